// The compile pipelines: the training step's passes, the parallelizing pipeline's stages and its
// plain error for a strategy that needs parameter servers where there are none.
#include <gtest/gtest.h>

#include <string>

#include "ModelFiles.h"
#include "frontends/text/Parser.h"
#include "ir/OpTable.h"
#include "ir/VariablePlacement.h"
#include "plan/Pipeline.h"

namespace prism::plan {
namespace {

using testing::loadModel;

bool ranPass(const PassStatistics &statistics, llvm::StringRef pass) {
  for (const auto &[name, statistic] : statistics)
    if (name == pass)
      return true;
  return false;
}

int countOps(const ir::Module &module, llvm::StringRef name) {
  int n = 0;
  for (const auto &op : module.ops())
    n += op->name() == name;
  return n;
}

TEST(Pipeline, TrainingPipelineFusesOnRequest) {
  EXPECT_EQ(trainingPipeline(false), "inline,infer-shapes,expand,autodiff,lower-optimizer,cse,dce");
  EXPECT_EQ(trainingPipeline(true), "inline,infer-shapes,expand,autodiff,lower-optimizer,cse,dce,"
                                    "fuse-bias-activation,fuse-elementwise");
}

TEST(Pipeline, TrainingStepUpdatesEveryVariable) {
  auto model = loadModel("mlp");
  ASSERT_TRUE(model);
  ASSERT_FALSE(static_cast<bool>(compileTrainingStep(*model)));
  int updates = 0;
  for (const auto &op : model->ops())
    updates += op->def().has(ir::kOptimizerUpdate);
  EXPECT_GT(updates, 0);
  EXPECT_GT(countOps(*model, "fused_matmul") + countOps(*model, "fused_elementwise"), 0);
}

TEST(Pipeline, ParallelizePlacesRoutesAndCountsEveryPass) {
  auto model = loadModel("embedding_classifier");
  ASSERT_TRUE(model);
  ParallelPipelineOptions options;
  options.replicate.workers = 2;
  options.placement.psTasks = 2;
  PassStatistics statistics;
  llvm::Error e = parallelize(*model, options, &statistics);
  ASSERT_FALSE(static_cast<bool>(e)) << llvm::toString(std::move(e));
  for (const char *pass : {"autodiff", "classify-variables", "replicate-between-graph",
                           "place-variables", "route-gradients"})
    EXPECT_TRUE(ranPass(statistics, pass)) << pass;
  EXPECT_FALSE(ranPass(statistics, "replicate-in-graph"));
  for (const auto &variable : model->variables())
    EXPECT_EQ(ir::onParameterServers(*variable),
              llvm::StringRef(variable->name()).startswith("emb"))
        << variable->name(); // the table and its Adam state
  EXPECT_EQ(countOps(*model, "ps_pull_rows"), 1);
  EXPECT_GE(countOps(*model, "all_reduce"), 1);
}

TEST(Pipeline, HybridWithoutParameterServersNamesTheVariableAndTheWayOut) {
  auto model = loadModel("embedding_classifier");
  ASSERT_TRUE(model);
  ParallelPipelineOptions options;
  options.placement.psTasks = 0;
  llvm::Error e = parallelize(*model, options);
  ASSERT_TRUE(static_cast<bool>(e));
  std::string message = llvm::toString(std::move(e));
  EXPECT_NE(message.find("strategy hybrid puts 'emb' on a parameter server"), std::string::npos)
      << message;
  EXPECT_NE(message.find("--strategy allreduce"), std::string::npos) << message;
  // All-reduce needs none.
  auto again = loadModel("embedding_classifier");
  options.placement.strategy = passes::Strategy::AllReduce;
  EXPECT_FALSE(static_cast<bool>(parallelize(*again, options)));
}

} // namespace
} // namespace prism::plan
