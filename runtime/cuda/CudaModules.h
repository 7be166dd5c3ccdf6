// Kernels compiled at run time (generated elementwise kernels, DeviceKernels.cuh) on CUDA devices:
// NVRTC compiles a module's source for the device's architecture once per process, the CUDA
// runtime's library API loads it once per device, and kernels are found by name. No driver library
// is linked: programs built with the GPU path start on machines without a GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::cuda {

// `module` names the source (kernels of equal names must come from equal sources).
llvm::Expected<cudaKernel_t> loadKernel(llvm::StringRef module, llvm::StringRef source,
                                        llvm::StringRef kernel, int device);

// Launches `kernel` on `device` with `threads` threads (256 per block, at most 4096 blocks: the
// kernels stride over the rest) and the given arguments (pointers to each, as cudaLaunchKernel
// takes them), on the device's stream.
llvm::Error launchKernel(cudaKernel_t kernel, int device, int64_t threads, void **arguments,
                         llvm::StringRef what);

// The stream of `device` that this process's kernels and cuBLAS calls run on, one per device,
// made on first use; a captured step (CUDA graph) is recorded from it and replayed on it. It is a
// blocking stream: the synchronous copies (cudaMemcpy, on the legacy default stream) wait for
// its work and its later work waits for them, so everything runs in the program's order.
llvm::Expected<cudaStream_t> deviceStream(int device);

// Success, or "<call> failed: <name>: <description>".
llvm::Error checkCuda(cudaError_t status, const llvm::Twine &call);

} // namespace prism::runtime::cuda
