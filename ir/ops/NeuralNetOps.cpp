// Dense layers, normalization and losses: matmul, batch_matmul, bias_add, softmax, log_softmax,
// layer_norm, softmax_cross_entropy, sigmoid_cross_entropy.
#include "ir/ops/OpHelpers.h"

namespace prism::ir::ops {
namespace {

constexpr const char *kEpsilon = "epsilon";

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

// Logits [..., C] and integer labels of logits' shape without the classes: every position of the
// leading dimensions is one example of C classes.
ShapeResult xentShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectDense(in[0], "logits"))
    return std::move(e);
  if (auto e = expectFloat(in[0], "logits"))
    return std::move(e);
  if (in[0].rank() < 2)
    return shapeError("logits must have rank 2 or more ([..., classes]), got " + in[0].str());
  if (auto e = expectInteger(in[1], "labels"))
    return std::move(e);
  if (auto e = expectRank(in[1], in[0].rank() - 1, "labels"))
    return std::move(e);
  if (!llvm::equal(in[1].dims, llvm::makeArrayRef(in[0].dims).drop_back()))
    return shapeError("labels " + in[1].str() + " do not match the rows of logits " + in[0].str());
  return Types{TensorType(in[0].dtype, {})};
}

// The backward op carries the forward op's ignore_index, when it has one.
AttrMap ignoreIndexOf(const GradientContext &c) {
  AttrMap m;
  if (const Attr *ignore = c.attrs().find(kIgnoreIndexAttr))
    m.set(kIgnoreIndexAttr, *ignore);
  return m;
}

void xentGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad())
    c.setGrad(0, c.emit("softmax_cross_entropy_grad", {dy, c.operand(0), c.operand(1)},
                        ignoreIndexOf(c)));
}

// (dloss, logits, labels) -> type of logits, after checking that the forward op accepts them.
template <ShapeRule Forward>
ShapeResult lossGradShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectRank(in[0], 0, "loss gradient"))
    return std::move(e);
  auto fwd = Forward(in.drop_front(), attrs);
  if (!fwd)
    return fwd.takeError();
  return Types{in[1]};
}

ShapeResult sigmoidXentShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectDense(in[0], "logits"))
    return std::move(e);
  if (auto e = expectFloat(in[0], "logits"))
    return std::move(e);
  if (auto e = expectSameType(in[0], in[1], "logits and labels"))
    return std::move(e);
  return Types{TensorType(in[0].dtype, {})};
}

// d/dx = dloss * (sigmoid(x) - z) / count; d/dz = -dloss * x / count (labels may be computed).
void sigmoidXentGrad(GradientContext &c) {
  Value *dy = c.resultGrad();
  if (!dy)
    return;
  c.setGrad(0, c.emit("sigmoid_cross_entropy_grad", {dy, c.operand(0), c.operand(1)}));
  AttrMap mean;
  mean.set("mean", Attr::boolean(true));
  Value *perElement = c.emit("expand_like", {dy, c.operand(1)}, std::move(mean));
  c.setGrad(1, c.emit("mul", {perElement, c.emit("neg", {c.operand(0)})}));
}

// x [..., D] with gamma (and beta) [D] of x's dtype.
llvm::Error expectNormParameters(const TensorType &x, llvm::ArrayRef<TensorType> params,
                                 const AttrMap &attrs) {
  if (auto e = expectDense(x, "x"))
    return e;
  if (auto e = expectFloat(x, "x"))
    return e;
  if (x.rank() < 1)
    return shapeError("x must have rank 1 or more, got " + x.str());
  for (const TensorType &p : params)
    if (p.rank() != 1 || p.dims[0] != x.dims.back() || p.dtype != x.dtype)
      return shapeError("gamma and beta must be " + TensorType(x.dtype, {x.dims.back()}).str() +
                        " to match the last dimension of " + x.str() + ", got " + p.str());
  if (!(attrs.getFloat(kEpsilon) > 0))
    return shapeError("epsilon must be positive, got " + formatDouble(attrs.getFloat(kEpsilon)));
  return llvm::Error::success();
}

ShapeResult layerNormShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectNormParameters(in[0], in.drop_front(), attrs))
    return std::move(e);
  return Types{in[0]};
}

// (dy, x, gamma) -> type of x.
ShapeResult layerNormGradShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectNormParameters(in[1], in.drop_front(2), attrs))
    return std::move(e);
  if (auto e = expectSameType(in[0], in[1], "gradient and x"))
    return std::move(e);
  return Types{in[1]};
}

