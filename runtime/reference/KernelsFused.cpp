// Reference kernels of the fused ops (fused_matmul, fused_conv2d): the unfused ops' reference
// kernels run one after another, so the fused ops mean exactly what the chains they replace do.
#include "runtime/reference/KernelSupport.h"

namespace prism::runtime::reference::kernels {
namespace {

// Runs the reference kernel of `opName` as if the fused op were that op over `operands`; the
// result has the fused op's type, which every op of the chain shares.
llvm::Expected<Tensor> runUnfused(llvm::StringRef opName, const KernelArgs &fused,
                                  llvm::ArrayRef<const Tensor *> operands) {
  KernelArgs args{fused.op, fused.attrs, {}, fused.results, fused.batch};
  args.operands.assign(operands.begin(), operands.end());
  auto results = lookupKernel(opName)->run(args);
  if (!results)
    return results.takeError();
  return std::move((*results)[0]);
}

// activation(product(operand 0, operand 1) + operand 2)
llvm::Expected<KernelResults> fusedKernel(llvm::StringRef product, const KernelArgs &args) {
  auto y = runUnfused(product, args, {&args.operand(0), &args.operand(1)});
  if (!y)
    return y.takeError();
  auto biased = runUnfused("bias_add", args, {&*y, &args.operand(2)});
  if (!biased)
    return biased.takeError();
  std::string activation = args.attrs.getString("activation");
  if (activation == "none")
    return single(std::move(*biased));
  if (activation != "relu")
    return kernelError("unknown activation '" + activation + "'");
  auto activated = runUnfused(activation, args, {&*biased});
  if (!activated)
    return activated.takeError();
  return single(std::move(*activated));
}

llvm::Expected<KernelResults> fusedMatmulKernel(const KernelArgs &args) {
  return fusedKernel("matmul", args);
}

llvm::Expected<KernelResults> fusedConv2dKernel(const KernelArgs &args) {
  return fusedKernel("conv2d", args);
}

} // namespace

void registerFusedKernels(KernelTable &t) {
  t["fused_matmul"] = {fusedMatmulKernel};
  t["fused_conv2d"] = {fusedConv2dKernel};
}

} // namespace prism::runtime::reference::kernels
