// lower-optimizer: turns `minimize %loss with OPT(...)` into update ops: optimizer state
// variables, optional dynamic loss scaling, optional global-norm clipping, the learning-rate
// schedule's factor, one apply op per trained variable, and the state updates of the ops that keep
// state (batch_norm's running averages).
#include <optional>
#include <vector>

#include "ir/Diagnostic.h"
#include "ir/LearningRateSchedule.h"
#include "ir/OpTable.h"
#include "ir/Verifier.h"
#include "passes/Pass.h"

namespace prism::passes {
namespace {

using ir::Attr;
using ir::AttrMap;
using ir::Module;
using ir::Value;

// What each optimizer becomes. The apply op's operands are the variable, its state variables
// in this order, the gradient, (for adam) the step count, and with a schedule its factor.
struct OptimizerLowering {
  llvm::StringRef kind;
  llvm::StringRef applyOp;
  std::vector<llvm::StringRef> stateSuffixes; // state variable `<var>.<suffix>`
  bool stepCounter;                           // a shared `adam.step`, incremented each step
};

const OptimizerLowering *findLowering(llvm::StringRef kind) {
  static const std::vector<OptimizerLowering> lowerings = {
      {"sgd", "apply_sgd", {}, false},
      {"momentum", "apply_momentum", {"momentum"}, false},
      {"adam", "apply_adam", {"adam_m", "adam_v"}, true},
  };
  for (const OptimizerLowering &l : lowerings)
    if (l.kind == kind)
      return &l;
  return nullptr;
}

constexpr llvm::StringLiteral kClipNorm = "clip_norm";
constexpr llvm::StringLiteral kLossScale = "loss_scale";
constexpr llvm::StringLiteral kLossScaleInterval = "loss_scale_interval";

// The optimizer parameters that are not the apply op's attributes.
struct StepParameters {
  std::optional<double> clipNorm;
  std::optional<double> lossScale; // the initial scale: dynamic loss scaling is on
  int64_t lossScaleInterval = 2000;
};

// Dynamic loss scaling as PyTorch's GradScaler and TensorFlow's LossScaleOptimizer do it: the
// backward pass starts from the scale instead of 1, the gradients are divided by it again, and a
// step whose gradients are not all finite is skipped and halves the scale; the scale doubles
// after `loss_scale_interval` finite steps in a row.
constexpr double kDefaultLossScale = 65536.0;

// The state and values loss scaling adds to the step.
struct LossScaling {
  Value *scale = nullptr, *goodSteps = nullptr, *skippedSteps = nullptr;
  Value *finite = nullptr; // 1 when every unscaled gradient is finite, else 0
  int64_t interval = 0;
};

// A trained variable and its gradient (`record`: the module's declaration of it).
struct Update {
  ir::Variable *variable;
  Value *gradient;
  ir::Gradient *record;
};

class LowerOptimizer : public Pass {
public:
  llvm::StringRef name() const override { return "lower-optimizer"; }
  llvm::StringRef summary() const override {
    return "turns the optimizer into state variables and one update op per trained variable";
  }
  // `loss-scale=dynamic`: dynamic loss scaling even if the optimizer does not ask for it (the
  // training pipelines set it for fp16).
  std::vector<std::string> optionKeys() const override { return {"loss-scale"}; }

