// Dense layers and losses: matmul, bias_add, softmax, log_softmax, softmax_cross_entropy.
#include "ir/ops/OpHelpers.h"

namespace prism::ir::ops {
namespace {

ShapeResult matmulShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  for (int i = 0; i < 2; ++i) {
    const char *what = i == 0 ? "a" : "b";
    if (auto e = expectDense(in[i], what))
      return std::move(e);
    if (auto e = expectFloat(in[i], what))
      return std::move(e);
    if (auto e = expectRank(in[i], 2, what))
      return std::move(e);
  }
  if (in[0].dtype != in[1].dtype)
    return shapeError("operand dtypes differ: " + in[0].str() + " and " + in[1].str());
  bool ta = attrs.getBool("transpose_a"), tb = attrs.getBool("transpose_b");
  int64_t m = in[0].dims[ta ? 1 : 0], k = in[0].dims[ta ? 0 : 1];
  int64_t k2 = in[1].dims[tb ? 1 : 0], n = in[1].dims[tb ? 0 : 1];
  if (k != k2)
    return shapeError("contracted dimensions differ: " + in[0].str() + (ta ? "ᵀ" : "") + " times " +
                      in[1].str() + (tb ? "ᵀ" : "") + " (" + dimString(k) + " vs " + dimString(k2) +
                      ")");
  return Types{TensorType(in[0].dtype, {m, n})};
}

OpCost matmulCost(llvm::ArrayRef<TensorType> in, llvm::ArrayRef<TensorType> out,
                  const AttrMap &attrs, int64_t batch) {
  OpCost c = elementwiseCost(in, out, attrs, batch);
  int64_t k = in[0].dims[attrs.getBool("transpose_a") ? 0 : 1];
  if (k == kBatchDim)
    k = batch;
  c.flops = 2.0 * elements(out[0], batch) * static_cast<double>(k);
  return c;
}

void matmulGrad(GradientContext &c) {
  Value *dy = c.resultGrad();
  if (!dy)
    return;
  Value *a = c.operand(0), *b = c.operand(1);
  bool ta = c.resolvedAttrs().getBool("transpose_a");
  bool tb = c.resolvedAttrs().getBool("transpose_b");
  auto mm = [&](Value *x, Value *y, bool tx, bool ty) {
    AttrMap m;
    if (tx)
      m.set("transpose_a", Attr::boolean(true));
    if (ty)
      m.set("transpose_b", Attr::boolean(true));
    return c.emit("matmul", {x, y}, std::move(m));
  };
  if (!ta && !tb) {
    c.setGrad(0, mm(dy, b, false, true));
    c.setGrad(1, mm(a, dy, true, false));
  } else if (ta && !tb) {
    c.setGrad(0, mm(b, dy, false, true));
    c.setGrad(1, mm(a, dy, false, false));
  } else if (!ta && tb) {
    c.setGrad(0, mm(dy, b, false, false));
    c.setGrad(1, mm(dy, a, true, false));
  } else {
    c.setGrad(0, mm(b, dy, true, true));
    c.setGrad(1, mm(dy, a, true, true));
  }
}

ShapeResult biasAddShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectDense(in[0], "x"))
    return std::move(e);
  if (auto e = expectFloat(in[0], "x"))
    return std::move(e);
  if (auto e = expectRank(in[1], 1, "bias"))
    return std::move(e);
  if (in[0].rank() < 1 || in[0].dims.back() != in[1].dims[0] || in[0].dtype != in[1].dtype)
    return shapeError("bias " + in[1].str() + " does not match the last dimension of " +
                      in[0].str());
  return Types{in[0]};
}

void biasAddGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad()) {
    c.setGrad(0, dy);
    c.setGrad(1, c.emit("sum_like", {dy, c.operand(1)}));
  }
}

ShapeResult lastAxisShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectDense(in[0], "x"))
    return std::move(e);
  if (auto e = expectFloat(in[0], "x"))
    return std::move(e);
  if (in[0].rank() < 1)
    return shapeError("x must have rank 1 or more, got " + in[0].str());
  return Types{in[0]};
}

ShapeResult pairGradShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectSameType(in[0], in[1], "gradient and forward value"))
    return std::move(e);
  return Types{in[0]};
}

void softmaxGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad())
    c.setGrad(0, c.emit("softmax_grad", {dy, c.result()}));
}

void logSoftmaxGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad())
    c.setGrad(0, c.emit("log_softmax_grad", {dy, c.result()}));
}

ShapeResult xentShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectDense(in[0], "logits"))
    return std::move(e);
  if (auto e = expectFloat(in[0], "logits"))
    return std::move(e);
  if (auto e = expectRank(in[0], 2, "logits"))
    return std::move(e);
  if (auto e = expectInteger(in[1], "labels"))
    return std::move(e);
  if (auto e = expectRank(in[1], 1, "labels"))
    return std::move(e);
  if (in[1].dims[0] != in[0].dims[0])
    return shapeError("labels " + in[1].str() + " do not match the rows of logits " + in[0].str());
  return Types{TensorType(in[0].dtype, {})};
}

void xentGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad())
    c.setGrad(0, c.emit("softmax_cross_entropy_grad", {dy, c.operand(0), c.operand(1)}));
}

// (dloss, logits, labels) -> type of logits, after checking that the forward op accepts them.
ShapeResult xentGradShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectRank(in[0], 0, "loss gradient"))
    return std::move(e);
  auto fwd = xentShape(in.drop_front(), attrs);
  if (!fwd)
    return fwd.takeError();
  return Types{in[1]};
}

// Most of these ops take no attributes: their traits come right after the gradient rule.
OpDef def(const char *name, const char *summary, std::vector<std::string> operands, ShapeRule shape,
          GradRule grad, uint32_t traits = 0) {
  return makeOp(name, summary, std::move(operands), shape, grad, {}, traits);
}

} // namespace

void registerNeuralNetOps(std::vector<OpDef> &t) {
  OpDef mm = def("matmul", "matrix product op(a) · op(b) of two rank-2 tensors", {"a", "b"},
                 matmulShape, matmulGrad);
  mm.attrs = {attr("transpose_a", AttrKind::Bool, Attr::boolean(false), "use aᵀ"),
              attr("transpose_b", AttrKind::Bool, Attr::boolean(false), "use bᵀ")};
  mm.cost = matmulCost;
  mm.reducedPrecisionOperands = 0b11;
  t.push_back(mm);
  t.push_back(def("bias_add", "x + bias along the last dimension", {"x", "bias"}, biasAddShape,
                  biasAddGrad, kElementwise));
  t.push_back(def("softmax", "softmax over the last dimension", {"x"}, lastAxisShape, softmaxGrad));
  t.push_back(def("log_softmax", "log of softmax over the last dimension", {"x"}, lastAxisShape,
                  logSoftmaxGrad));
  t.push_back(def("softmax_cross_entropy",
                  "mean over rows of -log softmax(logits)[label]; labels are class indices",
                  {"logits", "labels"}, xentShape, xentGrad));
  t.push_back(def("softmax_grad", "y * (dy - sum(dy * y)) over the last dimension", {"dy", "y"},
                  pairGradShape, nullptr, kGradientOnly));
  t.push_back(def("log_softmax_grad", "dy - exp(y) * sum(dy) over the last dimension", {"dy", "y"},
                  pairGradShape, nullptr, kGradientOnly));
  t.push_back(def("softmax_cross_entropy_grad", "dloss * (softmax(logits) - onehot(labels)) / rows",
                  {"dloss", "logits", "labels"}, xentGradShape, nullptr, kGradientOnly));
}

} // namespace prism::ir::ops
