// The learning-rate scaling rule (`--lr-scale-rule linear --lr-base-batch N`): the model's lr is
// the rate for the base batch, and a run on a larger global batch multiplies it by
// global / base (Goyal et al., "Accurate, Large Minibatch SGD"). One definition for `prism
// train`, `prism partition` and the single-device run of `prism verify`.
#pragma once

#include <cstdint>

#include "ir/Module.h"
#include "plan/plan.pb.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::plan {

enum class LrScaleRule : uint8_t { None, Linear };
llvm::StringRef lrScaleRuleName(LrScaleRule rule); // "none", "linear"
// The error names the option (`--lr-scale-rule`) and the text.
llvm::Expected<LrScaleRule> parseLrScaleRule(llvm::StringRef text);

struct LearningRateScaling {
  LrScaleRule rule = LrScaleRule::None;
  // The batch the model's lr was chosen for: `prism train`'s default batch.
  int64_t baseBatch = 128;

  // The factor lr is multiplied by at `globalBatch` (1 without a rule).
  double factor(int64_t globalBatch) const;
};

// The scaling a plan's run was compiled with (a plan without the fields: none).
LearningRateScaling lrScalingOf(const RunConfig &run);

// Multiplies the optimizer's lr by the rule's factor; the schedule (a factor of lr) is kept. A
// module without an optimizer is left as it is.
llvm::Error scaleLearningRate(ir::Module &module, const LearningRateScaling &scaling,
                              int64_t globalBatch);

} // namespace prism::plan
