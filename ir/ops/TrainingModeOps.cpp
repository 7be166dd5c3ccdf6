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
constexpr const char *kValuesPerExample = "values_per_example";

// The attributes the op has, in range.
llvm::Error checkBatchNormAttrs(const AttrMap &attrs) {
  if (const Attr *eps = attrs.find(kEpsilon); eps && !(eps->getFloat() > 0))
    return shapeError("epsilon must be positive, got " + formatDouble(eps->getFloat()));
  if (const Attr *m = attrs.find(kMomentum); m && !(m->getFloat() >= 0 && m->getFloat() <= 1))
    return shapeError("momentum must be in [0, 1], got " + formatDouble(m->getFloat()));
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

// Moments are float64 whatever x is: the variance mean(x * x) - mean^2 cancels digits when a
// channel's mean is large against its spread, and float64 keeps the replicas' combined
// statistics equal to one device's.
TensorType momentsType(const TensorType &x) {
  return TensorType(DType::F64, {2, x.dims.back()});
}

// moments f64[2, C] (batch_norm_moments of x).
llvm::Error checkMoments(const TensorType &x, const TensorType &moments) {
  TensorType expected = momentsType(x);
  if (moments != expected)
    return shapeError("moments must be " + expected.str() + " (batch_norm_moments of x " + x.str() +
                      "), got " + moments.str());
  return llvm::Error::success();
}

// batch_norm(x, scale, bias, running_mean, running_var) -> the type of x.
ShapeResult batchNormShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = checkBatchNorm(in[0], in.drop_front(),
                              {"scale", "bias", "running_mean", "running_var"}, attrs))
    return std::move(e);
  return Types{in[0]};
}

// batch_norm_moments(x) -> f64[2, C]: the mean and the mean of squares per channel.
ShapeResult batchNormMomentsShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = checkBatchNorm(in[0], {}, {}, attrs))
    return std::move(e);
  return Types{momentsType(in[0])};
}

// batch_norm_update(running_mean, running_var, moments): no results.
ShapeResult batchNormUpdateShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  for (int i = 0; i < 2; ++i)
    if (auto e = expectFloat(in[i], i == 0 ? "running_mean" : "running_var"))
      return std::move(e);
  if (in[0].rank() != 1 || in[1] != in[0])
    return shapeError("running_mean and running_var must be one [C] type, got " + in[0].str() +
                      " and " + in[1].str());
  TensorType moments(DType::F64, {2, in[0].dims[0]});
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
// Creates op `name` at `op`'s location before `before` (null: at the end), its result types
// inferred.
llvm::Expected<Op *> emitFor(Module &module, const Op &op, llvm::StringRef name,
                             llvm::ArrayRef<Value *> operands, AttrMap attrs,
                             std::vector<std::string> results, Op *before = nullptr) {
  Op *created = module.createOp(getOp(name), operands, std::move(attrs), results, before);
  created->loc = op.loc;
  auto types = inferResultTypes(*created);
  if (!types)
    return withLocation(withContext(types.takeError(), "'" + name + "'"), module.sourceFile(),
                        op.loc);
  for (unsigned i = 0; i < created->numResults(); ++i)
    created->result(i)->setType((*types)[i]);
  return created;
}

// What batch_norm's running averages must be: state the step writes, not parameters (an
// optimizer must not update them too, nor a parameter server hold them for one).
llvm::Error checkRunningAverages(const Module &module, const Op &op) {
  for (unsigned i : {3u, 4u}) {
    const Variable *var = op.operand(i)->variable();
    if (!var || var->trainable())
      return makeError(module.sourceFile(), op.loc,
                       "'" + op.name() + "' writes its " + op.def().operands[i] + " " +
                           op.operand(i)->ref() +
                           " at step end: it must be a variable declared {trainable = false}");
  }
  return llvm::Error::success();
}

