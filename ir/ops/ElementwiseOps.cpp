// Elementwise ops: binary arithmetic with broadcasting, maximum and minimum, where, unary math
// and activations.
#include "ir/ops/OpHelpers.h"

namespace prism::ir::ops {
namespace {

ShapeResult binaryShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectDense(in[0], "lhs"))
    return std::move(e);
  if (auto e = expectDense(in[1], "rhs"))
    return std::move(e);
  if (in[0].dtype != in[1].dtype)
    return shapeError("operand dtypes differ: " + in[0].str() + " and " + in[1].str());
  auto dims = broadcastDims(in[0].dims, in[1].dims);
  if (!dims)
    return dims.takeError();
  return Types{TensorType(in[0].dtype, *dims)};
}

ShapeResult unaryFloatShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectDense(in[0], "operand"))
    return std::move(e);
  if (auto e = expectFloat(in[0], "operand"))
    return std::move(e);
  return Types{in[0]};
}

ShapeResult unaryNumericShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectDense(in[0], "operand"))
    return std::move(e);
  if (in[0].dtype == DType::Bool)
    return shapeError("operand must be numeric, got " + in[0].str());
  return Types{in[0]};
}

// (dy, x) or (dy, y) -> like dy; both dense float of one type.
ShapeResult activationGradShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectFloat(in[0], "gradient"))
    return std::move(e);
  if (auto e = expectSameType(in[0].dense(), in[1].dense(), "gradient and forward value"))
    return std::move(e);
  return Types{in[0]};
}

// where(cond, a, b): cond of any dtype (non-zero is true), a and b float of one type; the
// three broadcast together.
ShapeResult whereShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectDense(in[0], "cond"))
    return std::move(e);
  for (int i = 1; i < 3; ++i) {
    const char *what = i == 1 ? "a" : "b";
    if (auto e = expectDense(in[i], what))
      return std::move(e);
    if (auto e = expectFloat(in[i], what))
      return std::move(e);
  }
  if (in[1].dtype != in[2].dtype)
    return shapeError("a and b dtypes differ: " + in[1].str() + " and " + in[2].str());
  auto ab = broadcastDims(in[1].dims, in[2].dims);
  if (!ab)
    return ab.takeError();
  auto dims = broadcastDims(in[0].dims, *ab);
  if (!dims)
    return dims.takeError();
  return Types{TensorType(in[1].dtype, *dims)};
}

// maximum_grad(dy, a, b) and minimum_grad: a and b broadcast to dy's shape; all of one type.
ShapeResult extremumGradShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectFloat(in[0], "gradient"))
    return std::move(e);
  auto fwd = binaryShape(in.drop_front(), attrs);
  if (!fwd)
    return fwd.takeError();
  if (auto e = expectSameType((*fwd)[0], in[0].dense(), "gradient and forward value"))
    return std::move(e);
  return Types{in[0]};
}

void addGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad()) {
    c.setGrad(0, sumLike(c, dy, c.operand(0)));
    c.setGrad(1, sumLike(c, dy, c.operand(1)));
  }
}

void subGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad()) {
    c.setGrad(0, sumLike(c, dy, c.operand(0)));
    c.setGrad(1, sumLike(c, c.emit("neg", {dy}), c.operand(1)));
  }
}

void mulGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad()) {
    c.setGrad(0, sumLike(c, c.emit("mul", {dy, c.operand(1)}), c.operand(0)));
    c.setGrad(1, sumLike(c, c.emit("mul", {dy, c.operand(0)}), c.operand(1)));
  }
}

void divGrad(GradientContext &c) {
  Value *dy = c.resultGrad();
  if (!dy)
    return;
  Value *a = c.operand(0), *b = c.operand(1);
  c.setGrad(0, sumLike(c, c.emit("div", {dy, b}), a));
  // d(a/b)/db = -a / b^2 = -(a/b) / b
  Value *q = c.emit("div", {c.result(), b});
  c.setGrad(1, sumLike(c, c.emit("neg", {c.emit("mul", {dy, q})}), b));
}

// dy goes where the forward op took its value from (a on ties): `grad` gives a's share, and
// b's is the rest, dy - that share, which is exact (dy - dy = 0, dy - 0 = dy).
void extremumGrad(GradientContext &c, const char *grad) {
  Value *dy = c.resultGrad();
  if (!dy)
    return;
  Value *toA = c.emit(grad, {dy, c.operand(0), c.operand(1)});
  c.setGrad(0, sumLike(c, toA, c.operand(0)));
  c.setGrad(1, sumLike(c, c.emit("sub", {dy, toA}), c.operand(1)));
}
void maximumGrad(GradientContext &c) {
  extremumGrad(c, "maximum_grad");
}
void minimumGrad(GradientContext &c) {
  extremumGrad(c, "minimum_grad");
}

// dy routed by cond: where(cond, dy, 0) to a and where(cond, 0, dy) to b, each summed back to
// its operand's shape. cond gets no gradient.
void whereGrad(GradientContext &c) {
  Value *dy = c.resultGrad();
  if (!dy)
    return;
  AttrMap zero;
  zero.set("value", Attr::real(0.0));
  zero.set("dtype", Attr::string(dtypeName(dy->type().dtype).str()));
  Value *zeros = c.emit("constant", {}, zero);
  Value *cond = c.operand(0);
  c.setGrad(1, sumLike(c, c.emit("where", {cond, dy, zeros}), c.operand(1)));
  c.setGrad(2, sumLike(c, c.emit("where", {cond, zeros, dy}), c.operand(2)));
}

void negGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad())
    c.setGrad(0, c.emit("neg", {dy}));
}

void expGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad())
    c.setGrad(0, c.emit("mul", {dy, c.result()}));
}

void logGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad())
    c.setGrad(0, c.emit("div", {dy, c.operand(0)}));
}

void sqrtGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad())
    c.setGrad(0, c.emit("div", {dy, c.emit("add", {c.result(), c.result()})}));
}

void reluGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad())
    c.setGrad(0, c.emit("relu_grad", {dy, c.operand(0)}));
}

void sigmoidGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad())
    c.setGrad(0, c.emit("sigmoid_grad", {dy, c.result()}));
}

void tanhGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad())
    c.setGrad(0, c.emit("tanh_grad", {dy, c.result()}));
}

void erfGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad())
    c.setGrad(0, c.emit("erf_grad", {dy, c.operand(0)}));
}

void geluGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad())
    c.setGrad(0, c.emit("gelu_grad", {dy, c.operand(0)}));
}

OpDef binary(const char *name, const char *summary, GradRule grad, uint32_t traits) {
  OpDef d;
  d.name = name;
  d.summary = summary;
  d.operands = {"a", "b"};
  d.shape = binaryShape;
  d.gradient = grad;
  d.traits = kElementwise | traits;
  return d;
}

OpDef unary(const char *name, const char *summary, ShapeRule shape, GradRule grad) {
  OpDef d;
  d.name = name;
  d.summary = summary;
  d.operands = {"x"};
  d.shape = shape;
  d.gradient = grad;
  d.traits = kElementwise;
  return d;
}

OpDef activationGrad(const char *name, const char *summary, const char *second) {
  OpDef d;
  d.name = name;
  d.summary = summary;
  d.operands = {"dy", second};
  d.shape = activationGradShape;
  d.traits = kElementwise | kGradientOnly;
  return d;
}

} // namespace

void registerElementwiseOps(std::vector<OpDef> &t) {
  t.push_back(binary("add", "a + b, broadcasting", addGrad, kCommutative));
  t.push_back(binary("sub", "a - b, broadcasting", subGrad, 0));
  t.push_back(binary("mul", "a * b, broadcasting", mulGrad, kCommutative));
  t.push_back(binary("div", "a / b, broadcasting", divGrad, 0));
  // Not commutative: the gradient goes to a on ties.
  t.push_back(binary("maximum", "the larger of a and b, broadcasting", maximumGrad, 0));
  t.push_back(binary("minimum", "the smaller of a and b, broadcasting", minimumGrad, 0));
  t.push_back(makeOp("where", "a where cond is non-zero, else b, broadcasting", {"cond", "a", "b"},
                     whereShape, whereGrad, {}, kElementwise));
  t.push_back(unary("neg", "-x", unaryNumericShape, negGrad));
  t.push_back(unary("exp", "e^x", unaryFloatShape, expGrad));
  t.push_back(unary("log", "natural logarithm of x", unaryFloatShape, logGrad));
  t.push_back(unary("sqrt", "square root of x", unaryFloatShape, sqrtGrad));
  t.push_back(unary("relu", "max(x, 0)", unaryFloatShape, reluGrad));
  t.push_back(unary("sigmoid", "1 / (1 + e^-x)", unaryFloatShape, sigmoidGrad));
  t.push_back(unary("tanh", "hyperbolic tangent of x", unaryFloatShape, tanhGrad));
  t.push_back(unary("erf", "error function of x, 2/sqrt(pi) * integral of e^-t^2 over [0, x]",
                    unaryFloatShape, erfGrad));
  t.push_back(unary("gelu", "x * Phi(x) = x/2 * (1 + erf(x / sqrt(2))), the exact GELU",
                    unaryFloatShape, geluGrad));
  t.push_back(activationGrad("relu_grad", "dy where x > 0, else 0", "x"));
  t.push_back(activationGrad("sigmoid_grad", "dy * y * (1 - y), y = sigmoid(x)", "y"));
  t.push_back(activationGrad("tanh_grad", "dy * (1 - y^2), y = tanh(x)", "y"));
  t.push_back(activationGrad("erf_grad", "dy * 2/sqrt(pi) * e^(-x^2)", "x"));
  t.push_back(
      activationGrad("gelu_grad", "dy * (Phi(x) + x * phi(x)), phi the normal density", "x"));
  t.push_back(makeOp("maximum_grad", "dy where a >= b, else 0 (a's share of maximum's gradient)",
                     {"dy", "a", "b"}, extremumGradShape, nullptr, {},
                     kElementwise | kGradientOnly));
  t.push_back(makeOp("minimum_grad", "dy where a <= b, else 0 (a's share of minimum's gradient)",
                     {"dy", "a", "b"}, extremumGradShape, nullptr, {},
                     kElementwise | kGradientOnly));
}

} // namespace prism::ir::ops
