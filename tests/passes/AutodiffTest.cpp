// autodiff: which gradients it makes, their kinds (dense, sparse, mixed), and its errors.
#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "ir/OpTable.h"
#include "ir/Verifier.h"
#include "passes/Passes.h"

using namespace prism;
using namespace prism::ir;

namespace {

llvm::Error runAutodiff(Module &m) {
  auto pass = passes::createPass("autodiff");
  auto changed = pass->run(m, passes::PassOptions());
  if (!changed)
    return changed.takeError();
  return verify(m);
}

const Gradient *gradientOf(const Module &m, llvm::StringRef var) {
  return m.gradientOf(m.findVariable(var));
}

TEST(Autodiff, MlpGetsDenseGradientsForEveryTrainableVariable) {
  ModuleBuilder b("mlp");
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 8}));
  Value *y = b.input("y", TensorType(DType::I32, {kBatchDim}));
  Value *w1 = b.variable("w1", TensorType(DType::F32, {8, 4}), {"glorot_uniform", {}});
  Value *b1 = b.variable("b1", TensorType(DType::F32, {4}));
  Value *w2 = b.variable("w2", TensorType(DType::F32, {4, 3}), {"glorot_uniform", {}});
  b.variable("frozen", TensorType(DType::F32, {3}), {"zeros", {}},
             attrs({{"trainable", Attr::boolean(false)}}));
  Value *h = b.relu(b.op("bias_add", {b.matmul(x, w1), b1}), "h");
  Value *logits = b.op("bias_add", {b.matmul(h, w2), b.module().lookup("frozen")}, {}, "logits");
  Value *loss = b.op("softmax_cross_entropy", {logits, y}, {}, "loss");
  b.minimize(loss, "sgd", attrs({{"lr", Attr::real(0.1)}}));
  auto m = b.finish();
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  ASSERT_FALSE(runAutodiff(**m));

  EXPECT_EQ((*m)->gradients.size(), 3u);
  for (const char *name : {"w1", "b1", "w2"}) {
    const Gradient *g = gradientOf(**m, name);
    ASSERT_NE(g, nullptr) << name;
    EXPECT_FALSE(g->value->type().sparse);
    EXPECT_EQ(g->value->type(), (*m)->findVariable(name)->type());
    EXPECT_EQ(g->value->name(), std::string("d.") + name);
    EXPECT_EQ((*m)->findVariable(name)->attrs.getString("grad"), "dense");
  }
  EXPECT_EQ(gradientOf(**m, "frozen"), nullptr);
  // Nothing computes a gradient for the data input x: unused backward ops are removed.
  for (const auto &op : (*m)->ops())
    if (op->name() == "matmul" && op->operand(0)->name() == "d.logits")
      FAIL() << "a gradient for h's producer's input x was left behind";
}

TEST(Autodiff, GatherGivesSparseGradientsAndTwoGathersSumSparsely) {
  ModuleBuilder b("emb");
  Value *ids = b.input("ids", TensorType(DType::I32, {kBatchDim, 5}));
  Value *more = b.input("more", TensorType(DType::I32, {kBatchDim, 5}));
  Value *y = b.input("y", TensorType(DType::I32, {kBatchDim}));
  Value *table = b.variable("emb", TensorType(DType::F32, {100, 4}), {"uniform", {}});
  Value *w = b.variable("w", TensorType(DType::F32, {4, 3}), {"glorot_uniform", {}});
  Value *e1 =
      b.op("reduce_mean", {b.op("gather", {table, ids})}, attrs({{"axes", Attr::ints({1})}}));
  Value *e2 =
      b.op("reduce_mean", {b.op("gather", {table, more})}, attrs({{"axes", Attr::ints({1})}}));
  Value *logits = b.matmul(b.add(e1, e2), w, "logits");
  b.minimize(b.op("softmax_cross_entropy", {logits, y}, {}, "loss"), "adam",
             attrs({{"lr", Attr::real(0.01)}}));
  auto m = b.finish();
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  ASSERT_FALSE(runAutodiff(**m));

  const Gradient *g = gradientOf(**m, "emb");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->value->type().sparse);
  EXPECT_EQ(g->value->type().str(), "sparse f32[100, 4]");
  EXPECT_EQ(g->value->definingOp()->name(), "sparse_add");
  EXPECT_EQ((*m)->findVariable("emb")->attrs.getString("grad"), "sparse");
  EXPECT_EQ((*m)->findVariable("w")->attrs.getString("grad"), "dense");
}

TEST(Autodiff, TiedEmbeddingGetsADenseGradientMarkedMixed) {
  ModuleBuilder b("tied");
  Value *ids = b.input("ids", TensorType(DType::I32, {kBatchDim}));
  Value *y = b.input("y", TensorType(DType::I32, {kBatchDim}));
  Value *table = b.variable("emb", TensorType(DType::F32, {50, 8}), {"uniform", {}});
  Value *h = b.op("gather", {table, ids}, {}, "h");
  AttrMap tb = attrs({{"transpose_b", Attr::boolean(true)}});
  Value *logits = b.op("matmul", {h, table}, tb, "logits"); // output layer tied to the input
  b.minimize(b.op("softmax_cross_entropy", {logits, y}, {}, "loss"), "sgd",
             attrs({{"lr", Attr::real(0.1)}}));
  auto m = b.finish();
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  ASSERT_FALSE(runAutodiff(**m));
  const Gradient *g = gradientOf(**m, "emb");
  ASSERT_NE(g, nullptr);
  EXPECT_FALSE(g->value->type().sparse);
  EXPECT_EQ((*m)->findVariable("emb")->attrs.getString("grad"), "mixed");
  bool densified = false;
  for (const auto &op : (*m)->ops())
    densified |= op->name() == "sparse_to_dense";
  EXPECT_TRUE(densified);
}

TEST(Autodiff, ErrorsWithoutLossOrThroughNonDifferentiableOps) {
  ModuleBuilder b("noloss");
  Value *x = b.input("x", TensorType(DType::F32, {4}));
  b.relu(x);
  auto m = b.finish();
  ASSERT_TRUE(bool(m));
  llvm::Error err = runAutodiff(**m);
  ASSERT_TRUE(bool(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("has no loss"), std::string::npos);

  ModuleBuilder c("nondiff");
  Value *w = c.variable("w", TensorType(DType::F32, {4}));
  Value *n = c.op("global_norm", {w}, {}, "n");
  c.minimize(n, "sgd", attrs({{"lr", Attr::real(0.1)}}));
  auto m2 = c.finish();
  ASSERT_TRUE(bool(m2)) << llvm::toString(m2.takeError());
  llvm::Error err2 = runAutodiff(**m2);
  ASSERT_TRUE(bool(err2));
  EXPECT_NE(llvm::toString(std::move(err2)).find("is not differentiable"), std::string::npos);
}

} // namespace
