// batch_norm on the reference interpreter: the batch's statistics in training, the running
// averages in evaluation, and the running averages after several training steps (the op
// table's state update) against a float64 recomputation of PyTorch's rule; evaluation steps
// leave them alone.
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "ir/OpTable.h"
#include "runtime/reference/ReferenceInterpreter.h"

using namespace prism;
using namespace prism::runtime::reference;
using ir::Attr;
using ir::DType;
using ir::TensorType;

namespace {

constexpr int64_t B = ir::kBatchDim;
constexpr int64_t kChannels = 3;
constexpr double kEpsilon = 1e-5;
constexpr double kMomentum = 0.25;

// y = batch_norm(x [B, 2, 2, 3], scale, bias, mean, var) with its state update, as
// lower-optimizer emits it.
std::unique_ptr<ir::Module> batchNormStep() {
  ir::ModuleBuilder b("batch_norm");
  ir::Value *x = b.input("x", TensorType(DType::F32, {B, 2, 2, kChannels}));
  TensorType channel(DType::F32, {kChannels});
  ir::AttrMap untrained = ir::attrs({{"trainable", Attr::boolean(false)}});
  ir::Value *scale = b.variable("scale", channel, {"ones", {}});
  ir::Value *bias = b.variable("bias", channel);
  ir::Value *mean = b.variable("mean", channel, {"zeros", {}}, untrained);
  ir::Value *var = b.variable("var", channel, {"ones", {}}, untrained);
  b.op("batch_norm", {x, scale, bias, mean, var}, ir::attrs({{"momentum", Attr::real(kMomentum)}}),
       "y");
  auto m = b.finish();
  EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
  if (!m)
    return nullptr;
  const ir::Op &op = *(*m)->lookup("y")->definingOp();
  llvm::Error emitted = op.def().stateUpdate(**m, op);
  EXPECT_FALSE(bool(emitted)) << llvm::toString(std::move(emitted));
  return std::move(*m);
}

Tensor randomX(int64_t batch, std::mt19937_64 &gen) {
  Tensor x(DType::F32, {batch, 2, 2, kChannels});
  std::normal_distribution<double> normal(0.5, 2.0);
  for (double &v : x.data())
    v = static_cast<double>(static_cast<float>(normal(gen)));
  return x;
}

struct Stats {
  std::vector<double> mean, biased, unbiased;
};

Stats statsOf(const Tensor &x) {
  Stats s;
  const int64_t n = x.numElements() / kChannels;
  s.mean.assign(kChannels, 0);
  s.biased.assign(kChannels, 0);
  for (int64_t i = 0; i < x.numElements(); ++i)
    s.mean[i % kChannels] += x.data()[i] / static_cast<double>(n);
  for (int64_t i = 0; i < x.numElements(); ++i) {
    double d = x.data()[i] - s.mean[i % kChannels];
    s.biased[i % kChannels] += d * d / static_cast<double>(n);
  }
  for (double v : s.biased)
    s.unbiased.push_back(v * static_cast<double>(n) / static_cast<double>(n - 1));
  return s;
}

void setChannels(ReferenceInterpreter &interp, llvm::StringRef name, std::vector<double> values) {
  llvm::Error set = interp.setVariable(name, Tensor(DType::F32, {kChannels}, std::move(values)));
  ASSERT_FALSE(bool(set)) << llvm::toString(std::move(set));
}

TEST(BatchNormReferenceTest, TrainingNormalizesWithTheBatchStatistics) {
  auto m = batchNormStep();
  ASSERT_TRUE(m);
  ReferenceInterpreter interp(*m);
  ASSERT_FALSE(bool(interp.initializeVariables(1)));
  setChannels(interp, "scale", {2, -1, 0.5});
  setChannels(interp, "bias", {0.25, 1, -3});
  setChannels(interp, "mean", {100, 100, 100}); // far from the batch's: unused in training
  std::mt19937_64 gen(7);
  Tensor x = randomX(5, gen);
  ASSERT_TRUE(bool(interp.step({{"x", x}})));
  Stats s = statsOf(x);
  const std::vector<double> scale = {2, -1, 0.5}, bias = {0.25, 1, -3};
  const Tensor *y = interp.value("y");
  ASSERT_NE(y, nullptr);
  for (int64_t i = 0; i < x.numElements(); ++i) {
    int64_t c = i % kChannels;
    double expected =
        scale[c] * (x.data()[i] - s.mean[c]) / std::sqrt(s.biased[c] + kEpsilon) + bias[c];
    EXPECT_NEAR(y->data()[i], expected, 1e-5) << i;
  }
}

TEST(BatchNormReferenceTest, RunningAveragesFollowPyTorchsRuleAndServeEvaluation) {
  auto m = batchNormStep();
  ASSERT_TRUE(m);
  ReferenceInterpreter interp(*m);
  ASSERT_FALSE(bool(interp.initializeVariables(1)));
  std::vector<double> mean(kChannels, 0.0), var(kChannels, 1.0);
  std::mt19937_64 gen(3);
  for (int64_t batch : {4, 7, 2, 5}) {
    Tensor x = randomX(batch, gen);
    ASSERT_TRUE(bool(interp.step({{"x", x}})));
    Stats s = statsOf(x);
    for (int64_t c = 0; c < kChannels; ++c) {
      mean[c] = (1 - kMomentum) * mean[c] + kMomentum * s.mean[c];
      var[c] = (1 - kMomentum) * var[c] + kMomentum * s.unbiased[c];
    }
  }
  const Tensor *runningMean = interp.variable("mean");
  const Tensor *runningVar = interp.variable("var");
  ASSERT_TRUE(runningMean && runningVar);
  for (int64_t c = 0; c < kChannels; ++c) {
    EXPECT_NEAR(runningMean->data()[c], mean[c], 1e-5) << c;
    EXPECT_NEAR(runningVar->data()[c], var[c], 1e-5) << c;
    EXPECT_NE(var[c], 1.0);
  }
  // Evaluation: y normalized with the running averages (scale 1, bias 0), which stay.
  runtime::StepContext evaluation;
  evaluation.mode = runtime::StepMode::Evaluation;
  interp.setContext(evaluation);
  const std::vector<double> meanBefore = runningMean->data(), varBefore = runningVar->data();
  Tensor x = randomX(3, gen);
  ASSERT_TRUE(bool(interp.step({{"x", x}})));
  const Tensor *y = interp.value("y");
  ASSERT_NE(y, nullptr);
  for (int64_t i = 0; i < x.numElements(); ++i) {
    int64_t c = i % kChannels;
    EXPECT_NEAR(y->data()[i], (x.data()[i] - meanBefore[c]) / std::sqrt(varBefore[c] + kEpsilon),
                1e-5)
        << i;
  }
  EXPECT_EQ(interp.variable("mean")->data(), meanBefore);
  EXPECT_EQ(interp.variable("var")->data(), varBefore);
}

// A training step over x [1, C] has one value per channel: its variance says nothing.
TEST(BatchNormReferenceTest, OneValuePerChannelIsAnError) {
  ir::ModuleBuilder b("one_row");
  TensorType channel(DType::F32, {kChannels});
  ir::Value *in = b.input("x", TensorType(DType::F32, {B, kChannels}));
  b.op("batch_norm",
       {in, b.variable("s", channel, {"ones", {}}), b.variable("b", channel),
        b.variable("m", channel), b.variable("v", channel, {"ones", {}})},
       {}, "y");
  auto rows = b.finish();
  ASSERT_TRUE(bool(rows)) << llvm::toString(rows.takeError());
  ReferenceInterpreter one(**rows);
  ASSERT_FALSE(bool(one.initializeVariables(1)));
  auto step = one.step({{"x", Tensor(DType::F32, {1, kChannels}, {1, 2, 3})}});
  ASSERT_FALSE(bool(step));
  EXPECT_NE(llvm::toString(step.takeError()).find("more than one value per channel"),
            std::string::npos);
}

} // namespace
