// Learning-rate schedules: each formula against values computed by hand, composition, the
// op's attributes, and the check's errors.
#include <cmath>

#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "ir/LearningRateSchedule.h"

using namespace prism::ir;

namespace {

SchedulePhase phase(const char *kind, AttrMap params = {}, int column = 1) {
  return {kind, std::move(params), {3, column}};
}

// The factor at steps 0, 1, ... of a schedule as written.
std::vector<double> factors(const std::vector<SchedulePhase> &phases, int steps) {
  llvm::Error e = checkSchedule(phases, "m.prism");
  EXPECT_FALSE(bool(e)) << llvm::toString(std::move(e));
  LearningRateSchedule schedule = scheduleOf(phases);
  std::vector<double> out;
  for (int s = 0; s < steps; ++s)
    out.push_back(schedule.factor(s));
  return out;
}

void expectFactors(const std::vector<double> &got, const std::vector<double> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-12) << "step " << i;
}

std::string checkError(const std::vector<SchedulePhase> &phases) {
  llvm::Error e = checkSchedule(phases, "m.prism");
  return e ? llvm::toString(std::move(e)) : "";
}

TEST(LearningRateSchedule, NoScheduleIsConstant) {
  expectFactors(factors({}, 3), {1, 1, 1});
  expectFactors(factors({phase("constant")}, 3), {1, 1, 1});
}

// PyTorch's LinearLR(start_factor = start, end_factor = 1, total_iters = W).
TEST(LearningRateSchedule, WarmupLinear) {
  expectFactors(factors({phase("warmup_linear", attrs({{"steps", Attr::integer(4)}}))}, 6),
                {0, 0.25, 0.5, 0.75, 1, 1});
  expectFactors(factors({phase("warmup_linear",
                               attrs({{"steps", Attr::integer(4)}, {"start", Attr::real(0.2)}}))},
                        5),
                {0.2, 0.4, 0.6, 0.8, 1});
}

// PyTorch's StepLR(step_size = every, gamma).
TEST(LearningRateSchedule, StepDecay) {
  expectFactors(factors({phase("step_decay", attrs({{"every", Attr::integer(3)}}))}, 8),
                {1, 1, 1, 0.1, 0.1, 0.1, 0.01, 0.01});
  expectFactors(factors({phase("step_decay",
                               attrs({{"every", Attr::integer(2)}, {"gamma", Attr::real(0.5)}}))},
                        5),
                {1, 1, 0.5, 0.5, 0.25});
}

// PyTorch's ExponentialLR(gamma).
TEST(LearningRateSchedule, Exponential) {
  expectFactors(factors({phase("exponential", attrs({{"gamma", Attr::real(0.9)}}))}, 4),
                {1, 0.9, 0.81, 0.729});
}

// PyTorch's CosineAnnealingLR(T_max = total, eta_min = final * lr) up to `total`, then held.
TEST(LearningRateSchedule, Cosine) {
  auto f = factors(
      {phase("cosine", attrs({{"total", Attr::integer(10)}, {"final", Attr::real(0.1)}}))}, 21);
  EXPECT_NEAR(f[0], 1, 1e-12);
  // (1 + cos(0.2 pi)) / 2 = 0.904508497..., scaled into [0.1, 1].
  EXPECT_NEAR(f[2], 0.1 + 0.9 * 0.9045084971874737, 1e-12);
  EXPECT_NEAR(f[5], 0.55, 1e-12);
  EXPECT_NEAR(f[10], 0.1, 1e-12);
  EXPECT_NEAR(f[20], 0.1, 1e-12);
  EXPECT_NEAR(factors({phase("cosine", attrs({{"total", Attr::integer(4)}}))}, 5)[2], 0.5, 1e-12);
}

// PyTorch's SequentialLR([warmup, decay], milestones = [W]): the decay counts from W.
TEST(LearningRateSchedule, WarmupThenDecay) {
  expectFactors(factors({phase("warmup_linear", attrs({{"steps", Attr::integer(2)}})),
                         phase("step_decay", attrs({{"every", Attr::integer(2)}}))},
                        7),
                {0, 0.5, 1, 1, 0.1, 0.1, 0.01});
  auto cosine = factors({phase("warmup_linear", attrs({{"steps", Attr::integer(2)}})),
                         phase("cosine", attrs({{"total", Attr::integer(4)}}))},
                        8);
  expectFactors(cosine, {0, 0.5, 1, (1 + std::cos(M_PI / 4)) / 2, 0.5,
                         (1 + std::cos(3 * M_PI / 4)) / 2, 0, 0});
}