// (dy, x) -> [D], the type of gamma.
ShapeResult layerNormGammaGradShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectNormParameters(in[1], {}, attrs))
    return std::move(e);
  if (auto e = expectSameType(in[0], in[1], "gradient and x"))
    return std::move(e);
  return Types{TensorType(in[1].dtype, {in[1].dims.back()})};
}

AttrMap epsilonOf(const GradientContext &c) {
  AttrMap m;
  m.set(kEpsilon, *c.resolvedAttrs().find(kEpsilon));
  return m;
}

void layerNormGrad(GradientContext &c) {
  Value *dy = c.resultGrad();
  if (!dy)
    return;
  c.setGrad(0, c.emit("layer_norm_grad", {dy, c.operand(0), c.operand(1)}, epsilonOf(c)));
  c.setGrad(1, c.emit("layer_norm_gamma_grad", {dy, c.operand(0)}, epsilonOf(c)));
  c.setGrad(2, c.emit("sum_like", {dy, c.operand(2)}));
}

// A few passes over x per op (mean, variance, write; the backward ops one more): flops per
// element of x, the operand read from memory once.
template <int FlopsPerElement>
OpCost normCost(llvm::ArrayRef<TensorType> in, llvm::ArrayRef<TensorType> out, const AttrMap &attrs,
                int64_t batch) {
  OpCost c = elementwiseCost(in, out, attrs, batch);
  c.flops = FlopsPerElement * elements(in[0], batch);
  return c;
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
  AttrSpec ignore = optionalAttr(kIgnoreIndexAttr, AttrKind::Int,
                                 "positions with this label count for nothing, not even in the "
                                 "mean (PyTorch uses -100); absent: every label is a class");
  OpDef xent = def("softmax_cross_entropy",
                   "mean over positions of -log softmax(logits)[label] over the last dimension "
                   "(the classes); labels are class indices of logits' other dimensions",
                   {"logits", "labels"}, xentShape, xentGrad);
  xent.attrs = {ignore};
  t.push_back(xent);
  t.push_back(def("sigmoid_cross_entropy",
                  "mean over elements of max(x, 0) - x * z + log(1 + e^-|x|): binary cross-entropy "
                  "of logits x against labels z in [0, 1]",
                  {"logits", "labels"}, sigmoidXentShape, sigmoidXentGrad));
  AttrSpec epsilon = attr(kEpsilon, AttrKind::Float, Attr::real(1e-5), "added to the variance");
  OpDef norm = def("layer_norm",
                   "gamma * (x - mean) / sqrt(var + epsilon) + beta, mean and (biased) variance "
                   "over the last dimension",
                   {"x", "gamma", "beta"}, layerNormShape, layerNormGrad);
  norm.attrs = {epsilon};
  norm.cost = normCost<8>;
  t.push_back(norm);
  t.push_back(def("softmax_grad", "y * (dy - sum(dy * y)) over the last dimension", {"dy", "y"},
                  pairGradShape, nullptr, kGradientOnly));
  t.push_back(def("log_softmax_grad", "dy - exp(y) * sum(dy) over the last dimension", {"dy", "y"},
                  pairGradShape, nullptr, kGradientOnly));
  OpDef xentBack =
      def("softmax_cross_entropy_grad",
          "dloss * (softmax(logits) - onehot(labels)) / positions counted",
          {"dloss", "logits", "labels"}, lossGradShape<xentShape>, nullptr, kGradientOnly);
  xentBack.attrs = {ignore};
  t.push_back(xentBack);
  t.push_back(def("sigmoid_cross_entropy_grad", "dloss * (sigmoid(logits) - labels) / elements",
                  {"dloss", "logits", "labels"}, lossGradShape<sigmoidXentShape>, nullptr,
                  kGradientOnly));
  OpDef normBack = def("layer_norm_grad",
                       "dx of layer_norm: (g - mean(g) - xhat * mean(g * xhat)) / sqrt(var + "
                       "epsilon), g = dy * gamma, over the last dimension",
                       {"dy", "x", "gamma"}, layerNormGradShape, nullptr, kGradientOnly);
  normBack.attrs = {epsilon};
  normBack.cost = normCost<10>;
  t.push_back(normBack);
  OpDef gammaBack = def("layer_norm_gamma_grad",
                        "dgamma of layer_norm: sum of dy * xhat over every dimension but the last",
                        {"dy", "x"}, layerNormGammaGradShape, nullptr, kGradientOnly);
  gammaBack.attrs = {epsilon};
  gammaBack.cost = normCost<8>;
  t.push_back(gammaBack);
}

} // namespace prism::ir::ops
