// Writing a file all or nothing.
#include "support/AtomicFile.h"

#include "ir/Diagnostic.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::support {

llvm::Error writeFileAtomically(llvm::StringRef path, llvm::StringRef contents, FileAccess access) {
  return writeFileAtomically(
      path, [&](llvm::raw_ostream &os) { os << contents; }, access);
}

llvm::Error writeFileAtomically(llvm::StringRef path,
                                llvm::function_ref<void(llvm::raw_ostream &)> write,
                                FileAccess access) {
  llvm::SmallString<256> temp;
  int fd;
  // The temporary file gets the final mode when it is made, so the contents are never readable
  // by others, not even between the write and the rename.
  unsigned mode = access == FileAccess::OwnerOnly
                      ? llvm::sys::fs::owner_read | llvm::sys::fs::owner_write
                      : llvm::sys::fs::all_read | llvm::sys::fs::owner_write;
  if (auto ec = llvm::sys::fs::createUniqueFile(path + ".tmp-%%%%%%", fd, temp,
                                                llvm::sys::fs::OF_None, mode))
    return ir::makeError("cannot write " + path + ": " + ec.message());
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    write(os);
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
