// The GPU's elementwise kernel family: fused_elementwise and every fusable elementwise op (add,
// sigmoid, gelu_grad, ...) as kernels generated from their expression (ElementwiseCodegen.h),
// compiled by NVRTC for the device's architecture when the program is built, once per distinct
// kernel and architecture in a process, and launched on the device's stream.
#pragma once

#include "runtime/cuda/ElementwiseCodegen.h"
#include "runtime/exec/Kernel.h"

namespace prism::runtime::cuda {

// The source of the kernel the family builds for `spec` (fused_elementwise or a fusable op), or
// the error that refuses it (an operand neither of the result's shape nor a scalar); no GPU is
// needed.
llvm::Expected<ElementwiseKernelSource> elementwiseKernelSource(const KernelSpec &spec);

// Adds the family to a registry (the `cuda` device kind's).
void registerElementwiseKernels(KernelRegistry &registry);

// Registers every GPU kernel family of this build for `cuda:N` devices; called once at start-up
// by programs built with the GPU path, with registerCudaDevice. A program with an op that has no
// GPU kernel yet is refused before its first step, naming the op and its model line.
void registerCudaKernels();

} // namespace prism::runtime::cuda
