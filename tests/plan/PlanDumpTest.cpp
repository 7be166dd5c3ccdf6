// The plan dump: the JSON interface's keys and values, what the text says, DOT that Graphviz
// renders, the task filter, and the errors.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "plan/PlanDump.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"

namespace prism::plan {
namespace {

constexpr const char *kJobToken = "s3cret-j0b-t0ken";

// The worker program: rows of `emb` from the PS tasks, `w` and `b` all-reduced in bucket 0.
constexpr const char *kWorkerIr = R"(model tiny {
  input tokens : i32[B, 4]
  input y : i32[B]
  var emb : f32[100, 8] = zeros {placement = ps, shards = [0, 1], rows = [0, 50, 100]}
  var w : f32[8, 10] = zeros {placement = allreduce}
  var b : f32[10] = zeros {placement = allreduce}
  %e = ps_pull_rows(emb, tokens) : f32[B, 4, 8]
  %p = reduce_mean(%e, axes = [1]) : f32[B, 8]
  %mm = matmul(%p, w) : f32[B, 10]
  %logits = bias_add(%mm, b) : f32[B, 10]
  %loss = softmax_cross_entropy(%logits, y) : f32[]
  %g.emb = gather_grad(%e, tokens, num_rows = 100) : sparse f32[100, 8]
  ps_push_rows(emb, %g.emb)
  %d.w, %d.b = all_reduce(w, b, group = "workers", bucket = 0) : f32[8, 10], f32[10]
  %loss.mean = all_reduce(%loss, group = "workers", bucket = -1) : f32[]
  loss %loss
}
)";

// The program of PS task `index`: its half of `emb`'s rows.
std::string psIr(int index) {
  std::string rows = std::to_string(index * 50) + ", " + std::to_string(index * 50 + 50);
  return "model tiny {\n  var emb : f32[50, 8] = zeros {placement = ps, table_shape = [100, 8], "
         "held_rows = [" +
         rows + "]}\n  %g = ps_gradient_rows(emb) : sparse f32[50, 8]\n}\n";
}

Variable *addVariable(Plan &plan, const std::string &name, const std::string &kind,
                      std::vector<int64_t> shape, const std::string &placement) {
  Variable *v = plan.add_variables();
  v->set_name(name);
  v->set_kind(kind);
  v->set_dtype("f32");
  int64_t elements = 1;
  for (int64_t d : shape) {
    v->add_shape(d);
    elements *= d;
  }
  v->set_bytes(elements * 4);
  v->set_trainable(kind != "state" && kind != "other");
  v->set_placement(placement);
  if (placement == "ps")
    for (int i = 0; i < 2; ++i) {
      Shard *s = v->add_shards();
      s->set_task("ps:" + std::to_string(i));
      s->set_row_begin(i * shape[0] / 2);
      s->set_row_end((i + 1) * shape[0] / 2);
    }
  return v;
}

