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
  for (const char *name : {"matmul",       "add",
                           "sub",          "mul",
                           "div",          "bias_add",
                           "relu",         "sigmoid",
                           "tanh",         "softmax",
                           "log_softmax",  "softmax_cross_entropy",
                           "reduce_sum",   "reduce_mean",
                           "reshape",      "transpose",
                           "concat",       "slice",
                           "conv2d",       "max_pool2d",
                           "avg_pool2d",   "gather",
                           "constant",     "cast",
                           "erf",          "gelu",
                           "layer_norm",   "sigmoid_cross_entropy",
                           "batch_matmul", "where",
                           "maximum",      "minimum",
                           "pad",          "global_avg_pool",
                           "batch_norm"})
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

// batch_norm keeps its operand's type over NHWC or [N, C], gives no gradient to its running
// averages, has a state-update rule that emits its moments and the update of the two variables,
// and refuses what it does not take with a reason.
TEST(OpTable, BatchNorm) {
  const OpDef &bn = getOp("batch_norm");
  EXPECT_EQ(bn.signature(), "batch_norm(x, scale, bias, running_mean, running_var, epsilon = "
                            "1e-05, momentum = 0.1, sync = false)");
  EXPECT_TRUE(bn.has(kBatchStatistics));
  EXPECT_TRUE(bn.getsGradient(0) && bn.getsGradient(1) && bn.getsGradient(2));
  EXPECT_FALSE(bn.getsGradient(3) || bn.getsGradient(4));
  ASSERT_NE(bn.stateUpdate, nullptr);
  EXPECT_TRUE(getOp("batch_norm_update").has(kSideEffect));
  EXPECT_TRUE(getOp("batch_norm_update").writes(0) && getOp("batch_norm_update").writes(1));
  EXPECT_FALSE(getOp("batch_norm_update").has(kBatchStatistics)); // moments combine exactly

  ModuleBuilder b("m");
  TensorType channel(DType::F32, {8});
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 6, 6, 8}));
  Value *scale = b.variable("scale", channel), *bias = b.variable("bias", channel);
  Value *mean =
      b.variable("mean", channel, {"zeros", {}}, attrs({{"trainable", Attr::boolean(false)}}));
  Value *var =
      b.variable("var", channel, {"ones", {}}, attrs({{"trainable", Attr::boolean(false)}}));
  Value *y =
      b.op("batch_norm", {x, scale, bias, mean, var}, attrs({{"momentum", Attr::real(0.2)}}), "y");
  EXPECT_EQ(y->type(), x->type());
  Module &m = b.module();
  ASSERT_FALSE(bool(bn.stateUpdate(m, *y->definingOp())));
  const Op &update = *m.ops().back();
  EXPECT_EQ(update.name(), "batch_norm_update");
  EXPECT_EQ(update.operand(0), mean);
  EXPECT_EQ(update.operand(1), var);
  EXPECT_EQ(update.operand(2)->definingOp()->name(), "batch_norm_moments");
  EXPECT_EQ(update.operand(2)->type(), TensorType(DType::F64, {2, 8}));
  EXPECT_EQ(update.attrs.getFloat("momentum"), 0.2);
  EXPECT_EQ(update.attrs.getInt("values_per_example"), 36);
  auto ok = b.finish();
  ASSERT_TRUE(bool(ok)) << llvm::toString(ok.takeError());

  auto errorOf = [&](llvm::ArrayRef<TensorType> types, AttrMap a = {}) {
    auto r = bn.shape(types, withDefaults(bn, a));
    return r ? std::string() : llvm::toString(r.takeError());
  };
  TensorType x4(DType::F32, {kBatchDim, 6, 6, 8});
  EXPECT_EQ(errorOf({x4, channel, channel, channel, channel}), "");
  EXPECT_EQ(errorOf({TensorType(DType::F32, {kBatchDim, 8}), channel, channel, channel, channel}),
            "");
  EXPECT_NE(errorOf({TensorType(DType::F32, {kBatchDim, 2, 8}), channel, channel, channel, channel})
                .find("x must be [N, C] or [N, H, W, C]"),
            std::string::npos);
  EXPECT_NE(errorOf({x4, channel, channel, TensorType(DType::F32, {4}), channel})
                .find("running_mean must be f32[8]"),
            std::string::npos);
  EXPECT_NE(
      errorOf({x4, channel, channel, channel, channel}, attrs({{"momentum", Attr::real(1.5)}}))
          .find("momentum must be in [0, 1], got 1.5"),
      std::string::npos);
  EXPECT_EQ(
      errorOf({x4, channel, channel, channel, channel}, attrs({{"sync", Attr::boolean(true)}})),
      "");
}