  llvm::Expected<bool> run(Module &module, const PassOptions &options) override {
    // Both statistics show in `--stats`, even when zero.
    count("variables updated", 0);
    count("state variables created", 0);
    if (!module.optimizer)
      return ir::makeError(module.sourceFile(), {},
                           "the module has no optimizer to lower (`minimize %loss with ...`)");
    const ir::Optimizer &opt = *module.optimizer;
    loc_ = opt.loc;
    if (module.gradients.empty())
      return error(module, "the module has no gradients: run autodiff first");
    const OptimizerLowering *lowering = findLowering(opt.kind);
    if (!lowering)
      return error(module, "unknown optimizer '" + opt.kind + "'");
    StepParameters params;
    auto applyAttrs = applyAttributes(module, opt, ir::getOp(lowering->applyOp), params);
    if (!applyAttrs)
      return applyAttrs.takeError();
    std::string lossScaleOption = options.get("loss-scale", "none");
    if (lossScaleOption != "none" && lossScaleOption != "dynamic")
      return ir::makeError("option --loss-scale: expected none or dynamic, got '" +
                           lossScaleOption + "'");
    if (lossScaleOption == "dynamic" && !params.lossScale)
      params.lossScale = kDefaultLossScale;
    if (auto e = ir::checkSchedule(opt.schedule, module.sourceFile()))
      return std::move(e);
    auto updates = trainedGradients(module);
    if (!updates)
      return updates.takeError();
    if (auto err = emitStateUpdates(module))
      return std::move(err);
    if (updates->empty()) {
      module.optimizer.reset();
      return true;
    }

    std::optional<LossScaling> lossScaling;
    if (params.lossScale) {
      auto scaling = emitLossScaling(module, *updates, params);
      if (!scaling)
        return scaling.takeError();
      lossScaling = *scaling;
    }
    Value *clipScale = nullptr;
    if (params.clipNorm) {
      auto scale = emitClipScale(module, *updates, *params.clipNorm);
      if (!scale)
        return scale.takeError();
      clipScale = *scale;
    }
    // The steps already applied (a skipped step does not count): adam's shared counter, or one
    // of the schedule's own.
    Value *stepCount = nullptr, *step = nullptr, *lrFactor = nullptr, *finite = nullptr;
    if (lossScaling)
      finite = lossScaling->finite;
    if (lowering->stepCounter || !opt.schedule.empty()) {
      llvm::StringRef prefix = lowering->stepCounter ? "adam" : "lr";
      stepCount = createState(module, prefix + ".step", ir::TensorType(ir::DType::F32, {}));
      auto t = emitStep(module, stepCount, prefix, finite);
      if (!t)
        return t.takeError();
      step = *t;
    }
    if (!opt.schedule.empty() || finite) {
      // Without a schedule the factor is 1, there only because `finite` comes after it.
      auto factor = opt.schedule.empty()
                        ? emitConstant(module, 1.0, "lr.factor")
                        : emit(module, "lr_schedule", {stepCount},
                               ir::scheduleAttrs(ir::scheduleOf(opt.schedule)), "lr.factor");
      if (!factor)
        return factor.takeError();
      lrFactor = *factor;
    }
    for (const Update &update : *updates)
      if (auto err = emitUpdate(module, *lowering, *applyAttrs, update, clipScale,
                                lowering->stepCounter ? step : nullptr, lrFactor, finite))
        return std::move(err);
    if (stepCount)
      if (auto assigned = emit(module, "assign", {stepCount, step}, {}, ""); !assigned)
        return assigned.takeError();
    if (lossScaling) {
      AttrMap attrs;
      attrs.set("growth_interval", Attr::integer(lossScaling->interval));
      if (auto updated = emit(module, "update_loss_scale",
                              {lossScaling->scale, lossScaling->goodSteps,
                               lossScaling->skippedSteps, lossScaling->finite},
                              std::move(attrs), "");
          !updated)
        return updated.takeError();
    }
    module.optimizer.reset();
    return true;
  }

private:
  llvm::Error error(const Module &module, const llvm::Twine &message) const {
    return ir::makeError(module.sourceFile(), loc_, message);
  }

  static std::string parameterNames(const ir::OpDef &def) {
    std::string names;
    for (const ir::AttrSpec &spec : def.attrs)
      names += spec.name + ", ";
    return names + kClipNorm.str() + ", " + kLossScale.str() + ", " + kLossScaleInterval.str();
  }

  // The apply op's attributes from the optimizer's parameters, every one spelled out so an
  // update op says exactly what it does; `clip_norm`, `loss_scale` and `loss_scale_interval` go
  // to `params` instead.
  llvm::Expected<AttrMap> applyAttributes(const Module &module, const ir::Optimizer &opt,
                                          const ir::OpDef &applyDef, StepParameters &params) const {
    if (auto err = ir::checkLossScaleParameters(opt.params))
      return ir::withLocation(std::move(err), module.sourceFile(), loc_);
    AttrMap applyAttrs;
    for (const auto &[key, value] : opt.params) {
      bool number = value.kind() == ir::AttrKind::Int || value.kind() == ir::AttrKind::Float;
      if (key == kClipNorm) {
        if (!number)
          return error(module, "clip_norm must be a number, got " + value.str());
        params.clipNorm = value.getFloat();
        continue;
      }
      if (key == kLossScale) {
        params.lossScale = value.getFloat();
        continue;
      }
      if (key == kLossScaleInterval) {
        params.lossScaleInterval = value.getInt();
        continue;
      }
      if (!applyDef.attrSpec(key))
        return error(module, "optimizer '" + opt.kind + "' has no parameter '" + key +
                                 "'; accepted: " + parameterNames(applyDef));
      applyAttrs.set(key, value);
    }
    applyAttrs = ir::withDefaults(applyDef, applyAttrs);
    if (auto err = ir::checkSignature(applyDef, applyDef.minOperands(), applyAttrs))
      return ir::withLocation(ir::withContext(std::move(err), "optimizer '" + opt.kind + "'"),
                              module.sourceFile(), loc_);
    return applyAttrs;
  }

