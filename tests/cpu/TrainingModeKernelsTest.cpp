// The CPU kernels of dropout and dropout_grad against the reference interpreter, in training and
// evaluation, at several seeds, steps and example offsets; and the property the mask rule
// exists for: a batch run in pieces (shards at their offsets) draws what it draws whole. The
// batch_norm family against the reference in both modes, its running averages after steps, and
// the same for batch_norm with sync = true as the expand pass and autodiff make it.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "ir/Builder.h"
#include "ir/OpTable.h"
#include "passes/PassManager.h"
#include "runtime/exec/Executor.h"
#include "tests/cpu/ReferenceCheck.h"

namespace {

using namespace prism;
using ir::Attr;
using ir::DType;
using ir::TensorType;
using prism::testing::ReferenceCheckOptions;

constexpr int64_t B = ir::kBatchDim;

std::unique_ptr<ir::Module> dropoutModule(llvm::StringRef op, const TensorType &type, double rate) {
  ir::ModuleBuilder b("dropout");
  ir::Value *x = b.input("x", type);
  b.op(op, {x}, ir::attrs({{"rate", Attr::real(rate)}, {"key", Attr::string("d")}}), "y");
  auto module = b.finish();
  EXPECT_TRUE(bool(module)) << llvm::toString(module.takeError());
  return module ? std::move(*module) : nullptr;
}

TEST(TrainingModeKernels, DropoutMatchesTheReference) {
  for (const char *op : {"dropout", "dropout_grad"})
    for (DType dtype : {DType::F32, DType::F64})
      for (const std::vector<int64_t> &dims :
           {std::vector<int64_t>{B, 33}, {B, 2, 3, 4}, {5, 7}, {}})
        for (double rate : {0.0, 0.3, 0.9}) {
          TensorType type(dtype, dims);
          SCOPED_TRACE(std::string(op) + " of " + type.str() + " at rate " + std::to_string(rate));
          auto module = dropoutModule(op, type, rate);
          ASSERT_TRUE(module);
          ReferenceCheckOptions options;
          options.batch = 4;
          options.steps = 3; // both count steps alike
          options.context.seed = 11;
          options.context.step = 5;
          options.context.exampleOffset = 7;
          prism::testing::expectMatchesReference(*module, {"y"}, options);
          options.context.mode = runtime::StepMode::Evaluation;
          prism::testing::expectMatchesReference(*module, {"y"}, options);
        }
}

TEST(TrainingModeKernels, DropoutOnTwoThreads) {
  auto module = dropoutModule("dropout", TensorType(DType::F32, {B, 5001}), 0.5);
  ASSERT_TRUE(module);
  ReferenceCheckOptions options;
  options.threads = 2;
  options.batch = 3;
  options.context.exampleOffset = 2;
  prism::testing::expectMatchesReference(*module, {"y"}, options);
}

// Runs y = dropout(x) on rows [begin, end) of x, at that example offset.
std::vector<float> runRows(const ir::Module &module, const runtime::Tensor &x, int64_t begin,
                           int64_t end, int64_t step) {
  runtime::ExecutorOptions options;
  options.outputs = {"y"};
  options.seed = 3;
  auto exec =
      runtime::Executor::create(module, std::make_shared<runtime::VariableStore>(), options);
  EXPECT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  const int64_t cols = x.dim(1);
  runtime::Tensor rows(DType::F32, {end - begin, cols});
  for (int64_t i = 0; i < rows.numElements(); ++i)
    rows.data<float>()[i] = x.data<float>()[begin * cols + i];
  (*exec)->setStepNumber(step);
  (*exec)->setExampleOffset(begin);
  if (auto err = (*exec)->step({{"x", rows}})) {
    ADD_FAILURE() << llvm::toString(std::move(err));
    return {};
  }
  const runtime::Tensor &y = (*exec)->output("y")->dense;
  return std::vector<float>(y.data<float>(), y.data<float>() + y.numElements());
}

TEST(TrainingModeKernels, MasksDoNotDependOnHowTheBatchIsSplit) {
  const double rate = 0.5;
  auto module = dropoutModule("dropout", TensorType(DType::F32, {B, 64}), rate);
  ASSERT_TRUE(module);
  runtime::Tensor x(DType::F32, {10, 64});
  for (int64_t i = 0; i < x.numElements(); ++i)
    x.data<float>()[i] = 1.0f + static_cast<float>(i % 7);
  std::vector<float> whole = runRows(*module, x, 0, 10, 4);
  std::vector<float> pieces;
  for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, 3}, {3, 4}, {4, 10}}) {
    std::vector<float> part = runRows(*module, x, begin, end, 4);
    pieces.insert(pieces.end(), part.begin(), part.end());
  }
  ASSERT_EQ(whole.size(), pieces.size());
  EXPECT_EQ(whole, pieces);
  // Inverted dropout: kept elements are x / (1 - rate), about `rate` of them are zero, and rows
  // (examples) and steps draw different masks.
  int64_t dropped = 0;
  for (size_t i = 0; i < whole.size(); ++i) {
    if (whole[i] == 0)
      ++dropped;
    else
      EXPECT_FLOAT_EQ(whole[i], x.data<float>()[i] * 2.0f);
  }
  EXPECT_NEAR(static_cast<double>(dropped) / static_cast<double>(whole.size()), rate, 0.08);
  EXPECT_NE(std::vector<float>(whole.begin(), whole.begin() + 64),
            std::vector<float>(whole.begin() + 64, whole.begin() + 128));
  EXPECT_NE(whole, runRows(*module, x, 0, 10, 5));
}