// batch_norm_update of running_mean and running_var (operands 3 and 4 of `op`) from `moments`
// of x (operand 0).
llvm::Error emitRunningUpdate(Module &module, const Op &op, Value *moments) {
  const TensorType &x = op.operand(0)->type();
  int64_t perExample = 1;
  for (int64_t d = 1; d + 1 < x.rank(); ++d)
    perExample *= x.dims[d];
  AttrMap attrs;
  attrs.set(kMomentum, *withDefaults(op.def(), op.attrs).find(kMomentum));
  attrs.set(kValuesPerExample, Attr::integer(perExample));
  auto update = emitFor(module, op, "batch_norm_update", {op.operand(3), op.operand(4), moments},
                        std::move(attrs), {});
  return update ? llvm::Error::success() : update.takeError();
}

llvm::Error batchNormStateUpdate(Module &module, const Op &op) {
  if (auto err = checkRunningAverages(module, op))
    return err;
  auto moments = emitFor(module, op, "batch_norm_moments", {op.operand(0)}, {},
                         {module.uniqueName(op.result(0)->name() + ".moments")});
  if (!moments)
    return moments.takeError();
  return emitRunningUpdate(module, op, (*moments)->result(0));
}

// batch_norm_apply's running averages move towards the moments it normalized with: the whole
// step's batch's, as every replica reads them.
llvm::Error batchNormApplyStateUpdate(Module &module, const Op &op) {
  if (auto err = checkRunningAverages(module, op))
    return err;
  return emitRunningUpdate(module, op, op.operand(5));
}

// sync = true: the statistics of the step's whole batch, over every tower and worker. The op
// becomes
//   %y.moments = batch_norm_moments(x)          this part's moments
//   %y.global = replica_mean(%y.moments)        the whole batch's (exact: a batch-weighted mean)
//   %y = batch_norm_apply(x, scale, bias, running_mean, running_var, %y.global)
// and autodiff differentiates through the three, so the backward pass reduces the two sums the
// input gradient needs over the replicas too (replica_mean is its own gradient).
llvm::Expected<bool> batchNormExpand(Module &module, Op &op) {
  AttrMap attrs = withDefaults(op.def(), op.attrs);
  if (!attrs.getBool(kSyncAttr))
    return false;
  Value *y = op.result(0);
  const std::string name = y->name();
  auto moments = emitFor(module, op, "batch_norm_moments", {op.operand(0)}, {},
                         {module.uniqueName(name + ".moments")}, &op);
  if (!moments)
    return moments.takeError();
  auto global = emitFor(module, op, "replica_mean", {(*moments)->result(0)}, {},
                        {module.uniqueName(name + ".global")}, &op);
  if (!global)
    return global.takeError();
  AttrMap applyAttrs;
  applyAttrs.set(kEpsilon, *attrs.find(kEpsilon));
  applyAttrs.set(kMomentum, *attrs.find(kMomentum));
  module.renameValue(y, module.uniqueName(name + ".expanded"));
  llvm::SmallVector<Value *, 6> operands(op.operands().begin(), op.operands().end());
  operands.push_back((*global)->result(0));
  auto apply =
      emitFor(module, op, "batch_norm_apply", operands, std::move(applyAttrs), {name}, &op);
  if (!apply)
    return apply.takeError();
  (*apply)->trivia = op.trivia;
  module.replaceAllUses(y, (*apply)->result(0));
  module.eraseOp(&op);
  return true;
}

// batch_norm_apply(x, scale, bias, running_mean, running_var, moments) -> the type of x.
ShapeResult batchNormApplyShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = checkBatchNorm(in[0], in.slice(1, 4),
                              {"scale", "bias", "running_mean", "running_var"}, attrs))
    return std::move(e);
  if (auto e = checkMoments(in[0], in[5]))
    return std::move(e);
  return Types{in[0]};
}