// 2 workers and 2 PS tasks on 2 hosts (and the coordinator): `emb` split over both PS tasks,
// `w` and `b` in one all-reduce bucket, Adam state for each.
Plan samplePlan() {
  Plan plan;
  plan.set_version(1);
  plan.set_model("tiny");
  plan.set_source("models/tiny.prism");
  plan.set_strategy("hybrid");
  plan.set_replication("between-graph");
  for (int h = 0; h < 2; ++h) {
    Host *host = plan.mutable_cluster()->add_hosts();
    host->set_name("host" + std::to_string(h));
    host->set_address("10.0.0." + std::to_string(h + 1));
    host->add_devices("cpu:0");
    host->set_bandwidth_bits_per_sec(h == 0 ? 10'000'000'000ULL : 0);
  }
  auto addTask = [&](const std::string &role, int index, int host, int port) {
    Task *t = plan.mutable_cluster()->add_tasks();
    t->set_name(role + ":" + std::to_string(index));
    t->set_role(role);
    t->set_index(index);
    t->set_host(host);
    t->set_address("10.0.0." + std::to_string(host + 1));
    t->set_port(port);
    if (role == "worker")
      t->add_devices("cpu:0");
  };
  addTask("coordinator", 0, 0, 6000);
  addTask("worker", 0, 0, 6001);
  addTask("ps", 0, 0, 6002);
  addTask("worker", 1, 1, 6001);
  addTask("ps", 1, 1, 6002);

  addVariable(plan, "emb", "sparse", {100, 8}, "ps");
  addVariable(plan, "w", "dense", {8, 10}, "allreduce");
  addVariable(plan, "b", "dense", {10}, "allreduce");
  for (const char *of : {"emb", "w", "b"})
    for (const char *slot : {"m", "v"}) {
      Variable *source = nullptr;
      for (Variable &v : *plan.mutable_variables())
        if (v.name() == of)
          source = &v;
      std::vector<int64_t> shape(source->shape().begin(), source->shape().end());
      addVariable(plan, std::string(of) + ".adam." + slot, "state", shape, source->placement())
          ->set_state_of(of);
    }
  addVariable(plan, "adam.step", "other", {}, "replicated");

  Program *worker = plan.add_programs();
  worker->set_name("worker");
  worker->add_tasks("worker:0");
  worker->add_tasks("worker:1");
  worker->set_ir(kWorkerIr);
  for (int i = 0; i < 2; ++i) {
    Program *ps = plan.add_programs();
    ps->set_name("ps:" + std::to_string(i));
    ps->add_tasks("ps:" + std::to_string(i));
    ps->set_ir(psIr(i));
  }

  CollectiveGroup *group = plan.add_groups();
  group->set_name("workers");
  group->add_tasks("worker:0");
  group->add_tasks("worker:1");
  Bucket *bucket = group->add_buckets();
  bucket->set_id(0);
  bucket->add_values("d.w");
  bucket->add_values("d.b");
  bucket->add_variables("w");
  bucket->add_variables("b");
  bucket->set_bytes(360);
  Bucket *loss = group->add_buckets();
  loss->set_id(-1);
  loss->add_values("loss.mean");
  loss->set_bytes(4);

  RunConfig *run = plan.mutable_run();
  run->set_global_batch(64);
  run->set_steps(100);
  run->set_seed(7);
  run->set_optimizer("adam(lr = 0.001)");
  run->set_data_sharding("contiguous");
  run->set_towers_per_worker(1);
  run->set_job_token(kJobToken);

  Estimate *estimate = plan.mutable_estimate();
  estimate->set_local_batch(32);
  for (const Task &task : plan.cluster().tasks()) {
    TaskEstimate *e = estimate->add_tasks();
    e->set_task(task.name());
    bool worker = task.role() == "worker", ps = task.role() == "ps";
    e->set_bytes_sent_per_step(worker ? 2124 : ps ? 1280 : 0);
    e->set_bytes_received_per_step(worker ? 1644 : ps ? 1920 : 0);
    e->set_parameter_bytes(worker ? 360 : ps ? 4800 : 0);
    e->set_activation_bytes(worker ? 8192 : 0);
    e->set_flops_per_step(worker ? 2.5e6 : 0);
  }
  for (const Host &h : plan.cluster().hosts()) {
    LinkEstimate *l = estimate->add_links();
    l->set_host(h.name());
    l->set_bytes_out_per_step(2000);
    l->set_bytes_in_per_step(1500);
    l->set_seconds_per_step(h.bandwidth_bits_per_sec() ? 1.6e-6 : 0);
  }
  TableEstimate *table = estimate->add_tables();
  table->set_variable("emb");
  table->set_rows_per_step(40);
  table->set_source("uniform draws");
  return plan;
}

std::string dump(const Plan &plan, DumpFormat format, llvm::StringRef task = "") {
  auto out = dumpPlan(plan, format, task);
  if (!out) {
    ADD_FAILURE() << llvm::toString(out.takeError());
    return "";
  }
  return *out;
}

// The line of `text` that starts with `prefix` (after indentation), or "".
std::string lineStarting(const std::string &text, const std::string &prefix) {
  llvm::SmallVector<llvm::StringRef, 64> lines;
  llvm::StringRef(text).split(lines, '\n');
  for (llvm::StringRef line : lines)
    if (line.ltrim().startswith(prefix))
      return line.str();
  return "";
}

const nlohmann::json *findByName(const nlohmann::json &array, const std::string &name) {
  for (const auto &item : array)
    if (item.at("name") == name)
      return &item;
  return nullptr;
}

TEST(PlanDumpTest, JsonHasTheDocumentedKeysAndValues) {
  nlohmann::json j = nlohmann::json::parse(dump(samplePlan(), DumpFormat::Json));
  for (const char *key : {"version", "model", "source", "strategy", "replication", "hosts",
                          "variables", "tasks", "buckets", "estimate", "run"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["strategy"], "hybrid");
  EXPECT_EQ(j["replication"], "between-graph");

  const auto *emb = findByName(j["variables"], "emb");
  ASSERT_TRUE(emb);
  EXPECT_EQ((*emb)["bytes"], 3200);
  EXPECT_EQ((*emb)["shape"], nlohmann::json({100, 8}));
  EXPECT_EQ((*emb)["placement"]["type"], "ps");
  EXPECT_TRUE((*emb)["placement"]["bucket"].is_null());
  ASSERT_EQ((*emb)["placement"]["shards"].size(), 2u);
  EXPECT_EQ((*emb)["placement"]["shards"][1]["task"], "ps:1");
  EXPECT_EQ((*emb)["placement"]["shards"][1]["rows"], nlohmann::json({50, 100}));
  EXPECT_EQ((*emb)["placement"]["shards"][1]["bytes"], 1600);
  EXPECT_EQ((*emb)["state"], nlohmann::json({"emb.adam.m", "emb.adam.v"}));
  EXPECT_FALSE(emb->contains("state_of"));
  const auto *w = findByName(j["variables"], "w");
  ASSERT_TRUE(w);
  EXPECT_EQ((*w)["placement"]["type"], "allreduce");
  EXPECT_EQ((*w)["placement"]["bucket"], 0);
  EXPECT_TRUE((*w)["placement"]["shards"].empty());
  EXPECT_EQ((*findByName(j["variables"], "w.adam.v"))["state_of"], "w");

  ASSERT_EQ(j["buckets"].size(), 2u);
  EXPECT_EQ(j["buckets"][0]["group"], "workers");
  EXPECT_EQ(j["buckets"][0]["id"], 0);
  EXPECT_EQ(j["buckets"][0]["variables"], nlohmann::json({"w", "b"}));
  EXPECT_EQ(j["buckets"][0]["values"], nlohmann::json({"d.w", "d.b"}));
  EXPECT_EQ(j["buckets"][0]["bytes"], 360);
  EXPECT_EQ(j["buckets"][1]["id"], -1);

  ASSERT_EQ(j["tasks"].size(), 5u);
  const auto *worker = findByName(j["tasks"], "worker:1");
  ASSERT_TRUE(worker);
  EXPECT_EQ((*worker)["role"], "worker");
  EXPECT_EQ((*worker)["host"], "host1");
  EXPECT_EQ((*worker)["address"], "10.0.0.2");
  EXPECT_EQ((*worker)["port"], 6001);
  EXPECT_EQ((*worker)["devices"], nlohmann::json({"cpu:0"}));
  EXPECT_EQ((*worker)["program"], "worker");
  EXPECT_EQ((*worker)["estimate"]["bytes_sent_per_step"], 2124);
  EXPECT_EQ((*worker)["estimate"]["flops_per_step"], 2.5e6);
  const auto &comm = (*worker)["communication"];
  ASSERT_EQ(comm.size(), 4u);
  EXPECT_EQ(comm[0]["op"], "ps_pull_rows");
  EXPECT_EQ(comm[0]["variable"], "emb");
  EXPECT_EQ(comm[0]["peers"][0]["task"], "ps:0");
  EXPECT_EQ(comm[0]["peers"][0]["rows"], nlohmann::json({0, 50}));
  // 40 rows a step, half of them on each shard: 20 indices out, 20 rows of 32 bytes back.
  EXPECT_EQ(comm[0]["peers"][0]["bytes_sent_per_step"], 160);
  EXPECT_EQ(comm[0]["bytes_received_per_step"], 1280);
  EXPECT_EQ(comm[1]["op"], "ps_push_rows");
  EXPECT_EQ(comm[1]["bytes_sent_per_step"], 1600);
  EXPECT_EQ(comm[2]["op"], "all_reduce");
  EXPECT_EQ(comm[2]["group"], "workers");
  EXPECT_EQ(comm[2]["bucket"], 0);
  EXPECT_EQ(comm[2]["values"], 2);
  EXPECT_EQ(comm[2]["bytes"], 360);
  EXPECT_EQ(comm[2]["peers"][0]["task"], "worker:0");
  EXPECT_EQ(comm[2]["bytes_sent_per_step"], 360);
  EXPECT_EQ(comm[3]["bucket"], -1);

  const auto *ps = findByName(j["tasks"], "ps:1");
  ASSERT_TRUE(ps);
  ASSERT_EQ((*ps)["communication"].size(), 2u);
  EXPECT_EQ((*ps)["communication"][0]["op"], "ps_pull_rows");
  EXPECT_EQ((*ps)["communication"][0]["peers"].size(), 2u);
  EXPECT_EQ((*ps)["communication"][0]["bytes_sent_per_step"], 1280);

  EXPECT_EQ(j["estimate"]["bytes_per_step"]["worker:0"], 2124 + 1644);
  EXPECT_EQ(j["estimate"]["bytes_per_step"]["ps:1"], 1280 + 1920);
  EXPECT_EQ(j["estimate"]["links"][0]["host"], "host0");
  EXPECT_EQ(j["estimate"]["tables"][0]["rows_per_step"], 40);
  EXPECT_EQ(j["run"]["global_batch"], 64);
  EXPECT_EQ(j["run"]["optimizer"], "adam(lr = 0.001)");
  EXPECT_FALSE(j["run"].contains("job_token"));
}

TEST(PlanDumpTest, TextNamesEachVariableWithItsPlacementAndBytes) {
  std::string text = dump(samplePlan(), DumpFormat::Text);
  std::string emb = lineStarting(text, "emb ");
  EXPECT_NE(emb.find("ps:0 rows 0..50, ps:1 rows 50..100"), std::string::npos) << text;
  EXPECT_NE(emb.find("3.2 kB"), std::string::npos) << emb;
  EXPECT_NE(emb.find("+ 2 adam slots (6.4 kB)"), std::string::npos) << emb;
  std::string w = lineStarting(text, "w ");
  EXPECT_NE(w.find("all-reduce (bucket 0)"), std::string::npos) << text;
  EXPECT_NE(w.find("320 B"), std::string::npos) << w;
  EXPECT_NE(lineStarting(text, "b ").find("all-reduce (bucket 0)"), std::string::npos);
  EXPECT_NE(lineStarting(text, "adam.step ").find("replicated"), std::string::npos);
  // Optimizer state is folded under its variable, not listed on its own.
  EXPECT_EQ(lineStarting(text, "emb.adam.m"), "");
  EXPECT_NE(lineStarting(text, "all_reduce ").find("bucket 0 (2 values, 360 B)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("hybrid, between-graph replication"), std::string::npos);
  EXPECT_NE(text.find("64 global, 32 per worker"), std::string::npos);
  EXPECT_NE(lineStarting(text, "host0 ").find("10gbit"), std::string::npos);
}

// With gradient accumulation the header shows the micro-batches, and each worker's estimate the
// activations of one micro-batch and what a whole local batch would have needed beyond them.
TEST(PlanDumpTest, AccumulationShowsMicroBatchAndMemorySaved) {
  Plan plan = samplePlan();
  plan.mutable_run()->set_accumulate(4);
  plan.mutable_estimate()->set_micro_batch(8);
  for (TaskEstimate &e : *plan.mutable_estimate()->mutable_tasks())
    if (e.activation_bytes() > 0)
      e.set_activation_bytes_saved(3 * e.activation_bytes());
  std::string text = dump(plan, DumpFormat::Text);
  EXPECT_EQ(
      lineStarting(text, "batch"),
      "batch     64 global, 32 per worker in 4 micro-batches of 8 (gradients accumulated, one "
      "optimizer step)");
  EXPECT_NE(
      lineStarting(text, "estimate").find("activations 8.2 kB (one micro-batch; 24.6 kB saved)"),
      std::string::npos)
      << text;
  nlohmann::json j = nlohmann::json::parse(dump(plan, DumpFormat::Json));
  EXPECT_EQ(j["run"]["accumulate"], 4);
  EXPECT_EQ(j["estimate"]["micro_batch"], 8);
  const auto *worker = findByName(j["tasks"], "worker:0");
  ASSERT_TRUE(worker);
  EXPECT_EQ((*worker)["estimate"]["activation_bytes_saved"], 3 * 8192.0);
}

// A plan compiled with a schedule and the linear scaling rule says the rate, where it comes from
// and the schedule; without either the text has no `lr` line.
TEST(PlanDumpTest, ScheduleAndScaledRateShowInTextAndJson) {
  EXPECT_EQ(lineStarting(dump(samplePlan(), DumpFormat::Text), "lr "), "");
  Plan plan = samplePlan();
  RunConfig *run = plan.mutable_run();
  const std::string schedule = "[warmup_linear(steps = 5), cosine(total = 95)]";
  run->set_optimizer("adam(lr = 0.0005, schedule = " + schedule + ")");
  run->set_lr_scale_rule("linear");
  run->set_lr_base_batch(128);
  run->set_base_lr(0.001);
  run->set_lr(0.0005);
  run->set_lr_schedule(schedule);
  std::string text = dump(plan, DumpFormat::Text);
  EXPECT_EQ(lineStarting(text, "lr "),
            "lr        5e-04 = 0.001 × 64 / 128 (linear scaling rule), schedule " + schedule)
      << text;
  EXPECT_NE(lineStarting(text, "run ").find("schedule = " + schedule), std::string::npos) << text;
  nlohmann::json j = nlohmann::json::parse(dump(plan, DumpFormat::Json));
  EXPECT_EQ(j["run"]["lr"], 0.0005);
  EXPECT_EQ(j["run"]["base_lr"], 0.001);
  EXPECT_EQ(j["run"]["lr_scale_rule"], "linear");
  EXPECT_EQ(j["run"]["lr_base_batch"], 128);
  EXPECT_EQ(j["run"]["lr_schedule"], schedule);
}

TEST(PlanDumpTest, SynchronizationShowsInTextAndJson) {
  const std::string exact = dump(samplePlan(), DumpFormat::Text);
  EXPECT_EQ(lineStarting(exact, "sync "), "") << exact;
  nlohmann::json j = nlohmann::json::parse(dump(samplePlan(), DumpFormat::Json));
  EXPECT_EQ(j["run"]["sync"], "sync");
  EXPECT_EQ(j["run"]["backup_workers"], 0);
  EXPECT_TRUE(j["run"]["max_staleness"].is_null());

  Plan plan = samplePlan(); // two workers
  plan.mutable_run()->set_sync("async");
  plan.mutable_run()->set_max_staleness(3);
  std::string text = dump(plan, DumpFormat::Text);
  EXPECT_EQ(lineStarting(text, "sync "),
            "sync      async: parameter servers apply each worker's push on arrival (all-reduce "
            "variables stay synchronous); a worker runs at most 3 steps ahead of the slowest")
      << text;
  j = nlohmann::json::parse(dump(plan, DumpFormat::Json));
  EXPECT_EQ(j["run"]["sync"], "async");
  EXPECT_EQ(j["run"]["max_staleness"], 3);

  plan = samplePlan();
  plan.mutable_run()->set_sync("sync");
  plan.mutable_run()->set_backup_workers(1);
  text = dump(plan, DumpFormat::Text);
  EXPECT_NE(lineStarting(text, "sync ")
                .find("sync with 1 backup worker: each step applies the "
                      "first 1 of 2 workers' gradients"),
            std::string::npos)
      << text;
  EXPECT_EQ(nlohmann::json::parse(dump(plan, DumpFormat::Json))["run"]["backup_workers"], 1);
}

TEST(PlanDumpTest, TaskFilterShowsOnlyThatTask) {
  std::string text = dump(samplePlan(), DumpFormat::Text, "ps:1");
  // Task sections start at column 0 with the task's name.
  for (const char *other : {"\ncoordinator:0 ", "\nworker:0 ", "\nworker:1 ", "\nps:0 "})
    EXPECT_EQ(text.find(other), std::string::npos) << other << "\n" << text;
  EXPECT_NE(text.find("\nps:1  ps on host1, 10.0.0.2:6002"), std::string::npos) << text;
  EXPECT_NE(lineStarting(text, "holds").find("emb  rows 50..100"), std::string::npos) << text;
  // Only the variables ps:1 touches.
  EXPECT_NE(lineStarting(text, "emb "), "");
  EXPECT_EQ(lineStarting(text, "w "), "");

  nlohmann::json j = nlohmann::json::parse(dump(samplePlan(), DumpFormat::Json, "worker:0"));
  ASSERT_EQ(j["tasks"].size(), 1u);
  EXPECT_EQ(j["tasks"][0]["name"], "worker:0");
  EXPECT_EQ(j["estimate"]["bytes_per_step"].size(), 1u);
  EXPECT_TRUE(findByName(j["variables"], "w"));
  EXPECT_FALSE(findByName(j["variables"], "adam.step"));
}

// Runs Graphviz on `dot`; false with the reason in `why` when it refuses it.
bool renders(const std::string &dot, std::string &why) {
  llvm::SmallString<128> in, out;
  if (llvm::sys::fs::createTemporaryFile("plan", "dot", in) ||
      llvm::sys::fs::createTemporaryFile("plan", "svg", out)) {
    why = "cannot create temporary files";
    return false;
  }
  std::ofstream(in.c_str()) << dot;
  std::string command = "/usr/bin/dot -Tsvg '" + in.str().str() + "' -o '" + out.str().str() +
                        "' 2>'" + out.str().str() + ".err'";
  int status = std::system(command.c_str());
  std::ifstream err(out.str().str() + ".err");
  why.assign(std::istreambuf_iterator<char>(err), {});
  uint64_t size = 0;
  llvm::sys::fs::file_size(out, size);
  for (const std::string &p : {in.str().str(), out.str().str(), out.str().str() + ".err"})
    std::remove(p.c_str());
  return status == 0 && size > 0;
}

TEST(PlanDumpTest, DotRendersWithAClusterPerHost) {
  if (!llvm::sys::fs::exists("/usr/bin/dot"))
    GTEST_SKIP() << "Graphviz's dot is not installed";
  Plan plan = samplePlan();
  plan.set_model("tiny \"quoted\" \\ model\nline"); // labels must escape these
  std::string dot = dump(plan, DumpFormat::Dot);
  EXPECT_EQ(dot.rfind("digraph plan {", 0), 0u);
  EXPECT_NE(dot.find("subgraph cluster_0"), std::string::npos);
  EXPECT_NE(dot.find("subgraph cluster_1"), std::string::npos);
  EXPECT_NE(dot.find("\"ps:1\" [shape=cylinder"), std::string::npos) << dot;
  EXPECT_NE(dot.find("emb rows 50..100  1.6 kB"), std::string::npos) << dot;
  EXPECT_NE(dot.find("\"worker:0\" -> \"ps:1\""), std::string::npos) << dot;
  std::string why;
  EXPECT_TRUE(renders(dot, why)) << why << "\n" << dot;
  std::string one = dump(plan, DumpFormat::Dot, "worker:1");
  EXPECT_EQ(one.find("\"worker:0\" -> \"ps:1\""), std::string::npos) << one;
  EXPECT_TRUE(renders(one, why)) << why << "\n" << one;
}

// Hosts of two addresses on one machine (network namespaces): the header counts the machine,
// JSON gives each host's machine (its address when the cluster names none), DOT labels it.
TEST(PlanDumpTest, HostsSharingAMachineSayIt) {
  Plan plan = samplePlan();
  nlohmann::json before = nlohmann::json::parse(dump(plan, DumpFormat::Json));
  EXPECT_EQ(before["hosts"][1]["machine"], "10.0.0.2");
  EXPECT_EQ(dump(plan, DumpFormat::Text).find(" machine"), std::string::npos);
  for (Host &host : *plan.mutable_cluster()->mutable_hosts())
    host.set_machine("box");
  std::string text = dump(plan, DumpFormat::Text);
  EXPECT_NE(text.find("on 2 hosts of 1 machine\n"), std::string::npos) << text;
  nlohmann::json j = nlohmann::json::parse(dump(plan, DumpFormat::Json));
  EXPECT_EQ(j["hosts"][0]["machine"], "box");
  EXPECT_EQ(j["hosts"][1]["machine"], "box");
  EXPECT_NE(dump(plan, DumpFormat::Dot).find("machine box"), std::string::npos);
}

TEST(PlanDumpTest, JobTokenAppearsInNoOutput) {
  Plan plan = samplePlan();
  for (DumpFormat format : {DumpFormat::Text, DumpFormat::Json, DumpFormat::Dot})
    for (const char *task : {"", "worker:0", "coordinator:0"})
      EXPECT_EQ(dump(plan, format, task).find(kJobToken), std::string::npos);
}

TEST(PlanDumpTest, UnknownTaskIsAnErrorNamingIt) {
  auto out = dumpPlan(samplePlan(), DumpFormat::Text, "worker:7");
  ASSERT_FALSE(out);
  std::string message = llvm::toString(out.takeError());
  EXPECT_NE(message.find("'worker:7'"), std::string::npos) << message;
  EXPECT_NE(message.find("ps:1"), std::string::npos) << message;
}

TEST(PlanDumpTest, ProgramThatDoesNotParseIsAnError) {
  Plan plan = samplePlan();
  plan.mutable_programs(0)->set_ir("model tiny {");
  auto out = dumpPlan(plan, DumpFormat::Json);
  ASSERT_FALSE(out);
  EXPECT_NE(llvm::toString(out.takeError()).find("<plan program worker>"), std::string::npos);
}

TEST(PlanDumpTest, ParseDumpFormatNamesTheChoices) {
  EXPECT_EQ(*parseDumpFormat("text"), DumpFormat::Text);
  EXPECT_EQ(*parseDumpFormat("json"), DumpFormat::Json);
  EXPECT_EQ(*parseDumpFormat("dot"), DumpFormat::Dot);
  auto bad = parseDumpFormat("xml");
  ASSERT_FALSE(bad);
  std::string message = llvm::toString(bad.takeError());
  EXPECT_NE(message.find("'xml'"), std::string::npos) << message;
  EXPECT_NE(message.find("text, json, dot"), std::string::npos) << message;
}

} // namespace
} // namespace prism::plan
