// Local aggregation per host in the plan: which hosts aggregate and who leads them, the flag's
// three modes, the servers' contributors, the estimate (a host's link carries its workers' rows
// once; members talk to the leader over loopback) and the verifier's checks of the new fields.
#include <gtest/gtest.h>

#include <string>

#include "ModelFiles.h"
#include "cluster/ClusterParser.h"
#include "plan/LocalAggregation.h"
#include "plan/Partitioner.h"
#include "plan/PlanVerifier.h"

namespace prism::plan {
namespace {

using testing::loadModel;

// 2 hosts with 2 devices each and 2 PS tasks: between-graph, 2 workers per host.
constexpr const char *kTwoByTwo = "local:2,ps=2,devices=2";

llvm::Expected<PartitionResult>
partitionFor(const char *modelName, const std::string &cluster, PartitionOptions options = {},
             cluster::Replication replication = cluster::Replication::BetweenGraph) {
  auto model = loadModel(modelName);
  if (!model)
    return ir::makeError("no model");
  auto c = cluster::loadCluster(cluster, replication);
  if (!c)
    return c.takeError();
  return partition(*model, *c, options);
}

double linkOut(const Plan &plan, const std::string &host) {
  for (const LinkEstimate &l : plan.estimate().links())
    if (l.host() == host)
      return l.bytes_out_per_step();
  return -1;
}

double sentPerStep(const Plan &plan, const std::string &task) {
  for (const TaskEstimate &t : plan.estimate().tasks())
    if (t.task() == task)
      return t.bytes_sent_per_step();
  return -1;
}

TEST(LocalAggregation, HostsWithSeveralWorkersAggregateUnderTheirFirstWorker) {
  for (const char *strategy : {"hybrid", "ps"}) {
    PartitionOptions options;
    options.placement.strategy = *passes::parseStrategy(strategy);
    auto result = partitionFor("embedding_classifier", kTwoByTwo, options);
    ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
    const Plan &plan = result->plan;
    EXPECT_EQ(plan.run().local_aggregation(), "auto");
    ASSERT_EQ(plan.host_aggregation_size(), 2) << strategy;
    EXPECT_EQ(plan.host_aggregation(0).host(), "local0");
    EXPECT_EQ(plan.host_aggregation(0).leader(), "worker:0");
    EXPECT_EQ(std::vector<std::string>(plan.host_aggregation(0).members().begin(),
                                       plan.host_aggregation(0).members().end()),
              (std::vector<std::string>{"worker:0", "worker:1"}));
    EXPECT_EQ(plan.host_aggregation(1).leader(), "worker:2");
    EXPECT_EQ(psContributors(plan), (std::vector<int64_t>{0, 2}));
    EXPECT_EQ(aggregationOf(plan, "worker:3"), &plan.host_aggregation(1));
    EXPECT_EQ(aggregationOf(plan, "ps:0"), nullptr);
  }
}

TEST(LocalAggregation, OffAndPlansWithoutRowTrafficHaveNone) {
  PartitionOptions off;
  off.localAggregation = LocalAggregationMode::Off;
  auto result = partitionFor("embedding_classifier", kTwoByTwo, off);
  ASSERT_TRUE(static_cast<bool>(result));
  EXPECT_EQ(result->plan.host_aggregation_size(), 0);
  EXPECT_EQ(result->plan.run().local_aggregation(), "off");
  EXPECT_EQ(psContributors(result->plan), (std::vector<int64_t>{0, 1, 2, 3}));

  // One worker per host; in-graph towers; no table on parameter servers (mlp, and the
  // all-reduce strategy): nothing to aggregate, and no error under auto.
  struct Case {
    const char *model, *cluster, *strategy;
    cluster::Replication replication;
  } cases[] = {
      {"embedding_classifier", "local:2,ps=2", "hybrid", cluster::Replication::BetweenGraph},
      {"embedding_classifier", kTwoByTwo, "hybrid", cluster::Replication::InGraph},
      {"embedding_classifier", kTwoByTwo, "allreduce", cluster::Replication::BetweenGraph},
      {"mlp", kTwoByTwo, "ps", cluster::Replication::BetweenGraph},
  };
  for (const Case &c : cases) {
    PartitionOptions options;
    options.placement.strategy = *passes::parseStrategy(c.strategy);
    auto none = partitionFor(c.model, c.cluster, options, c.replication);
    ASSERT_TRUE(static_cast<bool>(none)) << llvm::toString(none.takeError());
    EXPECT_EQ(none->plan.host_aggregation_size(), 0) << c.model << " " << c.cluster;
    // With `on` each is an error saying why.
    options.localAggregation = LocalAggregationMode::On;
    auto refused = partitionFor(c.model, c.cluster, options, c.replication);
    ASSERT_FALSE(static_cast<bool>(refused)) << c.model << " " << c.cluster;
    EXPECT_NE(llvm::toString(refused.takeError()).find("--local-aggregation on: "),
              std::string::npos);
  }
}

// Workers that do not wait for each other must not meet at a leader every step: auto leaves
// aggregation off under async and backup workers, `on` says why, the verifier refuses it.
TEST(LocalAggregation, WorkersThatDoNotWaitForEachOtherDoNotAggregate) {
  for (const char *flag : {"--sync async", "--backup-workers"}) {
    PartitionOptions options;
    options.placement.strategy = *passes::parseStrategy("ps");
    if (std::string(flag) == "--sync async")
      options.synchronization.mode = SyncMode::Async;
    else
      options.synchronization.backupWorkers = 1;
    auto none = partitionFor("embedding_classifier", kTwoByTwo, options);
    ASSERT_TRUE(static_cast<bool>(none)) << llvm::toString(none.takeError());
    EXPECT_EQ(none->plan.host_aggregation_size(), 0) << flag;

    Plan corrupted = none->plan;
    corrupted.mutable_run()->set_local_aggregation("auto");
    HostAggregation *a = corrupted.add_host_aggregation();
    a->set_host("local0");
    a->set_leader("worker:0");
    a->add_members("worker:0");
    a->add_members("worker:1");
    llvm::Error e = verifyPlan(corrupted);
    ASSERT_TRUE(static_cast<bool>(e)) << flag;
    EXPECT_NE(llvm::toString(std::move(e)).find("whose workers do not wait for each other"),
              std::string::npos);

    options.localAggregation = LocalAggregationMode::On;
    auto refused = partitionFor("embedding_classifier", kTwoByTwo, options);
    ASSERT_FALSE(static_cast<bool>(refused)) << flag;
    std::string message = llvm::toString(refused.takeError());
    EXPECT_NE(message.find("--local-aggregation on: a host's workers would wait for each other"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find(flag), std::string::npos) << message;
  }
}

TEST(LocalAggregation, FlagValues) {
  EXPECT_EQ(*parseLocalAggregation("auto"), LocalAggregationMode::Auto);
  EXPECT_EQ(*parseLocalAggregation("on"), LocalAggregationMode::On);
  EXPECT_EQ(*parseLocalAggregation("off"), LocalAggregationMode::Off);
  auto bad = parseLocalAggregation("yes");
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_EQ(ir::messageOf(bad.takeError()), "expected auto, on or off, got 'yes'");
}

TEST(LocalAggregation, TheEstimateCountsAHostsRowsOnceOnItsLink) {
  PartitionOptions on, off;
  off.localAggregation = LocalAggregationMode::Off;
  auto aggregated = partitionFor("embedding_classifier", kTwoByTwo, on);
  auto separate = partitionFor("embedding_classifier", kTwoByTwo, off);
  ASSERT_TRUE(aggregated && separate);
  const Plan &a = aggregated->plan, &s = separate->plan;
  // A member sends nothing to the servers: its rows go to the leader (loopback), which sends
  // the host's; the host's link carries less (the union of two workers' rows, fewer messages).
  EXPECT_LT(linkOut(a, "local0"), linkOut(s, "local0"));
  EXPECT_GT(linkOut(a, "local0"), 0.5 * linkOut(s, "local0"));
  ASSERT_EQ(a.estimate().local_aggregation_size(), 2);
  const LocalAggregationEstimate &host = a.estimate().local_aggregation(0);
  EXPECT_EQ(host.host(), "local0");
  EXPECT_GT(host.local_bytes_per_step(), 0);
  ASSERT_EQ(host.tables_size(), 1);
  ASSERT_EQ(a.estimate().tables_size(), 1);
  // Uniform draws: two workers' 320 indices over 100,000 rows barely overlap.
  const double one = a.estimate().tables(0).rows_per_step();
  EXPECT_LT(host.tables(0).rows_per_step(), 2 * one);
  EXPECT_GT(host.tables(0).rows_per_step(), 1.99 * one);
  EXPECT_EQ(s.estimate().local_aggregation_size(), 0);
  // Every worker still runs the all-reduce; the members' PS bytes now go to their leader.
  EXPECT_NEAR(sentPerStep(a, "worker:1"), sentPerStep(s, "worker:1"),
              0.05 * sentPerStep(s, "worker:1"));
  EXPECT_GT(sentPerStep(a, "worker:0"), sentPerStep(s, "worker:0"));
}

TEST(LocalAggregation, TheVerifierChecksTheHostsAndTheirMembers) {
  auto result = partitionFor("embedding_classifier", kTwoByTwo);
  ASSERT_TRUE(static_cast<bool>(result));
  struct Corruption {
    const char *what;
    std::function<void(Plan &)> apply;
    const char *expected;
  } corruptions[] = {
      {"mode", [](Plan &p) { p.mutable_run()->set_local_aggregation("sometimes"); },
       "run.local_aggregation: expected auto, on or off, got 'sometimes'"},
      {"off with hosts", [](Plan &p) { p.mutable_run()->set_local_aggregation("off"); },
       "plan.host_aggregation: hosts aggregate, but run.local_aggregation is off"},
      {"unknown host", [](Plan &p) { p.mutable_host_aggregation(0)->set_host("h9"); },
       "plan.host_aggregation: host 'h9' is not in the cluster"},
      {"twice", [](Plan &p) { *p.add_host_aggregation() = p.host_aggregation(0); },
       "plan.host_aggregation: host 'local0' aggregates twice"},
      {"leader", [](Plan &p) { p.mutable_host_aggregation(0)->set_leader("worker:1"); },
       "the leader of host 'local0' must be worker:0, not 'worker:1'"},
      {"members", [](Plan &p) { p.mutable_host_aggregation(1)->set_members(1, "worker:1"); },
       "the members of host 'local1' must be its workers in index order, from worker:2 to "
       "worker:3"},
      {"missing member",
       [](Plan &p) { p.mutable_host_aggregation(1)->mutable_members()->RemoveLast(); },
       "the members of host 'local1' must be its workers"},
      {"in-graph", [](Plan &p) { p.set_replication("in-graph"); },
       "local aggregation is for between-graph replication"},
  };
  for (const Corruption &c : corruptions) {
    Plan plan = result->plan;
    c.apply(plan);
    llvm::Error e = verifyPlan(plan);
    ASSERT_TRUE(static_cast<bool>(e)) << c.what << ": the verifier accepted it";
    std::string message = llvm::toString(std::move(e));
    EXPECT_NE(message.find(c.expected), std::string::npos)
        << c.what << ": got \"" << message << "\"";
  }
  // A single-worker host cannot aggregate.
  auto single = partitionFor("embedding_classifier", "local:2,ps=2");
  ASSERT_TRUE(static_cast<bool>(single));
  Plan plan = single->plan;
  plan.mutable_run()->set_local_aggregation("auto");
  HostAggregation *a = plan.add_host_aggregation();
  a->set_host("local0");
  a->set_leader("worker:0");
  a->add_members("worker:0");
  llvm::Error e = verifyPlan(plan);
  ASSERT_TRUE(static_cast<bool>(e));
  EXPECT_NE(llvm::toString(std::move(e))
                .find("host 'local0' runs 1 worker(s); aggregation needs "
                      "two or more"),
            std::string::npos);
}

} // namespace
} // namespace prism::plan
