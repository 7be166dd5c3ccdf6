// Fused ops: a matmul or conv2d with its bias and activation applied in the same op, made by
// the fuse-bias-activation pass so that a kernel can apply them while the output is in cache;
// and fused_elementwise, a chain of elementwise ops made by fuse-elementwise so that a kernel
// makes one pass over memory instead of one per op.
#include <cassert>

#include "ir/ops/ElementwiseExpr.h"
#include "ir/ops/OpHelpers.h"

namespace prism::ir::ops {
namespace {

llvm::Error checkActivation(const AttrMap &attrs) {
  std::string activation = attrs.getString("activation");
  if (activation != "none" && activation != "relu")
    return shapeError("activation must be none or relu, got " + activation);
  return llvm::Error::success();
}

// The type of the unfused op named `base` over the first two operands, after checking that
// the bias (operand 2) fits its last dimension; the unfused op's own rule does the rest.
ShapeResult fusedShape(llvm::StringRef base, llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = checkActivation(attrs))
    return std::move(e);
  auto product = getOp(base).shape(in.take_front(2), attrs);
  if (!product)
    return product.takeError();
  const TensorType &y = (*product)[0], &bias = in[2];
  if (auto e = expectDense(bias, "bias"))
    return std::move(e);
  if (auto e = expectRank(bias, 1, "bias"))
    return std::move(e);
  if (bias.dims[0] != y.dims.back() || bias.dtype != y.dtype)
    return shapeError("bias " + bias.str() + " does not match the last dimension of " + y.str());
  return product;
}

// The unfused op's cost plus the epilogue: the bias is read once, and each output element
// takes one add and, with an activation, one max.
OpCost fusedCost(llvm::StringRef base, llvm::ArrayRef<TensorType> in,
                 llvm::ArrayRef<TensorType> out, const AttrMap &attrs, int64_t batch) {
  OpCost c = getOp(base).cost(in.take_front(2), out, attrs, batch);
  c.bytes += bytesOf(in[2], batch);
  double epilogueOps = attrs.getString("activation") == "none" ? 1.0 : 2.0;
  c.flops += epilogueOps * elements(out[0], batch);
  return c;
}

ShapeResult fusedMatmulShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  return fusedShape("matmul", in, attrs);
}

ShapeResult fusedConv2dShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  return fusedShape("conv2d", in, attrs);
}

OpCost fusedMatmulCost(llvm::ArrayRef<TensorType> in, llvm::ArrayRef<TensorType> out,
                       const AttrMap &attrs, int64_t batch) {
  return fusedCost("matmul", in, out, attrs, batch);
}

OpCost fusedConv2dCost(llvm::ArrayRef<TensorType> in, llvm::ArrayRef<TensorType> out,
                       const AttrMap &attrs, int64_t batch) {
  return fusedCost("conv2d", in, out, attrs, batch);
}

// The fused op takes the unfused op's operands and attributes (copied from its entry, which
// is registered before), then the bias and the activation. It has no gradient rule: fusion runs
// after autodiff.
OpDef fusedDef(const std::vector<OpDef> &table, llvm::StringRef base, const char *name,
               const char *summary, ShapeRule shape, CostRule cost) {
  const OpDef *unfused = nullptr;
  for (const OpDef &d : table)
    if (d.name == base)
      unfused = &d;
  assert(unfused && "fused ops are registered after the ops they fuse");
  OpDef d;
  d.name = name;
  d.summary = summary;
  d.operands = unfused->operands;
  d.operands.push_back("bias");
  d.attrs = unfused->attrs;
  d.attrs.push_back(attr("activation", AttrKind::String, Attr::string("none"),
                         "none or relu, applied after the bias"));
  d.shape = shape;
  d.cost = cost;
  d.reducedPrecisionOperands = unfused->reducedPrecisionOperands; // the bias stays f32
  return d;
}

// Operands of one float dtype, each of the result's shape or a scalar; the expression must parse
// and reference every operand. The result has the shape of the non-scalar operands.
ShapeResult fusedElementwiseShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  auto expr = parseElementwiseExpr(attrs.getString("expr"));
  if (!expr)
    return expr.takeError();
  std::vector<bool> referenced(in.size(), false);
  for (const ExprNode &node : expr->nodes) {
    if (!node.isOperand())
      continue;
    if (static_cast<size_t>(node.operand) >= in.size())
      return shapeError("expr references $" + llvm::Twine(node.operand) + " but the op has " +
                        llvm::Twine(in.size()) + " operands");
    referenced[node.operand] = true;
  }
  for (size_t i = 0; i < in.size(); ++i)
    if (!referenced[i])
      return shapeError("expr does not use operand $" + llvm::Twine(i));
  const TensorType *shaped = nullptr;
  for (size_t i = 0; i < in.size(); ++i) {
    std::string what = "operand $" + std::to_string(i);
    if (auto e = expectDense(in[i], what))
      return std::move(e);
    if (auto e = expectFloat(in[i], what))
      return std::move(e);
    if (in[i].dtype != in[0].dtype)
      return shapeError("operand dtypes differ: " + in[0].str() + " and " + in[i].str());
    if (in[i].dims.empty())
      continue;
    if (shaped && shaped->dims != in[i].dims)
      return shapeError("operands must have one shape or be scalars, got " + shaped->str() +
                        " and " + in[i].str());
    shaped = &in[i];
  }
  return Types{shaped ? *shaped : in[0]};
}

// Reads each operand and writes the result once; one flop per op of the expression per element.
OpCost fusedElementwiseCost(llvm::ArrayRef<TensorType> in, llvm::ArrayRef<TensorType> out,
                            const AttrMap &attrs, int64_t batch) {
  OpCost c = elementwiseCost(in, out, attrs, batch);
  if (auto expr = parseElementwiseExpr(attrs.getString("expr"))) {
    double opsPerElement = 0;
    for (const ExprNode &node : expr->nodes)
      opsPerElement += node.isOperand() ? 0 : 1;
    c.flops = opsPerElement * elements(out[0], batch);
  } else {
    llvm::consumeError(expr.takeError());
  }
  return c;
}

OpDef fusedElementwiseDef() {
  OpDef d;
  d.name = "fused_elementwise";
  d.summary = "the elementwise expression `expr` over operands $0, $1, ... of one shape or "
              "scalars";
  d.operands = {"x"};
  d.variadic = true;
  d.attrs.push_back(attr("expr", AttrKind::String,
                         "prefix expression of elementwise ops over $0, $1, ..., e.g. "
                         "mul(sigmoid($0), tanh($1))"));
  d.shape = fusedElementwiseShape;
  d.cost = fusedElementwiseCost;
  d.traits = kElementwise;
  return d;
}

} // namespace

void registerFusedOps(std::vector<OpDef> &t) {
  OpDef matmul = fusedDef(t, "matmul", "fused_matmul",
                          "activation(op(a) · op(b) + bias), bias along the columns",
                          fusedMatmulShape, fusedMatmulCost);
  OpDef conv = fusedDef(t, "conv2d", "fused_conv2d",
                        "activation(conv2d(x, filter) + bias), bias along the output channels",
                        fusedConv2dShape, fusedConv2dCost);
  t.push_back(std::move(matmul));
  t.push_back(std::move(conv));
  t.push_back(fusedElementwiseDef());
}

} // namespace prism::ir::ops