  // The gradients of trainable variables, each typed.
  llvm::Expected<std::vector<Update>> trainedGradients(Module &module) const {
    std::vector<Update> updates;
    for (ir::Gradient &g : module.gradients) {
      if (!g.variable->trainable())
        continue;
      if (!g.value->hasType())
        return error(module, "the gradient of '" + g.variable->name() +
                                 "' has no type: run infer-shapes first");
      updates.push_back({g.variable, g.value, &g});
    }
    return updates;
  }

  // Global-norm clipping: the factor every gradient is scaled by.
  llvm::Expected<Value *> emitClipScale(Module &module, llvm::ArrayRef<Update> updates,
                                        double clipNorm) {
    std::vector<Value *> grads;
    for (const Update &update : updates)
      grads.push_back(update.gradient);
    auto norm = emit(module, "global_norm", grads, {}, "grad.norm");
    if (!norm)
      return norm.takeError();
    AttrMap clipAttrs;
    clipAttrs.set(kClipNorm, Attr::real(clipNorm));
    return emit(module, "clip_scale", {*norm}, clipAttrs, "grad.clip");
  }

  // Dynamic loss scaling. The gradient seed `%d.loss` (1) becomes the scale times this batch's
  // share of the step's global batch (batch_share), so that every example's backward values are
  // those of one device on the whole batch: fp16 rounds and overflows them alike however the
  // batch is split over workers, towers and micro-batches. Each gradient is divided by that seed
  // again right away and declared unscaled (what is all-reduced and accumulated); `all_finite`
  // of the combined gradients says whether the step may apply them.
  llvm::Expected<LossScaling> emitLossScaling(Module &module, std::vector<Update> &updates,
                                              const StepParameters &params) {
    Value *seed = module.lookup("d.loss");
    ir::Op *seedOp = seed ? seed->definingOp() : nullptr;
    if (!seedOp || seedOp->name() != "constant" || seedOp->numOperands() != 0)
      return error(module, "loss scaling starts backward from the scale, but the module has no "
                           "gradient seed %d.loss (a constant that autodiff makes)");
    Value *batched = nullptr;
    for (const auto &input : module.inputs())
      if (input->type().rank() > 0 && input->type().dims[0] == ir::kBatchDim) {
        batched = input->value.get();
        break;
      }
    if (!batched)
      return error(module, "loss scaling needs an input with the batch dimension B first");
    const ir::TensorType scalar(seed->type().dtype, {});
    LossScaling scaling;
    scaling.interval = params.lossScaleInterval;
    AttrMap init;
    init.set("value", Attr::real(*params.lossScale));
    scaling.scale = createState(module, "loss.scale", scalar, ir::Initializer{"constant", init});
    scaling.goodSteps = createState(module, "loss.good_steps", scalar);
    scaling.skippedSteps = createState(module, "loss.skipped_steps", scalar);
    // Where the seed was, so that backward still starts after it.
    ir::Op *at = seedOp->next();
    auto share = emitAt(module, "batch_share", {batched}, {}, "loss.share", at);
    if (!share)
      return share.takeError();
    auto scaledSeed = emitAt(module, "mul", {scaling.scale, *share}, {}, "loss.seed", at);
    if (!scaledSeed)
      return scaledSeed.takeError();
    module.replaceAllUses(seed, *scaledSeed);
    auto one = emitAt(module, "constant", {}, constantAttrs(1.0), "loss.one", at);
    if (!one)
      return one.takeError();
    auto inverse = emitAt(module, "div", {*one, *scaledSeed}, {}, "loss.inverse_seed", at);
    if (!inverse)
      return inverse.takeError();
    std::vector<Value *> unscaled;
    for (Update &update : updates) {
      // Right after the gradient, so that its all-reduce bucket still leaves during backward.
      ir::Op *producer = update.gradient->definingOp();
      auto value =
          emitAt(module, "scale", {update.gradient, *inverse}, {},
                 update.gradient->name() + ".unscaled", producer ? producer->next() : nullptr);
      if (!value)
        return value.takeError();
      update.gradient = *value;
      update.record->value = *value;
      unscaled.push_back(*value);
    }
    auto finite = emit(module, "all_finite", unscaled, {}, "grad.finite");
    if (!finite)
      return finite.takeError();
    scaling.finite = *finite;
    return scaling;
  }