// batch_norm with sync = true expands (its rule) to its moments, their replica_mean and
// batch_norm_apply under the op's result name; without sync the rule leaves it. replica_mean
// is its own gradient, takes no batch-major value, and is marked for the replicating passes.
TEST(OpTable, SyncBatchNormExpands) {
  const OpDef &mean = getOp("replica_mean");
  EXPECT_TRUE(mean.has(kReplicaMean));
  EXPECT_FALSE(mean.has(kCommunication)); // copied into towers' places, not a transfer itself
  EXPECT_NE(llvm::toString(mean.shape({TensorType(DType::F32, {kBatchDim, 4})}, {}).takeError())
                .find("must not have the batch dimension"),
            std::string::npos);
  const OpDef &apply = getOp("batch_norm_apply");
  EXPECT_FALSE(apply.has(kBatchStatistics)); // its statistics come in as an operand
  EXPECT_FALSE(apply.getsGradient(3) || apply.getsGradient(4));
  EXPECT_TRUE(apply.getsGradient(5));
  EXPECT_NE(apply.stateUpdate, nullptr);

  ModuleBuilder b("m");
  TensorType channel(DType::F32, {8});
  AttrMap untrained = attrs({{"trainable", Attr::boolean(false)}});
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 6, 6, 8}));
  Value *scale = b.variable("scale", channel), *bias = b.variable("bias", channel);
  Value *rm = b.variable("mean", channel, {"zeros", {}}, untrained);
  Value *rv = b.variable("var", channel, {"ones", {}}, untrained);
  Value *synced = b.op("batch_norm", {x, scale, bias, rm, rv},
                       attrs({{"sync", Attr::boolean(true)}, {"epsilon", Attr::real(0.01)}}), "y");
  Value *own = b.op("batch_norm", {synced, scale, bias, rm, rv}, {}, "z");
  Module &m = b.module();
  const OpDef &bn = getOp("batch_norm");
  ASSERT_NE(bn.expand, nullptr);
  auto unchanged = bn.expand(m, *own->definingOp());
  ASSERT_TRUE(bool(unchanged)) << llvm::toString(unchanged.takeError());
  EXPECT_FALSE(*unchanged);
  auto expanded = bn.expand(m, *synced->definingOp());
  ASSERT_TRUE(bool(expanded)) << llvm::toString(expanded.takeError());
  EXPECT_TRUE(*expanded);
  Value *y = m.lookup("y");
  ASSERT_NE(y, nullptr);
  const Op &applied = *y->definingOp();
  EXPECT_EQ(applied.name(), "batch_norm_apply");
  EXPECT_EQ(applied.attrs.getFloat("epsilon"), 0.01);
  EXPECT_EQ(applied.operand(0), x);
  const Op &reduced = *applied.operand(5)->definingOp();
  EXPECT_EQ(reduced.name(), "replica_mean");
  EXPECT_EQ(reduced.operand(0)->definingOp()->name(), "batch_norm_moments");
  EXPECT_EQ(own->definingOp()->operand(0), y); // the reader reads the expansion
  auto ok = b.finish();
  ASSERT_TRUE(bool(ok)) << llvm::toString(ok.takeError());
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

namespace {
// The error of building one op over inputs of the given types ("" when it type-checks).
std::string opError(llvm::StringRef op, const std::vector<TensorType> &inputs, AttrMap a = {}) {
  ModuleBuilder b("m");
  std::vector<Value *> operands;
  for (size_t i = 0; i < inputs.size(); ++i)
    operands.push_back(b.input("x" + std::to_string(i), inputs[i]));
  b.op(op, operands, std::move(a));
  auto m = b.finish();
  return m ? "" : llvm::toString(m.takeError());
}
} // namespace

