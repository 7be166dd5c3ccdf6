// Learning-rate schedules: the phases an optimizer's `schedule` may list (constant,
// warmup_linear, step_decay, exponential, cosine), their check, and the factor the base rate is
// multiplied by at each step, a pure function of the step number.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/Attribute.h"
#include "ir/Module.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::ir {

// The optimizer parameter that holds the schedule: `adam(lr = 0.001, schedule = ...)`.
constexpr llvm::StringLiteral kScheduleParam = "schedule";

// What a phase's parameter must be.
enum class ScheduleParamRange : uint8_t {
  PositiveInt, // an integer >= 1 (a number of steps)
  Fraction,    // a number in [0, 1]
  Positive,    // a number > 0
  NonNegative, // a number >= 0
};

struct ScheduleParamDef {
  std::string name;
  ScheduleParamRange range;
  bool required = false;
  double dflt = 0; // used when not required and absent
  std::string doc;
};

struct SchedulePhaseDef {
  std::string kind;
  bool warmup = false; // a warmup may only come first, and a decay (any other) follows it
  std::vector<ScheduleParamDef> params;
  std::string summary; // the formula, for docs and messages
  // `cosine(total, final = 0.0)`, `constant`
  std::string signature() const;
  const ScheduleParamDef *param(llvm::StringRef name) const;
};

const SchedulePhaseDef *lookupSchedulePhase(llvm::StringRef kind);
// "constant, warmup_linear, step_decay, exponential, cosine", for messages.
std::string schedulePhaseNames();

// Checks a schedule as written: known kinds, parameter names, kinds and ranges, required
// parameters, and the composition rule (at most two phases: an optional warmup_linear first,
// then at most one decay). Errors carry the location of the phase at fault in `file`.
llvm::Error checkSchedule(llvm::ArrayRef<SchedulePhase> phases, llvm::StringRef file);

// The decay that follows the warmup.
enum class ScheduleDecay : uint8_t { Constant, Step, Exponential, Cosine };

// A checked schedule in the form the `lr_schedule` op's attributes hold: an optional linear
// warmup over `warmupSteps`, then one decay counted from the warmup's end.
struct LearningRateSchedule {
  int64_t warmupSteps = 0; // 0: no warmup
  double warmupStart = 0;  // the factor at step 0
  ScheduleDecay decay = ScheduleDecay::Constant;
  int64_t every = 0;      // step: gamma is applied every `every` steps
  double gamma = 0.1;     // step, exponential
  int64_t total = 0;      // cosine: steps from 1 down to `final`
  double finalFactor = 0; // cosine: the factor after `total` steps

  // The factor at `step` (updates already applied: 0 for the first). docs/ir.md has the formulas.
  double factor(int64_t step) const;
};

// The step number a counter holds (a float tensor counts steps): an error unless it is a
// whole number >= 0.
llvm::Expected<int64_t> stepNumber(double counter);

// The schedule of phases that passed checkSchedule (none: constant).
LearningRateSchedule scheduleOf(llvm::ArrayRef<SchedulePhase> phases);

// The `lr_schedule` op's attributes: those the schedule uses, so the op says what it computes.
AttrMap scheduleAttrs(const LearningRateSchedule &schedule);
// The schedule the `lr_schedule` op's attributes describe; an error (no location) for a decay
// the IR does not know or a parameter out of range.
llvm::Expected<LearningRateSchedule> scheduleFromAttrs(const AttrMap &attrs);

llvm::StringRef scheduleDecayName(ScheduleDecay decay);

} // namespace prism::ir
