// Ops that compute differently in training and in evaluation steps (runtime/StepContext.h):
// dropout and batch_norm, their gradients, and batch_norm's update of its running averages.
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

constexpr const char *kEpsilon = "epsilon";
constexpr const char *kMomentum = "momentum";
constexpr const char *kSync = "sync";
constexpr const char *kValuesPerExample = "values_per_example";

// The attributes the op has, in range.
llvm::Error checkBatchNormAttrs(const AttrMap &attrs) {
  if (const Attr *eps = attrs.find(kEpsilon); eps && !(eps->getFloat() > 0))
    return shapeError("epsilon must be positive, got " + formatDouble(eps->getFloat()));
  if (const Attr *m = attrs.find(kMomentum); m && !(m->getFloat() >= 0 && m->getFloat() <= 1))
    return shapeError("momentum must be in [0, 1], got " + formatDouble(m->getFloat()));
  if (const Attr *sync = attrs.find(kSync); sync && sync->getBool())
    return shapeError("sync = true (statistics over every worker and tower) is not supported "
                      "yet; with sync = false each worker, tower and micro-batch normalizes with "
                      "its own statistics");
  return llvm::Error::success();
}

// x [N, C] or [N, H, W, C] (channels last, as conv2d), each per-channel operand [C] of x's
// dtype, and the attributes the op has in range.
llvm::Error checkBatchNorm(const TensorType &x, llvm::ArrayRef<TensorType> perChannel,
                           llvm::ArrayRef<const char *> names, const AttrMap &attrs) {
  if (auto e = expectDense(x, "x"))
    return e;
  if (auto e = expectFloat(x, "x"))
    return e;
  if (x.rank() != 2 && x.rank() != 4)
    return shapeError("x must be [N, C] or [N, H, W, C] (channels last), got " + x.str());
  TensorType channel(x.dtype, {x.dims.back()});
  for (size_t i = 0; i < perChannel.size(); ++i)
    if (perChannel[i] != channel)
      return shapeError(llvm::Twine(names[i]) + " must be " + channel.str() +
                        " (one per channel of " + x.str() + "), got " + perChannel[i].str());
  return checkBatchNormAttrs(attrs);
}

// batch_norm(x, scale, bias, running_mean, running_var) -> the type of x.
ShapeResult batchNormShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = checkBatchNorm(in[0], in.drop_front(),
                              {"scale", "bias", "running_mean", "running_var"}, attrs))
    return std::move(e);
  return Types{in[0]};
}

// batch_norm_moments(x) -> [2, C]: the mean and the mean of squares per channel.
ShapeResult batchNormMomentsShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = checkBatchNorm(in[0], {}, {}, attrs))
    return std::move(e);
  return Types{TensorType(in[0].dtype, {2, in[0].dims.back()})};
}

// batch_norm_update(running_mean, running_var, moments): no results.
ShapeResult batchNormUpdateShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  for (int i = 0; i < 2; ++i)
    if (auto e = expectFloat(in[i], i == 0 ? "running_mean" : "running_var"))
      return std::move(e);
  if (in[0].rank() != 1 || in[1] != in[0])
    return shapeError("running_mean and running_var must be one [C] type, got " + in[0].str() +
                      " and " + in[1].str());
  TensorType moments(in[0].dtype, {2, in[0].dims[0]});
  if (in[2] != moments)
    return shapeError("moments must be " + moments.str() + " (batch_norm_moments of x), got " +
                      in[2].str());
  if (auto e = checkBatchNormAttrs(attrs))
    return std::move(e);
  if (!(attrs.getInt(kValuesPerExample) >= 1))
    return shapeError(llvm::Twine(kValuesPerExample) + " must be 1 or more, got " +
                      llvm::Twine(attrs.getInt(kValuesPerExample)));
  return Types{};
}

