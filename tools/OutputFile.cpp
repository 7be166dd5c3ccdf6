// Writing a command's output file atomically.
#include "tools/OutputFile.h"

#include "support/AtomicFile.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {

llvm::Error writeOutput(llvm::StringRef path, llvm::StringRef contents) {
  if (path == "-") {
    llvm::outs() << contents;
    llvm::outs().flush();
    return llvm::Error::success();
  }
  return support::writeFileAtomically(path, contents);
}

} // namespace prism::tools
