// The partitioner: passes, then one program per task, then the plan (see Partitioner.h).
#include "plan/Partitioner.h"
#include "ir/VariablePlacement.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "ir/Collectives.h"
#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "ir/Printer.h"
#include "passes/PassManager.h"
#include "plan/Estimate.h"
#include "plan/PlanFile.h"
#include "plan/PlanVerifier.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::plan {
namespace {

using ir::Module;
using ir::Op;

// Runs `pipeline` with `options`, collecting statistics.
llvm::Error runPasses(Module &module, llvm::StringRef pipeline, const passes::PassOptions &options,
                      PartitionResult &result) {
  auto manager = passes::PassManager::fromPipeline(pipeline);
  if (!manager)
    return manager.takeError();
  // The partitioner sets every option once; each stage takes the ones its passes read.
  passes::PassOptions read;
  for (const auto &pass : manager->passes())
    for (const std::string &key : pass->optionKeys())
      if (options.has(key))
        read.set(key, options.get(key));
  if (auto changed = manager->run(module, read); !changed)
    return changed.takeError();
  for (const auto &pass : manager->passes())
    for (const auto &statistic : pass->statistics())
      result.statistics.push_back({pass->name().str(), statistic});
  return llvm::Error::success();
}

std::string placementText(const ir::Variable &variable) {
  return variable.attrs.getString("placement");
}

// The variable an op writes as operand 0 (updates, assign), or null.
ir::Variable *writtenVariable(const Op &op) {
  if (op.numOperands() == 0 || !op.def().writes(0))
    return nullptr;
  return op.operand(0)->variable();
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
  std::vector<ir::Variable *> unread;
  for (const auto &variable : module.variables())
    if (!read.count(variable->value.get()))
      unread.push_back(variable.get());
  llvm::erase_if(module.gradients,
                 [&](const ir::Gradient &g) { return llvm::is_contained(unread, g.variable); });
  for (ir::Variable *variable : unread)
    module.eraseVariable(variable);
  std::vector<ir::Input *> unfed;
  for (const auto &input : module.inputs())
    if (!read.count(input->value.get()))
      unfed.push_back(input.get());
  for (ir::Input *input : unfed)
    module.eraseInput(input);
}

// The worker program: the routed module without what runs on the PS tasks, and without what
// only those ops read.
llvm::Expected<std::unique_ptr<Module>> workerProgram(const Module &routed) {
  auto worker = routed.clone();
  llvm::DenseSet<const Op *> keep;
  for (const auto &op : worker->ops()) {
    ir::Variable *written = writtenVariable(*op);
    bool onPs = op->def().has(ir::kOnParameterServer) ||
                (written && op->def().has(ir::kOptimizerUpdate) && placementText(*written) == "ps");
    if (!onPs)
      keep.insert(op.get());
  }
  eraseOpsNotIn(*worker, keep);
  PartitionResult ignored;
  if (auto e = runPasses(*worker, "dce", {}, ignored))
    return std::move(e);
  eraseUnreadVariables(*worker);
  return std::move(worker);
}

// The row ranges of `variable` that PS task `task` holds, as [begin, end) pairs.
std::vector<std::pair<int64_t, int64_t>> rangesOn(const ir::Variable &variable, int64_t task) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  const ir::Attr *shards = variable.attrs.find("shards");
  const ir::Attr *rows = variable.attrs.find("rows");
  if (!shards || !rows)
    return ranges;
  for (size_t i = 0; i < shards->getInts().size(); ++i)
    if (shards->getInts()[i] == task)
      ranges.push_back({rows->getInts()[i], rows->getInts()[i + 1]});
  return ranges;
}