// The running averages move towards the batch's statistics at step end: from the per-channel
// moments, which the parts of a split batch (towers, micro-batches) combine exactly by their
// batch-weighted mean, so a task's update sees its whole batch's statistics.
llvm::Error batchNormStateUpdate(Module &module, const Op &op) {
  auto emit = [&](llvm::StringRef name, llvm::ArrayRef<Value *> operands, AttrMap attrs,
                  std::vector<std::string> results) -> llvm::Expected<Op *> {
    Op *created = module.createOp(getOp(name), operands, std::move(attrs), results);
    created->loc = op.loc;
    auto types = inferResultTypes(*created);
    if (!types)
      return withLocation(withContext(types.takeError(), "'" + name + "'"), module.sourceFile(),
                          op.loc);
    for (unsigned i = 0; i < created->numResults(); ++i)
      created->result(i)->setType((*types)[i]);
    return created;
  };
  // State, not parameters: an optimizer must not update them too, nor a parameter server hold
  // them for one.
  for (unsigned i : {3u, 4u}) {
    const Variable *var = op.operand(i)->variable();
    if (!var || var->trainable())
      return makeError(module.sourceFile(), op.loc,
                       "'" + op.name() + "' writes its " + op.def().operands[i] + " " +
                           op.operand(i)->ref() +
                           " at step end: it must be a variable declared {trainable = false}");
  }
  const TensorType &x = op.operand(0)->type();
  auto moments = emit("batch_norm_moments", {op.operand(0)}, {},
                      {module.uniqueName(op.result(0)->name() + ".moments")});
  if (!moments)
    return moments.takeError();
  int64_t perExample = 1;
  for (int64_t d = 1; d + 1 < x.rank(); ++d)
    perExample *= x.dims[d];
  AttrMap attrs;
  attrs.set(kMomentum, *withDefaults(op.def(), op.attrs).find(kMomentum));
  attrs.set(kValuesPerExample, Attr::integer(perExample));
  auto update = emit("batch_norm_update", {op.operand(3), op.operand(4), (*moments)->result(0)},
                     std::move(attrs), {});
  if (!update)
    return update.takeError();
  return llvm::Error::success();
}

// batch_norm_grad(dy, x, scale, running_mean, running_var) -> the type of x.
ShapeResult batchNormGradShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e =
          checkBatchNorm(in[1], in.drop_front(2), {"scale", "running_mean", "running_var"}, attrs))
    return std::move(e);
  if (auto e = expectSameType(in[0], in[1], "gradient and x"))
    return std::move(e);
  return Types{in[1]};
}

// batch_norm_scale_grad(dy, x, running_mean, running_var) -> [C], the type of scale.
ShapeResult batchNormScaleGradShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = checkBatchNorm(in[1], in.drop_front(2), {"running_mean", "running_var"}, attrs))
    return std::move(e);
  if (auto e = expectSameType(in[0], in[1], "gradient and x"))
    return std::move(e);
  return Types{TensorType(in[1].dtype, {in[1].dims.back()})};
}

// The statistics are state, not parameters: running_mean and running_var get no gradient. In
// training the backward ops use the batch's statistics, in evaluation the running ones, as the
// forward did.
void batchNormGrad(GradientContext &c) {
  Value *dy = c.resultGrad();
  if (!dy)
    return;
  AttrMap epsilon;
  epsilon.set(kEpsilon, *c.resolvedAttrs().find(kEpsilon));
  Value *x = c.operand(0), *mean = c.operand(3), *var = c.operand(4);
  c.setGrad(0, c.emit("batch_norm_grad", {dy, x, c.operand(1), mean, var}, epsilon));
  c.setGrad(1, c.emit("batch_norm_scale_grad", {dy, x, mean, var}, epsilon));
  c.setGrad(2, c.emit("sum_like", {dy, c.operand(2)}));
}

