// CPU kernels of the fused ops: fused_matmul and fused_conv2d are one oneDNN matmul or
// convolution that adds the bias and applies the activation as post-ops, while each output
// block is still in cache, instead of two more passes over the output.
#include "runtime/cpu/Kernel.h"
#include "runtime/cpu/kernels/OneDnnKernel.h"

namespace prism::runtime::cpu {

// In FusedElementwiseKernels.cpp: it shares nothing with the oneDNN kernels here.
llvm::Expected<std::unique_ptr<Kernel>> makeFusedElementwiseKernel(const KernelSpec &spec);

namespace {

using onednn::Epilogue;

// The bias is always applied; relu when the op asks for it.
Epilogue epilogueOf(const KernelSpec &spec) {
  return Epilogue{/*bias=*/true, /*relu=*/spec.attrs.getString("activation") == "relu"};
}

// fused_matmul(a, b, bias) -> activation(op(a) · op(b) + bias)
llvm::Expected<std::unique_ptr<Kernel>> makeFusedMatmul(const KernelSpec &spec) {
  return onednn::makeMatmulKernel(spec, epilogueOf(spec));
}

// fused_conv2d(x, filter, bias) -> activation(conv2d(x, filter) + bias)
llvm::Expected<std::unique_ptr<Kernel>> makeFusedConv2d(const KernelSpec &spec) {
  return onednn::makeConvForwardKernel(spec, epilogueOf(spec));
}

} // namespace

void registerFusedKernels(KernelRegistry &registry) {
  registry.add("fused_matmul", makeFusedMatmul);
  registry.add("fused_conv2d", makeFusedConv2d);
  registry.add("fused_elementwise", makeFusedElementwiseKernel);
}

} // namespace prism::runtime::cpu
