// Variable updates (applied at the end of a step) and gradient clipping.
#include "ir/LearningRateSchedule.h"
#include "ir/ops/OpHelpers.h"

namespace prism::ir::ops {
namespace {

// The gradient (dense or sparse) must have the variable's dense type.
llvm::Error checkGradient(const TensorType &var, const TensorType &grad) {
  if (grad.dense() != var)
    return shapeError("gradient " + grad.str() + " does not match variable " + var.str());
  if (!isFloat(var.dtype))
    return shapeError("only floating-point variables are trained, got " + var.str());
  return llvm::Error::success();
}

// The optional last operands of an update: the factor lr is multiplied by this step, and
// whether this step's gradients are finite (1: apply; 0: leave everything as it is).
llvm::Error checkLrFactor(llvm::ArrayRef<TensorType> in, size_t index) {
  for (const char *name : {"lr_factor", "finite"}) {
    if (in.size() <= index)
      break;
    if (auto e = expectFloat(in[index], name))
      return e;
    if (auto e = expectRank(in[index], 0, name))
      return e;
    ++index;
  }
  return llvm::Error::success();
}

ShapeResult sgdShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = checkGradient(in[0], in[1]))
    return std::move(e);
  if (auto e = checkLrFactor(in, 2))
    return std::move(e);
  return Types{};
}

ShapeResult momentumShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectSameType(in[0], in[1], "variable and accumulator"))
    return std::move(e);
  if (auto e = checkGradient(in[0], in[2]))
    return std::move(e);
  if (auto e = checkLrFactor(in, 3))
    return std::move(e);
  return Types{};
}

ShapeResult adamShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectSameType(in[0], in[1], "variable and first moment"))
    return std::move(e);
  if (auto e = expectSameType(in[0], in[2], "variable and second moment"))
    return std::move(e);
  if (auto e = checkGradient(in[0], in[3]))
    return std::move(e);
  if (auto e = expectRank(in[4], 0, "step count"))
    return std::move(e);
  if (auto e = checkLrFactor(in, 5))
    return std::move(e);
  return Types{};
}

// Dense: every state tensor read and written. Sparse: only the touched rows.
OpCost updateCost(llvm::ArrayRef<TensorType> in, size_t gradIndex, int64_t batch) {
  OpCost c;
  const TensorType &g = in[gradIndex];
  double touched = g.sparse ? bytesOf(g, batch) : bytesOf(in[0], batch);
  c.bytes = touched * static_cast<double>(2 * gradIndex + 1);
  c.flops = (g.sparse ? elements(g, batch) : elements(in[0], batch)) * 4.0 * gradIndex;
  return c;
}

// The gradient is the operand after the variable and its state.
template <size_t GradIndex>
OpCost updateCostOf(llvm::ArrayRef<TensorType> in, llvm::ArrayRef<TensorType>, const AttrMap &,
                    int64_t batch) {
  return updateCost(in, GradIndex, batch);
}

ShapeResult lrScheduleShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectFloat(in[0], "step"))
    return std::move(e);
  if (auto e = expectRank(in[0], 0, "step"))
    return std::move(e);
  if (auto schedule = scheduleFromAttrs(attrs); !schedule)
    return shapeError(messageOf(schedule.takeError()));
  return Types{TensorType(in[0].dtype, {})};
}

ShapeResult assignShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectSameType(in[0], in[1], "variable and new value"))
    return std::move(e);
  return Types{};
}

ShapeResult scaleShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectFloat(in[0], "x"))
    return std::move(e);
  if (auto e = expectRank(in[1], 0, "scale"))
    return std::move(e);
  return Types{in[0]};
}

ShapeResult globalNormShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  for (const TensorType &t : in)
    if (auto e = expectFloat(t, "gradient"))
      return std::move(e);
  return Types{TensorType(in[0].dtype, {})};
}

ShapeResult allFiniteShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  for (const TensorType &t : in)
    if (auto e = expectFloat(t, "gradient"))
      return std::move(e);
  return Types{TensorType(in[0].dtype, {})};
}

ShapeResult batchShareShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (in[0].rank() < 1 || in[0].dims[0] != kBatchDim)
    return shapeError("batch_share needs an operand whose first dimension is the batch B, got " +
                      in[0].str());
  return Types{TensorType(DType::F32, {})};
}

ShapeResult updateLossScaleShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  const char *names[] = {"scale", "good_steps", "skipped_steps", "finite"};
  for (size_t i = 0; i < in.size(); ++i) {
    if (auto e = expectFloat(in[i], names[i]))
      return std::move(e);
    if (auto e = expectRank(in[i], 0, names[i]))
      return std::move(e);
  }
  if (attrs.getInt("growth_interval") < 1)
    return shapeError("growth_interval must be at least 1");
  if (attrs.getFloat("growth_factor") < 1)
    return shapeError("growth_factor must be at least 1");
  double backoff = attrs.getFloat("backoff_factor");
  if (backoff <= 0 || backoff >= 1)
    return shapeError("backoff_factor must be in (0, 1)");
  return Types{};
}

ShapeResult clipScaleShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectRank(in[0], 0, "norm"))
    return std::move(e);
  if (attrs.getFloat("clip_norm") <= 0)
    return shapeError("clip_norm must be positive");
  return Types{in[0]};
}

// Updates have no gradient rule; their result count varies (zero for writes).
OpDef def(const char *name, const char *summary, std::vector<std::string> operands, ShapeRule shape,
          std::vector<AttrSpec> attrs, uint32_t traits, unsigned results) {
  OpDef d = makeOp(name, summary, std::move(operands), shape, nullptr, std::move(attrs), traits);
  d.numResults = results;
  return d;
}

