// The IR and the passes at scale: a model of 100,000 ops (bench/ir_scale's ladder) goes through
// the training pipeline and the data-parallel passes, verified after every pass. Every pass must
// be about linear in the graph for this to take seconds (bench/ir_scale times each one).
#include <gtest/gtest.h>

#include <chrono>

#include "bench/ir_scale/LadderModel.h"
#include "ir/VariablePlacement.h"
#include "passes/PassManager.h"

using namespace prism;

namespace {

int64_t statistic(const passes::PassManager &manager, llvm::StringRef pass, llvm::StringRef name) {
  for (const auto &p : manager.passes())
    if (p->name() == pass)
      for (const auto &[statistic, value] : p->statistics())
        if (statistic == name)
          return value;
  ADD_FAILURE() << "no statistic '" << name.str() << "' of " << pass.str();
  return -1;
}

TEST(Scale, HundredThousandOpModelTrainsOnFourWorkers) {
  auto start = std::chrono::steady_clock::now();
  const int64_t layers = bench::ladderLayersFor(100000);
  auto module = bench::buildLadderModel(layers);
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  ir::Module &m = **module;
  const size_t built = m.ops().size();
  ASSERT_GE(built, 100000u);

  auto training = passes::PassManager::fromPipeline(bench::kLadderTrainingPipeline);
  ASSERT_TRUE(bool(training)) << llvm::toString(training.takeError());
  auto trained = training->run(m, {});
  ASSERT_TRUE(bool(trained)) << llvm::toString(trained.takeError());
  // Every layer's weight and bias, the embedding and the output weight.
  EXPECT_EQ(statistic(*training, "autodiff", "gradients"), 2 * layers + 2);
  EXPECT_EQ(statistic(*training, "fuse-bias-activation", "chains fused (matmul)"), layers);

  auto parallel = passes::PassManager::fromPipeline(bench::kLadderParallelPipeline);
  ASSERT_TRUE(bool(parallel)) << llvm::toString(parallel.takeError());
  passes::PassOptions options;
  options.set("workers", "4");
  auto placed = parallel->run(m, options);
  ASSERT_TRUE(bool(placed)) << llvm::toString(placed.takeError());
  EXPECT_EQ(statistic(*parallel, "place-variables", "variables on PS"), 1); // the embedding
  EXPECT_EQ(statistic(*parallel, "route-gradients", "gradients pushed to PS"), 1);
  EXPECT_EQ(statistic(*parallel, "route-gradients", "gradients all-reduced"), 2 * layers + 1);
  EXPECT_EQ(statistic(*parallel, "route-gradients", "row pulls"), 1);
  EXPECT_TRUE(ir::onParameterServers(*m.findVariable("emb")));
  for (const ir::Gradient &g : m.gradients) {
    if (g.variable->name() != "emb") {
      EXPECT_EQ(g.value->definingOp()->name(), "all_reduce") << g.variable->name();
    }
  }

  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("ladder of %lld layers: %zu ops built, %zu after every pass, %.2f s in all\n",
              static_cast<long long>(layers), built, m.ops().size(), seconds);
}

} // namespace
