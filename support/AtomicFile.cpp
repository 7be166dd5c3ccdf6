// Writing a file all or nothing.
#include "support/AtomicFile.h"

#include "ir/Diagnostic.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::support {

llvm::Error writeFileAtomically(llvm::StringRef path, llvm::StringRef contents) {
  llvm::SmallString<256> temp;
  int fd;
  if (auto ec = llvm::sys::fs::createUniqueFile(path + ".tmp-%%%%%%", fd, temp))
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

} // namespace prism::support
