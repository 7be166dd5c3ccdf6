// The plan verifier on broken plans: each corruption gets an error naming the field and the
// value at fault.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "cluster/ClusterParser.h"
#include "frontends/text/Parser.h"
#include "plan/Partitioner.h"
#include "plan/PlanVerifier.h"

namespace prism::plan {
namespace {

const Plan &goodPlan() {
  static const Plan plan = [] {
    auto model = frontends::parseModuleFile(std::string(PRISM_SOURCE_DIR) +
                                            "/models/embedding_classifier.prism");
    EXPECT_TRUE(static_cast<bool>(model));
    auto cluster = cluster::loadCluster("local:2,ps=2", cluster::Replication::BetweenGraph);
    EXPECT_TRUE(static_cast<bool>(cluster));
    auto result = partition(**model, *cluster, {});
    EXPECT_TRUE(static_cast<bool>(result));
    return result->plan;
  }();
  return plan;
}

Program &programNamed(Plan &plan, const std::string &name) {
  for (Program &p : *plan.mutable_programs())
    if (p.name() == name)
      return p;
  ADD_FAILURE() << "no program " << name;
  return *plan.mutable_programs(0);
}

Variable &variableNamed(Plan &plan, const std::string &name) {
  for (Variable &v : *plan.mutable_variables())
    if (v.name() == name)
      return v;
  ADD_FAILURE() << "no variable " << name;
  return *plan.mutable_variables(0);
}

void replaceIn(std::string &text, const std::string &from, const std::string &to) {
  size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
}

struct Corruption {
  const char *what;
  std::function<void(Plan &)> apply;
  const char *expected; // a part of the message
};

TEST(PlanVerifier, TheEmittedPlanVerifies) {
  llvm::Error e = verifyPlan(goodPlan());
  EXPECT_FALSE(static_cast<bool>(e)) << llvm::toString(std::move(e));
}

TEST(PlanVerifier, EveryCorruptionIsNamed) {
  const Corruption corruptions[] = {
      {"version", [](Plan &p) { p.set_version(6); },
       "version 6: this prism reads plan versions 1 to 5"},
      {"sync", [](Plan &p) { p.mutable_run()->set_sync("gossip"); },
       "run.sync: expected sync or async (or empty), got 'gossip'"},
      {"staleness without async", [](Plan &p) { p.mutable_run()->set_max_staleness(3); },
       "run.max_staleness: set in a plan whose run.sync is not async"},
      {"staleness",
       [](Plan &p) {
         p.mutable_run()->set_sync("async");
         p.mutable_run()->set_max_staleness(-2);
       },
       "run.max_staleness: expected -1 (unbounded) or 0 or more, got -2"},
      {"backup workers", [](Plan &p) { p.mutable_run()->set_backup_workers(2); },
       "run.backup_workers: 2 for a synchronous plan of 2 workers"},
      {"backup workers of an all-reduce variable",
       [](Plan &p) { p.mutable_run()->set_backup_workers(1); },
       "placed allreduce in a plan with run.backup_workers 1 (every trained variable must be on "
       "parameter servers)"},
      {"compress", [](Plan &p) { p.mutable_run()->set_compress("int8"); },
       "run.compress: expected fp16 or bf16 (or empty), got 'int8'"},
      {"error feedback", [](Plan &p) { p.mutable_run()->set_error_feedback(true); },
       "run.error_feedback: error feedback needs run.compress"},
      {"elastic range",
       [](Plan &p) {
         p.mutable_run()->set_elastic_min(3);
         p.mutable_run()->set_elastic_max(2);
       },
       "run.elastic_min/elastic_max: --elastic 3:2: MIN is larger than MAX"},
      {"elastic maximum",
       [](Plan &p) {
         p.mutable_run()->set_elastic_min(1);
         p.mutable_run()->set_elastic_max(1);
       },
       "run.elastic_min/elastic_max: --elastic 1:1: MAX is below the cluster's 2 workers"},
      {"accumulate", [](Plan &p) { p.mutable_run()->set_accumulate(1000); },
       "run.accumulate: 1000 micro-batches per step need a global batch of at least"},
      {"strategy", [](Plan &p) { p.set_strategy("gossip"); },
       "strategy: expected hybrid, allreduce, ps or auto, got 'gossip'"},
      {"duplicate task",
       [](Plan &p) { p.mutable_cluster()->mutable_tasks(2)->set_name("worker:0"); },
       "cluster.tasks[2].name: 'worker:0' does not match role worker and index 1"},
      {"port clash",
       [](Plan &p) {
         p.mutable_cluster()->mutable_tasks(3)->set_port(p.cluster().tasks(1).port());
         p.mutable_cluster()->mutable_tasks(3)->set_address(p.cluster().tasks(1).address());
       },
       "cluster.tasks[3].port: ps:0 and worker:0 both use"},
      {"bad port", [](Plan &p) { p.mutable_cluster()->mutable_tasks(1)->set_port(70000); },
       "cluster.tasks[1].port: 70000 is not a port"},
      {"host index", [](Plan &p) { p.mutable_cluster()->mutable_tasks(1)->set_host(9); },
       "cluster.tasks[1].host: 9 is not a host index"},
      {"batch", [](Plan &p) { p.mutable_run()->set_global_batch(1); },
       "run.global_batch: 1 is smaller than the 2 towers"},
      {"bytes", [](Plan &p) { variableNamed(p, "hidden.w").set_bytes(12); },
       "'hidden.w'.bytes: 12, but f32 with 8192 elements is 32768 bytes"},
      {"placement", [](Plan &p) { variableNamed(p, "hidden.w").set_placement("gpu"); },
       "'hidden.w'.placement: expected allreduce, ps or replicated, got 'gpu'"},
      {"shard gap",
       [](Plan &p) { variableNamed(p, "emb").mutable_shards(1)->set_row_begin(50001); },
       "'emb'.shards[1]: rows 50001..100000 should start at row 50000"},
      {"shard short",
       [](Plan &p) { variableNamed(p, "emb").mutable_shards(1)->set_row_end(99999); },
       "'emb'.shards: cover rows 0..99999 of 100000"},
      {"shard task",
       [](Plan &p) { variableNamed(p, "emb").mutable_shards(0)->set_task("worker:1"); },
       "'emb'.shards[0].task: 'worker:1' is not a PS task"},
      {"shards on an all-reduce variable",
       [](Plan &p) {
         Shard *s = variableNamed(p, "out.b").add_shards();
         s->set_task("ps:0");
         s->set_row_end(10);
       },
       "'out.b'.shards: a variable placed allreduce has no shards"},
      {"program of no task", [](Plan &p) { programNamed(p, "ps:1").set_tasks(0, "ps:7"); },
       "program 'ps:1'.tasks: 'ps:7' is not a worker or PS task"},
      {"task without program",
       [](Plan &p) { programNamed(p, "worker").mutable_tasks()->RemoveLast(); },
       "programs: no program for worker:1"},
      {"program IR",
       [](Plan &p) {
         replaceIn(*programNamed(p, "worker").mutable_ir(), "reduce_mean", "reduce_meen");
       },
       "<plan program worker>:"},
      {"program that does not verify",
       [](Plan &p) {
         replaceIn(*programNamed(p, "worker").mutable_ir(), "var out.b : f32[10]",
                   "var out.b : f32[11]");
       },
       "<plan program worker>:35:3: error: invalid plan: program 'worker': 'fused_matmul' "
       "defining %logits: bias f32[11]"},
      {"plan shape",
       [](Plan &p) {
         variableNamed(p, "out.b").set_shape(0, 11);
         variableNamed(p, "out.b").set_bytes(44);
       },
       "program 'worker': variable 'out.b' is f32[10] but the plan says f32[11]"},
      {"rows on a PS",
       [](Plan &p) {
         replaceIn(*programNamed(p, "ps:1").mutable_ir(), "held_rows = [50000, 100000]",
                   "held_rows = [40000, 100000]");
       },
       "'emb' holds other rows than the plan's shards on ps:1"},
      {"all-reduce variable on a PS",
       [](Plan &p) { variableNamed(p, "out.b").set_placement("ps"); },
       "'out.b'.shards: a PS variable needs at least one shard"},
      {"bucket id", [](Plan &p) { p.mutable_groups(0)->mutable_buckets(1)->set_id(7); },
       "groups 'workers'.buckets[1].id: 7, but program 'worker' has bucket 0 there"},
      {"bucket bytes", [](Plan &p) { p.mutable_groups(0)->mutable_buckets(1)->set_bytes(5); },
       "groups 'workers'.buckets[1].bytes: 5, but its values hold"},
      {"missing bucket", [](Plan &p) { p.mutable_groups(0)->mutable_buckets()->RemoveLast(); },
       "groups 'workers': 1 buckets, but program 'worker' has 2 all_reduce ops"},
      {"group member", [](Plan &p) { p.mutable_groups(0)->mutable_tasks()->RemoveLast(); },
       "worker:1 all-reduces over group 'workers' but is not one of its tasks"},
      {"pushed twice",
       [](Plan &p) {
         replaceIn(*programNamed(p, "worker").mutable_ir(), "  ps_push_rows(emb, %d.emb)\n",
                   "  ps_push_rows(emb, %d.emb)\n  ps_push_rows(emb, %d.emb)\n");
       },
       "variable 'emb': the worker program pushes its gradient 2 times (expected once)"},
      {"update left on the worker",
       [](Plan &p) {
         replaceIn(*programNamed(p, "worker").mutable_ir(), "  ps_push_rows(emb, %d.emb)\n",
                   "  %g = ps_gradient_rows(emb) : sparse f32[100000, 64]\n");
       },
       "'ps_gradient_rows' runs on parameter servers only"},
  };
  for (const Corruption &c : corruptions) {
    Plan plan = goodPlan();
    c.apply(plan);
    llvm::Error e = verifyPlan(plan);
    ASSERT_TRUE(static_cast<bool>(e)) << c.what << ": the verifier accepted it";
    std::string message = llvm::toString(std::move(e));
    EXPECT_NE(message.find(c.expected), std::string::npos)
        << c.what << ": got \"" << message << "\"";
  }
}

} // namespace
} // namespace prism::plan
