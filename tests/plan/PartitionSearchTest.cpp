// --partitions search at compile time: the options' parsing and errors, the fit of
// t(P) = a (P - 1) + b / P + c and the choice, and the candidates a search plan carries.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ModelFiles.h"
#include "cluster/ClusterParser.h"
#include "plan/PartitionSearch.h"
#include "plan/Partitioner.h"
#include "plan/PlanFile.h"
#include "plan/PlanVerifier.h"

namespace prism::plan {
namespace {

template <typename T> std::string errorOf(llvm::Expected<T> value) {
  return value ? "" : llvm::toString(value.takeError());
}

std::string errorOf(llvm::Error e) {
  return e ? llvm::toString(std::move(e)) : "";
}

TEST(PartitionSearch, ParsesPartitionsAsACountOrSearch) {
  auto search = parsePartitions("search");
  ASSERT_TRUE(static_cast<bool>(search));
  EXPECT_TRUE(search->search);
  auto automatic = parsePartitions("auto");
  ASSERT_TRUE(static_cast<bool>(automatic));
  EXPECT_TRUE(automatic->automatic);
  EXPECT_FALSE(automatic->search);
  auto four = parsePartitions("4");
  ASSERT_TRUE(static_cast<bool>(four));
  EXPECT_FALSE(four->search);
  EXPECT_EQ(four->count, 4);
  for (const char *bad : {"-1", "serch", "", "2x"})
    EXPECT_NE(errorOf(parsePartitions(bad))
                  .find("option --partitions: expected auto, search, or 0 or more row ranges"),
              std::string::npos)
        << bad;
}

TEST(PartitionSearch, ParsesSearchPartitionsAscendingAndRefusesBadCounts) {
  auto counts = parseSearchPartitions("4, 1,2");
  ASSERT_TRUE(static_cast<bool>(counts));
  EXPECT_EQ(*counts, (std::vector<int64_t>{1, 2, 4}));
  EXPECT_NE(errorOf(parseSearchPartitions("1,0")).find("option --search-partitions: expected"),
            std::string::npos);
  EXPECT_NE(errorOf(parseSearchPartitions("1,,2")).find("option --search-partitions"),
            std::string::npos);
  EXPECT_NE(errorOf(parseSearchPartitions("2,1,2")).find("2 is named twice"), std::string::npos);
}

TEST(PartitionSearch, CandidatesAreCappedOrRefusedAtTheLimit) {
  PartitionSearchOptions defaults;
  auto capped = searchCandidates(defaults, 3, "3 PS tasks");
  ASSERT_TRUE(static_cast<bool>(capped));
  EXPECT_EQ(*capped, (std::vector<int64_t>{1, 2}));
  PartitionSearchOptions asked;
  asked.candidates = {1, 2, 4};
  EXPECT_NE(errorOf(searchCandidates(asked, 2, "the cluster's 2 PS tasks"))
                .find("option --search-partitions: 4 partitions is more than 2 (the cluster's 2 "
                      "PS tasks)"),
            std::string::npos);
}

TEST(PartitionSearch, FitRecoversKnownCoefficientsFromExactTimes) {
  const PartitionCurve truth{0.002, 0.040, 0.010}; // seconds
  const std::vector<int64_t> counts = {1, 2, 4, 8};
  std::vector<double> seconds;
  for (int64_t p : counts)
    seconds.push_back(truth.at(p));
  auto curve = fitPartitionCurve(counts, seconds);
  ASSERT_TRUE(curve.has_value());
  EXPECT_NEAR(curve->a, truth.a, 1e-9);
  EXPECT_NEAR(curve->b, truth.b, 1e-9);
  EXPECT_NEAR(curve->c, truth.c, 1e-9);
  // t = 0.050, 0.032, 0.026, 0.029: the minimum is at 4 (sqrt(b / a) = 4.5).
  EXPECT_EQ(choosePartitions(counts, seconds, curve), 2u);
}

TEST(PartitionSearch, ChoiceFollowsTheCurveOrTheFastestWithoutOne) {
  const std::vector<int64_t> counts = {1, 2, 4};
  // No overhead per partition: the most partitions win.
  std::vector<double> seconds = {0.040, 0.020, 0.010};
  auto curve = fitPartitionCurve(counts, seconds);
  ASSERT_TRUE(curve.has_value());
  EXPECT_NEAR(curve->a, 0, 1e-9);
  EXPECT_EQ(choosePartitions(counts, seconds, curve), 2u);
  // Two counts do not determine three coefficients: the fastest measured.
  EXPECT_FALSE(fitPartitionCurve({1, 2}, {0.03, 0.02}).has_value());
  EXPECT_EQ(choosePartitions({1, 2}, {0.03, 0.02}, std::nullopt), 1u);
  EXPECT_EQ(choosePartitions({1, 2}, {0.01, 0.02}, std::nullopt), 0u);
}

TEST(PartitionSearch, MedianOfOddAndEvenCounts) {
  EXPECT_EQ(medianOf({3, 1, 2}), 2);
  EXPECT_EQ(medianOf({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(medianOf({}), 0);
}

llvm::Expected<PartitionResult> searchPlan(const std::string &model, const std::string &cluster,
                                           std::vector<int64_t> candidates,
                                           PartitionOptions options = {}) {
  auto c = cluster::loadCluster(cluster, cluster::Replication::BetweenGraph);
  if (!c)
    return c.takeError();
  options.partitionSearch = PartitionSearchOptions{std::move(candidates)};
  return partition(*testing::loadModel(model), *c, options);
}

TEST(PartitionSearch, PlanCarriesEachCandidatesShardsAndPsPrograms) {
  auto result = searchPlan("embedding_classifier", "local:2,ps=4", {1, 2, 4});
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  const Plan &plan = result->plan;
  EXPECT_EQ(plan.version(), kPlanVersion);
  ASSERT_EQ(plan.partition_search().candidates_size(), 3);
  EXPECT_EQ(candidateCounts(plan.partition_search()), "1, 2, 4");
  EXPECT_EQ(plan.partition_search().timed_steps(), 5);
  for (int i = 0; i < 3; ++i) {
    const PartitionCandidate &candidate = plan.partition_search().candidates(i);
    EXPECT_EQ(candidate.programs_size(), 5); // the workers' and every PS task's
    Plan chosen = candidatePlan(plan, static_cast<size_t>(i));
    EXPECT_FALSE(chosen.has_partition_search());
    for (const Variable &v : chosen.variables()) {
      if (v.name() == "emb") {
        EXPECT_EQ(v.shards_size(), candidate.partitions());
      }
    }
  }
  // The plan's own placement is the first candidate's, and it is the same plan partition()
  // makes with that count.
  for (const Variable &v : plan.variables()) {
    if (v.name() == "emb") {
      EXPECT_EQ(v.shards_size(), 1);
    }
  }
}

TEST(PartitionSearch, DefaultCandidatesStopAtThePsTasks) {
  auto result = searchPlan("embedding_classifier", "local:2,ps=2", {});
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  EXPECT_EQ(candidateCounts(result->plan.partition_search()), "1, 2");
}

TEST(PartitionSearch, RefusesWhatItCannotTime) {
  EXPECT_NE(errorOf(searchPlan("embedding_classifier", "local:2,ps=2", {1, 2, 4}))
                .find("option --search-partitions: 4 partitions is more than 2"),
            std::string::npos);
  EXPECT_NE(errorOf(searchPlan("mlp", "local:2,ps=1", {1, 2}))
                .find("option --partitions search: the plan (--strategy hybrid) has no "
                      "parameter-server table read by rows"),
            std::string::npos);
  PartitionOptions async;
  async.synchronization.mode = SyncMode::Async;
  EXPECT_NE(errorOf(searchPlan("embedding_classifier", "local:2,ps=2", {1, 2}, async))
                .find("option --partitions search with --sync async"),
            std::string::npos);
  PartitionOptions elastic;
  elastic.elasticMin = 1;
  elastic.elasticMax = 2;
  EXPECT_NE(errorOf(searchPlan("embedding_classifier", "local:2,ps=2", {1, 2}, elastic))
                .find("option --partitions search with --elastic"),
            std::string::npos);
  PartitionOptions local;
  local.localAggregation = LocalAggregationMode::On;
  EXPECT_NE(errorOf(searchPlan("embedding_classifier", "local:2,ps=2", {1, 2}, local))
                .find("option --partitions search with --local-aggregation on"),
            std::string::npos);
}

TEST(PartitionSearch, VerifierChecksEveryCandidate) {
  auto result = searchPlan("embedding_classifier", "local:2,ps=2", {1, 2});
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  EXPECT_EQ(errorOf(verifyPlan(result->plan)), "");
  Plan unknown = result->plan;
  unknown.mutable_partition_search()->mutable_candidates(1)->mutable_variables(0)->set_variable(
      "nope");
  EXPECT_NE(errorOf(verifyPlan(unknown)).find("'nope' is no variable on parameter servers"),
            std::string::npos);
  Plan gap = result->plan;
  gap.mutable_partition_search()
      ->mutable_candidates(1)
      ->mutable_variables(0)
      ->mutable_shards(1)
      ->set_row_begin(50001);
  EXPECT_NE(errorOf(verifyPlan(gap)).find("partition_search.candidates[1]"), std::string::npos);
  Plan renamed = result->plan;
  renamed.mutable_partition_search()->mutable_candidates(0)->mutable_programs(0)->set_name("x");
  EXPECT_NE(errorOf(verifyPlan(renamed)).find("'x' where the plan has 'worker'"),
            std::string::npos);
  Plan descending = result->plan;
  descending.mutable_partition_search()->mutable_candidates(1)->set_partitions(1);
  EXPECT_NE(errorOf(verifyPlan(descending)).find("counts ascend"), std::string::npos);
}

} // namespace
} // namespace prism::plan