TEST(OpTable, LayerNormShapeCostAndErrors) {
  ModuleBuilder b("m");
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 8, 16}));
  Value *gamma = b.variable("gamma", TensorType(DType::F32, {16}));
  Value *beta = b.variable("beta", TensorType(DType::F32, {16}));
  Value *y = b.op("layer_norm", {x, gamma, beta});
  EXPECT_EQ(y->type(), x->type());
  EXPECT_DOUBLE_EQ(opCost(*y->definingOp(), 2).flops, 8.0 * 2 * 8 * 16);
  EXPECT_EQ(getOp("layer_norm").signature(), "layer_norm(x, gamma, beta, epsilon = 1e-05)");
  Value *dy = b.input("dy", x->type());
  EXPECT_EQ(b.op("layer_norm_grad", {dy, x, gamma})->type(), x->type());
  EXPECT_EQ(b.op("layer_norm_gamma_grad", {dy, x})->type(), gamma->type());
  ASSERT_TRUE(bool(b.finish()));

  TensorType rows(DType::F32, {kBatchDim, 16}), d16(DType::F32, {16}), d8(DType::F32, {8});
  EXPECT_EQ(opError("layer_norm", {rows, d16, d16}), "");
  std::string e = opError("layer_norm", {rows, d8, d16});
  EXPECT_NE(e.find("gamma and beta must be f32[16] to match the last dimension of f32[B, 16], "
                   "got f32[8]"),
            std::string::npos)
      << e;
  e = opError("layer_norm", {rows, d16, TensorType(DType::F64, {16})});
  EXPECT_NE(e.find("got f64[16]"), std::string::npos) << e;
  e = opError("layer_norm", {rows, d16, d16}, attrs({{"epsilon", Attr::real(0)}}));
  EXPECT_NE(e.find("epsilon must be positive"), std::string::npos) << e;
  e = opError("layer_norm", {TensorType(DType::I32, {kBatchDim, 16}), d16, d16});
  EXPECT_FALSE(e.empty());
}

// Logits [..., C] with labels of the leading dimensions; ignore_index is optional without a
// default: absent, no label is ignored.
TEST(OpTable, CrossEntropyOverPositions) {
  TensorType logits(DType::F32, {kBatchDim, 6, 50});
  EXPECT_EQ(opError("softmax_cross_entropy", {logits, TensorType(DType::I32, {kBatchDim, 6})}), "");
  std::string e =
      opError("softmax_cross_entropy", {logits, TensorType(DType::I32, {kBatchDim, 5})});
  EXPECT_NE(e.find("labels i32[B, 5] do not match the rows of logits f32[B, 6, 50]"),
            std::string::npos)
      << e;
  e = opError("softmax_cross_entropy", {logits, TensorType(DType::I32, {kBatchDim})});
  EXPECT_NE(e.find("labels"), std::string::npos) << e;
  e = opError("softmax_cross_entropy", {TensorType(DType::F32, {50}), TensorType(DType::I32, {})});
  EXPECT_NE(e.find("logits must have rank 2 or more"), std::string::npos) << e;
  e = opError("softmax_cross_entropy", {logits, TensorType(DType::I32, {kBatchDim, 6})},
              attrs({{"ignore_index", Attr::real(0.5)}}));
  EXPECT_NE(e.find("attribute 'ignore_index' of 'softmax_cross_entropy' must be a"),
            std::string::npos)
      << e;

  const OpDef &xent = getOp("softmax_cross_entropy");
  EXPECT_EQ(xent.signature(), "softmax_cross_entropy(logits, labels, ignore_index?)");
  EXPECT_FALSE(withDefaults(xent, {}).has("ignore_index"));
  EXPECT_EQ(
      withDefaults(xent, attrs({{"ignore_index", Attr::integer(-100)}})).getInt("ignore_index"),
      -100);
}

TEST(OpTable, SigmoidCrossEntropyShapes) {
  TensorType x(DType::F32, {kBatchDim, 3});
  EXPECT_EQ(opError("sigmoid_cross_entropy", {x, x}), "");
  std::string e = opError("sigmoid_cross_entropy", {x, TensorType(DType::F32, {kBatchDim, 4})});
  EXPECT_NE(e.find("logits and labels"), std::string::npos) << e;
  e = opError("sigmoid_cross_entropy", {x, TensorType(DType::I32, {kBatchDim, 3})});
  EXPECT_NE(e.find("logits and labels"), std::string::npos) << e;
}

namespace {

TensorType f32(llvm::ArrayRef<int64_t> dims) {
  return TensorType(DType::F32, dims);
}

// The result type of op(inputs...), or the module's error text (empty when it built).
struct Built {
  TensorType type;
  std::string error;
  double flops = 0;
};

Built build(llvm::StringRef op, const std::vector<TensorType> &inputs, AttrMap a = {},
            int64_t batch = 8) {
  ModuleBuilder b("m");
  std::vector<Value *> operands;
  for (size_t i = 0; i < inputs.size(); ++i)
    operands.push_back(b.input("x" + std::to_string(i), inputs[i]));
  Value *y = b.op(op, operands, std::move(a), "y");
  Built r;
  if (y && y->hasType()) {
    r.type = y->type();
    r.flops = opCost(*y->definingOp(), batch).flops;
  }
  auto m = b.finish();
  if (!m)
    r.error = llvm::toString(m.takeError());
  return r;
}

AttrMap transposes(bool ta, bool tb) {
  return attrs({{"transpose_a", Attr::boolean(ta)}, {"transpose_b", Attr::boolean(tb)}});
}

} // namespace