// A few passes over x (statistics, normalization; the backward ops sums and the write): flops
// per element of operand 0 (x, or dy of x's shape), every operand read and every result written
// once.
template <int FlopsPerElement>
OpCost batchNormCost(llvm::ArrayRef<TensorType> in, llvm::ArrayRef<TensorType> out,
                     const AttrMap &attrs, int64_t batch) {
  OpCost c = elementwiseCost(in, out, attrs, batch);
  c.flops = FlopsPerElement * elements(in[0], batch);
  return c;
}

AttrSpec epsilonAttr() {
  return attr(kEpsilon, AttrKind::Float, Attr::real(1e-5), "added to the variance");
}

AttrSpec momentumAttr() {
  return attr(kMomentum, AttrKind::Float, Attr::real(0.1),
              "weight of the batch's statistics in the running averages, in [0, 1]");
}

std::vector<AttrSpec> batchNormAttrs() {
  return {epsilonAttr(), momentumAttr(),
          attr(kSync, AttrKind::Bool, Attr::boolean(false),
               "statistics over every worker and tower (not supported yet); false: each "
               "worker's, tower's and micro-batch's own")};
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
  const std::vector<std::string> bnOperands = {"x", "scale", "bias", "running_mean", "running_var"};
  OpDef bn = makeOp("batch_norm",
                    "scale * (x - mean) / sqrt(var + epsilon) + bias per channel (the last "
                    "dimension of x [N, C] or [N, H, W, C]); training: the batch's mean and biased "
                    "variance over every other dimension, evaluation: running_mean and running_var",
                    bnOperands, batchNormShape, batchNormGrad, batchNormAttrs(), kBatchStatistics);
  bn.noGradientOperands = 0b11000;
  bn.stateUpdate = batchNormStateUpdate;
  bn.cost = batchNormCost<7>;
  t.push_back(bn);
  t.push_back(makeOp("batch_norm_moments",
                     "[mean(x), mean(x * x)] per channel (the last dimension of x [N, C] or [N, H, "
                     "W, C]) over every other dimension: what the parts of a split batch combine "
                     "exactly by their batch-weighted mean",
                     {"x"}, batchNormMomentsShape, nullptr, {}, 0));
  OpDef update = makeOp(
      "batch_norm_update",
      "training: at step end running = (1 - momentum) * running + momentum * the batch's "
      "statistic, for running_mean the mean and for running_var the unbiased variance (as "
      "PyTorch), from moments over the step's batch; evaluation: nothing",
      {"running_mean", "running_var", "moments"}, batchNormUpdateShape, nullptr,
      {momentumAttr(),
       attr(kValuesPerExample, AttrKind::Int, Attr::integer(1),
            "values per channel in one example (H * W of x), for the unbiased variance's count")},
      kSideEffect);
  update.numResults = 0;
  update.writtenOperands = 0b11;
  t.push_back(update);
  OpDef back = makeOp("batch_norm_grad",
                      "dx of batch_norm: training scale / sqrt(var + epsilon) * (dy - mean(dy) - "
                      "xhat * mean(dy * xhat)) with the batch's statistics per channel; "
                      "evaluation dy * scale / sqrt(running_var + epsilon)",
                      {"dy", "x", "scale", "running_mean", "running_var"}, batchNormGradShape,
                      nullptr, {epsilonAttr()}, kGradientOnly | kBatchStatistics);
  back.cost = batchNormCost<10>;
  t.push_back(back);
  OpDef scaleBack = makeOp("batch_norm_scale_grad",
                           "dscale of batch_norm: sum of dy * xhat per channel, xhat normalized "
                           "with the batch's statistics (training) or the running ones "
                           "(evaluation)",
                           {"dy", "x", "running_mean", "running_var"}, batchNormScaleGradShape,
                           nullptr, {epsilonAttr()}, kGradientOnly | kBatchStatistics);
  scaleBack.cost = batchNormCost<6>;
  t.push_back(scaleBack);
}

} // namespace prism::ir::ops