// batch_norm_apply_grad(dy, x, scale, running_mean, running_var, moments) -> the type of x.
ShapeResult batchNormApplyGradShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e =
          checkBatchNorm(in[1], in.slice(2, 3), {"scale", "running_mean", "running_var"}, attrs))
    return std::move(e);
  if (auto e = expectSameType(in[0], in[1], "gradient and x"))
    return std::move(e);
  if (auto e = checkMoments(in[1], in[5]))
    return std::move(e);
  return Types{in[1]};
}

// batch_norm_apply_scale_grad(dy, x, running_mean, running_var, moments) -> [C].
ShapeResult batchNormApplyScaleGradShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = checkBatchNorm(in[1], in.slice(2, 2), {"running_mean", "running_var"}, attrs))
    return std::move(e);
  if (auto e = expectSameType(in[0], in[1], "gradient and x"))
    return std::move(e);
  if (auto e = checkMoments(in[1], in[4]))
    return std::move(e);
  return Types{TensorType(in[1].dtype, {in[1].dims.back()})};
}

// batch_norm_apply_moments_grad(dy, x, scale, moments) -> f64[2, C], the type of moments.
ShapeResult batchNormApplyMomentsGradShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = checkBatchNorm(in[1], in.slice(2, 1), {"scale"}, attrs))
    return std::move(e);
  if (auto e = expectSameType(in[0], in[1], "gradient and x"))
    return std::move(e);
  if (auto e = checkMoments(in[1], in[3]))
    return std::move(e);
  return Types{in[3]};
}

// batch_norm_moments_grad(dmoments, x) -> the type of x.
ShapeResult batchNormMomentsGradShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = checkBatchNorm(in[1], {}, {}, attrs))
    return std::move(e);
  if (auto e = checkMoments(in[1], in[0]))
    return std::move(e);
  return Types{in[1]};
}

// y depends on x directly and through the moments (the training statistics), which autodiff
// reaches through batch_norm_moments and replica_mean; running_mean and running_var get none.
void batchNormApplyGrad(GradientContext &c) {
  Value *dy = c.resultGrad();
  if (!dy)
    return;
  AttrMap epsilon;
  epsilon.set(kEpsilon, *c.resolvedAttrs().find(kEpsilon));
  Value *x = c.operand(0), *mean = c.operand(3), *var = c.operand(4), *moments = c.operand(5);
  c.setGrad(0, c.emit("batch_norm_apply_grad", {dy, x, c.operand(1), mean, var, moments}, epsilon));
  c.setGrad(1, c.emit("batch_norm_apply_scale_grad", {dy, x, mean, var, moments}, epsilon));
  c.setGrad(2, c.emit("sum_like", {dy, c.operand(2)}));
  c.setGrad(5, c.emit("batch_norm_apply_moments_grad", {dy, x, c.operand(1), moments}, epsilon));
}

void batchNormMomentsGrad(GradientContext &c) {
  if (Value *dm = c.resultGrad())
    c.setGrad(0, c.emit("batch_norm_moments_grad", {dm, c.operand(0)}));
}

// replica_mean(x) -> the type of x: any dense float tensor.
ShapeResult replicaMeanShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectDense(in[0], "x"))
    return std::move(e);
  if (auto e = expectFloat(in[0], "x"))
    return std::move(e);
  if (in[0].hasBatchDim())
    return shapeError("x must not have the batch dimension (a mean over the replicas joins values "
                      "of the same shape on every part of the batch), got " +
                      in[0].str());
  return Types{in[0]};
}

// Each replica's share of the loss weighs its gradient by its part of the batch, which is
// what the mean gives every replica back: the gradient of the mean is the mean of the gradients.
void replicaMeanGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad())
    c.setGrad(0, c.emit("replica_mean", {dy}));
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
          attr(kSyncAttr, AttrKind::Bool, Attr::boolean(false),
               "statistics over the step's whole batch, every worker and tower (reduced with "
               "replica_mean); false: each worker's, tower's and micro-batch's own")};
}

