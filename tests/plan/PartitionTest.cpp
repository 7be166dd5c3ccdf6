// The partitioner on every model, cluster size, strategy and replication: the plan verifies,
// survives a write and read, and says what a plan must say (tables over the PS tasks,
// dense layers in an all-reduce bucket, bytes per step).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "ModelFiles.h"
#include "cluster/ClusterParser.h"
#include "frontends/text/Parser.h"
#include "plan/Estimate.h"
#include "plan/Partitioner.h"
#include "plan/PlanFile.h"
#include "plan/PlanVerifier.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

namespace prism::plan {
namespace {

using testing::loadModel;

llvm::Expected<PartitionResult>
partitionFor(const ir::Module &model, const std::string &cluster, PartitionOptions options = {},
             cluster::Replication replication = cluster::Replication::BetweenGraph) {
  auto c = cluster::loadCluster(cluster, replication);
  if (!c)
    return c.takeError();
  return partition(model, *c, options);
}

const Variable *findVariable(const Plan &plan, llvm::StringRef name) {
  for (const Variable &v : plan.variables())
    if (v.name() == name)
      return &v;
  return nullptr;
}

std::string errorOf(llvm::Error e) {
  return e ? llvm::toString(std::move(e)) : "";
}

double bytesPerStep(const Plan &plan, llvm::StringRef task) {
  for (const TaskEstimate &t : plan.estimate().tasks())
    if (t.task() == task)
      return t.bytes_sent_per_step() + t.bytes_received_per_step();
  return -1;
}

TEST(Partition, EveryModelClusterSizeStrategyAndReplicationVerifies) {
  for (const char *modelName : {"mlp", "cnn", "embedding_classifier", "lstm_lm", "resnet"}) {
    auto model = loadModel(modelName);
    ASSERT_TRUE(model);
    for (int workers : {1, 2, 3, 8, 64})
      for (const char *strategy : {"hybrid", "allreduce", "ps"})
        for (auto replication :
             {cluster::Replication::BetweenGraph, cluster::Replication::InGraph}) {
          std::string cluster = "local:" + std::to_string(workers) +
                                ",ps=" + std::to_string(std::min(workers, 3)) + ",devices=2";
          PartitionOptions options;
          options.placement.strategy = llvm::cantFail(passes::parseStrategy(strategy));
          options.globalBatch = 256;
          auto result = partitionFor(*model, cluster, options, replication);
          std::string what = std::string(modelName) + " on " + cluster + " " + strategy + " " +
                             cluster::replicationName(replication).str();
          ASSERT_TRUE(static_cast<bool>(result))
              << what << ": " << llvm::toString(result.takeError());
          // The partitioner verified it; the verifier must still agree with a fresh look.
          EXPECT_EQ(errorOf(verifyPlan(result->plan)), "") << what;
          int towers = replication == cluster::Replication::InGraph ? 2 : 1;
          EXPECT_EQ(result->plan.run().towers_per_worker(), towers) << what;
          // Every trainable variable placed as the strategy says.
          for (const Variable &v : result->plan.variables()) {
            if (!v.trainable())
              continue;
            if (std::string(strategy) == "allreduce")
              EXPECT_EQ(v.placement(), "allreduce") << what << " " << v.name();
            else if (std::string(strategy) == "ps")
              EXPECT_EQ(v.placement(), "ps") << what << " " << v.name();
            else
              EXPECT_EQ(v.placement(), v.kind() == "sparse" ? "ps" : "allreduce")
                  << what << " " << v.name();
          }
        }
  }
}

TEST(Partition, EmbeddingOnFourWorkersAndTwoPsSplitsTheTableAndBucketsTheDenseLayers) {
  auto model = loadModel("embedding_classifier");
  auto result = partitionFor(*model, "local:4,ps=2");
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  const Plan &plan = result->plan;
  const Variable *emb = findVariable(plan, "emb");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->kind(), "sparse");
  EXPECT_EQ(emb->placement(), "ps");
  ASSERT_EQ(emb->shards_size(), 2);
  EXPECT_EQ(emb->shards(0).task(), "ps:0");
  EXPECT_EQ(emb->shards(0).row_begin(), 0);
  EXPECT_EQ(emb->shards(0).row_end(), 50000);
  EXPECT_EQ(emb->shards(1).task(), "ps:1");
  EXPECT_EQ(emb->shards(1).row_end(), 100000);
  // Its Adam state lives with it.
  const Variable *m = findVariable(plan, "emb.adam_m");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->kind(), "state");
  EXPECT_EQ(m->state_of(), "emb");
  EXPECT_EQ(m->shards_size(), 2);