  static AttrMap constantAttrs(double value) {
    AttrMap attrs;
    attrs.set("value", Attr::real(value));
    return attrs;
  }

  llvm::Expected<Value *> emitConstant(Module &module, double value, const std::string &name) {
    return emit(module, "constant", {}, constantAttrs(value), name);
  }

  // This step's number (`PREFIX.t`): the shared counter plus one, or with loss scaling plus
  // `finite` (a skipped step does not count).
  llvm::Expected<Value *> emitStep(Module &module, Value *stepCount, llvm::StringRef prefix,
                                   Value *finite) {
    Value *increment = finite;
    if (!increment) {
      auto one = emitConstant(module, 1.0, (prefix + ".one").str());
      if (!one)
        return one.takeError();
      increment = *one;
    }
    return emit(module, "add", {stepCount, increment}, {}, (prefix + ".t").str());
  }

  // The apply op of one variable, with its state variables, its (clipped) gradient, the step
  // (adam), the schedule's factor and whether the gradients are finite (loss scaling).
  llvm::Error emitUpdate(Module &module, const OptimizerLowering &lowering,
                         const AttrMap &applyAttrs, const Update &update, Value *clipScale,
                         Value *step, Value *lrFactor, Value *finite) {
    ir::Variable *var = update.variable;
    std::vector<Value *> operands = {var->value.get()};
    for (llvm::StringRef suffix : lowering.stateSuffixes)
      operands.push_back(createState(module, var->name() + "." + suffix, var->type()));
    Value *grad = update.gradient;
    if (clipScale) {
      auto scaled = emit(module, "scale", {grad, clipScale}, {}, grad->name() + ".clipped");
      if (!scaled)
        return scaled.takeError();
      grad = *scaled;
    }
    operands.push_back(grad);
    if (step)
      operands.push_back(step);
    if (lrFactor)
      operands.push_back(lrFactor);
    if (finite)
      operands.push_back(finite);
    if (auto applied = emit(module, lowering.applyOp, operands, applyAttrs, ""); !applied)
      return applied.takeError();
    count("variables updated");
    return llvm::Error::success();
  }

  // The ops that keep state in variables (batch_norm's running averages) emit its update, by
  // their rule in the op table.
  llvm::Error emitStateUpdates(Module &module) {
    std::vector<const ir::Op *> stateful;
    for (const auto &op : module.ops())
      if (op->def().stateUpdate)
        stateful.push_back(op.get());
    for (const ir::Op *op : stateful) {
      if (auto err = op->def().stateUpdate(module, *op))
        return err;
      count("state updates");
    }
    return llvm::Error::success();
  }

  // An untrained variable (zero unless `init` says otherwise) holding state across steps.
  Value *createState(Module &module, const llvm::Twine &name, const ir::TensorType &type,
                     ir::Initializer init = ir::Initializer{"zeros", {}}) {
    ir::Variable *state =
        module.addVariable(module.uniqueName(name.str()), type.dense(), std::move(init));
    state->attrs.set("trainable", Attr::boolean(false));
    count("state variables created");
    return state->value.get();
  }

  // Appends an op with its result types inferred; returns its first result (null if none).
  llvm::Expected<Value *> emit(Module &module, llvm::StringRef opName,
                               llvm::ArrayRef<Value *> operands, AttrMap attrs,
                               const std::string &resultName) {
    return emitAt(module, opName, operands, std::move(attrs), resultName, nullptr);
  }

  // The same before `before` (null: at the end).
  llvm::Expected<Value *> emitAt(Module &module, llvm::StringRef opName,
                                 llvm::ArrayRef<Value *> operands, AttrMap attrs,
                                 const std::string &resultName, ir::Op *before) {
    ir::Op *op =
        module.createOp(ir::getOp(opName), operands, std::move(attrs), {resultName}, before);
    op->loc = loc_;
    auto types = ir::inferResultTypes(*op);
    if (!types)
      return ir::withLocation(ir::withContext(types.takeError(), "'" + opName + "'"),
                              module.sourceFile(), loc_);
    for (unsigned i = 0; i < op->numResults(); ++i)
      op->result(i)->setType((*types)[i]);
    return op->numResults() ? op->result(0) : nullptr;
  }

  ir::SourceLoc loc_;
};

} // namespace

std::unique_ptr<Pass> createLowerOptimizerPass() {
  return std::make_unique<LowerOptimizer>();
}

} // namespace prism::passes
