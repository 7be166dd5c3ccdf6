// Ops that compute differently in training and in evaluation steps (runtime/StepContext.h):
// dropout and its gradient.
#include "ir/ops/OpHelpers.h"

namespace prism::ir::ops {
namespace {

llvm::Error checkRate(const AttrMap &attrs) {
  double rate = attrs.getFloat("rate");
  if (!(rate >= 0 && rate < 1))
    return shapeError("dropout rate must be in [0, 1), got " + Attr::real(rate).str());
  return llvm::Error::success();
}

// dropout(x) and dropout_grad(dy): a dense float tensor of any shape, returned as it is.
ShapeResult dropoutShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectDense(in[0], "x"))
    return std::move(e);
  if (auto e = expectFloat(in[0], "x"))
    return std::move(e);
  if (auto e = checkRate(withDefaults(getOp("dropout"), attrs)))
    return std::move(e);
  return Types{in[0]};
}

// The gradient drops what the forward dropped: the same mask, from the same stream.
void dropoutGrad(GradientContext &c) {
  Value *dy = c.resultGrad();
  if (!dy)
    return;
  AttrMap attrs;
  attrs.set("rate", Attr::real(c.resolvedAttrs().getFloat("rate")));
  attrs.set(kRandomKeyAttr, Attr::string(randomStreamKey(c.op())));
  c.setGrad(0, c.emit("dropout_grad", {dy}, std::move(attrs)));
}

std::vector<AttrSpec> dropoutAttrs() {
  return {attr("rate", AttrKind::Float, Attr::real(0.5),
               "probability that an element is zeroed in training, in [0, 1)"),
          attr(kRandomKeyAttr, AttrKind::String, Attr::string(""),
               "the stream of draws (empty: the result's name)")};
}

} // namespace

void registerTrainingModeOps(std::vector<OpDef> &t) {
  t.push_back(makeOp("dropout",
                     "training: each element zeroed with probability rate, the others scaled by "
                     "1/(1-rate); evaluation: x",
                     {"x"}, dropoutShape, dropoutGrad, dropoutAttrs(), kRandom));
  t.push_back(makeOp("dropout_grad",
                     "dy through the mask of the dropout with the same key (training); dy "
                     "(evaluation)",
                     {"dy"}, dropoutShape, nullptr, dropoutAttrs(), kRandom | kGradientOnly));
}

} // namespace prism::ir::ops
