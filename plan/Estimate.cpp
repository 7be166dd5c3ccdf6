// The plan's estimate (see Estimate.h): traffic as flows between tasks, summed per task and per
// host link.
#include "plan/Estimate.h"

#include <cmath>
#include <map>
#include <string>

#include "ir/OpTable.h"
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

double rowsOf(const Variable &v) {
  return v.shape_size() ? static_cast<double>(v.shape(0)) : 1;
}

// Bytes of one row of a table (everything after the first dimension).
double rowBytes(const Variable &v) {
  return static_cast<double>(v.bytes()) / std::max(1.0, rowsOf(v));
}

} // namespace

void estimatePlan(Plan &plan, const ir::Module &worker, const std::vector<const ir::Module *> &ps,
                  std::optional<double> rowsPerStep) {
  Estimate &estimate = *plan.mutable_estimate();
  estimate.Clear();
  std::vector<std::string> workers;
  for (const Task &task : plan.cluster().tasks())
    if (task.role() == "worker")
      workers.push_back(task.name());
  const int64_t numWorkers = static_cast<int64_t>(workers.size());
  const int64_t towers = std::max(1, plan.run().towers_per_worker());
  const int64_t localBatch = (plan.run().global_batch() + numWorkers - 1) / numWorkers;
  const int64_t towerBatch = (localBatch + towers - 1) / towers;
  estimate.set_local_batch(localBatch);

  llvm::StringMap<const Variable *> variables;
  for (const Variable &v : plan.variables())
    variables[v.name()] = &v;

  // Distinct rows per step: each table's indices per step, over all its row pulls.
  std::map<std::string, double> indicesPerStep; // ordered: the plan's bytes are deterministic
  auto batchOf = [&](const ir::Op &op) {
    return op.attrs.has(ir::kDeviceAttr) ? towerBatch : localBatch;
  };
  for (const auto &op : worker.ops())
    if (op->name() == "ps_pull_rows")
      indicesPerStep[op->operand(0)->name()] +=
          static_cast<double>(op->operand(1)->type().numElements(batchOf(*op)));
  auto distinctRows = [&](llvm::StringRef table, double indices) {
    const Variable *v = variables.lookup(table);
    double total = indicesPerStep[table.str()];
    if (rowsPerStep)
      return total > 0 ? *rowsPerStep * indices / total : *rowsPerStep;
    return expectedDistinct(rowsOf(*v), indices);
  };
  for (const auto &[table, indices] : indicesPerStep) {
    TableEstimate *t = estimate.add_tables();
    t->set_variable(table);
    t->set_rows_per_step(distinctRows(table, indices));
    t->set_source(rowsPerStep ? "--rows-per-step" : "uniform draws");
  }

  // flows[from][to]: bytes per step. Every worker runs the same program, so its flows are
  // added once per worker.
  std::map<std::string, std::map<std::string, double>> flows;
  auto toShards = [&](const std::string &w, const Variable &v, double bytes, bool toPs) {
    for (const Shard &s : v.shards()) {
      double share = bytes * static_cast<double>(s.row_end() - s.row_begin()) / rowsOf(v);
      if (toPs)
        flows[w][s.task()] += share;
      else
        flows[s.task()][w] += share;
    }
  };
  double flops = 0, activations = 0;
  for (const auto &op : worker.ops()) {
    int64_t batch = batchOf(*op);
    flops += ir::opCost(*op, batch).flops;
    for (unsigned i = 0; i < op->numResults(); ++i) {
      if (!op->result(i)->hasType())
        continue;
      const ir::TensorType &type = op->result(i)->type();
      if (!type.sparse) {
        activations += bytesOf(type, batch);
        continue;
      }
      // A sparse value holds only rows: about as many bytes as the dense values it is made of.
      for (const ir::Value *v : op->operands())
        if (v->hasType() && !v->type().sparse && ir::isFloat(v->type().dtype) &&
            v->kind() == ir::ValueKind::OpResult)
          activations += bytesOf(v->type(), batch);
    }
  }
  for (int64_t rank = 0; rank < numWorkers; ++rank) {
    const std::string &w = workers[static_cast<size_t>(rank)];
    for (const auto &op : worker.ops()) {
      llvm::StringRef name = op->name();
      if (name == "all_reduce") {
        // A ring all-reduce: each rank sends 2(N−1)/N of the bucket to the next rank.
        if (numWorkers < 2)
          continue;
        double bucket = 0;
        for (unsigned i = 0; i < op->numResults(); ++i)
          bucket += bytesOf(op->result(i)->type(), 1);
        double share = 2.0 * static_cast<double>(numWorkers - 1) / numWorkers * bucket;
        flows[w][workers[static_cast<size_t>((rank + 1) % numWorkers)]] += share;
        continue;
      }
      if (!op->def().has(ir::kCommunication) || op->numOperands() == 0)
        continue;
      const Variable *v = variables.lookup(op->operand(0)->name());
      if (!v || v->placement() != "ps")
        continue;
      double row = rowBytes(*v), indexBytes = 8;
      if (name == "ps_pull") {
        toShards(w, *v, static_cast<double>(v->bytes()), /*toPs=*/false);
      } else if (name == "ps_push") {
        toShards(w, *v, static_cast<double>(v->bytes()), /*toPs=*/true);
      } else if (name == "ps_pull_rows") {
        double rows = distinctRows(
            v->name(), static_cast<double>(op->operand(1)->type().numElements(batchOf(*op))));
        toShards(w, *v, rows * indexBytes, /*toPs=*/true);
        toShards(w, *v, rows * row, /*toPs=*/false);
      } else if (name == "ps_push_rows") {
        double rows = distinctRows(v->name(), indicesPerStep[v->name()]);
        toShards(w, *v, rows * (row + indexBytes), /*toPs=*/true);
      }
    }
  }

  std::map<std::string, double> sent, received;
  for (const auto &[from, row] : flows)
    for (const auto &[to, bytes] : row) {
      sent[from] += bytes;
      received[to] += bytes;
    }
  std::vector<double> psParameters, psFlops;
  for (const ir::Module *module : ps) {
    double bytes = 0, f = 0;
    for (const auto &variable : module->variables())
      bytes += bytesOf(variable->type(), 1);
    for (const auto &op : module->ops())
      f += ir::opCost(*op, localBatch).flops;
    psParameters.push_back(bytes);
    psFlops.push_back(f);
  }
  double workerParameters = 0;
  for (const auto &variable : worker.variables())
    if (variable->attrs.getString("placement") != "ps")
      workerParameters += bytesOf(variable->type(), 1);

  std::map<std::string, int> hostOf;
  for (const Task &task : plan.cluster().tasks()) {
    hostOf[task.name()] = task.host();
    TaskEstimate *t = estimate.add_tasks();
    t->set_task(task.name());
    t->set_bytes_sent_per_step(sent[task.name()]);
    t->set_bytes_received_per_step(received[task.name()]);
    if (task.role() == "worker") {
      t->set_parameter_bytes(workerParameters);
      t->set_activation_bytes(activations);
      t->set_flops_per_step(flops);
    } else if (task.role() == "ps" && static_cast<size_t>(task.index()) < ps.size()) {
      t->set_parameter_bytes(psParameters[static_cast<size_t>(task.index())]);
      t->set_flops_per_step(psFlops[static_cast<size_t>(task.index())]);
    }
  }
  for (int h = 0; h < plan.cluster().hosts_size(); ++h) {
    const Host &host = plan.cluster().hosts(h);
    double out = 0, in = 0;
    for (const auto &[from, row] : flows)
      for (const auto &[to, bytes] : row) {
        if (hostOf[from] == h && hostOf[to] != h)
          out += bytes;
        if (hostOf[to] == h && hostOf[from] != h)
          in += bytes;
      }
    LinkEstimate *link = estimate.add_links();
    link->set_host(host.name());
    link->set_bytes_out_per_step(out);
    link->set_bytes_in_per_step(in);
    if (host.bandwidth_bits_per_sec() > 0)
      link->set_seconds_per_step(std::max(out, in) * 8 /
                                 static_cast<double>(host.bandwidth_bits_per_sec()));
  }
}

} // namespace prism::plan
