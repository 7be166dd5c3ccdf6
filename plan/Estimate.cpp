// The plan's estimate (see Estimate.h): traffic as flows between tasks, summed per task and per
// host link.
#include "plan/Estimate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/Device.h"
#include "ir/OpTable.h"
#include "ir/VariablePlacement.h"
#include "plan/CommunicationCost.h"
#include "plan/LocalAggregation.h"
#include "plan/PlanTasks.h"
#include "plan/PlanVariables.h"
#include "llvm/ADT/StringMap.h"

namespace prism::plan {

double expectedDistinct(double range, double draws) {
  if (range <= 0 || draws <= 0)
    return 0;
  return range * -std::expm1(draws * std::log1p(-1.0 / range));
}

namespace {

double bytesOf(const ir::TensorType &type, int64_t batch) {
  return static_cast<double>(type.numElements(batch, batch)) * ir::dtypeBytes(type.dtype);
}

} // namespace

double inputBytes(const ir::Module &worker, int64_t batch) {
  double bytes = 0;
  for (const auto &input : worker.inputs())
    if (input->value->hasType())
      bytes += bytesOf(input->value->type(), batch);
  return bytes;
}

namespace {

int64_t ceilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The workers and the batch each of them (and each of its towers) runs per step, and per
// micro-batch with gradient accumulation.
struct WorkerBatches {
  std::vector<std::string> workers; // in rank order
  int64_t localBatch = 0, towerBatch = 0;
  int64_t accumulate = 1, microBatch = 0, microTowerBatch = 0;