// The program of PS task `task`: the updates of the variables it holds rows of, and what they
// read (the combined gradients, the step counter), over its rows only.
llvm::Expected<std::unique_ptr<Module>> psProgram(const Module &routed, int64_t task,
                                                  llvm::StringRef taskName) {
  auto ps = routed.clone();
  ps->setName(routed.name() + ".ps" + std::to_string(task));
  llvm::DenseSet<const Op *> keep;
  std::vector<const Op *> work;
  for (const auto &op : ps->ops()) {
    ir::Variable *written = writtenVariable(*op);
    if (written && op->def().has(ir::kOptimizerUpdate) && placementText(*written) == "ps" &&
        !rangesOn(*written, task).empty())
      work.push_back(op.get());
  }
  if (work.empty())
    return std::make_unique<Module>(ps->name());
  // The ancestors of the updates; then the writes of replicated state (the step counter) the
  // kept ops read, and their ancestors, until nothing changes.
  for (;;) {
    while (!work.empty()) {
      const Op *op = work.back();
      work.pop_back();
      if (!keep.insert(op).second)
        continue;
      for (ir::Value *v : op->operands()) {
        if (v->kind() == ir::ValueKind::Input)
          return ir::makeError(routed.sourceFile(), op->loc,
                               "'" + std::string(op->name()) + "' is needed on " + taskName.str() +
                                   " to update its variables, but it reads the input '" +
                                   v->name() + "'");
        if (v->kind() == ir::ValueKind::OpResult)
          work.push_back(v->definingOp());
      }
      if (op->def().has(ir::kCommunication) && !op->def().has(ir::kOnParameterServer))
        return ir::makeError(routed.sourceFile(), op->loc,
                             "'" + std::string(op->name()) + "' is needed on " + taskName.str() +
                                 " to update its variables, but it runs on the workers");
    }
    llvm::DenseSet<const ir::Value *> read;
    for (const Op *op : keep)
      for (ir::Value *v : op->operands())
        read.insert(v);
    for (const auto &op : ps->ops()) {
      ir::Variable *written = writtenVariable(*op);
      if (written && !keep.count(op.get()) && placementText(*written) == "replicated" &&
          read.count(written->value.get()))
        work.push_back(op.get());
    }
    if (work.empty())
      break;
  }
  ps->loss.reset();
  ps->optimizer.reset();
  ps->gradients.clear();
  eraseOpsNotIn(*ps, keep);
  eraseUnreadVariables(*ps);

  // Each PS-held variable shrinks to the rows this task holds; `rows` lists them as
  // [begin, end) pairs and `table_shape` keeps the whole shape (initial values depend on it).
  for (const auto &variable : ps->variables()) {
    if (placementText(*variable) != "ps")
      continue;
    auto ranges = rangesOn(*variable, task);
    ir::TensorType type = variable->type();
    ir::HeldRows heldRows;
    heldRows.tableShape = type.dims;
    for (auto [begin, end] : ranges)
      heldRows.ranges.push_back({begin, end});
    const int64_t held = heldRows.count();
    ir::setHeldRows(*variable, heldRows);
    variable->attrs.erase("shards");
    variable->attrs.erase("rows");
    if (!type.isScalar())
      type.dims[0] = held;
    variable->value->setType(type);
  }
  for (const auto &op : ps->ops())
    for (unsigned i = 0; i < op->numResults(); ++i)
      op->result(i)->setType(std::nullopt);
  PartitionResult ignored;
  if (auto e = runPasses(*ps, "infer-shapes", {}, ignored))
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

void fillVariables(const Module &routed, const cluster::Cluster &cluster, Plan &plan) {
  // Optimizer state: the operands an update writes besides its variable.
  std::map<std::string, std::string> stateOf;
  for (const auto &op : routed.ops())
    if (op->def().has(ir::kOptimizerUpdate))
      for (unsigned i = 1; i < op->numOperands(); ++i)
        if (op->def().writes(i))
          stateOf[op->operand(i)->name()] = op->operand(0)->name();
  auto psTasks = cluster.parameterServers();
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
    if (variable->trainable())
      v->set_kind(variable->attrs.getString("kind"));
    else if (state != stateOf.end())
      v->set_kind("state");
    else
      v->set_kind("other");
    if (state != stateOf.end())
      v->set_state_of(state->second);
    v->set_placement(placementText(*variable));
    if (v->placement() == "ps") {
      const auto &shards = variable->attrs.find("shards")->getInts();
      const auto &rows = variable->attrs.find("rows")->getInts();
      for (size_t i = 0; i < shards.size(); ++i) {
        Shard *s = v->add_shards();
        s->set_task(psTasks[static_cast<size_t>(shards[i])]->name);
        s->set_row_begin(rows[i]);
        s->set_row_end(rows[i + 1]);
      }
    }
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

} // namespace

std::string makeJobToken() {
  std::random_device device;
  std::string token;
  const char *hex = "0123456789abcdef";
  for (int i = 0; i < 32; ++i)
    token += hex[device() % 16];
  return token;
}

llvm::Expected<PartitionResult> partition(const ir::Module &model, const cluster::Cluster &cluster,
                                          const PartitionOptions &options) {
  const int workers = cluster.numWorkers();
  if (workers < 1)
    return ir::makeError("the cluster has no worker task");
  if (options.globalBatch < workers)
    return ir::makeError("--batch " + std::to_string(options.globalBatch) +
                         " is smaller than the " + std::to_string(workers) +
                         " workers: every worker needs at least one example per step");
  int towers = 1;
  if (cluster.replication == cluster::Replication::InGraph) {
    auto workerTasks = cluster.workers();
    towers = static_cast<int>(workerTasks.front()->devices.size());
    for (const cluster::Task *task : workerTasks)
      if (static_cast<int>(task->devices.size()) != towers)
        return ir::makeError("in-graph replication needs the same number of devices on every "
                             "host: " +
                             workerTasks.front()->name + " has " + std::to_string(towers) + ", " +
                             task->name + " has " + std::to_string(task->devices.size()));
  }
  if (options.globalBatch < int64_t(workers) * towers)
    return ir::makeError("--batch " + std::to_string(options.globalBatch) + " is smaller than " +
                         std::to_string(workers * towers) + " towers in all");

  PartitionResult result;
  auto routed = model.clone();
  routed->setSourceFile(model.sourceFile());
  passes::PassOptions passOptions;
  passOptions.set("strategy", options.strategy);
  passOptions.set("ps", std::to_string(cluster.numParameterServers()));
  passOptions.set("partitions", std::to_string(options.partitions));
  passOptions.set("partition-threshold-mb", std::to_string(options.partitionThresholdMb));
  passOptions.set("bucket-mb", std::to_string(options.bucketMb));
  passOptions.set("workers", std::to_string(workers));
  passOptions.set("devices", std::to_string(towers));
  std::string pipeline = "infer-shapes,autodiff,lower-optimizer,cse,dce,classify-variables";
  if (towers > 1)
    pipeline += ",replicate-in-graph";
  pipeline += ",replicate-between-graph";
  if (auto e = runPasses(*routed, pipeline, passOptions, result))
    return std::move(e);
  // A strategy that needs parameter servers on a cluster without any: say so plainly.
  if (cluster.numParameterServers() == 0 && options.strategy != "allreduce") {
    for (const auto &variable : routed->variables())
      if (variable->trainable() &&
          (options.strategy == "ps" || variable->attrs.getString("kind") == "sparse"))
        return ir::makeError("strategy " + options.strategy + " puts '" + variable->name() +
                             "' on a parameter server, but the cluster has none: add ps=M "
                             "(local:N,ps=M, or `ps:` on a host) or use --strategy allreduce");
  }
  if (auto e = runPasses(*routed, "place-variables,route-gradients", passOptions, result))
    return std::move(e);
  if (options.fuse)
    if (auto e = runPasses(*routed, "fuse-bias-activation,fuse-elementwise", passOptions, result))
      return std::move(e);

  Plan &plan = result.plan;
  plan.set_version(kPlanVersion);
  plan.set_model(model.name());
  plan.set_source(model.sourceFile());
  plan.set_strategy(options.strategy);
  plan.set_replication(cluster::replicationName(cluster.replication).str());
  fillCluster(cluster, *plan.mutable_cluster());
  fillVariables(*routed, cluster, plan);

  auto worker = workerProgram(*routed);
  if (!worker)
    return worker.takeError();
  Program *workerProgramEntry = plan.add_programs();
  workerProgramEntry->set_name("worker");
  for (const cluster::Task *task : cluster.workers())
    workerProgramEntry->add_tasks(task->name);
  workerProgramEntry->set_ir(ir::printModule(**worker));
  fillGroups(**worker, cluster, plan);

  std::vector<std::unique_ptr<Module>> psPrograms;
  for (const cluster::Task *task : cluster.parameterServers()) {
    auto ps = psProgram(*routed, task->index, task->name);
    if (!ps)
      return ps.takeError();
    Program *entry = plan.add_programs();
    entry->set_name(task->name);
    entry->add_tasks(task->name);
    entry->set_ir(ir::printModule(**ps));
    psPrograms.push_back(std::move(*ps));
  }

  RunConfig *run = plan.mutable_run();
  run->set_global_batch(options.globalBatch);
  run->set_steps(options.steps);
  run->set_seed(options.seed);
  if (model.optimizer)
    run->set_optimizer(ir::printOptimizer(*model.optimizer));
  run->set_data_sharding("contiguous");
  run->set_towers_per_worker(towers);
  run->set_job_token(options.jobToken.empty() ? makeJobToken() : options.jobToken);

  std::vector<const Module *> psModules;
  for (const auto &ps : psPrograms)
    psModules.push_back(ps.get());
  estimatePlan(plan, **worker, psModules, options.rowsPerStep);
  if (auto e = verifyPlan(plan))
    return ir::withNote(ir::withContext(std::move(e), "the emitted plan does not verify"),
                        "this is a bug in Prism's partitioner");
  return std::move(result);
}

} // namespace prism::plan