// A channel's positive parameter or running average, drawn from [0.5, 2].
ir::Initializer positiveInit() {
  return {"uniform", ir::attrs({{"min", Attr::real(0.5)}, {"max", Attr::real(2.0)}})};
}

// batch_norm(x, scale, bias, mean, var, momentum = 0.3, epsilon = 0.01[, sync]) named `y`, its
// per-channel variables positive, the running averages untrained.
ir::Value *addBatchNorm(ir::ModuleBuilder &b, ir::Value *x, bool sync) {
  const TensorType &xType = x->type();
  TensorType channel(xType.dtype, {xType.dims.back()});
  ir::AttrMap untrained = ir::attrs({{"trainable", Attr::boolean(false)}});
  ir::Value *scale = b.variable("scale", channel, positiveInit());
  ir::Value *bias = b.variable("bias", channel, positiveInit());
  ir::Value *mean = b.variable("mean", channel, positiveInit(), untrained);
  ir::Value *var = b.variable("var", channel, positiveInit(), untrained);
  ir::AttrMap attrs = ir::attrs({{"momentum", Attr::real(0.3)}, {"epsilon", Attr::real(0.01)}});
  if (sync)
    attrs.set("sync", Attr::boolean(true));
  return b.op("batch_norm", {x, scale, bias, mean, var}, attrs, "y");
}

// body(type, threads) for f32 and f64 x of [B, 5] and [B, 3, 4, 6] on 1 and 2 threads.
template <typename Body> void forEachBatchNormCase(const Body &body) {
  for (DType dtype : {DType::F32, DType::F64})
    for (const std::vector<int64_t> &dims : {std::vector<int64_t>{B, 5}, {B, 3, 4, 6}})
      for (int threads : {1, 2}) {
        TensorType type(dtype, dims);
        SCOPED_TRACE(type.str() + " on " + std::to_string(threads) + " threads");
        body(type, threads);
      }
}

// Batch-norm checks draw x from [-2, 3) over a batch of 4.
ReferenceCheckOptions batchNormOptions(int threads) {
  ReferenceCheckOptions options;
  options.batch = 4;
  options.threads = threads;
  options.low = -2.0;
  options.high = 3.0;
  return options;
}

// y = batch_norm(x, scale, bias, mean, var) with its backward ops for upstream dy (g, dscale)
// and its state update (the moments and the running averages' writes).
std::unique_ptr<ir::Module> batchNormModule(const TensorType &xType) {
  ir::ModuleBuilder b("batch_norm");
  ir::Value *x = b.input("x", xType);
  b.input("dy", xType);
  addBatchNorm(b, x, /*sync=*/false);
  auto m = b.finish();
  EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
  if (!m)
    return nullptr;
  const ir::Op &op = *(*m)->lookup("y")->definingOp();
  ir::GradientContext ctx(**m, op, {(*m)->lookup("dy")});
  op.def().gradient(ctx);
  EXPECT_FALSE(bool(ctx.takeError()));
  (*m)->renameValue(ctx.operandGrads()[0], "g");
  (*m)->renameValue(ctx.operandGrads()[1], "dscale");
  llvm::Error emitted = op.def().stateUpdate(**m, op);
  EXPECT_FALSE(bool(emitted)) << llvm::toString(std::move(emitted));
  (*m)->renameValue((*m)->lookup("y.moments"), "moments");
  return std::move(*m);
}