// The op's attributes say the same schedule, and read back to it.
TEST(LearningRateSchedule, OpAttributesRoundTrip) {
  std::vector<SchedulePhase> phases = {
      phase("warmup_linear", attrs({{"steps", Attr::integer(3)}, {"start", Attr::real(0.5)}})),
      phase("exponential", attrs({{"gamma", Attr::real(0.5)}}))};
  LearningRateSchedule schedule = scheduleOf(phases);
  AttrMap opAttrs = scheduleAttrs(schedule);
  EXPECT_EQ(opAttrs.getInt("warmup_steps"), 3);
  EXPECT_EQ(opAttrs.getString("decay"), "exponential");
  EXPECT_FALSE(opAttrs.has("total"));
  auto back = scheduleFromAttrs(opAttrs);
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  for (int s = 0; s < 8; ++s)
    EXPECT_EQ(back->factor(s), schedule.factor(s)) << "step " << s;
  // A constant schedule says only its decay.
  AttrMap constant = scheduleAttrs(scheduleOf({}));
  EXPECT_EQ(constant.size(), 1u);
}

TEST(LearningRateSchedule, OpAttributesAreChecked) {
  auto message = [](AttrMap a) {
    auto s = scheduleFromAttrs(a);
    return s ? std::string() : llvm::toString(s.takeError());
  };
  EXPECT_NE(message(attrs({{"decay", Attr::string("linear")}})).find("unknown decay 'linear'"),
            std::string::npos);
  EXPECT_NE(message(attrs({{"decay", Attr::string("cosine")}})).find("'total'"), std::string::npos);
  EXPECT_NE(message(attrs({{"warmup_steps", Attr::integer(-1)}})).find("cannot be negative"),
            std::string::npos);
  EXPECT_EQ(message(attrs({{"decay", Attr::string("cosine")}, {"total", Attr::integer(5)}})), "");
}

TEST(LearningRateSchedule, CheckNamesThePhaseAtFault) {
  EXPECT_EQ(checkError({phase("linear_decay", {}, 7)}),
            "m.prism:3:7: error: unknown schedule 'linear_decay' (expected constant, "
            "warmup_linear, step_decay, exponential, cosine)");
  EXPECT_EQ(checkError({phase("warmup_linear", attrs({{"steps", Attr::integer(-5)}}), 9)}),
            "m.prism:3:9: error: parameter 'steps' of schedule 'warmup_linear' must be a "
            "positive integer (a number of steps), got -5");
  EXPECT_EQ(checkError({phase("warmup_linear", attrs({{"steps", Attr::real(2.5)}}))}),
            "m.prism:3:1: error: parameter 'steps' of schedule 'warmup_linear' must be a "
            "positive integer (a number of steps), got 2.5");
  EXPECT_EQ(checkError({phase("cosine", attrs({{"final", Attr::real(0.1)}}))}),
            "m.prism:3:1: error: schedule 'cosine' needs 'total': cosine(total, final = 0.0)");
  EXPECT_EQ(checkError({phase("exponential", attrs({{"gamma", Attr::real(0)}}))}),
            "m.prism:3:1: error: parameter 'gamma' of schedule 'exponential' must be a positive "
            "number, got 0.0");
  EXPECT_EQ(checkError({phase("constant", attrs({{"steps", Attr::integer(1)}}))}),
            "m.prism:3:1: error: schedule 'constant' has no parameter 'steps': constant");
  auto warmup = phase("warmup_linear", attrs({{"steps", Attr::integer(2)}}), 5);
  auto decay = phase("exponential", attrs({{"gamma", Attr::real(0.5)}}), 30);
  EXPECT_EQ(checkError({decay, warmup}),
            "m.prism:3:30: error: the first of two schedule phases must be warmup_linear, got "
            "'exponential'");
  EXPECT_EQ(checkError({warmup, warmup}),
            "m.prism:3:5: error: the second schedule phase must be a decay (constant, "
            "step_decay, exponential or cosine), got 'warmup_linear'");
  EXPECT_NE(checkError({warmup, decay, decay}).find("at most two phases"), std::string::npos);
  EXPECT_EQ(checkError({warmup, decay}), "");
}

TEST(LearningRateSchedule, StepNumbers) {
  EXPECT_EQ(*stepNumber(0), 0);
  EXPECT_EQ(*stepNumber(12), 12);
  for (double bad : {-1.0, 0.5, std::nan("")}) {
    auto s = stepNumber(bad);
    ASSERT_FALSE(bool(s));
    llvm::consumeError(s.takeError());
  }
}

} // namespace
