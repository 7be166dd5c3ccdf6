// The learning-rate scaling rule.
#include "plan/LearningRateScaling.h"

#include "ir/Diagnostic.h"

namespace prism::plan {

llvm::StringRef lrScaleRuleName(LrScaleRule rule) {
  return rule == LrScaleRule::Linear ? "linear" : "none";
}

llvm::Expected<LrScaleRule> parseLrScaleRule(llvm::StringRef text) {
  for (LrScaleRule rule : {LrScaleRule::None, LrScaleRule::Linear})
    if (text == lrScaleRuleName(rule))
      return rule;
  return ir::makeError("option --lr-scale-rule: expected none or linear, got '" + text + "'");
}

double LearningRateScaling::factor(int64_t globalBatch) const {
  if (rule == LrScaleRule::None)
    return 1;
  return static_cast<double>(globalBatch) / static_cast<double>(baseBatch);
}

LearningRateScaling lrScalingOf(const RunConfig &run) {
  LearningRateScaling scaling;
  scaling.rule = run.lr_scale_rule() == lrScaleRuleName(LrScaleRule::Linear) ? LrScaleRule::Linear
                                                                             : LrScaleRule::None;
  if (run.lr_base_batch() > 0)
    scaling.baseBatch = run.lr_base_batch();
  return scaling;
}

llvm::Error scaleLearningRate(ir::Module &module, const LearningRateScaling &scaling,
                              int64_t globalBatch) {
  if (scaling.rule == LrScaleRule::None || !module.optimizer)
    return llvm::Error::success();
  if (scaling.baseBatch < 1)
    return ir::makeError("option --lr-base-batch: expected at least 1, got " +
                         llvm::Twine(scaling.baseBatch));
  if (globalBatch < 1)
    return ir::makeError("the lr scaling rule needs a global batch of at least 1, got " +
                         llvm::Twine(globalBatch));
  ir::AttrMap &params = module.optimizer->params;
  const ir::Attr *lr = params.find("lr");
  if (!lr || (lr->kind() != ir::AttrKind::Int && lr->kind() != ir::AttrKind::Float))
    return ir::makeError(module.sourceFile(), module.optimizer->loc,
                         "the lr scaling rule needs the optimizer's lr as a number");
  params.set("lr", ir::Attr::real(lr->getFloat() * scaling.factor(globalBatch)));
  return llvm::Error::success();
}

} // namespace prism::plan