TEST(TrainingModeKernels, BatchNormMatchesTheReference) {
  forEachBatchNormCase([](const TensorType &type, int threads) {
    auto module = batchNormModule(type);
    ASSERT_TRUE(module);
    ReferenceCheckOptions options = batchNormOptions(threads);
    prism::testing::expectMatchesReference(*module, {"y", "g", "dscale", "moments"}, options);
    // Training steps: the running averages after each.
    options.steps = 3;
    prism::testing::expectMatchesReference(*module, {}, options);
    options.steps = 1;
    options.context.mode = runtime::StepMode::Evaluation;
    prism::testing::expectMatchesReference(*module, {"y", "g", "dscale"}, options);
    prism::testing::expectMatchesReference(*module, {}, options);
  });
}

// batch_norm with sync = true in a training step: expanded (moments, replica_mean,
// batch_norm_apply), differentiated through the three, its running averages updated from the
// moments; a loss that weighs every output element differently (dy), and a parameter w
// before the op, so every gradient path counts.
std::unique_ptr<ir::Module> syncBatchNormModule(const TensorType &xType) {
  ir::ModuleBuilder b("sync_batch_norm");
  ir::Value *x = b.input("x", xType);
  ir::Value *dy = b.input("dy", xType);
  // A parameter before the op, so its input's gradient (through the moments too) is needed.
  ir::Value *w = b.variable("w", TensorType(xType.dtype, {xType.dims.back()}), positiveInit());
  ir::Value *y = addBatchNorm(b, b.op("mul", {x, w}), /*sync=*/true);
  ir::Value *loss = b.op("reduce_sum", {b.op("mul", {y, dy})}, {}, "loss");
  b.minimize(loss, "sgd", ir::attrs({{"lr", Attr::real(0.1)}}));
  auto m = b.finish();
  EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
  if (!m)
    return nullptr;
  auto pipeline = passes::PassManager::fromPipeline("infer-shapes,expand,autodiff,lower-optimizer");
  EXPECT_TRUE(bool(pipeline)) << llvm::toString(pipeline.takeError());
  if (!pipeline)
    return nullptr;
  auto changed = pipeline->run(**m, passes::PassOptions());
  EXPECT_TRUE(bool(changed)) << llvm::toString(changed.takeError());
  return changed ? std::move(*m) : nullptr;
}

TEST(TrainingModeKernels, SyncBatchNormMatchesTheReference) {
  forEachBatchNormCase([](const TensorType &type, int threads) {
    auto module = syncBatchNormModule(type);
    ASSERT_TRUE(module);
    std::vector<std::string> values;
    std::set<std::string> ops;
    for (const auto &op : module->ops()) {
      ops.insert(op->name().str());
      for (unsigned r = 0; r < op->numResults(); ++r)
        values.push_back(op->result(r)->name());
    }
    for (const char *op :
         {"batch_norm_moments", "replica_mean", "batch_norm_apply", "batch_norm_apply_grad",
          "batch_norm_apply_scale_grad", "batch_norm_apply_moments_grad", "batch_norm_moments_grad",
          "batch_norm_update"})
      EXPECT_TRUE(ops.count(op)) << "the expanded step has no " << op;
    ReferenceCheckOptions options = batchNormOptions(threads);
    prism::testing::expectMatchesReference(*module, values, options);
    // Training steps (the CPU's optimizers update f32 variables): the running averages and
    // parameters after each.
    if (type.dtype == DType::F32) {
      options.steps = 3;
      prism::testing::expectMatchesReference(*module, {}, options);
      options.steps = 1;
    }
    options.context.mode = runtime::StepMode::Evaluation;
    prism::testing::expectMatchesReference(*module, values, options);
  });
}

TEST(TrainingModeKernels, EveryTrainingModeOpHasACpuKernel) {
  const std::set<std::string> family = {"dropout",
                                        "dropout_grad",
                                        "batch_norm",
                                        "batch_norm_grad",
                                        "batch_norm_scale_grad",
                                        "batch_norm_moments",
                                        "batch_norm_moments_grad",
                                        "batch_norm_update",
                                        "batch_norm_apply",
                                        "batch_norm_apply_grad",
                                        "batch_norm_apply_scale_grad",
                                        "batch_norm_apply_moments_grad",
                                        "replica_mean"};
  for (const std::string &name : family)
    EXPECT_NE(runtime::findKernel(name, ir::DeviceKind::Cpu), nullptr) << name;
}

} // namespace
