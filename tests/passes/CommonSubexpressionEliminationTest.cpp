// cse: duplicates merged into the first, commutative operands matched both ways, attributes
// compared with defaults, side effects never merged.
#include <iterator>

#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "ir/Verifier.h"
#include "passes/Passes.h"

using namespace prism;
using namespace prism::ir;

namespace {

// The op at position `i` of the module's op list.
const std::unique_ptr<Op> &opAt(const Module &module, size_t i) {
  return *std::next(module.ops().begin(), static_cast<std::ptrdiff_t>(i));
}

int64_t runCse(Module &m) {
  auto pass = passes::createPass("cse");
  auto changed = pass->run(m, {});
  EXPECT_TRUE(bool(changed)) << llvm::toString(changed.takeError());
  EXPECT_EQ(pass->statistics().size(), 1u);
  EXPECT_EQ(pass->statistics()[0].first, "ops merged");
  llvm::Error valid = verify(m);
  EXPECT_FALSE(bool(valid)) << llvm::toString(std::move(valid));
  return pass->statistics()[0].second;
}

TensorType vec4() {
  return TensorType(DType::F32, {4});
}

} // namespace

TEST(CommonSubexpressionElimination, MergesDuplicatesAndRewritesUses) {
  ModuleBuilder b("m");
  Value *x = b.input("x", vec4());
  Value *a = b.relu(x, "a");
  Value *c = b.relu(x, "c");
  // d and e become duplicates once c is merged into a.
  Value *d = b.op("exp", {a}, {}, "d");
  Value *e = b.op("exp", {c}, {}, "e");
  Value *loss = b.op("reduce_sum", {b.add(d, e, "s")}, {}, "loss");
  b.minimize(loss, "sgd", attrs({{"lr", Attr::real(0.1)}}));
  Module &m = b.module();
  EXPECT_EQ(runCse(m), 2);
  EXPECT_EQ(m.lookup("c"), nullptr);
  EXPECT_EQ(m.lookup("e"), nullptr);
  Op *sum = m.lookup("s")->definingOp();
  EXPECT_EQ(sum->operand(0), d);
  EXPECT_EQ(sum->operand(1), d);
  EXPECT_EQ(runCse(m), 0);
}

TEST(CommonSubexpressionElimination, CommutativeOperandsMatchSwapped) {
  ModuleBuilder b("m");
  Value *x = b.input("x", vec4());
  Value *y = b.input("y", vec4());
  Value *sum1 = b.add(x, y, "sum1");
  Value *sum2 = b.add(y, x, "sum2");
  Value *diff1 = b.op("sub", {x, y}, {}, "diff1");
  Value *diff2 = b.op("sub", {y, x}, {}, "diff2");
  (void)sum1, (void)sum2, (void)diff1, (void)diff2;
  Module &m = b.module();
  EXPECT_EQ(runCse(m), 1);
  EXPECT_EQ(m.lookup("sum2"), nullptr);
  EXPECT_NE(m.lookup("diff2"), nullptr) << "sub is not commutative";
}

TEST(CommonSubexpressionElimination, ComparesAttributesWithDefaults) {
  ModuleBuilder b("m");
  Value *x = b.input("x", TensorType(DType::F32, {3, 4}));
  Value *r1 = b.op("reduce_sum", {x}, {}, "r1");
  Value *r2 = b.op("reduce_sum", {x}, attrs({{"keepdims", Attr::boolean(false)}}), "r2");
  Value *r3 = b.op("reduce_sum", {x}, attrs({{"axes", Attr::ints({0, 1})}}), "r3");
  Value *c1 = b.op("constant", {}, attrs({{"value", Attr::integer(1)}}), "c1");
  Value *c2 = b.op("constant", {},
                   attrs({{"value", Attr::real(1.0)}, {"dtype", Attr::string("f32")}}), "c2");
  (void)r2, (void)r3, (void)c1, (void)c2;
  Module &m = b.module();
  ASSERT_TRUE(r1->hasType());
  EXPECT_EQ(runCse(m), 2);
  EXPECT_EQ(m.lookup("r2"), nullptr);
  EXPECT_NE(m.lookup("r3"), nullptr) << "axes = [0, 1] is written differently from []";
  EXPECT_EQ(m.lookup("c2"), nullptr);
}

TEST(CommonSubexpressionElimination, NeverMergesSideEffects) {
  ModuleBuilder b("m");
  Value *w = b.variable("w", vec4());
  Value *v = b.variable("v", vec4());
  Value *g1 = b.op("mul", {w, w}, {}, "g1");
  Value *g2 = b.op("mul", {w, w}, {}, "g2");
  b.op("apply_sgd", {w, g1}, attrs({{"lr", Attr::real(0.5)}}));
  b.op("apply_sgd", {v, g2}, attrs({{"lr", Attr::real(0.5)}}));
  Module &m = b.module();
  EXPECT_EQ(runCse(m), 1);
  ASSERT_EQ(m.ops().size(), 3u);
  EXPECT_EQ(opAt(m, 1)->operand(1), g1);
  EXPECT_EQ(opAt(m, 2)->operand(1), g1);
}

TEST(CommonSubexpressionElimination, RewritesTheLossAndGradients) {
  ModuleBuilder b("m");
  Value *w = b.variable("w", vec4());
  Value *s1 = b.op("reduce_sum", {w}, {}, "s1");
  Value *s2 = b.op("reduce_sum", {w}, {}, "s2");
  Value *g1 = b.op("mul", {w, w}, {}, "g1");
  Value *g2 = b.op("mul", {w, w}, {}, "g2");
  (void)s1;
  (void)g1;
  b.minimize(s2, "sgd", attrs({{"lr", Attr::real(0.1)}}));
  Module &m = b.module();
  Gradient grad;
  grad.variable = m.findVariable("w");
  grad.value = g2;
  m.gradients.push_back(grad);
  EXPECT_EQ(runCse(m), 2);
  EXPECT_EQ(m.loss->value, s1);
  EXPECT_EQ(m.gradients[0].value, g1);
}
