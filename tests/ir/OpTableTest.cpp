// The op table and type inference through the builder.
#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "ir/OpTable.h"
#include "llvm/ADT/StringSet.h"

using namespace prism::ir;

TEST(OpTable, EveryOpHasAShapeRuleAndUniqueName) {
  llvm::StringSet<> names;
  for (const OpDef *def : allOps()) {
    EXPECT_TRUE(def->shape) << def->name;
    EXPECT_FALSE(def->summary.empty()) << def->name;
    EXPECT_TRUE(names.insert(def->name).second) << def->name;
    EXPECT_EQ(lookupOp(def->name), def);
  }
  EXPECT_EQ(lookupOp("no_such_op"), nullptr);
}

TEST(OpTable, RequiredOpsExist) {
  for (const char *name : {"matmul",     "add",         "sub",         "mul",
                           "div",        "bias_add",    "relu",        "sigmoid",
                           "tanh",       "softmax",     "log_softmax", "softmax_cross_entropy",
                           "reduce_sum", "reduce_mean", "reshape",     "transpose",
                           "concat",     "slice",       "conv2d",      "max_pool2d",
                           "avg_pool2d", "gather",      "constant",    "cast",
                           "erf",        "gelu"})
    EXPECT_NE(lookupOp(name), nullptr) << name;
  EXPECT_TRUE(getOp("gather").sparseGradient(0));
  EXPECT_FALSE(getOp("gather").sparseGradient(1));
  EXPECT_FALSE(getOp("matmul").sparseGradient(0));
}

TEST(OpTable, MatmulShapeAndCost) {
  ModuleBuilder b("m");
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 784}));
  Value *w = b.variable("w", TensorType(DType::F32, {784, 256}));
  Value *h = b.matmul(x, w, "h");
  EXPECT_EQ(h->type(), TensorType(DType::F32, {kBatchDim, 256}));
  OpCost c = opCost(*h->definingOp(), 32);
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 32 * 784 * 256);
  auto m = b.finish();
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
}

TEST(OpTable, ShapeMismatchIsAnError) {
  ModuleBuilder b("m");
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 784}));
  Value *w = b.variable("w", TensorType(DType::F32, {100, 256}));
  b.matmul(x, w, "h");
  auto m = b.finish();
  ASSERT_FALSE(bool(m));
  std::string msg = llvm::toString(m.takeError());
  EXPECT_NE(msg.find("contracted dimensions differ"), std::string::npos) << msg;
}

TEST(OpTable, Conv2dSameAndValid) {
  ModuleBuilder b("m");
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 28, 28, 1}));
  Value *w = b.variable("w", TensorType(DType::F32, {5, 5, 1, 32}));
  Value *same = b.op("conv2d", {x, w}, attrs({{"stride", Attr::ints({2, 2})}}));
  EXPECT_EQ(same->type(), TensorType(DType::F32, {kBatchDim, 14, 14, 32}));
  Value *valid = b.op("conv2d", {x, w}, attrs({{"padding", Attr::string("valid")}}));
  EXPECT_EQ(valid->type(), TensorType(DType::F32, {kBatchDim, 24, 24, 32}));
  Value *pooled = b.op("max_pool2d", {valid});
  EXPECT_EQ(pooled->type(), TensorType(DType::F32, {kBatchDim, 12, 12, 32}));
}

// dropout draws random numbers (never merged), keeps its operand's type, defaults its rate and
// key, refuses a rate outside [0, 1), and its gradient op carries its key.
TEST(OpTable, DropoutIsRandomAndShapePreserving) {
  EXPECT_TRUE(getOp("dropout").has(kRandom));
  EXPECT_TRUE(getOp("dropout").differentiable());
  EXPECT_TRUE(getOp("dropout_grad").has(kRandom));
  EXPECT_TRUE(getOp("dropout_grad").has(kGradientOnly));
  EXPECT_EQ(getOp("dropout").signature(), "dropout(x, rate = 0.5, key = \"\")");
  ModuleBuilder b("m");
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 2, 3}));
  Value *y = b.op("dropout", {x}, attrs({{"rate", Attr::real(0.2)}}), "y");
  EXPECT_EQ(y->type(), x->type());
  EXPECT_EQ(randomStreamKey(*y->definingOp()), "y");
  Value *z = b.op("dropout", {y}, attrs({{"key", Attr::string("k")}}), "z");
  EXPECT_EQ(randomStreamKey(*z->definingOp()), "k");
  b.op("dropout", {x}, attrs({{"rate", Attr::real(1.0)}}));
  auto m = b.finish();
  ASSERT_FALSE(bool(m));
  EXPECT_NE(llvm::toString(m.takeError()).find("dropout rate must be in [0, 1), got 1.0"),
            std::string::npos);
}

TEST(OpTable, GatherGradientIsSparse) {
  ModuleBuilder b("m");
  Value *ids = b.input("ids", TensorType(DType::I32, {kBatchDim, 20}));
  Value *table = b.variable("emb", TensorType(DType::F32, {1000, 64}));
  Value *rows = b.op("gather", {table, ids});
  EXPECT_EQ(rows->type(), TensorType(DType::F32, {kBatchDim, 20, 64}));
  Value *g = b.op("gather_grad", {rows, ids}, attrs({{"num_rows", Attr::integer(1000)}}));
  EXPECT_EQ(g->type(), TensorType(DType::F32, {1000, 64}, /*sparse=*/true));
  EXPECT_EQ(g->type().str(), "sparse f32[1000, 64]");
}

TEST(OpTable, UnknownAttributeAndArity) {
  ModuleBuilder b("m");
  Value *x = b.input("x", TensorType(DType::F32, {4}));
  b.op("relu", {x}, attrs({{"alpha", Attr::real(0.1)}}));
  auto m = b.finish();
  ASSERT_FALSE(bool(m));
  EXPECT_NE(llvm::toString(m.takeError()).find("has no attribute 'alpha'"), std::string::npos);

  ModuleBuilder b2("m");
  Value *y = b2.input("y", TensorType(DType::F32, {4}));
  b2.op("add", {y});
  auto m2 = b2.finish();
  ASSERT_FALSE(bool(m2));
  EXPECT_NE(llvm::toString(m2.takeError()).find("takes 2 operands, got 1"), std::string::npos);
}