TEST(OpTable, BatchMatmulShapesAndCost) {
  // Attention's scores: [B, H, T, D] x [B, H, D, T] -> [B, H, T, T].
  Built scores = build("batch_matmul", {f32({kBatchDim, 4, 16, 8}), f32({kBatchDim, 4, 8, 16})});
  EXPECT_EQ(scores.error, "");
  EXPECT_EQ(scores.type, f32({kBatchDim, 4, 16, 16}));
  EXPECT_DOUBLE_EQ(scores.flops, 2.0 * 16 * 16 * 8 * (8 * 4));
  Built shared =
      build("batch_matmul", {f32({kBatchDim, 5, 3}), f32({2, 3})}, transposes(false, true));
  EXPECT_EQ(shared.type, f32({kBatchDim, 5, 2}));
  Built sharedA =
      build("batch_matmul", {f32({3, 5}), f32({2, kBatchDim, 3, 4})}, transposes(true, false));
  EXPECT_EQ(sharedA.type, f32({2, kBatchDim, 5, 4}));
  EXPECT_NE(build("batch_matmul", {f32({kBatchDim, 2, 3, 4}), f32({kBatchDim, 3, 4, 5})})
                .error.find("batch dimensions differ"),
            std::string::npos);
  EXPECT_NE(build("batch_matmul", {f32({kBatchDim, 3, 4}), f32({kBatchDim, 5, 2})})
                .error.find("contracted dimensions differ"),
            std::string::npos);
  EXPECT_NE(build("batch_matmul", {f32({4}), f32({4, 2})}).error.find("rank 2 or more"),
            std::string::npos);
}

TEST(OpTable, WhereMaximumAndMinimumBroadcast) {
  Built w = build("where", {TensorType(DType::Bool, {kBatchDim, 1}), f32({3}), f32({})});
  EXPECT_EQ(w.error, "");
  EXPECT_EQ(w.type, f32({kBatchDim, 3}));
  EXPECT_EQ(build("where", {f32({4}), f32({kBatchDim, 4}), f32({4})}).type, f32({kBatchDim, 4}));
  EXPECT_NE(build("where", {TensorType(DType::I32, {2}), f32({2}), TensorType(DType::I32, {2})})
                .error.find("b must be f32 or f64"),
            std::string::npos);
  EXPECT_NE(build("where", {f32({3}), f32({2}), f32({2})}).error.find("cannot broadcast"),
            std::string::npos);
  for (const char *op : {"maximum", "minimum"}) {
    EXPECT_EQ(build(op, {f32({kBatchDim, 1}), f32({5})}).type, f32({kBatchDim, 5}));
    EXPECT_FALSE(getOp(op).has(kCommutative)) << "the gradient goes to a on ties";
  }
  EXPECT_NE(build("maximum_grad", {f32({4}), f32({kBatchDim, 4}), f32({4})}).error.find("differ"),
            std::string::npos);
}

TEST(OpTable, PadShapesAndErrors) {
  AttrMap a = attrs({{"pads", Attr::ints({0, 1, 2, 0, 0, 3, 4, 0})}});
  Built p = build("pad", {f32({kBatchDim, 28, 28, 1})}, a);
  EXPECT_EQ(p.error, "");
  EXPECT_EQ(p.type, f32({kBatchDim, 32, 34, 1}));
  std::string batch =
      build("pad", {f32({kBatchDim, 4})}, attrs({{"pads", Attr::ints({1, 0, 0, 0})}})).error;
  EXPECT_NE(batch.find("dimension 0 of f32[B, 4] is the batch dimension"), std::string::npos)
      << batch;
  EXPECT_NE(build("pad", {f32({2, 4})}, attrs({{"pads", Attr::ints({1, 0, 0})}}))
                .error.find("must have 2 * rank = 4 entries"),
            std::string::npos);
  EXPECT_NE(build("pad", {f32({2, 4})}, attrs({{"pads", Attr::ints({1, 0, -1, 0})}}))
                .error.find("non-negative"),
            std::string::npos);
}

TEST(OpTable, GlobalAvgPoolShapeAndCost) {
  Built g = build("global_avg_pool", {f32({kBatchDim, 7, 5, 16})});
  EXPECT_EQ(g.type, f32({kBatchDim, 16}));
  EXPECT_DOUBLE_EQ(g.flops, 8.0 * 7 * 5 * 16);
  EXPECT_NE(build("global_avg_pool", {f32({kBatchDim, 16})}).error.find("rank 4"),
            std::string::npos);
}
