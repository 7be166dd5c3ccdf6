// lower-optimizer: turns `minimize %loss with OPT(...)` into update ops: optimizer state
// variables, optional global-norm clipping, the learning-rate schedule's factor, and one apply
// op per trained variable.
#include <optional>
#include <vector>

#include "ir/Diagnostic.h"
#include "ir/LearningRateSchedule.h"
#include "ir/OpTable.h"
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

// A trained variable and its gradient.
struct Update {
  ir::Variable *variable;
  Value *gradient;
};

class LowerOptimizer : public Pass {
public:
  llvm::StringRef name() const override { return "lower-optimizer"; }
  llvm::StringRef summary() const override {
    return "turns the optimizer into state variables and one update op per trained variable";
  }

  llvm::Expected<bool> run(Module &module, const PassOptions &) override {
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
    std::optional<double> clipNorm;
    auto applyAttrs = applyAttributes(module, opt, ir::getOp(lowering->applyOp), clipNorm);
    if (!applyAttrs)
      return applyAttrs.takeError();
    if (auto e = ir::checkSchedule(opt.schedule, module.sourceFile()))
      return std::move(e);
    auto updates = trainedGradients(module);
    if (!updates)
      return updates.takeError();
    if (updates->empty()) {
      module.optimizer.reset();
      return true;
    }

    Value *clipScale = nullptr;
    if (clipNorm) {
      auto scale = emitClipScale(module, *updates, *clipNorm);
      if (!scale)
        return scale.takeError();
      clipScale = *scale;
    }
    // The steps already applied: adam's shared counter, or one of the schedule's own.
    Value *stepCount = nullptr, *step = nullptr, *lrFactor = nullptr;
    if (lowering->stepCounter || !opt.schedule.empty()) {
      llvm::StringRef prefix = lowering->stepCounter ? "adam" : "lr";
      stepCount = createState(module, prefix + ".step", ir::TensorType(ir::DType::F32, {}));
      auto t = emitStep(module, stepCount, prefix);
      if (!t)
        return t.takeError();
      step = *t;
    }
    if (!opt.schedule.empty()) {
      auto factor = emit(module, "lr_schedule", {stepCount},
                         ir::scheduleAttrs(ir::scheduleOf(opt.schedule)), "lr.factor");
      if (!factor)
        return factor.takeError();
      lrFactor = *factor;
    }
    for (const Update &update : *updates)
      if (auto err = emitUpdate(module, *lowering, *applyAttrs, update, clipScale,
                                lowering->stepCounter ? step : nullptr, lrFactor))
        return std::move(err);
    if (stepCount)
      if (auto assigned = emit(module, "assign", {stepCount, step}, {}, ""); !assigned)
        return assigned.takeError();
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
    return names + kClipNorm.str();
  }

  // The apply op's attributes from the optimizer's parameters, every one spelled out so an
  // update op says exactly what it does; `clip_norm` goes to `clipNorm` instead.
  llvm::Expected<AttrMap> applyAttributes(const Module &module, const ir::Optimizer &opt,
                                          const ir::OpDef &applyDef,
                                          std::optional<double> &clipNorm) const {
    AttrMap applyAttrs;
    for (const auto &[key, value] : opt.params) {
      if (key == kClipNorm) {
        if (value.kind() != ir::AttrKind::Int && value.kind() != ir::AttrKind::Float)
          return error(module, "clip_norm must be a number, got " + value.str());
        clipNorm = value.getFloat();
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
  llvm::Expected<std::vector<Update>> trainedGradients(const Module &module) const {
    std::vector<Update> updates;
    for (const ir::Gradient &g : module.gradients) {
      if (!g.variable->trainable())
        continue;
      if (!g.value->hasType())
        return error(module, "the gradient of '" + g.variable->name() +
                                 "' has no type: run infer-shapes first");
      updates.push_back({g.variable, g.value});
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

  // This step's number: the shared counter plus one (`PREFIX.t`).
  llvm::Expected<Value *> emitStep(Module &module, Value *stepCount, llvm::StringRef prefix) {
    AttrMap oneAttrs;
    oneAttrs.set("value", Attr::real(1.0));
    auto one = emit(module, "constant", {}, oneAttrs, (prefix + ".one").str());
    if (!one)
      return one.takeError();
    return emit(module, "add", {stepCount, *one}, {}, (prefix + ".t").str());
  }

  // The apply op of one variable, with its state variables, its (clipped) gradient, the step
  // (adam) and the schedule's factor.
  llvm::Error emitUpdate(Module &module, const OptimizerLowering &lowering,
                         const AttrMap &applyAttrs, const Update &update, Value *clipScale,
                         Value *step, Value *lrFactor) {
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
    if (auto applied = emit(module, lowering.applyOp, operands, applyAttrs, ""); !applied)
      return applied.takeError();
    count("variables updated");
    return llvm::Error::success();
  }

  // A zero-initialized, untrained variable holding optimizer state across steps.
  Value *createState(Module &module, const llvm::Twine &name, const ir::TensorType &type) {
    ir::Variable *state = module.addVariable(module.uniqueName(name.str()), type.dense(),
                                             ir::Initializer{"zeros", {}});
    state->attrs.set("trainable", Attr::boolean(false));
    count("state variables created");
    return state->value.get();
  }

  // Appends an op with its result types inferred; returns its first result (null if none).
  llvm::Expected<Value *> emit(Module &module, llvm::StringRef opName,
                               llvm::ArrayRef<Value *> operands, AttrMap attrs,
                               const std::string &resultName) {
    ir::Op *op = module.createOp(ir::getOp(opName), operands, std::move(attrs), {resultName});
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
