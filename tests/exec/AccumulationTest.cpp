// Gradient accumulation in the executor: the micro-step / step split of a training step, and
// K micro-batches giving the step one batch of their concatenation gives (dense and sparse
// gradients, uneven micro-batches, batch_norm's running averages), with a smaller arena.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "frontends/text/Parser.h"
#include "ir/OpTable.h"
#include "passes/PassManager.h"
#include "runtime/exec/AccumulationSplit.h"
#include "runtime/exec/Executor.h"
#include "llvm/ADT/DenseSet.h"

using namespace prism;
using namespace prism::runtime;

namespace {

constexpr const char *kPipeline =
    "infer-shapes,autodiff,lower-optimizer,cse,dce,fuse-bias-activation,fuse-elementwise";

std::unique_ptr<ir::Module> compile(const std::string &text) {
  auto module = frontends::parseModule(text, "test.prism");
  EXPECT_TRUE(bool(module)) << llvm::toString(module.takeError());
  if (!module)
    return nullptr;
  auto pm = passes::PassManager::fromPipeline(kPipeline);
  EXPECT_TRUE(bool(pm));
  auto changed = pm->run(**module, passes::PassOptions());
  EXPECT_TRUE(bool(changed)) << llvm::toString(changed.takeError());
  return std::move(*module);
}

const char *kMlp = R"(model mlp {
  input x : f32[B, 12]
  input y : i32[B]
  var w1 : f32[12, 16] = glorot_uniform
  var b1 : f32[16] = zeros
  var w2 : f32[16, 5] = glorot_uniform
  %h = relu(bias_add(matmul(x, w1), b1))
  %loss = softmax_cross_entropy(matmul(%h, w2), y)
  minimize %loss with adam(lr = 0.01, clip_norm = 0.5)
})";

const char *kEmbedding = R"(model bag {
  input tokens : i32[B, 6]
  input y : i32[B]
  var emb : f32[30, 8] = uniform(min = -0.5, max = 0.5)
  var out.w : f32[8, 4] = glorot_uniform
  %pooled = reduce_mean(gather(emb, tokens), axes = [1])
  %loss = softmax_cross_entropy(matmul(%pooled, out.w), y)
  minimize %loss with adam(lr = 0.01)
})";

// Feeds of `batch` examples for every input: floats in [-1, 1), integers in [0, 4) for labels
// and [0, 30) for token ids (so tokens repeat within and across micro-batches).
Feeds randomFeeds(const ir::Module &m, int64_t batch, uint64_t seed) {
  std::mt19937_64 gen(seed);
  Feeds feeds;
  for (const auto &in : m.inputs()) {
    std::vector<int64_t> shape(in->type().dims.begin(), in->type().dims.end());
    shape[0] = batch;
    Tensor t(in->type().dtype, shape);
    for (int64_t i = 0; i < t.numElements(); ++i) {
      if (in->type().dtype == ir::DType::F32)
        t.data<float>()[i] = static_cast<float>(static_cast<double>(gen() % 2000) / 1000.0 - 1.0);
      else
        t.data<int32_t>()[i] = static_cast<int32_t>(gen() % (in->name() == "y" ? 4 : 30));
    }
    feeds[in->name()] = std::move(t);
  }
  return feeds;
}

// Rows [begin, begin + size) of every feed.
Feeds slice(const Feeds &feeds, int64_t begin, int64_t size) {
  Feeds out;
  for (const auto &[name, t] : feeds) {
    std::vector<int64_t> shape = t.shape();
    int64_t rowBytes = t.numBytes() / shape[0];
    shape[0] = size;
    Tensor part(t.dtype(), shape);
    std::memcpy(part.raw(), static_cast<const char *>(t.raw()) + begin * rowBytes,
                static_cast<size_t>(size * rowBytes));
    out[name] = std::move(part);
  }
  return out;
}

double largestRelativeDifference(const Tensor &a, const Tensor &b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.numElements(); ++i) {
    double x = a.dtype() == ir::DType::F64 ? a.data<double>()[i] : a.data<float>()[i];
    double y = b.dtype() == ir::DType::F64 ? b.data<double>()[i] : b.data<float>()[i];
    diff = std::max(diff, std::fabs(x - y));
    scale = std::max(scale, std::fabs(y));
  }
  return diff / std::max(scale, 1e-30);
}

struct Trained {
  std::shared_ptr<VariableStore> store;
  std::vector<double> losses;
  size_t arenaBytes = 0;
};

// Three steps of `batch` examples: whole (sizes empty) or as micro-batches of `sizes`.
Trained trainSteps(const ir::Module &m, int64_t batch, const std::vector<int64_t> &sizes) {
  Trained out;
  out.store = std::make_shared<VariableStore>();
  EXPECT_FALSE(bool(out.store->initialize(m, 3)));
  ExecutorOptions options;
  options.accumulate = !sizes.empty();
  auto exec = Executor::create(m, out.store, options);
  EXPECT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  if (!exec)
    return out;
  for (uint64_t step = 0; step < 3; ++step) {
    Feeds feeds = randomFeeds(m, batch, 100 + step);
    llvm::Error e = llvm::Error::success();
    if (sizes.empty()) {
      e = (*exec)->step(feeds);
    } else {
      std::vector<Feeds> micro;
      int64_t at = 0;
      for (int64_t size : sizes) {
        micro.push_back(slice(feeds, at, size));
        at += size;
      }
      e = (*exec)->accumulatedStep(micro);
    }
    EXPECT_FALSE(bool(e)) << llvm::toString(std::move(e));
    out.losses.push_back((*exec)->loss().value_or(NAN));
  }
  out.arenaBytes = (*exec)->arenaBytes();
  return out;
}