  explicit WorkerBatches(const Plan &plan) {
    for (const Task &task : plan.cluster().tasks())
      if (task.role() == "worker")
        workers.push_back(task.name());
    const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(workers.size()));
    const int64_t towers = std::max(1, plan.run().towers_per_worker());
    accumulate = std::max(1, plan.run().accumulate());
    localBatch = ceilDiv(plan.run().global_batch(), n);
    towerBatch = ceilDiv(localBatch, towers);
    microBatch = ceilDiv(localBatch, accumulate);
    microTowerBatch = ceilDiv(microBatch, towers);
  }
  // An op placed on a tower's device runs the tower's batch.
  int64_t of(const ir::Op &op) const {
    return op.attrs.has(ir::kDeviceAttr) ? towerBatch : localBatch;
  }
  int64_t microOf(const ir::Op &op) const {
    return op.attrs.has(ir::kDeviceAttr) ? microTowerBatch : microBatch;
  }
};

// Distinct rows per step of each PS table a worker reads by rows: `--rows-per-step` split over
// the table's row pulls in proportion to their indices, or the expectation for uniform draws;
// and how they fall over the table's rows, where sampled (TableEstimate.row_shares).
class RowsPerStep {
public:
  RowsPerStep(const Plan &plan, const ir::Module &worker, const WorkerBatches &batches,
              std::optional<double> given, const std::map<int, double> &givenOfWorkers,
              const RowShares &shares)
      : given_(given), givenOfWorkers_(givenOfWorkers), shares_(shares) {
    for (const Variable &v : plan.variables())
      variables_[v.name()] = &v;
    for (const auto &op : worker.ops())
      if (op->name() == "ps_pull_rows")
        indicesPerStep_[op->operand(0)->name()] += indicesOf(*op, batches);
  }
  static double indicesOf(const ir::Op &pullRows, const WorkerBatches &batches) {
    return static_cast<double>(pullRows.operand(1)->type().numElements(batches.of(pullRows)));
  }
  // Distinct rows one row pull moves per step: with gradient accumulation each micro-batch
  // pulls its own rows, so a row two micro-batches read travels twice.
  // `workers` > 1: the union of as many workers' rows (a host's leader pulls it for them all).
  double pulledPerStep(const ir::Op &pullRows, const WorkerBatches &batches,
                       int workers = 1) const {
    double indices =
        static_cast<double>(pullRows.operand(1)->type().numElements(batches.microOf(pullRows)));
    return static_cast<double>(batches.accumulate) *
           distinct(pullRows.operand(0)->name(), indices, workers);
  }
  // Among `indices` of each of `workers` workers' indices of the table, together.
  double distinct(const std::string &table, double indices, int workers = 1) const {
    auto total = indicesPerStep_.find(table);
    if (given_) {
      auto ofWorkers = givenOfWorkers_.find(workers);
      double rows = ofWorkers != givenOfWorkers_.end() ? ofWorkers->second : workers * *given_;
      return total != indicesPerStep_.end() && total->second > 0 ? rows * indices / total->second
                                                                 : rows;
    }
    return expectedDistinct(tableRows(*variables_.lookup(table)), workers * indices);
  }
  // Over all the table's indices of a step (what the worker pushes back).
  double perStep(const std::string &table, int workers = 1) const {
    auto total = indicesPerStep_.find(table);
    return distinct(table, total == indicesPerStep_.end() ? 0 : total->second, workers);
  }
  // The table's rows' shares of equal ranges of it; empty: spread as its rows are.
  llvm::ArrayRef<double> sharesOf(const std::string &table) const {
    auto it = shares_.find(table);
    return it == shares_.end() ? llvm::ArrayRef<double>() : llvm::ArrayRef<double>(it->second);
  }
  // `workers` > 1: the rows of as many workers together (a host's leader moves them once).
  void addTables(google::protobuf::RepeatedPtrField<TableEstimate> &tables,
                 const WorkerBatches &batches, int workers = 1) const {
    const double k = static_cast<double>(batches.accumulate);
    for (const auto &[table, indices] : indicesPerStep_) {
      TableEstimate *t = tables.Add();
      t->set_variable(table);
      t->set_rows_per_step(distinct(table, indices, workers));
      if (batches.accumulate > 1)
        t->set_rows_pulled_per_step(k * distinct(table, indices / k, workers));
      t->set_source(given_ ? "--rows-per-step" : "uniform draws");
      for (double share : sharesOf(table))
        t->add_row_shares(share);
    }
  }

private:
  std::optional<double> given_;
  std::map<int, double> givenOfWorkers_;
  const RowShares &shares_;
  llvm::StringMap<const Variable *> variables_;
  std::map<std::string, double> indicesPerStep_; // ordered: the plan's bytes are deterministic
};

// flows[from][to]: bytes per step between two tasks.
using Flows = std::map<std::string, std::map<std::string, double>>;
// By leader: what its members and it send each other per step for local aggregation.
using LocalBytes = std::map<std::string, double>;

// Adds what one worker's PS op on `v` moves to and from each shard's task.
void addPsFlows(Flows &flows, const RunConfig &run, const std::string &worker, PsTransfer transfer,
                const Variable &v, double rows, llvm::ArrayRef<double> shares, double times) {
  for (const Shard &s : v.shards()) {
    ShardTraffic traffic = psShardTraffic(run, transfer, v, s, rows, shares);
    flows[worker][s.task()] += times * traffic.toPs;
    flows[s.task()][worker] += times * traffic.fromPs;
  }
}

// A worker's part in local aggregation (plan/LocalAggregation.h): alone (its own PS traffic), a
// leader (its host's: the union of its members' rows, dense values once) or a member (its PS
// traffic goes to its leader over loopback, uncompressed).
struct AggregationRole {
  const std::string *leader = nullptr; // set for members
  int workers = 1;                     // the host's workers, for a leader
};

AggregationRole aggregationRole(const Plan &plan, const std::string &worker) {
  AggregationRole role;
  if (const HostAggregation *a = aggregationOf(plan, worker)) {
    if (a->leader() == worker)
      role.workers = a->members_size();
    else
      role.leader = &a->leader();
  }
  return role;
}

// Adds what one worker's PS op moves: to the shards' tasks, or for a member to its leader.
void addPsOpFlows(Flows &flows, const Plan &plan, const std::string &w, const AggregationRole &role,
                  const ir::Op &op, PsTransfer transfer, const Variable &v,
                  const WorkerBatches &batches, const RowsPerStep &rows, LocalBytes &local) {
  double moved = 0;
  if (transfer == PsTransfer::PullRows)
    moved = rows.pulledPerStep(op, batches, role.workers);
  else if (transfer == PsTransfer::PushRows)
    moved = rows.perStep(v.name(), role.workers);
  const double times = timesPerStep(plan, transfer);
  if (!role.leader) {
    addPsFlows(flows, plan.run(), w, transfer, v, moved, rows.sharesOf(v.name()), times);
    return;
  }
  RunConfig uncompressed = plan.run();
  uncompressed.clear_compress();
  for (const Shard &s : v.shards()) {
    ShardTraffic traffic =
        psShardTraffic(uncompressed, transfer, v, s, moved, rows.sharesOf(v.name()));
    flows[w][*role.leader] += times * traffic.toPs;
    flows[*role.leader][w] += times * traffic.fromPs;
    local[*role.leader] += times * (traffic.toPs + traffic.fromPs);
  }
}

// Every worker runs the same program: its flows are added once per worker (by rank: a ring
// all-reduce sends to the next rank).
Flows workerFlows(const Plan &plan, const ir::Module &worker, const WorkerBatches &batches,
                  const RowsPerStep &rows, LocalBytes &local) {
  llvm::StringMap<const Variable *> variables;
  for (const Variable &v : plan.variables())
    variables[v.name()] = &v;
  const auto &workers = batches.workers;
  const int64_t n = static_cast<int64_t>(workers.size());
  Flows flows;
  for (int64_t rank = 0; rank < n; ++rank) {
    const std::string &w = workers[static_cast<size_t>(rank)];
    const AggregationRole role = aggregationRole(plan, w);
    for (const auto &op : worker.ops()) {
      if (op->name() == "all_reduce") {
        if (n < 2)
          continue;
        // The loss (bucket -1) always travels in float32; gradient buckets as run.compress says.
        const bool loss = op->attrs.getInt("bucket") < 0;
        double bucket = 0;
        for (unsigned i = 0; i < op->numResults(); ++i) {
          const ir::TensorType &type = op->result(i)->type();
          bucket +=
              bytesOf(type, 1) * (loss ? 1.0 : wireScale(plan.run(), ir::dtypeName(type.dtype)));
        }
        flows[w][workers[static_cast<size_t>((rank + 1) % n)]] += ringAllReduceBytes(bucket, n);
        continue;
      }
      auto transfer = psTransferOf(op->name());
      const Variable *v = transfer ? variables.lookup(op->operand(0)->name()) : nullptr;
      if (!v || !onParameterServers(*v))
        continue;
      addPsOpFlows(flows, plan, w, role, *op, *transfer, *v, batches, rows, local);
    }
  }
  return flows;
}

// Per aggregating host: what its workers send each other per step (both directions), and the
// rows its leader moves for them.
void addLocalAggregation(const Plan &plan, const LocalBytes &local, const RowsPerStep &rows,
                         const WorkerBatches &batches, Estimate &estimate) {
  for (const HostAggregation &a : plan.host_aggregation()) {
    auto bytes = local.find(a.leader());
    LocalAggregationEstimate *host = estimate.add_local_aggregation();
    host->set_host(a.host());
    host->set_local_bytes_per_step(bytes == local.end() ? 0 : bytes->second);
    rows.addTables(*host->mutable_tables(), batches, a.members_size());
  }
}

// One worker's step: FLOPs, and activations (an upper bound: every intermediate) of one
// micro-batch, and of the whole local batch at once.
struct WorkerCompute {
  double flops = 0;
  double activations = 0;
  double activationsOfLocalBatch = 0;
};

double activationBytes(const ir::Op &op, int64_t batch) {
  double bytes = 0;
  for (unsigned i = 0; i < op.numResults(); ++i) {
    if (!op.result(i)->hasType())
      continue;
    const ir::TensorType &type = op.result(i)->type();
    if (!type.sparse) {
      bytes += bytesOf(type, batch);
      continue;
    }
    // A sparse value holds only rows: about as many bytes as the dense values it is made of.
    for (const ir::Value *v : op.operands())
      if (v->hasType() && !v->type().sparse && ir::isFloat(v->type().dtype) &&
          v->kind() == ir::ValueKind::OpResult)
        bytes += bytesOf(v->type(), batch);
  }
  return bytes;
}

WorkerCompute workerCompute(const ir::Module &worker, const WorkerBatches &batches) {
  WorkerCompute compute;
  for (const auto &op : worker.ops()) {
    compute.flops += ir::opCost(*op, batches.of(*op)).flops;
    compute.activations += activationBytes(*op, batches.microOf(*op));
    compute.activationsOfLocalBatch += activationBytes(*op, batches.of(*op));
  }
  return compute;
}

// A worker whose in-graph towers run on its GPUs (tower t on its t-th device, the shared ops and
// variables on the first): the bytes copied between its GPUs per step, as the executor copies
// them: each value an op reads from another GPU, once per GPU and micro-batch (the variables and
// shared values a tower reads, the towers' losses and gradients the first GPU combines); towers
// on one GPU share it. A sparse value counts at its dense size, an upper bound.
double towerCopyBytes(const ir::Module &worker, const WorkerBatches &batches,
                      const std::vector<std::string> &gpus) {
  auto gpuOf = [&](const ir::Op &op) {
    std::optional<ir::DeviceId> device = ir::opDevice(op);
    size_t tower = device ? static_cast<size_t>(std::max(device->index, 0)) : 0;
    return tower < gpus.size() ? gpus[tower] : gpus.front();
  };
  std::set<std::pair<const ir::Value *, std::string>> copied;
  double bytes = 0;
  for (const auto &op : worker.ops()) {
    const std::string gpu = gpuOf(*op);
    for (const ir::Value *v : op->operands()) {
      if (v->kind() == ir::ValueKind::Input || !v->hasType())
        continue; // feeds come from the host to each GPU that reads them
      const ir::Op *from = v->kind() == ir::ValueKind::OpResult ? v->definingOp() : nullptr;
      if ((from ? gpuOf(*from) : gpus.front()) == gpu || !copied.insert({v, gpu}).second)
        continue;
      bytes += bytesOf(v->type(), from ? batches.microOf(*from) : batches.microBatch);
    }
  }
  return bytes * static_cast<double>(batches.accumulate);
}

// Bytes a task holds of `module`'s variables, leaving out those held by parameter servers.
double parameterBytes(const ir::Module &module) {
  double bytes = 0;
  for (const auto &variable : module.variables())
    if (!ir::onParameterServers(*variable))
      bytes += bytesOf(variable->type(), 1);
  return bytes;
}

void addTaskEstimates(const Plan &plan, const Flows &flows, const ir::Module &worker,
                      const std::vector<const ir::Module *> &ps, const WorkerBatches &batches,
                      Estimate &estimate) {
  std::map<std::string, double> sent, received;
  for (const auto &[from, row] : flows)
    for (const auto &[to, bytes] : row) {
      sent[from] += bytes;
      received[to] += bytes;
    }
  const WorkerCompute compute = workerCompute(worker, batches);
  const double workerParameters = parameterBytes(worker);
  for (const Task &task : plan.cluster().tasks()) {
    TaskEstimate *t = estimate.add_tasks();
    t->set_task(task.name());
    t->set_bytes_sent_per_step(sent[task.name()]);
    t->set_bytes_received_per_step(received[task.name()]);
    if (task.role() == "worker") {
      t->set_parameter_bytes(workerParameters);
      t->set_activation_bytes(compute.activations);
      t->set_activation_bytes_saved(compute.activationsOfLocalBatch - compute.activations);
      t->set_flops_per_step(compute.flops);
      // Each GPU of the worker gets the whole input batch (its towers slice it there).
      const std::vector<std::string> named = taskGpus(task);
      if (const size_t gpus = std::set<std::string>(named.begin(), named.end()).size(); gpus > 0)
        t->set_host_device_bytes_per_step(inputBytes(worker, batches.localBatch) *
                                              static_cast<double>(gpus) +
                                          4 + sent[task.name()] + received[task.name()]);
      if (taskGpus(task).size() > 1)
        t->set_device_copy_bytes_per_step(towerCopyBytes(worker, batches, taskGpus(task)));
    } else if (task.role() == "ps" && static_cast<size_t>(task.index()) < ps.size()) {
      // A PS program's variables are its rows of the tables: all of them count.
      const ir::Module &program = *ps[static_cast<size_t>(task.index())];
      double bytes = 0, flops = 0;
      for (const auto &variable : program.variables())
        bytes += bytesOf(variable->type(), 1);
      for (const auto &op : program.ops())
        flops += ir::opCost(*op, batches.localBatch).flops;
      t->set_parameter_bytes(bytes);
      t->set_flops_per_step(flops);
    }
  }
}

// Each host's link: what its tasks send to and receive from tasks on other hosts.
void addLinkEstimates(const Plan &plan, const Flows &flows, Estimate &estimate) {
  std::map<std::string, int> hostOf;
  for (const Task &task : plan.cluster().tasks())
    hostOf[task.name()] = task.host();
  // One pass over the flows (a host-by-host scan of every flow grew with the square of the
  // workers: 10,000 took minutes).
  const int hosts = plan.cluster().hosts_size();
  std::vector<double> out(static_cast<size_t>(hosts)), in(static_cast<size_t>(hosts));
  for (const auto &[from, row] : flows) {
    auto fromHost = hostOf.find(from);
    for (const auto &[to, bytes] : row) {
      auto toHost = hostOf.find(to);
      if (fromHost == hostOf.end() || toHost == hostOf.end() || fromHost->second == toHost->second)
        continue;
      if (fromHost->second >= 0 && fromHost->second < hosts)
        out[static_cast<size_t>(fromHost->second)] += bytes;
      if (toHost->second >= 0 && toHost->second < hosts)
        in[static_cast<size_t>(toHost->second)] += bytes;
    }
  }
  for (int h = 0; h < hosts; ++h) {
    const Host &host = plan.cluster().hosts(h);
    LinkEstimate *link = estimate.add_links();
    link->set_host(host.name());
    link->set_bytes_out_per_step(out[static_cast<size_t>(h)]);
    link->set_bytes_in_per_step(in[static_cast<size_t>(h)]);
    if (host.bandwidth_bits_per_sec() > 0)
      link->set_seconds_per_step(std::max(out[static_cast<size_t>(h)], in[static_cast<size_t>(h)]) *
                                 8 / static_cast<double>(host.bandwidth_bits_per_sec()));
  }
}

} // namespace

void estimatePlan(Plan &plan, const ir::Module &worker, const std::vector<const ir::Module *> &ps,
                  std::optional<double> rowsPerStep, const std::map<int, double> &rowsOfWorkers,
                  const RowShares &rowShares) {
  Estimate &estimate = *plan.mutable_estimate();
  estimate.Clear();
  const WorkerBatches batches(plan);
  estimate.set_local_batch(batches.localBatch);
  estimate.set_micro_batch(batches.microBatch);
  const RowsPerStep rows(plan, worker, batches, rowsPerStep, rowsOfWorkers, rowShares);
  rows.addTables(*estimate.mutable_tables(), batches);
  LocalBytes local;
  const Flows flows = workerFlows(plan, worker, batches, rows, local);
  addTaskEstimates(plan, flows, worker, ps, batches, estimate);
  addLinkEstimates(plan, flows, estimate);
  addLocalAggregation(plan, local, rows, batches, estimate);
}

} // namespace prism::plan