  // The dense layers share one bucket of (64·128 + 128 + 128·10 + 10)·4 bytes.
  ASSERT_EQ(plan.groups_size(), 1);
  const CollectiveGroup &workers = plan.groups(0);
  EXPECT_EQ(workers.tasks_size(), 4);
  int gradientBuckets = 0;
  for (const Bucket &b : workers.buckets()) {
    if (b.id() < 0)
      continue;
    ++gradientBuckets;
    EXPECT_EQ(b.bytes(), (64 * 128 + 128 + 128 * 10 + 10) * 4);
    EXPECT_EQ(b.variables_size(), 4);
  }
  EXPECT_EQ(gradientBuckets, 1);

  // Bytes per step: the ring all-reduce moves 2·3/4 of the bucket out and in; rows travel
  // to and from both PS tasks, which hold half the table each.
  double bucket = (64 * 128 + 128 + 128 * 10 + 10) * 4 + 4;
  double ring = 2.0 * 3 / 4 * bucket;
  double rows = expectedDistinct(100000, 16 * 20);
  double pull = rows * (8 + 64 * 4), push = rows * (64 * 4 + 8);
  EXPECT_NEAR(bytesPerStep(plan, "worker:0"), 2 * ring + pull + push, 1);
  EXPECT_NEAR(bytesPerStep(plan, "ps:0"), 4 * (pull + push) / 2, 1);
  EXPECT_NEAR(bytesPerStep(plan, "ps:0"), bytesPerStep(plan, "ps:1"), 1);
}

