// Reference kernels of the fused ops (fused_matmul, fused_conv2d, fused_elementwise): the
// unfused ops' reference kernels run one after another, so the fused ops mean exactly what the
// chains they replace do.
#include <vector>

#include "ir/ops/ElementwiseExpr.h"
#include "runtime/reference/KernelSupport.h"

namespace prism::runtime::reference::kernels {
namespace {

// Runs the reference kernel of `opName` as if the fused op were that op over `operands`; the
// result has the fused op's type, which every op of the chain shares.
llvm::Expected<Tensor> runUnfused(llvm::StringRef opName, const KernelArgs &fused,
                                  llvm::ArrayRef<const Tensor *> operands) {
  KernelArgs args{fused.op,   fused.attrs,    {}, fused.results, fused.batch,
                  fused.step, fused.batchRows};
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

// Evaluates the expression node by node with the unfused ops' kernels. Scalar operands are
// first repeated to the result's shape, so that every node sees operands of one shape (the
// activations' backward kernels take no broadcasting).
llvm::Expected<KernelResults> fusedElementwiseKernel(const KernelArgs &args) {
  auto expr = ir::parseElementwiseExpr(args.attrs.getString("expr"));
  if (!expr)
    return expr.takeError();
  std::vector<Tensor> operands;
  for (const Tensor *operand : args.operands)
    operands.push_back(
        operand->rank() == 0 && !args.resultShape().empty()
            ? Tensor::filled(operand->dtype(), args.resultShape(), operand->data().front())
            : *operand);
  std::vector<Tensor> values;
  values.reserve(expr->nodes.size());
  for (const ir::ExprNode &node : expr->nodes) {
    if (node.isOperand()) {
      if (static_cast<size_t>(node.operand) >= operands.size())
        return kernelError("expr references a missing operand");
      values.push_back(operands[node.operand]);
      continue;
    }
    llvm::SmallVector<const Tensor *, 2> in;
    for (int arg : node.args)
      in.push_back(&values[arg]);
    auto value = runUnfused(node.op, args, in);
    if (!value)
      return value.takeError();
    values.push_back(std::move(*value));
  }
  return single(std::move(values.back()));
}

} // namespace

void registerFusedKernels(KernelTable &t) {
  t["fused_matmul"] = {fusedMatmulKernel};
  t["fused_conv2d"] = {fusedConv2dKernel};
  t["fused_elementwise"] = {fusedElementwiseKernel};
}

} // namespace prism::runtime::reference::kernels
