// Learning-rate schedules: the table of phases, the check, printing and the factor's formulas.
#include "ir/LearningRateSchedule.h"

#include <cmath>

#include "ir/Diagnostic.h"

namespace prism::ir {
namespace {

using Range = ScheduleParamRange;

const std::vector<SchedulePhaseDef> &phaseTable() {
  static const std::vector<SchedulePhaseDef> table = {
      {"constant", false, {}, "1"},
      {"warmup_linear",
       true,
       {{"steps", Range::PositiveInt, true, 0, "warmup length W"},
        {"start", Range::Fraction, false, 0, "the factor at step 0"}},
       "start + (1 - start) * s / W for s < W"},
      {"step_decay",
       false,
       {{"every", Range::PositiveInt, true, 0, "steps between decays"},
        {"gamma", Range::Positive, false, 0.1, "factor per decay"}},
       "gamma ^ floor(s / every)"},
      {"exponential", false, {{"gamma", Range::Positive, true, 0, "factor per step"}}, "gamma ^ s"},
      {"cosine",
       false,
       {{"total", Range::PositiveInt, true, 0, "steps to reach final"},
        {"final", Range::NonNegative, false, 0, "the factor from step total on"}},
       "final + (1 - final) * (1 + cos(pi * min(s, total) / total)) / 2"},
  };
  return table;
}

std::string rangeText(Range range) {
  switch (range) {
  case Range::PositiveInt:
    return "a positive integer (a number of steps)";
  case Range::Fraction:
    return "a number in [0, 1]";
  case Range::Positive:
    return "a positive number";
  case Range::NonNegative:
    return "a number >= 0";
  }
  return "";
}

bool inRange(const Attr &value, Range range) {
  bool number = value.kind() == AttrKind::Int || value.kind() == AttrKind::Float;
  if (!number)
    return false;
  double v = value.getFloat();
  switch (range) {
  case Range::PositiveInt:
    return value.kind() == AttrKind::Int && value.getInt() >= 1;
  case Range::Fraction:
    return v >= 0 && v <= 1;
  case Range::Positive:
    return v > 0 && std::isfinite(v);
  case Range::NonNegative:
    return v >= 0 && std::isfinite(v);
  }
  return false;
}

// One phase's kind and parameters; the error has no location.
llvm::Error checkPhase(const SchedulePhase &phase) {
  const SchedulePhaseDef *def = lookupSchedulePhase(phase.kind);
  if (!def)
    return makeError("unknown schedule '" + phase.kind + "' (expected " + schedulePhaseNames() +
                     ")");
  for (const auto &[name, value] : phase.params) {
    const ScheduleParamDef *param = def->param(name);
    if (!param)
      return makeError("schedule '" + phase.kind + "' has no parameter '" + name +
                       "': " + def->signature());
    if (!inRange(value, param->range))
      return makeError("parameter '" + name + "' of schedule '" + phase.kind + "' must be " +
                       rangeText(param->range) + ", got " + value.str());
  }
  for (const ScheduleParamDef &param : def->params)
    if (param.required && !phase.params.has(param.name))
      return makeError("schedule '" + phase.kind + "' needs '" + param.name +
                       "': " + def->signature());
  return llvm::Error::success();
}

double paramOf(const SchedulePhase &phase, llvm::StringRef name) {
  const ScheduleParamDef *param = lookupSchedulePhase(phase.kind)->param(name);
  return phase.params.getFloat(name, param->dflt);
}

} // namespace

std::string SchedulePhaseDef::signature() const {
  if (params.empty())
    return kind;
  std::string s = kind + "(";
  for (const ScheduleParamDef &p : params) {
    s += (s.back() == '(' ? "" : ", ") + p.name;
    if (!p.required)
      s += " = " + formatDouble(p.dflt);
  }
  return s + ")";
}

const ScheduleParamDef *SchedulePhaseDef::param(llvm::StringRef name) const {
  for (const ScheduleParamDef &p : params)
    if (p.name == name)
      return &p;
  return nullptr;
}

const SchedulePhaseDef *lookupSchedulePhase(llvm::StringRef kind) {
  for (const SchedulePhaseDef &def : phaseTable())
    if (def.kind == kind)
      return &def;
  return nullptr;
}

std::string schedulePhaseNames() {
  std::string names;
  for (const SchedulePhaseDef &def : phaseTable())
    names += (names.empty() ? "" : ", ") + def.kind;
  return names;
}

llvm::Error checkSchedule(llvm::ArrayRef<SchedulePhase> phases, llvm::StringRef file) {
  for (const SchedulePhase &phase : phases)
    if (auto e = checkPhase(phase))
      return withLocation(std::move(e), file, phase.loc);
  if (phases.size() > 2)
    return makeError(file, phases[2].loc,
                     "a schedule has at most two phases (a warmup_linear, then one decay), got " +
                         llvm::Twine(phases.size()));
  if (phases.size() == 2) {
    if (!lookupSchedulePhase(phases[0].kind)->warmup)
      return makeError(file, phases[0].loc,
                       "the first of two schedule phases must be warmup_linear, got '" +
                           phases[0].kind + "'");
    if (lookupSchedulePhase(phases[1].kind)->warmup)
      return makeError(file, phases[1].loc,
                       "the second schedule phase must be a decay (constant, step_decay, "
                       "exponential or cosine), got '" +
                           phases[1].kind + "'");
  }
  return llvm::Error::success();
}

double LearningRateSchedule::factor(int64_t step) const {
  if (step < warmupSteps)
    return warmupStart +
           (1 - warmupStart) * static_cast<double>(step) / static_cast<double>(warmupSteps);
  const int64_t s = step - warmupSteps;
  switch (decay) {
  case ScheduleDecay::Constant:
    return 1;
  case ScheduleDecay::Step:
    return std::pow(gamma, static_cast<double>(s / every));
  case ScheduleDecay::Exponential:
    return std::pow(gamma, static_cast<double>(s));
  case ScheduleDecay::Cosine: {
    const double progress = static_cast<double>(std::min(s, total)) / static_cast<double>(total);
    return finalFactor + (1 - finalFactor) * (1 + std::cos(M_PI * progress)) / 2;
  }
  }
  return 1;
}

llvm::Expected<int64_t> stepNumber(double counter) {
  if (!(counter >= 0) || counter != std::floor(counter) || counter > 9.0e15)
    return makeError("a step count must be a whole number >= 0, got " + formatDouble(counter));
  return static_cast<int64_t>(counter);
}

LearningRateSchedule scheduleOf(llvm::ArrayRef<SchedulePhase> phases) {
  LearningRateSchedule schedule;
  for (const SchedulePhase &phase : phases) {
    if (phase.kind == "warmup_linear") {
      schedule.warmupSteps = static_cast<int64_t>(paramOf(phase, "steps"));
      schedule.warmupStart = paramOf(phase, "start");
    } else if (phase.kind == "step_decay") {
      schedule.decay = ScheduleDecay::Step;
      schedule.every = static_cast<int64_t>(paramOf(phase, "every"));
      schedule.gamma = paramOf(phase, "gamma");
    } else if (phase.kind == "exponential") {
      schedule.decay = ScheduleDecay::Exponential;
      schedule.gamma = paramOf(phase, "gamma");
    } else if (phase.kind == "cosine") {
      schedule.decay = ScheduleDecay::Cosine;
      schedule.total = static_cast<int64_t>(paramOf(phase, "total"));
      schedule.finalFactor = paramOf(phase, "final");
    }
  }
  return schedule;
}

llvm::StringRef scheduleDecayName(ScheduleDecay decay) {
  switch (decay) {
  case ScheduleDecay::Constant:
    return "constant";
  case ScheduleDecay::Step:
    return "step_decay";
  case ScheduleDecay::Exponential:
    return "exponential";
  case ScheduleDecay::Cosine:
    return "cosine";
  }
  return "";
}

AttrMap scheduleAttrs(const LearningRateSchedule &schedule) {
  AttrMap attrs;
  if (schedule.warmupSteps > 0) {
    attrs.set("warmup_steps", Attr::integer(schedule.warmupSteps));
    attrs.set("warmup_start", Attr::real(schedule.warmupStart));
  }
  attrs.set("decay", Attr::string(scheduleDecayName(schedule.decay).str()));
  switch (schedule.decay) {
  case ScheduleDecay::Constant:
    break;
  case ScheduleDecay::Step:
    attrs.set("every", Attr::integer(schedule.every));
    attrs.set("gamma", Attr::real(schedule.gamma));
    break;
  case ScheduleDecay::Exponential:
    attrs.set("gamma", Attr::real(schedule.gamma));
    break;
  case ScheduleDecay::Cosine:
    attrs.set("total", Attr::integer(schedule.total));
    attrs.set("final", Attr::real(schedule.finalFactor));
    break;
  }
  return attrs;
}

llvm::Expected<LearningRateSchedule> scheduleFromAttrs(const AttrMap &attrs) {
  LearningRateSchedule schedule;
  schedule.warmupSteps = attrs.getInt("warmup_steps", 0);
  schedule.warmupStart = attrs.getFloat("warmup_start", 0);
  if (schedule.warmupSteps < 0)
    return makeError("warmup_steps cannot be negative, got " + llvm::Twine(schedule.warmupSteps));
  if (!(schedule.warmupStart >= 0 && schedule.warmupStart <= 1))
    return makeError("warmup_start must be in [0, 1], got " + formatDouble(schedule.warmupStart));
  std::string decay = attrs.getString("decay", "constant");
  const SchedulePhaseDef *def = lookupSchedulePhase(decay);
  if (!def || def->warmup)
    return makeError("unknown decay '" + decay +
                     "' (expected constant, step_decay, exponential or cosine)");
  // The decay's parameters go through the same check as the phase written in the model.
  SchedulePhase phase{decay, {}, {}};
  for (const ScheduleParamDef &param : def->params)
    if (const Attr *value = attrs.find(param.name))
      phase.params.set(param.name, *value);
  if (auto e = checkPhase(phase))
    return std::move(e);
  LearningRateSchedule decayed = scheduleOf(phase);
  decayed.warmupSteps = schedule.warmupSteps;
  decayed.warmupStart = schedule.warmupStart;
  return decayed;
}

} // namespace prism::ir