void expectSameTraining(const ir::Module &m, const Trained &a, const Trained &b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i)
    EXPECT_NEAR(a.losses[i], b.losses[i], 1e-6 * std::fabs(b.losses[i])) << "step " << i;
  for (const auto &var : m.variables()) {
    const Tensor *x = a.store->find(var->name());
    const Tensor *y = b.store->find(var->name());
    ASSERT_TRUE(x && y) << var->name();
    EXPECT_LT(largestRelativeDifference(*x, *y), 1e-5) << var->name();
  }
}

TEST(AccumulationSplit, ClippingAndUpdatesRunOncePerStep) {
  auto m = compile(kMlp);
  ASSERT_TRUE(m);
  auto split = splitForAccumulation(*m);
  ASSERT_TRUE(bool(split)) << llvm::toString(split.takeError());
  EXPECT_EQ(split->microOps.size() + split->stepOps.size(), m->ops().size());
  for (const ir::Op *op : split->microOps)
    EXPECT_FALSE(op->def().has(ir::kSideEffect)) << op->name().str();
  llvm::DenseSet<const ir::Op *> step(split->stepOps.begin(), split->stepOps.end());
  int norms = 0;
  for (const auto &op : m->ops()) {
    if (op->def().has(ir::kSideEffect)) {
      EXPECT_TRUE(step.count(op.get())) << op->name().str();
    }
    // The norm must be of the accumulated gradient, not of one micro-batch's.
    if (op->name() == "global_norm") {
      EXPECT_TRUE(step.count(op.get()));
      ++norms;
    }
  }
  EXPECT_EQ(norms, 1);
  // The loss and the three gradients are averaged; nothing with the batch dimension crosses.
  llvm::DenseSet<const ir::Value *> averaged(split->accumulated.begin(), split->accumulated.end());
  EXPECT_TRUE(averaged.count(m->loss->value));
  for (const ir::Gradient &g : m->gradients)
    EXPECT_TRUE(averaged.count(g.value)) << g.variable->name();
}

TEST(AccumulationSplit, AStepOpReadingAnInputIsAnError) {
  auto m = compile(kMlp);
  ASSERT_TRUE(m);
  // Reads the loss (so it runs once per step) and the data: no micro-batch's data is the step's.
  ir::Value *x = m->findInput("x")->value.get();
  m->createOp(ir::getOp("mul"), {m->loss->value, x}, {}, {"scaled"});
  auto split = splitForAccumulation(*m);
  ASSERT_FALSE(bool(split));
  EXPECT_NE(llvm::toString(split.takeError()).find("reads the input 'x' of one micro-batch"),
            std::string::npos);
}

TEST(Accumulation, MicroBatchesEqualOneBatchDense) {
  auto m = compile(kMlp);
  ASSERT_TRUE(m);
  Trained whole = trainSteps(*m, 24, {});
  Trained micro = trainSteps(*m, 24, {6, 6, 6, 6});
  expectSameTraining(*m, micro, whole);
  EXPECT_LT(micro.arenaBytes, whole.arenaBytes);
}

TEST(Accumulation, UnevenMicroBatchesStayExact) {
  auto m = compile(kMlp);
  ASSERT_TRUE(m);
  expectSameTraining(*m, trainSteps(*m, 23, {8, 8, 7}), trainSteps(*m, 23, {}));
  expectSameTraining(*m, trainSteps(*m, 23, {1, 20, 2}), trainSteps(*m, 23, {}));
}

TEST(Accumulation, MicroBatchesEqualOneBatchSparse) {
  auto m = compile(kEmbedding);
  ASSERT_TRUE(m);
  expectSameTraining(*m, trainSteps(*m, 20, {5, 5, 5, 5}), trainSteps(*m, 20, {}));
  expectSameTraining(*m, trainSteps(*m, 20, {7, 7, 6}), trainSteps(*m, 20, {}));
}

// batch_norm's running averages come from moments that micro-batches combine exactly, so they
// equal one batch's even though each micro-batch normalizes with its own statistics (the
// normalized input reads no weight, so its statistics are the same in every step of both runs).
TEST(Accumulation, BatchNormRunningAveragesAreThoseOfTheWholeBatch) {
  auto m = compile(R"(model bn {
  input x : f32[B, 12]
  input y : i32[B]
  var s : f32[12] = ones
  var b : f32[12] = zeros
  var bn.mean : f32[12] = zeros {trainable = false}
  var bn.var : f32[12] = ones {trainable = false}
  var w : f32[12, 5] = glorot_uniform
  %loss = softmax_cross_entropy(matmul(batch_norm(x, s, b, bn.mean, bn.var, momentum = 0.5), w), y)
  minimize %loss with sgd(lr = 0.1)
})");
  ASSERT_TRUE(m);
  Trained whole = trainSteps(*m, 23, {});
  Trained micro = trainSteps(*m, 23, {8, 8, 7});
  for (const char *name : {"bn.mean", "bn.var"}) {
    const Tensor *a = micro.store->find(name);
    const Tensor *b = whole.store->find(name);
    ASSERT_TRUE(a && b) << name;
    EXPECT_LT(largestRelativeDifference(*a, *b), 1e-5) << name;
  }
  // Uniform in [-1, 1): the variance moved from 1 towards 1/3.
  EXPECT_LT(whole.store->find("bn.var")->data<float>()[0], 0.6f);
}

} // namespace
