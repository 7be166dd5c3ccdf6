// Writing a command's output file atomically.
#include "tools/OutputFile.h"

#include "ir/Diagnostic.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {

llvm::Error writeOutput(llvm::StringRef path, llvm::StringRef contents) {
  if (path == "-") {
    llvm::outs() << contents;
    llvm::outs().flush();
    return llvm::Error::success();
  }
  llvm::SmallString<256> temp;
  int fd;
  llvm::SmallString<256> model(path);
  model += ".tmp-%%%%%%";
  if (auto ec = llvm::sys::fs::createUniqueFile(model, fd, temp))
    return ir::makeError("cannot write " + path + ": " + ec.message());
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << contents;
    os.close();
    if (os.has_error()) {
      std::string msg = os.error().message();
      os.clear_error();
      llvm::sys::fs::remove(temp);
      return ir::makeError("cannot write " + path + ": " + msg);
    }
  }
  if (auto ec = llvm::sys::fs::rename(temp, path)) {
    llvm::sys::fs::remove(temp);
    return ir::makeError("cannot write " + path + ": " + ec.message());
  }
  return llvm::Error::success();
}

} // namespace prism::tools
