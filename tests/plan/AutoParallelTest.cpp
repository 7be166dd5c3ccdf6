// The automatic choices on the models under models/ with synthetic profiles whose figures make
// the best choice clear by hand: the strategy, a placement no single strategy gives, the
// partition count, the bucket size, refused alternatives, and the default kept on a tie.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ModelFiles.h"
#include "cluster/ClusterParser.h"
#include "ir/Diagnostic.h"
#include "plan/AutoParallel.h"
#include "plan/Partitioner.h"
#include "plan/PlanVariables.h"
#include "plan/Simulator.h"

namespace prism::plan {
namespace {

using testing::loadModel;

constexpr double kMs = 1e-3;

// Kernels free; an all-reduce `arLatency` plus `arSecondsPerByte` per byte a rank sends; a PS call
// `psLatency`, its bytes at 10 GB/s; updates free.
std::shared_ptr<const CostProfile> profile(double arLatency, double arSecondsPerByte,
                                           double psLatency) {
  auto p = std::make_shared<CostProfile>();
  p->host = "synthetic";
  p->threads = 1;
  p->allReduce = {arLatency, arSecondsPerByte};
  p->ps = {psLatency, 1e10, 0, 0};
  return p;
}

PartitionOptions automatic(std::shared_ptr<const CostProfile> p) {
  PartitionOptions options;
  options.automatic = {true, true, true};
  options.profile = std::move(p);
  options.profileSource = "synthetic";
  return options;
}

llvm::Expected<PartitionResult> partitionFor(const char *modelName, const std::string &cluster,
                                             const PartitionOptions &options) {
  auto model = loadModel(modelName);
  if (!model)
    return ir::makeError(std::string("cannot load model ") + modelName);
  auto c = cluster::loadCluster(cluster, cluster::Replication::BetweenGraph);
  if (!c)
    return c.takeError();
  return partition(*model, *c, options);
}

const Decision *decision(const Plan &plan, llvm::StringRef subject) {
  for (const Decision &d : plan.decisions())
    if (d.subject() == subject)
      return &d;
  return nullptr;
}

const Alternative *alternative(const Decision &d, llvm::StringRef option) {
  for (const Alternative &a : d.alternatives())
    if (a.option() == option)
      return &a;
  return nullptr;
}

bool onPs(const Plan &plan, llvm::StringRef name) {
  for (const Variable &v : plan.variables())
    if (v.name() == name)
      return onParameterServers(v);
  ADD_FAILURE() << "no variable " << name.str();
  return false;
}

// The chosen alternative is among them, and no other predicts a step shorter by the margin.
void expectChosenFastest(const Decision &d) {
  const Alternative *chosen = alternative(d, d.chosen());
  ASSERT_NE(chosen, nullptr);
  for (const Alternative &a : d.alternatives()) {
    if (a.refused().empty()) {
      EXPECT_LE(chosen->step_seconds(), a.step_seconds() * (1 + kDecisionMargin)) << a.option();
    }
  }
}

TEST(AutoParallel, SlowPsCallsPutEverythingOnAllReduce) {
  // A PS call costs 50 ms, an all-reduce 1 ms: the table too goes to all-reduce.
  auto p = profile(1 * kMs, 0, 50 * kMs);
  auto result = partitionFor("embedding_classifier", "local:2,ps=1", automatic(p));
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  EXPECT_EQ(result->plan.strategy(), "allreduce");
  EXPECT_FALSE(onPs(result->plan, "emb"));
  const Decision *strategy = decision(result->plan, "strategy");
  ASSERT_NE(strategy, nullptr);
  EXPECT_EQ(strategy->chosen(), "allreduce");
  EXPECT_EQ(strategy->profile(), "synthetic");
  ASSERT_EQ(strategy->alternatives_size(), 3);
  expectChosenFastest(*strategy);
  // Hybrid pulls the table's rows (a call) and pushes (another): at least 100 ms.
  EXPECT_GE(alternative(*strategy, "hybrid")->step_seconds(), 100 * kMs);
  // No table left on the PS: no partition count to choose.
  EXPECT_EQ(decision(result->plan, "partitions"), nullptr);
}

TEST(AutoParallel, ExpensiveAllReduceBytesPutTheTableOnPs) {
  // 0.1 µs per all-reduced byte makes the 25.6 MB table's all-reduce 2.6 s, and the 38 kB of
  // dense gradients 4.8 ms with the latency; through the PS (5 ms a call) the table's rows cost
  // a pull and a push, 10 ms, and the dense variables one more call (the step pulls them whole
  // in one), 15 ms in all: hybrid.
  auto p = profile(1 * kMs, 1e-7, 5 * kMs);
  auto result = partitionFor("embedding_classifier", "local:2,ps=1", automatic(p));
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  EXPECT_TRUE(onPs(result->plan, "emb"));
  EXPECT_FALSE(onPs(result->plan, "hidden.w"));
  const Decision *strategy = decision(result->plan, "strategy");
  ASSERT_NE(strategy, nullptr);
  EXPECT_EQ(strategy->chosen(), "hybrid");
  EXPECT_GT(alternative(*strategy, "allreduce")->step_seconds(), 2.0);
  EXPECT_GT(alternative(*strategy, "ps")->step_seconds(), 15 * kMs);
  const Decision *emb = decision(result->plan, "placement of emb");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->chosen(), "ps");
}

// Only Adam's updates cost: 10 ms a variable at the profile's figures, 20 ms on a worker of
// `local:2` (the two workers share the profile's one core; the server updates at the profile's
// speed); an all-reduce 1 ms plus 5 ns per byte, twice that on `local:2` (the core shared for it
// too); a PS call 3 ms, its CPU work (1.5 ms at the caller, 1.5 ms at the server) on the one
// core, its bytes at 100 MB/s, the server moving one message at a time.
std::shared_ptr<const CostProfile> adamOnlyProfile() {
  auto p = std::make_shared<CostProfile>(*profile(1 * kMs, 5e-9, 3 * kMs));
  p->kernels["apply_adam"] = {10 * kMs, 0, 0};
  p->cores = 1;
  p->ps.bytesPerSecond = 1e8;
  return p;
}

TEST(AutoParallel, PerVariableChoiceNoSingleStrategyGives) {
  // All on the PS: the two workers' pulls of 814 kB (3 ms, then 8.1 ms each, one after the
  // other: 19.3 ms; the calls' CPU work fits in while the first message moves), the loss's
  // all-reduce (2 ms), the pushes (19.3 ms likewise) and the server's 4 updates (40 ms): 80.6
  // ms. All all-reduced: the loss and one bucket (2 + 2 × (1 + 4.07) ms) and 4 updates on each
  // worker (80 ms): 92.1 ms. w1 (803 kB) all-reduced and b1, w2, b2 (11 kB) on the PS: the
  // pulls (6.1 ms: the two calls' four 1.5 ms halves take the core in turn, then 0.1 ms of
  // bytes), the loss (2 ms), w1's bucket (2 + 8.0 ms), its update on the workers (20 ms), the
  // pushes (6.1 ms likewise), the server's 3 updates (30 ms): 74.3 ms.
  auto p = adamOnlyProfile();
  auto result = partitionFor("mlp", "local:2,ps=1", automatic(p));
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  EXPECT_EQ(result->plan.strategy(), "auto");
  EXPECT_FALSE(onPs(result->plan, "w1"));
  for (const char *name : {"b1", "w2", "b2"})
    EXPECT_TRUE(onPs(result->plan, name)) << name;
  const Decision *strategy = decision(result->plan, "strategy");
  ASSERT_NE(strategy, nullptr);
  EXPECT_EQ(strategy->chosen(), "ps");
  EXPECT_NEAR(alternative(*strategy, "ps")->step_seconds(), 80.565 * kMs, 0.001 * kMs);
  EXPECT_NEAR(alternative(*strategy, "allreduce")->step_seconds(), 92.141 * kMs, 0.001 * kMs);
  const Decision *w1 = decision(result->plan, "placement of w1");
  ASSERT_NE(w1, nullptr);
  EXPECT_EQ(w1->chosen(), "all-reduce");
  EXPECT_NEAR(alternative(*w1, "all-reduce")->step_seconds(), 74.254 * kMs, 0.001 * kMs);
  EXPECT_LT(alternative(*w1, "all-reduce")->step_seconds(),
            alternative(*w1, "ps")->step_seconds() * (1 - kDecisionMargin));
  // The plan predicts what the decision says.
  auto predicted = simulateStep(result->plan, *result->programs.front(), *p);
  ASSERT_TRUE(bool(predicted));
  EXPECT_NEAR(predicted->stepSeconds, alternative(*w1, "all-reduce")->step_seconds(), 1e-9);
}

TEST(AutoParallel, PartitionsSpreadTheTableOverTheServers) {
  // With 4 PS tasks, a table's rows in 4 ranges move 4 times as fast as in 1 (a server holds one
  // range of a table: 4 is the most).
  auto p = profile(1 * kMs, 1e-6, 0.1 * kMs);
  auto options = automatic(p);
  options.rowsPerStep = 4096; // 1 MB of rows pulled and pushed
  auto result = partitionFor("embedding_classifier", "local:2,ps=4", options);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  const Decision *partitions = decision(result->plan, "partitions");
  ASSERT_NE(partitions, nullptr);
  EXPECT_EQ(partitions->chosen(), "4");
  expectChosenFastest(*partitions);
  for (const char *count : {"1", "2", "4"})
    EXPECT_NE(alternative(*partitions, count), nullptr) << count;
  EXPECT_EQ(alternative(*partitions, "8"), nullptr);
  EXPECT_GT(alternative(*partitions, "1")->step_seconds(),
            alternative(*partitions, "4")->step_seconds());
  for (const Variable &v : result->plan.variables()) {
    if (v.name() == "emb") {
      EXPECT_EQ(v.shards_size(), 4);
    }
  }
}

// The same table, its rows a step all in its first 64th (as sampled ids that crowd the first
// rows would have them): the first range's server serves them whatever the count, so more ranges
// gain nothing and the fewest win; the decision says where the rows fall.
TEST(AutoParallel, RowsCrowdedIntoOneRangeKeepOneRange) {
  auto p = profile(1 * kMs, 1e-6, 0.1 * kMs);
  auto options = automatic(p);
  options.rowsPerStep = 4096;
  std::vector<double> shares(64, 0.0);
  shares.front() = 1;
  options.rowShares["emb"] = shares;
  auto result = partitionFor("embedding_classifier", "local:2,ps=4", options);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  const Decision *partitions = decision(result->plan, "partitions");
  ASSERT_NE(partitions, nullptr);
  EXPECT_EQ(partitions->chosen(), "1");
  EXPECT_NEAR(alternative(*partitions, "4")->step_seconds(),
              alternative(*partitions, "1")->step_seconds(),
              alternative(*partitions, "1")->step_seconds() * kDecisionMargin);
  EXPECT_NE(partitions->reason().find("the busiest of emb's 4 ranges serves 100% of a step's rows"),
            std::string::npos)
      << partitions->reason();
  ASSERT_EQ(result->plan.estimate().tables_size(), 1);
  EXPECT_EQ(result->plan.estimate().tables(0).row_shares_size(), 64);
}

TEST(AutoParallel, WithoutServersPsIsRefusedWithTheReason) {
  auto p = profile(1 * kMs, 0, 1 * kMs);
  auto result = partitionFor("embedding_classifier", "local:2", automatic(p));
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  EXPECT_EQ(result->plan.strategy(), "allreduce");
  const Decision *strategy = decision(result->plan, "strategy");
  ASSERT_NE(strategy, nullptr);
  const Alternative *hybrid = alternative(*strategy, "hybrid");
  ASSERT_NE(hybrid, nullptr);
  EXPECT_NE(hybrid->refused().find("the cluster has none"), std::string::npos) << hybrid->refused();
  EXPECT_FALSE(alternative(*strategy, "ps")->refused().empty());
}

TEST(AutoParallel, BucketSizeWeighsLatencyAgainstOverlap) {
  // Free all-reduce bytes but 10 ms per all-reduce: one bucket for the whole model.
  auto p = profile(10 * kMs, 0, 1 * kMs);
  auto result = partitionFor("resnet", "local:2", automatic(p));
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  const Decision *bucket = decision(result->plan, "bucket-mb");
  ASSERT_NE(bucket, nullptr);
  EXPECT_EQ(bucket->chosen(), "25.0");
  ASSERT_NE(alternative(*bucket, "0.5"), nullptr);
  EXPECT_GT(alternative(*bucket, "0.5")->step_seconds(),
            alternative(*bucket, "25.0")->step_seconds());
}

TEST(AutoParallel, NothingAutomaticMakesNoDecisions) {
  auto result = partitionFor("embedding_classifier", "local:2,ps=1", PartitionOptions());
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  EXPECT_EQ(result->plan.decisions_size(), 0);
  EXPECT_EQ(result->plan.strategy(), "hybrid");
}

TEST(AutoParallel, ModelErrorsAreTheDefaultStrategysOwn) {
  auto p = profile(1 * kMs, 0, 1 * kMs);
  auto options = automatic(p);
  options.globalBatch = 3; // 2 workers × 2 micro-batches do not divide it
  options.accumulate = 2;
  auto result = partitionFor("mlp", "local:2", options);
  ASSERT_FALSE(bool(result));
  EXPECT_NE(llvm::toString(result.takeError()).find("accumulate"), std::string::npos);
}

TEST(AutoParallel, ExplainPrintsEveryAlternative) {
  auto p = adamOnlyProfile();
  auto result = partitionFor("mlp", "local:2,ps=1", automatic(p));
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  std::string text;
  llvm::raw_string_ostream os(text);
  printDecisions(result->plan, os);
  os.flush();
  EXPECT_NE(text.find("decisions (predicted steps, profile synthetic)"), std::string::npos) << text;
  EXPECT_NE(text.find("strategy: ps"), std::string::npos) << text;
  EXPECT_NE(text.find("placement of w1: all-reduce"), std::string::npos) << text;
  EXPECT_NE(text.find("* all-reduce"), std::string::npos) << text;
  EXPECT_NE(text.find("allreduce"), std::string::npos) << text;
}

} // namespace
} // namespace prism::plan
