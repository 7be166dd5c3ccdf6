// The CUDA libraries the GPU path opens with dlopen when first needed (NVRTC, cuBLAS), so that
// programs built with it start on machines without them.
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::cuda {

// `soname` ("libnvrtc.so.13") through the loader's path, else from the toolkit's lib64. Where
// neither opens, an Unsupported error: "<purpose> could not be loaded: <dlerror's reasons>".
llvm::Expected<void *> openCudaLibrary(llvm::StringRef soname, llvm::StringRef purpose);

} // namespace prism::runtime::cuda
