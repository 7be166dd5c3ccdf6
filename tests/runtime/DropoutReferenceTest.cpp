// dropout and dropout_grad on the reference interpreter: the mask rule of runtime/DropoutMask.h
// (its key, step, global example index and element index), inverted scaling, evaluation as the
// identity, and the gradient's mask equal to its forward's.
#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "ir/OpTable.h"
#include "runtime/DropoutMask.h"
#include "runtime/reference/ReferenceInterpreter.h"

using namespace prism;
using namespace prism::runtime::reference;
using ir::Attr;
using ir::DType;
using ir::TensorType;

namespace {

constexpr int64_t B = ir::kBatchDim;

// y = dropout(x) and its gradient g for upstream dy, on x f32[B, 6] (or `xType`).
std::unique_ptr<ir::Module> dropoutStep(double rate, TensorType xType = {DType::F32, {B, 6}}) {
  ir::ModuleBuilder b("dropout");
  ir::Value *x = b.input("x", xType);
  ir::Value *dy = b.input("dy", xType);
  b.op("dropout", {x}, ir::attrs({{"rate", Attr::real(rate)}}), "y");
  (void)dy;
  auto m = b.finish();
  EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
  if (!m)
    return nullptr;
  const ir::Op &op = *(*m)->lookup("y")->definingOp();
  ir::GradientContext ctx(**m, op, {(*m)->lookup("dy")});
  op.def().gradient(ctx);
  EXPECT_FALSE(bool(ctx.takeError()));
  (*m)->renameValue(ctx.operandGrads()[0], "g");
  return std::move(*m);
}

Tensor ramp(llvm::ArrayRef<int64_t> shape, double start) {
  Tensor t(DType::F32, shape);
  for (size_t i = 0; i < t.data().size(); ++i)
    t.data()[i] = start + static_cast<double>(i);
  return t;
}

TEST(DropoutReferenceTest, FollowsTheMaskRule) {
  const double rate = 0.4;
  auto m = dropoutStep(rate);
  ASSERT_TRUE(m);
  runtime::StepContext context;
  context.seed = 42;
  context.step = 9;
  context.exampleOffset = 100;
  ReferenceInterpreter interp(*m, context);
  Tensor x = ramp({3, 6}, 1), dy = ramp({3, 6}, -20);
  ASSERT_TRUE(bool(interp.step({{"x", x}, {"dy", dy}})));
  const Tensor *y = interp.value("y");
  const Tensor *g = interp.value("g");
  ASSERT_TRUE(y && g);
  // The key is the result's name; row r is example 100 + r of the global batch.
  const uint64_t stream = runtime::dropoutStepStream(42, "y", 9);
  int64_t kept = 0;
  for (int64_t r = 0; r < 3; ++r) {
    uint64_t example = runtime::dropoutExampleStream(stream, 100 + r);
    for (int64_t i = 0; i < 6; ++i) {
      size_t at = static_cast<size_t>(r * 6 + i);
      bool keep = runtime::dropoutKeeps(example, i, rate);
      kept += keep;
      EXPECT_DOUBLE_EQ(y->data()[at], keep ? x.data()[at] / (1 - rate) : 0.0) << at;
      EXPECT_DOUBLE_EQ(g->data()[at], keep ? dy.data()[at] / (1 - rate) : 0.0) << at;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 18);
  // The step number moved on, so the next step draws another mask.
  EXPECT_EQ(interp.context().step, 10);
  const std::vector<double> first = y->data();
  ASSERT_TRUE(bool(interp.step({{"x", x}, {"dy", dy}})));
  EXPECT_NE(interp.value("y")->data(), first);
}

TEST(DropoutReferenceTest, EvaluationIsTheIdentity) {
  auto m = dropoutStep(0.9);
  ASSERT_TRUE(m);
  runtime::StepContext context;
  context.mode = runtime::StepMode::Evaluation;
  ReferenceInterpreter interp(*m, context);
  Tensor x = ramp({2, 6}, 1), dy = ramp({2, 6}, 5);
  ASSERT_TRUE(bool(interp.step({{"x", x}, {"dy", dy}})));
  EXPECT_EQ(interp.value("y")->data(), x.data());
  EXPECT_EQ(interp.value("g")->data(), dy.data());
  EXPECT_EQ(interp.context().step, 0) << "evaluation steps are not counted";
}

TEST(DropoutReferenceTest, AValueWithoutTheBatchIsOneExampleEverywhere) {
  // Every replica computes a value without B alike, so its mask ignores the example offset.
  auto m = dropoutStep(0.5, TensorType(DType::F32, {4, 5}));
  ASSERT_TRUE(m);
  Tensor x = ramp({4, 5}, 1), dy = ramp({4, 5}, 1);
  std::vector<std::vector<double>> results;
  for (int64_t offset : {0, 17}) {
    runtime::StepContext context;
    context.exampleOffset = offset;
    ReferenceInterpreter interp(*m, context);
    ASSERT_TRUE(bool(interp.step({{"x", x}, {"dy", dy}})));
    results.push_back(interp.value("y")->data());
  }
  EXPECT_EQ(results[0], results[1]);
}

TEST(DropoutReferenceTest, RateOutsideItsRangeIsAShapeError) {
  for (double rate : {-0.1, 1.0, 2.0}) {
    ir::ModuleBuilder b("bad");
    ir::Value *x = b.input("x", TensorType(DType::F32, {B, 3}));
    b.op("dropout", {x}, ir::attrs({{"rate", Attr::real(rate)}}), "y");
    auto m = b.finish();
    ASSERT_FALSE(bool(m)) << rate;
    std::string message = llvm::toString(m.takeError());
    EXPECT_NE(message.find("dropout rate must be in [0, 1)"), std::string::npos) << message;
  }
}

} // namespace
