// NVRTC, CUDA's run-time compiler, loaded when first needed (dlopen of libnvrtc.so.13), so that
// programs built with the GPU path start on machines without it. It compiles generated kernels
// (ElementwiseCodegen.h) to PTX for a virtual architecture or to a cubin for a real one; neither
// needs a GPU, so code generation is tested on machines without one.
#pragma once

#include <string>

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::cuda {

class Nvrtc {
public:
  // The process's NVRTC, loaded on the first call; an error naming the library and dlerror's
  // reason where it cannot be loaded.
  static llvm::Expected<const Nvrtc *> get();

  // "13.0".
  std::string version() const;

  // Compiles `source` (file name `name` in messages). `architecture` is "compute_90" for PTX or
  // "sm_90" for a cubin. A failed compilation is an error carrying NVRTC's log.
  llvm::Expected<std::string> compile(llvm::StringRef source, llvm::StringRef name,
                                      llvm::StringRef architecture) const;

  struct Functions; // NVRTC's entry points, in Nvrtc.cpp

private:
  explicit Nvrtc(const Functions *functions) : functions_(functions) {}
  const Functions *functions_;
};

} // namespace prism::runtime::cuda
