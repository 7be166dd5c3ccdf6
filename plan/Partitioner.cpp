// The partitioner: passes, then one program per task, then the plan (see Partitioner.h).
#include "plan/Partitioner.h"

#include <map>
#include <random>

#include "ir/Collectives.h"
#include "ir/Diagnostic.h"
#include "ir/Initializer.h"
#include "ir/OpTable.h"
#include "ir/Printer.h"
#include "ir/VariablePlacement.h"
#include "plan/AutoParallel.h"
#include "plan/CommunicationCost.h"
#include "plan/ElasticRange.h"
#include "plan/Estimate.h"
#include "plan/PartitionSearch.h"
#include "plan/PlanFile.h"
#include "plan/PlanVariables.h"
#include "plan/PlanVerifier.h"
#include "support/Memory.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

namespace prism::plan {
namespace {

using ir::Module;
using ir::Op;

// A fresh random job token (32 hex digits).
std::string makeJobToken() {
  std::random_device device;
  std::string token;
  const char *hex = "0123456789abcdef";
  for (int i = 0; i < 32; ++i)
    token += hex[device() % 16];
  return token;
}

// Towers per worker: one, or in-graph the devices of each worker (the same on every worker).
// The global batch must give every tower an example.
llvm::Expected<int64_t> towersPerWorker(const cluster::Cluster &cluster, int64_t globalBatch) {
  const int64_t workers = cluster.numWorkers();
  if (workers < 1)
    return ir::makeError("the cluster has no worker task");
  if (globalBatch < workers)
    return ir::makeError("--batch " + std::to_string(globalBatch) + " is smaller than the " +
                         std::to_string(workers) +
                         " workers: every worker needs at least one example per step");
  int64_t towers = 1;
  if (cluster.replication == cluster::Replication::InGraph) {
    auto workerTasks = cluster.workers();
    towers = static_cast<int64_t>(workerTasks.front()->devices.size());
    for (const cluster::Task *task : workerTasks)
      if (static_cast<int64_t>(task->devices.size()) != towers)
        return ir::makeError("in-graph replication needs the same number of devices on every "
                             "host: " +
                             workerTasks.front()->name + " has " + std::to_string(towers) + ", " +
                             task->name + " has " + std::to_string(task->devices.size()));
  }
  if (globalBatch < workers * towers)
    return ir::makeError("--batch " + std::to_string(globalBatch) + " is smaller than " +
                         std::to_string(workers * towers) + " towers in all");
  return towers;
}

// Every micro-batch of every worker needs an example for each of its towers.
llvm::Error checkAccumulation(int64_t accumulate, int64_t globalBatch, int64_t towersInAll) {
  if (accumulate < 1)
    return ir::makeError("--accumulate " + std::to_string(accumulate) +
                         ": expected a number of micro-batches per step, at least 1");
  if (globalBatch < towersInAll * accumulate)
    return ir::makeError("--accumulate " + std::to_string(accumulate) + " with --batch " +
                         std::to_string(globalBatch) + " over " + std::to_string(towersInAll) +
                         " towers in all leaves micro-batches without examples: give a --batch "
                         "of at least " +
                         std::to_string(towersInAll * accumulate) + " or a smaller --accumulate");
  return llvm::Error::success();
}

ParallelPipelineOptions pipelineOptions(const cluster::Cluster &cluster, int64_t towers,
                                        const PartitionOptions &options) {
  ParallelPipelineOptions pipeline;
  pipeline.replicate.workers = cluster.numWorkers();
  pipeline.replicate.devices = towers;
  pipeline.placement = options.placement;
  pipeline.placement.psTasks = cluster.numParameterServers();
  pipeline.routing = options.routing;
  pipeline.fuse = options.fuse;
  pipeline.precision = options.precision;
  // The plan verifier verifies the programs made from the result: every op of it is in one.
  pipeline.verify = false;
  return pipeline;
}

// Whether every host of the cluster is this machine (loopback addresses, as `local:N` makes).
bool onThisMachine(const cluster::Cluster &cluster) {
  for (const cluster::Host &host : cluster.hosts)
    if (!llvm::StringRef(host.address).startswith("127."))
      return false;
  return true;
}

// The variables each task will hold against the memory it may use: every task of a local
// cluster shares this machine (its memory, or less with --memory-limit); on other clusters each
// task is held to --memory-limit as given, when it is (Prism does not know remote machines'
// memory). The plan is not written when it fails.
llvm::Error checkTaskMemory(const Plan &plan, const cluster::Cluster &cluster) {
  const bool local = onThisMachine(cluster);
  auto limit = support::memoryLimit();
  auto userLimit = support::userMemoryLimit();
  if (!limit)
    return limit.takeError();
  if (!userLimit)
    return userLimit.takeError();
  if (!local && !*userLimit)
    return llvm::Error::success();
  double total = 0;
  const TaskEstimate *largest = nullptr;
  for (const TaskEstimate &t : plan.estimate().tasks()) {
    total += t.parameter_bytes();
    if (!largest || t.parameter_bytes() > largest->parameter_bytes())
      largest = &t;
    if (!local)
      if (auto e =
              support::checkFits(t.parameter_bytes(), "the variables of " + t.task(), **userLimit))
        return ir::withNote(std::move(e), "add parameter servers, or hosts with more memory");
  }
  if (!local || !largest)
    return llvm::Error::success();
  return ir::withNote(
      support::checkFits(total, "the variables of every task on this machine (" + largest->task() +
                                    ": " + support::formatBytes(largest->parameter_bytes()) + ")"),
      "a local cluster holds every task on this machine: use a smaller model, "
      "or a cluster file with more hosts");
}

// The variable an op writes as operand 0 (updates, assign), or null.
ir::Variable *writtenVariable(const Op &op) {
  if (op.numOperands() == 0 || !op.def().writes(0))
    return nullptr;
  return op.operand(0)->variable();
}

// An optimizer update of a variable the parameter servers hold: it runs there.
bool updatesPsVariable(const Op &op) {
  ir::Variable *written = writtenVariable(op);
  return written && op.def().has(ir::kOptimizerUpdate) && ir::onParameterServers(*written);
}

// Erases every op not in `keep`, readers before what they read.
void eraseOpsNotIn(Module &module, const llvm::DenseSet<const Op *> &keep) {
  std::vector<Op *> doomed;
  for (const auto &op : module.ops())
    if (!keep.count(op.get()))
      doomed.push_back(op.get());
  for (auto it = doomed.rbegin(); it != doomed.rend(); ++it)
    module.eraseOp(*it);
}

// Erases the variables and inputs no op reads any more, and the variables' gradient
// declarations.
void eraseUnreadVariables(Module &module) {
  llvm::DenseSet<const ir::Value *> read;
  for (const auto &op : module.ops())
    for (ir::Value *v : op->operands())
      read.insert(v);
  // Sets and one pass each: a PS program cut from a module of 30,000 variables drops nearly all
  // of them, and erasing them one by one was quadratic.
  llvm::DenseSet<const ir::Variable *> unread;
  for (const auto &variable : module.variables())
    if (!read.count(variable->value.get()))
      unread.insert(variable.get());
  llvm::erase_if(module.gradients, [&](const ir::Gradient &g) { return unread.count(g.variable); });
  module.eraseVariablesIf([&](const ir::Variable &v) { return unread.count(&v) != 0; });
  module.eraseInputsIf([&](const ir::Input &i) { return !read.count(i.value.get()); });
}

// The worker program: the routed module without what runs on the PS tasks, and without what
// only those ops read.
llvm::Expected<std::unique_ptr<Module>> workerProgram(std::unique_ptr<Module> worker) {
  llvm::DenseSet<const Op *> keep;
  for (const auto &op : worker->ops())
    if (!op->def().has(ir::kOnParameterServer) && !updatesPsVariable(*op))
      keep.insert(op.get());
  eraseOpsNotIn(*worker, keep);
  // Not verified here: verifyPlan verifies every program.
  if (auto e = runPipeline(*worker, "dce", {}, nullptr, /*verify=*/false))
    return std::move(e);
  eraseUnreadVariables(*worker);
  return std::move(worker);
}

// Where a PS program's ops are wrong: the model's file, for the op's location.
struct PsProgramContext {
  std::string sourceFile;
  std::string taskName;
};

// An op PS task `context.taskName` needs must not read an input or communicate like a worker.
llvm::Error checkRunsOnPs(const Op &op, const PsProgramContext &context) {
  auto needed = [&](const std::string &but) {
    return ir::makeError(context.sourceFile, op.loc,
                         "'" + std::string(op.name()) + "' is needed on " + context.taskName +
                             " to update its variables, but " + but);
  };
  for (ir::Value *v : op.operands())
    if (v->kind() == ir::ValueKind::Input)
      return needed("it reads the input '" + v->name() + "'");
  if (op.def().has(ir::kCommunication) && !op.def().has(ir::kOnParameterServer))
    return needed("it runs on the workers");
  return llvm::Error::success();
}

// Adds the ops in `work` and their ancestors to `keep`, checking each can run on the PS task.
llvm::Error keepWithAncestors(std::vector<const Op *> work, llvm::DenseSet<const Op *> &keep,
                              const PsProgramContext &context) {
  while (!work.empty()) {
    const Op *op = work.back();
    work.pop_back();
    if (!keep.insert(op).second)
      continue;
    if (auto e = checkRunsOnPs(*op, context))
      return e;
    for (ir::Value *v : op->operands())
      if (v->kind() == ir::ValueKind::OpResult)
        work.push_back(v->definingOp());
  }
  return llvm::Error::success();
}

// The writes of replicated state (the step counter) that the kept ops read but `keep` lacks.
std::vector<const Op *> replicatedWritesRead(const Module &module,
                                             const llvm::DenseSet<const Op *> &keep) {
  llvm::DenseSet<const ir::Value *> read;
  for (const Op *op : keep)
    for (ir::Value *v : op->operands())
      read.insert(v);
  std::vector<const Op *> writes;
  for (const auto &op : module.ops()) {
    ir::Variable *written = writtenVariable(*op);
    if (!written || keep.count(op.get()) || !read.count(written->value.get()))
      continue;
    auto placement = ir::placementOf(*written);
    if (placement && placement->where == ir::Placement::Replicated)
      writes.push_back(op.get());
  }
  return writes;
}

// The ops of PS task `task`: the updates of the variables it holds rows of, what they read,
// and the replicated state they read with what that reads, until nothing changes.
llvm::Expected<llvm::DenseSet<const Op *>> opsOfPsTask(const Module &module, int64_t task,
                                                       const PsProgramContext &context) {
  std::vector<const Op *> work;
  for (const auto &op : module.ops())
    if (updatesPsVariable(*op) && !ir::placementOf(*writtenVariable(*op))->rangesOn(task).empty())
      work.push_back(op.get());
  llvm::DenseSet<const Op *> keep;
  while (!work.empty()) {
    if (auto e = keepWithAncestors(std::move(work), keep, context))
      return std::move(e);
    work = replicatedWritesRead(module, keep);
  }
  return std::move(keep);
}

// Each PS-held variable shrinks to the rows `task` holds: its type has those rows only, and its
// held rows (ir/VariablePlacement.h) keep the whole table's shape (initial values depend on it)
// and the ranges. The ops' types are inferred again.
llvm::Error shrinkToHeldRows(Module &ps, int64_t task) {
  for (const auto &variable : ps.variables()) {
    auto placement = ir::placementOf(*variable);
    if (!placement || placement->where != ir::Placement::ParameterServer)
      continue;
    ir::HeldRows held{variable->type().dims, placement->rangesOn(task)};
    ir::TensorType type = variable->type();
    if (!type.isScalar())
      type.dims[0] = held.count();
    ir::setPlacement(*variable, {ir::Placement::ParameterServer, {}});
    ir::setHeldRows(*variable, held);
    variable->value->setType(type);
  }
  for (const auto &op : ps.ops())
    for (unsigned i = 0; i < op->numResults(); ++i)
      op->result(i)->setType(std::nullopt);
  return runPipeline(ps, "infer-shapes", {}, nullptr, /*verify=*/false);
}

// The program of PS task `task`: the updates of the variables it holds rows of, and what they
// read (the combined gradients, the step counter), over its rows only.
llvm::Expected<std::unique_ptr<Module>> psProgram(const Module &routed, const cluster::Task &task) {
  std::string name = routed.name() + ".ps" + std::to_string(task.index);
  auto keep = opsOfPsTask(routed, task.index, {routed.sourceFile(), task.name});
  if (!keep)
    return keep.takeError();
  if (keep->empty())
    return std::make_unique<Module>(name);
  // Only the kept ops are copied: a PS task's part of a large model is small.
  auto ps = routed.cloneOps(*keep);
  ps->setName(name);
  eraseUnreadVariables(*ps);
  if (auto e = shrinkToHeldRows(*ps, task.index))
    return std::move(e);
  return std::move(ps);
}

void fillCluster(const cluster::Cluster &cluster, Cluster &out) {
  for (const cluster::Host &host : cluster.hosts) {
    Host *h = out.add_hosts();
    h->set_name(host.name);
    h->set_address(host.address);
    for (const cluster::Device &d : host.devices)
      h->add_devices(d.str());
    h->set_bandwidth_bits_per_sec(host.bandwidthBitsPerSec);
    h->set_machine(host.machine);
  }
  for (const cluster::Task &task : cluster.tasks) {
    Task *t = out.add_tasks();
    t->set_name(task.name);
    t->set_role(cluster::roleName(task.role).str());
    t->set_index(task.index);
    t->set_host(task.host);
    t->set_address(task.address);
    t->set_port(task.port);
    for (const cluster::Device &d : task.devices)
      t->add_devices(d.str());
  }
}

// Optimizer state: the operands an update writes besides its variable, by name, and the
// variable each belongs to.
std::map<std::string, std::string> optimizerStateOf(const Module &routed) {
  std::map<std::string, std::string> stateOf;
  for (const auto &op : routed.ops())
    if (op->def().has(ir::kOptimizerUpdate))
      for (unsigned i = 1; i < op->numOperands(); ++i)
        if (op->def().writes(i))
          stateOf[op->operand(i)->name()] = op->operand(0)->name();
  return stateOf;
}

// The plan's kind of a variable: classify-variables' for a trained one, else state or other.
std::string planKind(const ir::Variable &variable, bool isState) {
  if (variable.trainable()) {
    auto kind = ir::variableKind(variable);
    return kind ? ir::variableUsageName(*kind).str() : "";
  }
  return isState ? "state" : "other";
}

void fillPlacement(const ir::Variable &variable, const cluster::Cluster &cluster, Variable &v) {
  auto placement = ir::placementOf(variable);
  if (!placement)
    return;
  v.set_placement(ir::placementName(placement->where).str());
  auto psTasks = cluster.parameterServers();
  for (const ir::PsShard &shard : placement->shards) {
    Shard *s = v.add_shards();
    s->set_task(psTasks[static_cast<size_t>(shard.task)]->name);
    s->set_row_begin(shard.rows.begin);
    s->set_row_end(shard.rows.end);
  }
}

void fillVariables(const Module &routed, const cluster::Cluster &cluster, Plan &plan) {
  std::map<std::string, std::string> stateOf = optimizerStateOf(routed);
  for (const auto &variable : routed.variables()) {
    Variable *v = plan.add_variables();
    v->set_name(variable->name());
    const ir::TensorType &type = variable->type();
    v->set_dtype(ir::dtypeName(type.dtype).str());
    for (int64_t d : type.dims)
      v->add_shape(d);
    v->set_bytes(type.numElements() * ir::dtypeBytes(type.dtype));
    v->set_trainable(variable->trainable());
    auto state = stateOf.find(variable->name());
    v->set_kind(planKind(*variable, state != stateOf.end()));
    if (state != stateOf.end())
      v->set_state_of(state->second);
    fillPlacement(*variable, cluster, *v);
  }
}

// The worker group and its buckets, read off the worker program's all_reduce ops.
void fillGroups(const Module &worker, const cluster::Cluster &cluster, Plan &plan) {
  CollectiveGroup *group = plan.add_groups();
  group->set_name(ir::kWorkerGroup);
  for (const cluster::Task *task : cluster.workers())
    group->add_tasks(task->name);
  std::map<const ir::Value *, std::string> gradientOf;
  for (const ir::Gradient &g : worker.gradients)
    gradientOf[g.value] = g.variable->name();
  for (const auto &op : worker.ops()) {
    if (op->name() != "all_reduce")
      continue;
    Bucket *bucket = group->add_buckets();
    bucket->set_id(op->attrs.getInt("bucket"));
    int64_t bytes = 0;
    for (unsigned i = 0; i < op->numResults(); ++i) {
      const ir::Value *r = op->result(i);
      bucket->add_values(r->name());
      auto g = gradientOf.find(r);
      if (g != gradientOf.end())
        bucket->add_variables(g->second);
      bytes += r->type().numElements() * ir::dtypeBytes(r->type().dtype);
    }
    bucket->set_bytes(bytes);
  }
}

// The worker program, run by every worker, with the group its all_reduce ops form: made from
// the routed module itself, the last use of it.
llvm::Expected<std::unique_ptr<Module>>
addWorkerProgram(std::unique_ptr<Module> routed, const cluster::Cluster &cluster, Plan &plan) {
  auto worker = workerProgram(std::move(routed));
  if (!worker)
    return worker.takeError();
  Program *entry = plan.add_programs();
  entry->set_name("worker");
  for (const cluster::Task *task : cluster.workers())
    entry->add_tasks(task->name);
  entry->set_ir(ir::printModule(**worker));
  fillGroups(**worker, cluster, plan);
  return worker;
}

// One program per PS task, in PS task order.
llvm::Expected<std::vector<std::unique_ptr<Module>>> psPrograms(const Module &routed,
                                                                const cluster::Cluster &cluster) {
  std::vector<std::unique_ptr<Module>> programs;
  for (const cluster::Task *task : cluster.parameterServers()) {
    auto ps = psProgram(routed, *task);
    if (!ps)
      return ps.takeError();
    programs.push_back(std::move(*ps));
  }
  return std::move(programs);
}

void addPsPrograms(const std::vector<std::unique_ptr<Module>> &programs,
                   const cluster::Cluster &cluster, Plan &plan) {
  size_t i = 0;
  for (const cluster::Task *task : cluster.parameterServers()) {
    Program *entry = plan.add_programs();
    entry->set_name(task->name);
    entry->add_tasks(task->name);
    entry->set_ir(ir::printModule(*programs[i++]));
  }
}

// Whether the worker program pulls or pushes rows of tables on parameter servers.
bool movesRowsOfPsTables(const Module &worker) {
  for (const auto &op : worker.ops())
    if (auto transfer = psTransferOf(op->name()); transfer && movesRows(*transfer))
      return true;
  return false;
}

// A parameter server holds one row range of a table: more ranges than servers cannot run.
llvm::Error checkPartitionCount(int64_t partitions, const cluster::Cluster &cluster) {
  const int64_t servers = static_cast<int64_t>(cluster.parameterServers().size());
  if (servers == 0 || partitions <= servers)
    return llvm::Error::success();
  return ir::makeError("option --partitions " + std::to_string(partitions) +
                       ": a parameter server holds one row range of a table, and the cluster has " +
                       std::to_string(servers) + " PS " + (servers == 1 ? "task" : "tasks") +
                       " (use at most " + std::to_string(servers) + ")");
}

// `scaled` is the model's optimizer with the lr scaling rule applied.
void fillRunConfig(const std::optional<ir::Optimizer> &model,
                   const std::optional<ir::Optimizer> &scaled, const PartitionOptions &options,
                   int64_t towers, RunConfig &run) {
  run.set_global_batch(options.globalBatch);
  run.set_steps(options.steps);
  run.set_seed(options.seed);
  run.set_lr_scale_rule(lrScaleRuleName(options.lrScaling.rule).str());
  run.set_lr_base_batch(options.lrScaling.baseBatch);
  if (scaled) {
    run.set_optimizer(ir::printOptimizer(*scaled));
    run.set_base_lr(model->params.getFloat("lr"));
    run.set_lr(scaled->params.getFloat("lr"));
    if (!scaled->schedule.empty())
      run.set_lr_schedule(ir::printSchedule(scaled->schedule));
  }
  run.set_data_sharding("contiguous");
  run.set_towers_per_worker(static_cast<int32_t>(towers));
  if (options.precision != ir::ComputePrecision::F32)
    run.set_precision(ir::precisionName(options.precision).str());
  run.set_accumulate(static_cast<int32_t>(options.accumulate));
  if (options.compress != ir::ComputePrecision::F32)
    run.set_compress(ir::precisionName(options.compress).str());
  run.set_error_feedback(options.errorFeedback);
  writeSynchronization(options.synchronization, run);
  run.set_elastic_min(options.elasticMin);
  run.set_elastic_max(options.elasticMax);
  run.set_job_token(options.jobToken.empty() ? makeJobToken() : options.jobToken);
}

// The options with what the synchronization asks of placement: backup workers drop late
// gradients, which a ring all-reduce cannot, so every trained variable goes to the parameter
// servers (as TensorFlow's SyncReplicasOptimizer keeps them).
llvm::Expected<PartitionOptions> synchronizedOptions(const PartitionOptions &options,
                                                     const cluster::Cluster &cluster) {
  const Synchronization &sync = options.synchronization;
  if (auto e = checkSynchronization(sync, cluster.numWorkers()))
    return std::move(e);
  PartitionOptions result = options;
  if (sync.backupWorkers == 0)
    return result;
  if (options.placement.strategy == passes::Strategy::AllReduce)
    return ir::makeError("option --backup-workers " + std::to_string(sync.backupWorkers) +
                         ": --strategy allreduce keeps variables in a ring all-reduce, which "
                         "needs every worker each step; backup workers put every trained "
                         "variable on the parameter servers (use --strategy ps or hybrid)");
  result.placement.strategy = passes::Strategy::ParameterServer;
  return result;
}

// What would make workers wait for each other although the synchronization says they need not:
// an all-reduce other than the loss's (which the runtime leaves local then), or, asynchronous,
// no variable on a parameter server to apply pushes.
llvm::Error checkSynchronizedProgram(const Module &worker, const Plan &plan,
                                     const Synchronization &sync) {
  if (sync.mode == SyncMode::Async) {
    for (const Variable &v : plan.variables())
      if (v.trainable() && v.placement() == "ps")
        return llvm::Error::success();
    return ir::makeError("option --sync async: no trained variable is on a parameter server ("
                         "--strategy " +
                         plan.strategy() +
                         " all-reduces every one, and all-reduces stay synchronous): use "
                         "--strategy ps, or hybrid with a sparse table");
  }
  if (sync.backupWorkers == 0)
    return llvm::Error::success();
  for (const auto &op : worker.ops())
    if (op->name() == "all_reduce" && op->attrs.getInt("bucket") != ir::kLossBucket)
      return ir::makeError("option --backup-workers " + std::to_string(sync.backupWorkers) +
                           ": the model all-reduces '" + op->operand(0)->name() +
                           "' over the workers every step (a replica mean, e.g. batch norm over "
                           "the global batch), which needs every worker");
  return llvm::Error::success();
}

// What --partitions search cannot be combined with: each candidate's steps are timed with every
// worker in step (no elastic membership, asynchronous or backup workers), and workers push to
// the servers themselves (local aggregation is left off unless asked for).
llvm::Error checkPartitionSearch(const PartitionOptions &options) {
  const std::string flag = "option --partitions search";
  if (options.elasticMax > 0)
    return ir::makeError(flag + " with --elastic: the candidates are timed by a fixed set of "
                                "workers (leave out one of them)");
  if (!options.synchronization.exact())
    return ir::makeError(flag + " with " + synchronizationFlag(options.synchronization) +
                         ": the candidates are timed in synchronous steps (leave out one of them)");
  if (options.localAggregation == LocalAggregationMode::On)
    return ir::makeError(flag + " with --local-aggregation on: the candidates are timed with each "
                                "worker pushing to the servers (leave out one of them)");
  if (options.partitionSearch->timedSteps < 1 || options.partitionSearch->warmupSteps < 0)
    return ir::makeError("option --search-steps: expected at least 1 timed step, got " +
                         std::to_string(options.partitionSearch->timedSteps));
  return llvm::Error::success();
}

// The most row ranges a candidate may have: a server holds one range of a table, and a table
// has no more ranges than rows. Zero (and why) when the plan has no PS table read by rows.
std::pair<int64_t, std::string> partitionLimit(const Plan &plan, const cluster::Cluster &cluster) {
  int64_t rows = 0;
  for (const Variable &v : plan.variables())
    if (v.trainable() && onParameterServers(v) && (v.kind() == "sparse" || v.kind() == "mixed") &&
        !v.shape().empty())
      rows = std::max(rows, v.shape(0));
  const int64_t servers = cluster.numParameterServers();
  if (rows == 0)
    return {0, ""};
  if (servers <= rows)
    return {servers, "the cluster's " + std::to_string(servers) +
                         " PS tasks: a parameter server holds one row range of a table"};
  return {rows, "the largest PS table's " + std::to_string(rows) + " rows"};
}

// --partitions search: a plan per candidate count; the first one's is the plan's own, and each
// one's PS shards and programs are a candidate (plan/PartitionSearch.h).
llvm::Expected<PartitionResult> partitionWithSearch(const Module &model,
                                                    const cluster::Cluster &cluster,
                                                    const PartitionOptions &requested) {
  if (auto e = checkPartitionSearch(requested))
    return std::move(e);
  PartitionOptions options = requested;
  options.partitionSearch.reset();
  // The candidates differ in the count alone: --strategy auto and --bucket-mb auto take their
  // fixed defaults (which a prediction per candidate could change).
  options.automatic = {};
  if (options.localAggregation == LocalAggregationMode::Auto)
    options.localAggregation = LocalAggregationMode::Off;
  if (options.jobToken.empty())
    options.jobToken = makeJobToken(); // one token for every candidate's plan
  options.placement.partitions = 1;
  auto probe = partition(model, cluster, options);
  if (!probe)
    return probe.takeError();
  auto [limit, reason] = partitionLimit(probe->plan, cluster);
  if (limit == 0)
    return ir::makeError("option --partitions search: the plan (--strategy " +
                         probe->plan.strategy() +
                         ") has no parameter-server table read by rows to partition");
  auto counts = searchCandidates(*requested.partitionSearch, limit, reason);
  if (!counts)
    return counts.takeError();
  std::optional<PartitionResult> result;
  PartitionSearch search;
  for (int64_t count : *counts) {
    options.placement.partitions = count;
    auto compiled = count == 1 ? std::move(probe) : partition(model, cluster, options);
    if (!compiled)
      return compiled.takeError();
    if (result)
      if (auto e = checkSameGroups(result->plan, compiled->plan, count))
        return std::move(e);
    addCandidate(compiled->plan, count, search);
    if (!result)
      result = std::move(*compiled);
  }
  search.set_warmup_steps(static_cast<int32_t>(requested.partitionSearch->warmupSteps));
  search.set_timed_steps(static_cast<int32_t>(requested.partitionSearch->timedSteps));
  *result->plan.mutable_partition_search() = std::move(search);
  return std::move(*result);
}

} // namespace

llvm::Expected<PartitionResult> partition(const ir::Module &model, const cluster::Cluster &cluster,
                                          const PartitionOptions &options) {
  if (options.partitionSearch)
    return partitionWithSearch(model, cluster, options);
  if (options.automatic.any())
    return partitionAutomatically(model, cluster, options);
  auto copy = model.clone();
  copy->setSourceFile(model.sourceFile());
  return partition(std::move(copy), cluster, options);
}

llvm::Expected<PartitionResult> partition(std::unique_ptr<ir::Module> routed,
                                          const cluster::Cluster &cluster,
                                          const PartitionOptions &requested) {
  if (requested.partitionSearch)
    return partitionWithSearch(*routed, cluster, requested);
  if (requested.automatic.any())
    return partitionAutomatically(*routed, cluster, requested);
  auto synchronized = synchronizedOptions(requested, cluster);
  if (!synchronized)
    return synchronized.takeError();
  const PartitionOptions &options = *synchronized;
  const std::string modelName = routed->name(), sourceFile = routed->sourceFile();
  // The programs' text does not carry the model file that relative values files are found from.
  ir::makeValuesFilesAbsolute(*routed);
  const std::optional<ir::Optimizer> optimizer = routed->optimizer;
  auto towers = towersPerWorker(cluster, options.globalBatch);
  if (!towers)
    return towers.takeError();
  if (options.errorFeedback && options.compress == ir::ComputePrecision::F32)
    return ir::makeError("--error-feedback needs --compress fp16 or bf16");
  if (auto e = checkElasticRange(options.elasticMin, options.elasticMax, cluster.numWorkers()))
    return std::move(e);
  if (options.elasticMax > 0 && !options.synchronization.exact())
    return ir::makeError("--elastic " + std::to_string(options.elasticMin) + ":" +
                         std::to_string(options.elasticMax) + " with " +
                         synchronizationFlag(options.synchronization) +
                         ": a membership change redoes a synchronous step on every survivor, "
                         "and these workers are not at one step (leave out one of them)");
  if (auto e = checkPartitionCount(options.placement.partitions, cluster))
    return std::move(e);
  if (auto e = checkAccumulation(options.accumulate, options.globalBatch,
                                 cluster.numWorkers() * *towers))
    return std::move(e);
  PartitionResult result;
  if (auto e = scaleLearningRate(*routed, options.lrScaling, options.globalBatch))
    return std::move(e);
  const std::optional<ir::Optimizer> scaled = routed->optimizer; // lower-optimizer removes it
  if (auto e = parallelize(*routed, pipelineOptions(cluster, *towers, options), &result.statistics))
    return std::move(e);

  Plan &plan = result.plan;
  plan.set_version(kPlanVersion);
  plan.set_model(modelName);
  plan.set_source(sourceFile);
  plan.set_strategy(passes::strategyName(options.placement.strategy).str());
  plan.set_replication(cluster::replicationName(cluster.replication).str());
  fillCluster(cluster, *plan.mutable_cluster());
  fillVariables(*routed, cluster, plan);
  // The PS programs first (copies of parts of the routed module), then the worker program,
  // which takes the routed module itself.
  auto ps = psPrograms(*routed, cluster);
  if (!ps)
    return ps.takeError();
  auto worker = addWorkerProgram(std::move(routed), cluster, plan);
  if (!worker)
    return worker.takeError();
  if (auto e = checkSynchronizedProgram(**worker, plan, options.synchronization))
    return std::move(e);
  addPsPrograms(*ps, cluster, plan);
  fillRunConfig(optimizer, scaled, options, *towers, *plan.mutable_run());
  if (auto e =
          decideLocalAggregation(plan, options.localAggregation, movesRowsOfPsTables(**worker)))
    return std::move(e);

  std::vector<const Module *> psModules;
  for (const auto &program : *ps)
    psModules.push_back(program.get());
  estimatePlan(plan, **worker, psModules, options.rowsPerStep, {}, options.rowShares);
  if (auto e = checkTaskMemory(plan, cluster))
    return std::move(e);
  // The plan's programs are the worker's, then the PS tasks', as made above.
  std::vector<const Module *> programs = {worker->get()};
  programs.insert(programs.end(), psModules.begin(), psModules.end());
  if (auto e = verifyPlan(plan, programs))
    return ir::withNote(ir::withContext(std::move(e), "the emitted plan does not verify"),
                        "this is a bug in Prism's partitioner");
  result.programs.push_back(std::move(*worker));
  for (auto &program : *ps)
    result.programs.push_back(std::move(program));
  return std::move(result);
}

} // namespace prism::plan
