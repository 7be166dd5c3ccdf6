// dce: unused ops go, whatever feeds an op, the loss or a gradient stays, updates stay.
#include <iterator>

#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "passes/Passes.h"

using namespace prism;
using namespace prism::ir;

namespace {

// The op at position `i` of the module's op list.
const std::unique_ptr<Op> &opAt(const Module &module, size_t i) {
  return *std::next(module.ops().begin(), static_cast<std::ptrdiff_t>(i));
}

int64_t runDce(Module &m) {
  auto pass = passes::createPass("dce");
  auto changed = pass->run(m, {});
  EXPECT_TRUE(bool(changed)) << llvm::toString(changed.takeError());
  EXPECT_EQ(pass->statistics().size(), 1u);
  EXPECT_EQ(pass->statistics()[0].first, "ops removed");
  return pass->statistics()[0].second;
}

} // namespace

TEST(DeadCodeElimination, RemovesChainsOfUnusedOpsInOneRun) {
  ModuleBuilder b("m");
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 4}));
  Value *h = b.relu(x, "h");
  // dead1 feeds dead2 feeds dead3: all three go, though only dead3 is unused at first.
  b.op("exp", {b.op("neg", {b.relu(h, "dead1")}, {}, "dead2")}, {}, "dead3");
  Value *loss = b.op("reduce_sum", {h}, {}, "loss");
  b.minimize(loss, "sgd", attrs({{"lr", Attr::real(0.1)}}));
  auto m = b.finish();
  ASSERT_TRUE(bool(m));
  EXPECT_EQ(runDce(**m), 3);
  EXPECT_EQ((*m)->ops().size(), 2u);
  EXPECT_NE((*m)->lookup("h"), nullptr);
  EXPECT_NE((*m)->lookup("loss"), nullptr);
  EXPECT_EQ((*m)->lookup("dead1"), nullptr);
  EXPECT_EQ(runDce(**m), 0);
}

TEST(DeadCodeElimination, KeepsGradientsAndSideEffects) {
  ModuleBuilder b("m");
  Value *w = b.variable("w", TensorType(DType::F32, {4}));
  Value *v = b.variable("v", TensorType(DType::F32, {4}));
  Value *g = b.op("mul", {w, w}, {}, "g");
  Value *next = b.op("exp", {v}, {}, "next");
  b.op("assign", {v, next});
  b.op("neg", {w}, {}, "unused");
  Module &m = b.module();
  Gradient grad;
  grad.variable = m.findVariable("w");
  grad.value = g;
  m.gradients.push_back(grad);
  EXPECT_EQ(runDce(m), 1);
  EXPECT_EQ(m.lookup("unused"), nullptr);
  EXPECT_NE(m.lookup("g"), nullptr);
  EXPECT_NE(m.lookup("next"), nullptr);
  EXPECT_EQ(m.ops().back()->name(), "assign");
}

TEST(DeadCodeElimination, WithoutLossOrGradientsOnlySideEffectsSurvive) {
  ModuleBuilder b("m");
  Value *x = b.input("x", TensorType(DType::F32, {2}));
  Value *w = b.variable("w", TensorType(DType::F32, {2}));
  b.op("add", {x, w}, {}, "s");
  Value *g = b.op("mul", {x, x}, {}, "g");
  b.op("apply_sgd", {w, g}, attrs({{"lr", Attr::real(0.5)}}));
  Module &m = b.module();
  EXPECT_EQ(runDce(m), 1);
  ASSERT_EQ(m.ops().size(), 2u);
  EXPECT_EQ(opAt(m, 0)->name(), "mul");
  EXPECT_EQ(opAt(m, 1)->name(), "apply_sgd");
}