AttrSpec lr() {
  return attr("lr", AttrKind::Float, "learning rate (times lr_factor when given)");
}

// An update op's optional last operands: the learning-rate schedule's factor this step, and
// (with loss scaling) whether the gradients are finite; without it the update is skipped.
void takeLrFactor(OpDef &d) {
  d.operands.push_back("lr_factor");
  d.operands.push_back("finite");
  d.optionalOperands = 2;
}

} // namespace

void registerOptimizerOps(std::vector<OpDef> &t) {
  uint32_t update = kSideEffect | kOptimizerUpdate;
  OpDef sgd = def("apply_sgd", "w -= lr * g; a sparse g touches only its rows; finite = 0 skips",
                  {"w", "g"}, sgdShape, {lr()}, update, 0);
  takeLrFactor(sgd);
  sgd.writtenOperands = 0b1;
  sgd.cost = updateCostOf<1>;
  t.push_back(sgd);
  OpDef mom = def("apply_momentum",
                  "a = momentum * a + g; w -= lr * (nesterov ? g + momentum * a : a); "
                  "a sparse g touches only its rows; finite = 0 skips",
                  {"w", "accum", "g"}, momentumShape,
                  {lr(), attr("momentum", AttrKind::Float, Attr::real(0.9), "decay of a"),
                   attr("nesterov", AttrKind::Bool, Attr::boolean(false), "Nesterov update")},
                  update, 0);
  takeLrFactor(mom);
  mom.writtenOperands = 0b11;
  mom.cost = updateCostOf<2>;
  t.push_back(mom);
  OpDef adam = def(
      "apply_adam",
      "m = b1 m + (1-b1) g; v = b2 v + (1-b2) g²; w -= lr (m / (1-b1^t)) / (√(v / (1-b2^t)) + ε); "
      "a sparse g updates only its rows (lazy Adam); finite = 0 skips",
      {"w", "m", "v", "g", "t"}, adamShape,
      {lr(), attr("beta1", AttrKind::Float, Attr::real(0.9), "first-moment decay"),
       attr("beta2", AttrKind::Float, Attr::real(0.999), "second-moment decay"),
       attr("epsilon", AttrKind::Float, Attr::real(1e-8), "ε")},
      update, 0);
  takeLrFactor(adam);
  adam.writtenOperands = 0b111;
  adam.cost = updateCostOf<3>;
  t.push_back(adam);
  t.push_back(def(
      "lr_schedule",
      "the learning-rate factor at step s (updates already applied): a linear warmup "
      "from warmup_start over warmup_steps, then the decay (docs/ir.md)",
      {"step"}, lrScheduleShape,
      {attr("warmup_steps", AttrKind::Int, Attr::integer(0), "warmup length W"),
       attr("warmup_start", AttrKind::Float, Attr::real(0.0), "the factor at step 0"),
       attr("decay", AttrKind::String, Attr::string("constant"),
            "constant, step_decay, exponential or cosine"),
       attr("every", AttrKind::Int, Attr::integer(0), "step_decay: steps per decay"),
       attr("gamma", AttrKind::Float, Attr::real(0.1), "step_decay, exponential: factor per decay"),
       attr("total", AttrKind::Int, Attr::integer(0), "cosine: steps to final"),
       attr("final", AttrKind::Float, Attr::real(0.0), "cosine: the last factor")},
      0, 1));
  OpDef assign = def("assign", "the variable takes the value at the end of the step",
                     {"var", "value"}, assignShape, {}, kSideEffect, 0);
  assign.writtenOperands = 0b1;
  t.push_back(assign);
  t.push_back(
      def("scale", "x * s for a scalar s; x dense or sparse", {"x", "s"}, scaleShape, {}, 0, 1));
  OpDef norm = def("global_norm",
                   "√(Σ ‖g‖²) over all operands, dense or sparse "
                   "(a sparse value counts as its dense sum)",
                   {"g"}, globalNormShape, {}, 0, 1);
  norm.variadic = true;
  t.push_back(norm);
  OpDef finite =
      def("all_finite", "1 when every element of every operand (dense or sparse) is finite, else 0",
          {"g"}, allFiniteShape, {}, 0, 1);
  finite.variadic = true;
  t.push_back(finite);
  t.push_back(def("batch_share",
                  "b / N: the examples b of x's batch over the step's global batch N (all "
                  "workers, towers and micro-batches); 1 on one device without accumulation",
                  {"x"}, batchShareShape, {}, 0, 1));
  OpDef lossScale = def(
      "update_loss_scale",
      "dynamic loss scaling after a step: finite: good += 1, and scale *= growth_factor once good "
      "reaches growth_interval (good = 0); else scale *= backoff_factor, good = 0, skipped += 1",
      {"scale", "good_steps", "skipped_steps", "finite"}, updateLossScaleShape,
      {attr("growth_interval", AttrKind::Int, Attr::integer(2000),
            "finite steps in a row before the scale grows"),
       attr("growth_factor", AttrKind::Float, Attr::real(2.0), "growth of the scale"),
       attr("backoff_factor", AttrKind::Float, Attr::real(0.5), "shrinking after an overflow")},
      kSideEffect, 0);
  lossScale.writtenOperands = 0b111;
  t.push_back(lossScale);
  t.push_back(def("clip_scale", "min(1, clip_norm / norm): the factor global-norm clipping applies",
                  {"norm"}, clipScaleShape,
                  {attr("clip_norm", AttrKind::Float, "largest allowed global norm")}, 0, 1));
}

} // namespace prism::ir::ops
