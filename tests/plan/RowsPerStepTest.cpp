// Rows per step sampled from a data set: the row pulls' id inputs, the sampled count against the
// uniform-draws bound, and the plan estimated again with it.
#include <gtest/gtest.h>

#include <string>

#include "cluster/ClusterParser.h"
#include "frontends/text/Parser.h"
#include "plan/Partitioner.h"
#include "plan/PlanVerifier.h"
#include "runtime/job/RowsPerStep.h"

namespace prism::plan {
namespace {

using runtime::job::estimateRowsFromData;
using runtime::job::rowPullIdInputs;
using runtime::job::sampleRowShares;
using runtime::job::sampleRowsPerStep;

constexpr const char *kZipf = "zipf:100000,tokens=20,classes=10";

llvm::Expected<PartitionResult> partitionModel(const std::string &name, const std::string &cluster,
                                               int64_t partitions = 0) {
  auto model =
      frontends::parseModuleFile(std::string(PRISM_SOURCE_DIR) + "/models/" + name + ".prism");
  if (!model)
    return model.takeError();
  auto c = cluster::loadCluster(cluster, cluster::Replication::BetweenGraph);
  if (!c)
    return c.takeError();
  PartitionOptions options;
  options.placement.partitions = partitions;
  return partition(**model, *c, options);
}

double bytesOf(const Plan &plan, const std::string &task) {
  for (const TaskEstimate &t : plan.estimate().tasks())
    if (t.task() == task)
      return t.bytes_sent_per_step() + t.bytes_received_per_step();
  return -1;
}

double workerBytes(const Plan &plan) {
  for (const TaskEstimate &t : plan.estimate().tasks())
    if (t.task() == "worker:0")
      return t.bytes_sent_per_step() + t.bytes_received_per_step();
  return -1;
}

TEST(RowsPerStep, TheRowPullsReadTheTokens) {
  auto result = partitionModel("embedding_classifier", "local:2,ps=1");
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  auto worker = parseProgram(*findProgram(result->plan, "worker:0"));
  ASSERT_TRUE(static_cast<bool>(worker));
  EXPECT_EQ(rowPullIdInputs(**worker), std::set<std::string>{"tokens"});
}

TEST(RowsPerStep, SkewedIdsReadFewerRowsThanUniformDraws) {
  auto result = partitionModel("embedding_classifier", "local:2,ps=1");
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  Plan plan = result->plan;
  ASSERT_EQ(plan.estimate().tables_size(), 1);
  const double uniform = plan.estimate().tables(0).rows_per_step();
  const double uniformBytes = workerBytes(plan);
  auto worker = parseProgram(*findProgram(plan, "worker:0"));
  ASSERT_TRUE(static_cast<bool>(worker));
  auto rows = sampleRowsPerStep(plan, **worker, kZipf);
  ASSERT_TRUE(static_cast<bool>(rows)) << llvm::toString(rows.takeError());
  ASSERT_TRUE(rows->has_value());
  // A worker's 32 examples of 20 tokens hold at most 640 distinct ids; Zipf's repeat.
  EXPECT_GT(**rows, 0);
  EXPECT_LT(**rows, uniform);
  EXPECT_LE(**rows, 32 * 20);

  auto sampled = estimateRowsFromData(plan, kZipf);
  ASSERT_TRUE(static_cast<bool>(sampled)) << llvm::toString(sampled.takeError());
  EXPECT_TRUE(*sampled);
  EXPECT_DOUBLE_EQ(plan.estimate().tables(0).rows_per_step(), **rows);
  EXPECT_EQ(plan.estimate().tables(0).source(), std::string("sampled from ") + kZipf);
  EXPECT_LT(workerBytes(plan), uniformBytes);
  EXPECT_FALSE(static_cast<bool>(verifyPlan(plan)));
}

// Zipf's ids crowd the table's first rows, so the first of two row ranges serves most of them;
// ids drawn uniformly (exponent 0) spread over both.
TEST(RowsPerStep, TheRowsOfSkewedIdsFallOnTheFirstRange) {
  auto result = partitionModel("embedding_classifier", "local:2,ps=2", 2);
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  Plan plan = result->plan;
  auto worker = parseProgram(*findProgram(plan, "worker:0"));
  ASSERT_TRUE(static_cast<bool>(worker));
  for (const auto &[spec, skewed] : {std::make_pair(std::string(kZipf), true),
                                     std::make_pair(std::string(kZipf) + ",exponent=0", false)}) {
    SCOPED_TRACE(spec);
    auto shares = sampleRowShares(plan, **worker, spec);
    ASSERT_TRUE(static_cast<bool>(shares)) << llvm::toString(shares.takeError());
    ASSERT_EQ(shares->size(), 1u);
    const std::vector<double> &emb = shares->at("emb");
    ASSERT_EQ(emb.size(), runtime::job::kRowShareRanges);
    double sum = 0, firstHalf = 0;
    for (size_t i = 0; i < emb.size(); ++i) {
      EXPECT_GE(emb[i], 0);
      sum += emb[i];
      firstHalf += i < emb.size() / 2 ? emb[i] : 0;
    }
    EXPECT_NEAR(sum, 1, 1e-9);
    if (skewed) {
      EXPECT_GT(emb.front(), 0.5); // the most frequent ids are the first
      EXPECT_GT(firstHalf, 0.8);
    } else {
      EXPECT_NEAR(firstHalf, 0.5, 0.05);
    }
    Plan estimated = plan;
    auto sampled = estimateRowsFromData(estimated, spec);
    ASSERT_TRUE(static_cast<bool>(sampled)) << llvm::toString(sampled.takeError());
    ASSERT_EQ(estimated.estimate().tables(0).row_shares_size(), static_cast<int>(emb.size()));
    // The servers' rows follow: ps:0 holds rows 0..50000.
    const double ratio = bytesOf(estimated, "ps:0") / bytesOf(estimated, "ps:1");
    if (skewed)
      EXPECT_GT(ratio, 4);
    else
      EXPECT_NEAR(ratio, 1, 0.2);
    EXPECT_FALSE(static_cast<bool>(verifyPlan(estimated)));
  }
}

TEST(RowsPerStep, ADenseModelStaysAsItWas) {
  auto result = partitionModel("mlp", "local:2");
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  Plan plan = result->plan;
  std::string before = plan.SerializeAsString();
  auto sampled = estimateRowsFromData(plan, "fashion-mnist");
  ASSERT_TRUE(static_cast<bool>(sampled)) << llvm::toString(sampled.takeError());
  EXPECT_FALSE(*sampled);
  EXPECT_EQ(plan.SerializeAsString(), before);
}

TEST(RowsPerStep, ABadDataSpecIsAnError) {
  auto result = partitionModel("embedding_classifier", "local:2,ps=1");
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  auto sampled = estimateRowsFromData(result->plan, "no-such-data");
  ASSERT_FALSE(static_cast<bool>(sampled));
  llvm::consumeError(sampled.takeError());
}

} // namespace
} // namespace prism::plan