// What batch_norm with sync = true expands to beyond batch_norm_moments: the gradient of the
// moments, replica_mean, and batch_norm_apply with its gradients.
void registerSyncBatchNormOps(std::vector<OpDef> &t) {
  t.push_back(makeOp("batch_norm_moments_grad",
                     "dx of batch_norm_moments: (dmoments[0] + 2 x dmoments[1]) / n per channel, "
                     "n the values per channel in x",
                     {"dmoments", "x"}, batchNormMomentsGradShape, nullptr, {}, kGradientOnly));
  OpDef mean = makeOp("replica_mean",
                      "the batch-weighted mean of x over every part of the step's batch (towers "
                      "and workers: the replicating passes join and all-reduce it); on one "
                      "device x",
                      {"x"}, replicaMeanShape, replicaMeanGrad, {}, kReplicaMean);
  t.push_back(mean);
  const std::vector<std::string> applyOperands = {"x",           "scale",  "bias", "running_mean",
                                                  "running_var", "moments"};
  OpDef apply = makeOp("batch_norm_apply",
                       "scale * (x - mean) / sqrt(var + epsilon) + bias per channel with the "
                       "statistics of moments ([mean, mean of squares], batch_norm with sync = "
                       "true expands to it) in training, running_mean and running_var in "
                       "evaluation",
                       applyOperands, batchNormApplyShape, batchNormApplyGrad,
                       {epsilonAttr(), momentumAttr()}, 0);
  apply.noGradientOperands = 0b011000;
  apply.stateUpdate = batchNormApplyStateUpdate;
  apply.cost = batchNormCost<3>;
  t.push_back(apply);
  OpDef applyBack = makeOp("batch_norm_apply_grad",
                           "dx of batch_norm_apply with its moments held: dy * scale / sqrt(var + "
                           "epsilon), var from moments (training) or running_var (evaluation)",
                           {"dy", "x", "scale", "running_mean", "running_var", "moments"},
                           batchNormApplyGradShape, nullptr, {epsilonAttr()}, kGradientOnly);
  applyBack.cost = batchNormCost<2>;
  t.push_back(applyBack);
  OpDef applyScaleBack =
      makeOp("batch_norm_apply_scale_grad",
             "dscale of batch_norm_apply: sum of dy * xhat per channel, xhat "
             "normalized with moments (training) or the running averages "
             "(evaluation)",
             {"dy", "x", "running_mean", "running_var", "moments"}, batchNormApplyScaleGradShape,
             nullptr, {epsilonAttr()}, kGradientOnly);
  applyScaleBack.cost = batchNormCost<4>;
  t.push_back(applyScaleBack);
  OpDef applyMomentsBack = makeOp(
      "batch_norm_apply_moments_grad",
      "dmoments of batch_norm_apply per channel, from s = sum(dy) and t = sum(dy * (x - mean)): "
      "[-scale * s / sd + scale * mean * t / sd^3, -scale * t / (2 sd^3)] with sd = sqrt(var + "
      "epsilon) (training); zero in evaluation, where moments are not read",
      {"dy", "x", "scale", "moments"}, batchNormApplyMomentsGradShape, nullptr, {epsilonAttr()},
      kGradientOnly);
  applyMomentsBack.cost = batchNormCost<4>;
  t.push_back(applyMomentsBack);
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
  bn.expand = batchNormExpand;
  bn.cost = batchNormCost<7>;
  t.push_back(bn);
  t.push_back(makeOp("batch_norm_moments",
                     "[mean(x), mean(x * x)] per channel (the last dimension of x [N, C] or [N, H, "
                     "W, C]) over every other dimension, in float64: what the parts of a split "
                     "batch combine exactly by their batch-weighted mean",
                     {"x"}, batchNormMomentsShape, batchNormMomentsGrad, {}, 0));
  registerSyncBatchNormOps(t);
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