TEST(Partition, HybridWithoutParameterServersSaysWhatToDo) {
  auto model = loadModel("embedding_classifier");
  auto result = partitionFor(*model, "local:2");
  ASSERT_FALSE(static_cast<bool>(result));
  std::string message = llvm::toString(result.takeError());
  EXPECT_NE(message.find("'emb' on a parameter server, but the cluster has none"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("--strategy allreduce"), std::string::npos) << message;
  // Dense models need no PS under hybrid.
  auto mlp = loadModel("mlp");
  EXPECT_TRUE(static_cast<bool>(partitionFor(*mlp, "local:2")));
}

TEST(Partition, BackupWorkersPutEveryTrainedVariableOnParameterServers) {
  auto model = loadModel("embedding_classifier");
  PartitionOptions options; // hybrid: the dense layers would be all-reduced
  options.synchronization.backupWorkers = 1;
  auto result = partitionFor(*model, "local:3,ps=1", options);
  ASSERT_TRUE(static_cast<bool>(result)) << errorOf(result.takeError());
  EXPECT_EQ(result->plan.strategy(), "ps");
  EXPECT_EQ(result->plan.run().backup_workers(), 1);
  EXPECT_EQ(result->plan.run().sync(), "sync");
  for (const Variable &v : result->plan.variables()) {
    if (v.trainable()) {
      EXPECT_EQ(v.placement(), "ps") << v.name();
    }
  }
  Synchronization read = readSynchronization(result->plan.run());
  EXPECT_EQ(read.backupWorkers, 1);
  EXPECT_FALSE(read.exact());
  EXPECT_NE(describeSynchronization(read, 3).find("the first 2 of 3 workers' gradients"),
            std::string::npos);

  options.placement.strategy = passes::Strategy::AllReduce;
  EXPECT_NE(errorOf(partitionFor(*model, "local:3,ps=1", options).takeError())
                .find("option --backup-workers 1: --strategy allreduce keeps variables in a ring "
                      "all-reduce"),
            std::string::npos);
  options.placement.strategy = passes::Strategy::ParameterServer;
  options.synchronization.backupWorkers = 3;
  EXPECT_NE(errorOf(partitionFor(*model, "local:3,ps=1", options).takeError())
                .find("option --backup-workers 3: each step needs the gradient of at least one "
                      "worker, and the job has 3 workers (use at most 2)"),
            std::string::npos);
}

TEST(Partition, AsynchronousPlansCarryTheStalenessBound) {
  auto model = loadModel("mlp");
  PartitionOptions options;
  options.placement.strategy = passes::Strategy::ParameterServer;
  auto exact = partitionFor(*model, "local:2,ps=1", options);
  ASSERT_TRUE(static_cast<bool>(exact)) << errorOf(exact.takeError());
  EXPECT_EQ(exact->plan.run().sync(), ""); // as plans before version 4
  EXPECT_TRUE(readSynchronization(exact->plan.run()).exact());

  options.synchronization.mode = SyncMode::Async;
  auto unbounded = partitionFor(*model, "local:2,ps=1", options);
  ASSERT_TRUE(static_cast<bool>(unbounded)) << errorOf(unbounded.takeError());
  EXPECT_EQ(unbounded->plan.run().sync(), "async");
  EXPECT_EQ(unbounded->plan.run().max_staleness(), -1);
  EXPECT_FALSE(readSynchronization(unbounded->plan.run()).maxStaleness);

  options.synchronization.maxStaleness = 2;
  auto bounded = partitionFor(*model, "local:2,ps=1", options);
  ASSERT_TRUE(static_cast<bool>(bounded)) << errorOf(bounded.takeError());
  EXPECT_EQ(bounded->plan.run().max_staleness(), 2);
  EXPECT_EQ(readSynchronization(bounded->plan.run()).maxStaleness, 2);
  EXPECT_NE(describeSynchronization(readSynchronization(bounded->plan.run()), 2)
                .find("a worker runs at most 2 steps ahead of the slowest"),
            std::string::npos);

  // Every variable all-reduced: nothing would be asynchronous.
  options.placement.strategy = passes::Strategy::AllReduce;
  EXPECT_NE(errorOf(partitionFor(*model, "local:2,ps=1", options).takeError())
                .find("option --sync async: no trained variable is on a parameter server"),
            std::string::npos);
  options.placement.strategy = passes::Strategy::ParameterServer;
  options.synchronization.maxStaleness = -1;
  EXPECT_NE(errorOf(partitionFor(*model, "local:2,ps=1", options).takeError())
                .find("option --max-staleness -1: expected a number of steps, 0 or more"),
            std::string::npos);
}

// Elastic membership redoes one synchronous step on every survivor: workers that are not at one
// step (async, backup workers) cannot, and a host's leader would wait for a lost member.
TEST(Partition, ElasticMembershipNeedsWorkersAtOneStepAndNoHostLeaders) {
  auto model = loadModel("embedding_classifier");
  PartitionOptions options;
  options.placement.strategy = passes::Strategy::ParameterServer;
  options.elasticMin = 2;
  options.elasticMax = 4;
  for (bool async : {true, false}) {
    options.synchronization = {};
    if (async)
      options.synchronization.mode = SyncMode::Async;
    else
      options.synchronization.backupWorkers = 1;
    std::string message = errorOf(partitionFor(*model, "local:3,ps=1", options).takeError());
    EXPECT_NE(message.find("--elastic 2:4 with "), std::string::npos) << message;
    EXPECT_NE(message.find(async ? "--sync async" : "--backup-workers 1"), std::string::npos)
        << message;
  }
  options.synchronization = {};
  auto elastic = partitionFor(*model, "local:2,ps=1,devices=2", options);
  ASSERT_TRUE(static_cast<bool>(elastic)) << errorOf(elastic.takeError());
  EXPECT_EQ(elastic->plan.host_aggregation_size(), 0);
  options.localAggregation = LocalAggregationMode::On;
  std::string message =
      errorOf(partitionFor(*model, "local:2,ps=1,devices=2", options).takeError());
  EXPECT_NE(message.find("--local-aggregation on: a host's leader waits for every member"),
            std::string::npos)
      << message;
}

TEST(Partition, BatchSmallerThanTheTowersIsRefused) {
  auto model = loadModel("mlp");
  PartitionOptions options;
  options.globalBatch = 3;
  auto result = partitionFor(*model, "local:4", options);
  ASSERT_FALSE(static_cast<bool>(result));
  EXPECT_NE(llvm::toString(result.takeError()).find("smaller than the 4 workers"),
            std::string::npos);
}

TEST(Partition, RowsPerStepOptionDrivesTheSparseEstimate) {
  auto model = loadModel("embedding_classifier");
  PartitionOptions options;
  options.rowsPerStep = 100;
  auto result = partitionFor(*model, "local:2,ps=1", options);
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  ASSERT_EQ(result->plan.estimate().tables_size(), 1);
  EXPECT_EQ(result->plan.estimate().tables(0).rows_per_step(), 100);
  EXPECT_EQ(result->plan.estimate().tables(0).source(), "--rows-per-step");
  double bucket = (64 * 128 + 128 + 128 * 10 + 10) * 4 + 4;
  double ring = 2.0 * 1 / 2 * bucket;
  EXPECT_NEAR(bytesPerStep(result->plan, "worker:0"), 2 * ring + 2 * 100 * (64 * 4 + 8), 1);
}

// Gradient accumulation: the plan carries K; the estimate gives one micro-batch's activations,
// the memory saved, and K pulls per step (rows of each micro-batch; dense pulls under ps), while
// the all-reduce moves the same bytes per step.
TEST(Partition, AccumulationIsInThePlanAndItsEstimate) {
  auto model = loadModel("embedding_classifier");
  PartitionOptions whole;
  whole.globalBatch = 256;
  PartitionOptions micro = whole;
  micro.accumulate = 4;
  for (const char *strategy : {"hybrid", "ps"}) {
    whole.placement.strategy = micro.placement.strategy = *passes::parseStrategy(strategy);
    auto a = partitionFor(*model, "local:2,ps=1", whole);
    auto b = partitionFor(*model, "local:2,ps=1", micro);
    ASSERT_TRUE(a && b) << strategy;
    EXPECT_EQ(b->plan.run().accumulate(), 4);
    EXPECT_EQ(b->plan.estimate().local_batch(), 128);
    EXPECT_EQ(b->plan.estimate().micro_batch(), 32);
    const TaskEstimate &ta = a->plan.estimate().tasks(1), &tb = b->plan.estimate().tasks(1);
    ASSERT_EQ(tb.task(), "worker:0");
    EXPECT_LT(tb.activation_bytes(), ta.activation_bytes() / 3);
    EXPECT_NEAR(tb.activation_bytes() + tb.activation_bytes_saved(), ta.activation_bytes(), 1);
    EXPECT_GT(bytesPerStep(b->plan, "worker:0"), bytesPerStep(a->plan, "worker:0")) << strategy;
    ASSERT_EQ(b->plan.estimate().tables_size(), 1);
    EXPECT_GT(b->plan.estimate().tables(0).rows_pulled_per_step(),
              b->plan.estimate().tables(0).rows_per_step());
  }
  micro.accumulate = 200;
  auto refused = partitionFor(*model, "local:2,ps=1", micro);
  ASSERT_FALSE(static_cast<bool>(refused));
  EXPECT_NE(errorOf(refused.takeError()).find("give a --batch of at least 400"), std::string::npos);
}

TEST(Partition, PlanFileRoundTripsAndRefusesOtherFiles) {
  auto model = loadModel("embedding_classifier");
  auto result = partitionFor(*model, "local:2,ps=2");
  ASSERT_TRUE(static_cast<bool>(result));
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("prism-plan", dir));
  std::string path = (dir + "/plan.pb").str();
  ASSERT_EQ(errorOf(writePlan(result->plan, path)), "");
  auto read = readPlan(path);
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->SerializeAsString(), result->plan.SerializeAsString());

  // A model file is not a plan; a missing file says so.
  auto notPlan = readPlan(std::string(PRISM_SOURCE_DIR) + "/models/mlp.prism");
  ASSERT_FALSE(static_cast<bool>(notPlan));
  EXPECT_NE(llvm::toString(notPlan.takeError()).find("mlp.prism"), std::string::npos);
  auto missing = readPlan((dir + "/none.pb").str());
  ASSERT_FALSE(static_cast<bool>(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("cannot read plan"), std::string::npos);

  // A plan that does not verify is not written, and what stood there stays.
  Plan broken = result->plan;
  broken.set_version(99);
  EXPECT_NE(errorOf(writePlan(broken, path)).find("version 99"), std::string::npos);
  EXPECT_TRUE(static_cast<bool>(readPlan(path)));
  llvm::sys::fs::remove_directories(dir);
}

TEST(Partition, InGraphTowersCombineBeforeTheyCommunicate) {
  auto model = loadModel("embedding_classifier");
  auto result = partitionFor(*model, "local:2,ps=1,devices=2", {}, cluster::Replication::InGraph);
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  auto worker = parseProgram(*findProgram(result->plan, "worker:0"));
  ASSERT_TRUE(static_cast<bool>(worker)) << llvm::toString(worker.takeError());
  int pushes = 0, combines = 0, pulls = 0;
  for (const auto &op : (*worker)->ops()) {
    pushes += op->name() == "ps_push_rows";
    combines += op->name() == "combine_towers";
    pulls += op->name() == "ps_pull_rows";
  }
  // Each tower reads its own rows; the sparse gradient is pushed once per task (local
  // aggregation), after the towers' gradients are combined.
  EXPECT_EQ(pulls, 2);
  EXPECT_EQ(pushes, 1);
  EXPECT_EQ(combines, 6); // the loss and five gradients
}

} // namespace
} // namespace prism::plan
