// Dense layers and losses: matmul, batch_matmul, bias_add, softmax, log_softmax,
// softmax_cross_entropy.
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

// The gradients of op(a) · op(b) for both operands, each a product `product` (matmul or
// batch_matmul) of dy and the other operand, transposed as the four cases need.
std::pair<Value *, Value *> productGrads(GradientContext &c, const char *product, Value *dy) {
  Value *a = c.operand(0), *b = c.operand(1);
  bool ta = c.resolvedAttrs().getBool("transpose_a");
  bool tb = c.resolvedAttrs().getBool("transpose_b");
  auto mm = [&](Value *x, Value *y, bool tx, bool ty) {
    AttrMap m;
    if (tx)
      m.set("transpose_a", Attr::boolean(true));
    if (ty)
      m.set("transpose_b", Attr::boolean(true));
    return c.emit(product, {x, y}, std::move(m));
  };
  if (!ta && !tb)
    return {mm(dy, b, false, true), mm(a, dy, true, false)};
  if (ta && !tb)
    return {mm(b, dy, false, true), mm(a, dy, false, false)};
  if (!ta && tb)
    return {mm(dy, b, false, false), mm(dy, a, true, false)};
  return {mm(b, dy, true, true), mm(dy, a, true, true)};
}

void matmulGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad()) {
    auto [da, db] = productGrads(c, "matmul", dy);
    c.setGrad(0, da);
    c.setGrad(1, db);
  }
}

// Operands of at least rank 2: the last two dimensions are the matrices, the ones before them
// the batch. The batches must be equal, or one operand is a single matrix (rank 2) that every
// entry of the other's batch shares.
ShapeResult batchMatmulShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  for (int i = 0; i < 2; ++i) {
    const char *what = i == 0 ? "a" : "b";
    if (auto e = expectDense(in[i], what))
      return std::move(e);
    if (auto e = expectFloat(in[i], what))
      return std::move(e);
    if (in[i].rank() < 2)
      return shapeError(llvm::Twine(what) + " must have rank 2 or more, got " + in[i].str());
  }
  const TensorType &a = in[0], &b = in[1];
  if (a.dtype != b.dtype)
    return shapeError("operand dtypes differ: " + a.str() + " and " + b.str());
  llvm::ArrayRef<int64_t> batchA = llvm::ArrayRef<int64_t>(a.dims).drop_back(2);
  llvm::ArrayRef<int64_t> batchB = llvm::ArrayRef<int64_t>(b.dims).drop_back(2);
  if (!batchA.empty() && !batchB.empty() && batchA != batchB)
    return shapeError("batch dimensions differ: " + a.str() + " and " + b.str() +
                      " (the dimensions before the last two must be equal, or one operand of "
                      "rank 2)");
  bool ta = attrs.getBool("transpose_a"), tb = attrs.getBool("transpose_b");
  int64_t ra = a.rank(), rb = b.rank();
  int64_t m = a.dims[ra - (ta ? 1 : 2)], k = a.dims[ra - (ta ? 2 : 1)];
  int64_t k2 = b.dims[rb - (tb ? 1 : 2)], n = b.dims[rb - (tb ? 2 : 1)];
  if (k != k2)
    return shapeError("contracted dimensions differ: " + a.str() + (ta ? "ᵀ" : "") + " times " +
                      b.str() + (tb ? "ᵀ" : "") + " (" + dimString(k) + " vs " + dimString(k2) +
                      ")");
  Dims out(batchA.empty() ? batchB.begin() : batchA.begin(),
           batchA.empty() ? batchB.end() : batchA.end());
  out.push_back(m);
  out.push_back(n);
  return Types{TensorType(a.dtype, out)};
}

// 2 * M * N * K per batch entry: two flops per output element and contracted index.
OpCost batchMatmulCost(llvm::ArrayRef<TensorType> in, llvm::ArrayRef<TensorType> out,
                       const AttrMap &attrs, int64_t batch) {
  OpCost c = elementwiseCost(in, out, attrs, batch);
  const TensorType &a = in[0];
  int64_t k = a.dims[a.rank() - (attrs.getBool("transpose_a") ? 2 : 1)];
  if (k == kBatchDim)
    k = batch;
  c.flops = 2.0 * elements(out[0], batch) * static_cast<double>(k);
  return c;
}

// The gradient of a shared (rank-2) operand sums the batch entries' gradients.
Value *sumOverBatch(GradientContext &c, Value *g, Value *operand) {
  int64_t extra = g->type().rank() - operand->type().rank();
  if (extra <= 0)
    return g;
  Dims axes;
  for (int64_t i = 0; i < extra; ++i)
    axes.push_back(i);
  AttrMap a;
  a.set("axes", Attr::ints(axes));
  return c.emit("reduce_sum", {g}, a);
}

void batchMatmulGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad()) {
    auto [da, db] = productGrads(c, "batch_matmul", dy);
    c.setGrad(0, sumOverBatch(c, da, c.operand(0)));
    c.setGrad(1, sumOverBatch(c, db, c.operand(1)));
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
  OpDef bmm = def("batch_matmul",
                  "op(a) · op(b) over the last two dimensions, for each index of the dimensions "
                  "before them (equal in a and b, or one operand of rank 2 shared by all)",
                  {"a", "b"}, batchMatmulShape, batchMatmulGrad);
  bmm.attrs = mm.attrs;
  bmm.cost = batchMatmulCost;
  bmm.reducedPrecisionOperands = 0b11;
  t.push_back(bmm);
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
