// The linear scaling rule: the factor, what it changes in a module, what the plan records, and
// the errors that name the option.
#include <gtest/gtest.h>

#include "frontends/text/Parser.h"
#include "plan/LearningRateScaling.h"

namespace prism::plan {
namespace {

std::unique_ptr<ir::Module> model(const char *optimizer) {
  std::string text = std::string("model m {\n  input x : f32[B, 4]\n  %l = reduce_sum(x)\n"
                                 "  minimize %l with ") +
                     optimizer + "\n}\n";
  auto module = frontends::parseModule(text, "m.prism");
  EXPECT_TRUE(bool(module)) << llvm::toString(module.takeError());
  return module ? std::move(*module) : nullptr;
}

TEST(LearningRateScaling, LinearMultipliesLrByGlobalOverBaseBatch) {
  LearningRateScaling linear{LrScaleRule::Linear, 128};
  EXPECT_DOUBLE_EQ(linear.factor(4096), 32);
  EXPECT_DOUBLE_EQ(linear.factor(64), 0.5);
  EXPECT_DOUBLE_EQ(LearningRateScaling().factor(4096), 1);

  auto m = model("adam(lr = 0.001, beta1 = 0.8, schedule = warmup_linear(steps = 15))");
  ASSERT_TRUE(m);
  ASSERT_FALSE(bool(scaleLearningRate(*m, linear, 4096)));
  EXPECT_DOUBLE_EQ(m->optimizer->params.getFloat("lr"), 0.032);
  // The other parameters, their order and the schedule stay.
  EXPECT_EQ(m->optimizer->params.begin()->first, "lr");
  EXPECT_DOUBLE_EQ(m->optimizer->params.getFloat("beta1"), 0.8);
  ASSERT_EQ(m->optimizer->schedule.size(), 1u);
}

TEST(LearningRateScaling, NoRuleChangesNothing) {
  auto m = model("sgd(lr = 0.1)");
  ASSERT_TRUE(m);
  ASSERT_FALSE(bool(scaleLearningRate(*m, LearningRateScaling(), 4096)));
  EXPECT_DOUBLE_EQ(m->optimizer->params.getFloat("lr"), 0.1);
}

TEST(LearningRateScaling, ThePlanRecordsTheRule) {
  RunConfig run;
  EXPECT_EQ(lrScalingOf(run).rule, LrScaleRule::None);
  EXPECT_EQ(lrScalingOf(run).baseBatch, 128);
  run.set_lr_scale_rule("linear");
  run.set_lr_base_batch(256);
  EXPECT_EQ(lrScalingOf(run).rule, LrScaleRule::Linear);
  EXPECT_EQ(lrScalingOf(run).baseBatch, 256);
}

TEST(LearningRateScaling, ErrorsNameTheOption) {
  auto rule = parseLrScaleRule("sqrt");
  ASSERT_FALSE(bool(rule));
  EXPECT_NE(llvm::toString(rule.takeError())
                .find("option --lr-scale-rule: expected none or linear, got 'sqrt'"),
            std::string::npos);
  EXPECT_EQ(*parseLrScaleRule("linear"), LrScaleRule::Linear);
  auto m = model("sgd(lr = 0.1)");
  ASSERT_TRUE(m);
  llvm::Error e = scaleLearningRate(*m, {LrScaleRule::Linear, 0}, 64);
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("option --lr-base-batch"), std::string::npos);
}

} // namespace
} // namespace prism::plan
