// dlopen of a CUDA library (see DynamicLibrary.h).
#include "runtime/cuda/DynamicLibrary.h"

#include <dlfcn.h>

#include <string>

#include "ir/Diagnostic.h"

namespace prism::runtime::cuda {

llvm::Expected<void *> openCudaLibrary(llvm::StringRef soname, llvm::StringRef purpose) {
  std::string reasons;
  for (const std::string &name : {soname.str(), "/usr/local/cuda/lib64/" + soname.str()}) {
    if (void *library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL))
      return library;
    const char *reason = dlerror();
    reasons += (reasons.empty() ? "" : "; ") + (reason ? std::string(reason) : name);
  }
  return ir::makeError(ir::ErrorCode::Unsupported, purpose + " could not be loaded: " + reasons);
}

} // namespace prism::runtime::cuda
