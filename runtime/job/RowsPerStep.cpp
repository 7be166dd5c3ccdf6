// Rows per step measured on a data set (see RowsPerStep.h).
#include "runtime/job/RowsPerStep.h"

#include <algorithm>
#include <map>

#include "plan/AutoParallel.h"
#include "plan/CommunicationCost.h"
#include "plan/Estimate.h"
#include "plan/PlanTasks.h"
#include "plan/PlanVerifier.h"
#include "runtime/data/BatchIterator.h"
#include "runtime/data/DataSpec.h"

namespace prism::runtime::job {
namespace {

// The batches worker `rank` trains on first, with the inputs of its program as fields.
llvm::Expected<data::BatchIterator> workerBatches(const plan::Plan &plan, const ir::Module &worker,
                                                  const data::Dataset &dataset, int64_t rank = 0) {
  std::vector<data::InputSlot> slots;
  for (const auto &in : worker.inputs())
    slots.push_back({in->name(), in->type()});
  auto fields = data::requestsForInputs(dataset, slots);
  if (!fields)
    return fields.takeError();
  data::BatchOptions options;
  options.batchSize = plan.run().global_batch();
  options.seed = plan.run().seed();
  options.numShards = plan::countTasks(plan, "worker");
  options.rank = rank;
  options.fields = *fields;
  return data::BatchIterator::create(dataset, options);
}

// The batches workers 0 .. workers-1 train on first, from `dataSpec`'s training set (which the
// iterators read from: it lives as long as they do).
struct SampledBatches {
  std::unique_ptr<data::Dataset> dataset;
  std::vector<data::BatchIterator> iterators; // by rank
};

llvm::Expected<SampledBatches> sampledBatches(const plan::Plan &plan, const ir::Module &worker,
                                              llvm::StringRef dataSpec, int64_t workers) {
  auto spec = data::parseDataSpec(dataSpec);
  if (!spec)
    return spec.takeError();
  auto dataset = data::openDataset(*spec, data::Split::Train, plan.run().seed());
  if (!dataset)
    return dataset.takeError();
  SampledBatches sampled{std::move(*dataset), {}};
  for (int64_t rank = 0; rank < workers; ++rank) {
    auto iterator = workerBatches(plan, worker, *sampled.dataset, rank);
    if (!iterator)
      return iterator.takeError();
    sampled.iterators.push_back(std::move(*iterator));
  }
  return std::move(sampled);
}

// Adds the ids in `inputs` of one batch to `ids`.
void addIds(const data::Batch &batch, const std::set<std::string> &inputs, std::set<int64_t> &ids) {
  for (const std::string &input : inputs) {
    const runtime::Tensor &t = batch.at(input);
    for (int64_t i = 0; i < t.numElements(); ++i)
      ids.insert(t.dtype() == ir::DType::I64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i]);
  }
}

// The PS programs, in PS task order.
llvm::Expected<std::vector<std::unique_ptr<ir::Module>>> psPrograms(const plan::Plan &plan) {
  std::vector<std::unique_ptr<ir::Module>> programs;
  for (const plan::Task &t : plan.cluster().tasks()) {
    if (t.role() != "ps")
      continue;
    auto program = plan::parseProgram(*plan::findProgram(plan, t.name()));
    if (!program)
      return program.takeError();
    programs.push_back(std::move(*program));
  }
  return std::move(programs);
}

} // namespace

std::map<std::string, std::set<std::string>> rowPullIdInputsByTable(const ir::Module &worker) {
  std::map<std::string, std::set<std::string>> inputs;
  for (const auto &op : worker.ops()) {
    if (op->name() != "ps_pull_rows")
      continue;
    const ir::Value *indices = op->operand(1);
    while (indices->kind() == ir::ValueKind::OpResult && indices->definingOp()->numOperands() == 1)
      indices = indices->definingOp()->operand(0);
    if (indices->kind() == ir::ValueKind::Input)
      inputs[op->operand(0)->name()].insert(indices->name());
  }
  return inputs;
}

std::set<std::string> rowPullIdInputs(const ir::Module &worker) {
  std::set<std::string> inputs;
  for (const auto &[table, ids] : rowPullIdInputsByTable(worker))
    inputs.insert(ids.begin(), ids.end());
  return inputs;
}

llvm::Expected<std::optional<double>> sampleRowsPerStep(const plan::Plan &plan,
                                                        const ir::Module &worker,
                                                        llvm::StringRef dataSpec, int64_t batches,
                                                        int64_t workers) {
  std::set<std::string> idInputs = rowPullIdInputs(worker);
  if (idInputs.empty())
    return std::nullopt;
  auto sampled = sampledBatches(plan, worker, dataSpec, workers);
  if (!sampled)
    return sampled.takeError();
  const std::vector<data::BatchIterator> &iterators = sampled->iterators;
  const int64_t samples = std::min(batches, iterators.front().numBatches());
  if (samples <= 0)
    return std::nullopt;
  double distinct = 0;
  for (int64_t step = 0; step < samples; ++step) {
    std::set<int64_t> ids;
    for (const data::BatchIterator &iterator : iterators)
      addIds(iterator.batch(step), idInputs, ids);
    distinct += static_cast<double>(ids.size());
  }
  return distinct / static_cast<double>(samples) / static_cast<double>(idInputs.size());
}

llvm::Expected<plan::RowShares> sampleRowShares(const plan::Plan &plan, const ir::Module &worker,
                                                llvm::StringRef dataSpec, int64_t batches) {
  plan::RowShares shares;
  const std::map<std::string, std::set<std::string>> inputs = rowPullIdInputsByTable(worker);
  if (inputs.empty())
    return shares;
  auto sampled = sampledBatches(plan, worker, dataSpec, 1);
  if (!sampled)
    return sampled.takeError();
  const data::BatchIterator *iterator = &sampled->iterators.front();
  const int64_t samples = std::min(batches, iterator->numBatches());
  for (const auto &[table, idInputs] : inputs) {
    const plan::Variable *v = nullptr;
    for (const plan::Variable &candidate : plan.variables())
      if (candidate.name() == table)
        v = &candidate;
    const double rows = v ? plan::tableRows(*v) : 0;
    if (rows < 1 || samples <= 0)
      continue;
    // Each step's distinct ids, counted in the range of rows they fall in.
    std::vector<double> counts(kRowShareRanges, 0);
    double total = 0;
    for (int64_t step = 0; step < samples; ++step) {
      std::set<int64_t> ids;
      addIds(iterator->batch(step), idInputs, ids);
      for (int64_t id : ids) {
        if (id < 0 || static_cast<double>(id) >= rows)
          continue; // out of the table: the step's gather fails on it, no share of it
        counts[static_cast<size_t>(static_cast<double>(id) / rows * kRowShareRanges)] += 1;
        total += 1;
      }
    }
    if (total <= 0)
      continue;
    for (double &c : counts)
      c /= total;
    shares[table] = std::move(counts);
  }
  return shares;
}

llvm::Expected<bool> estimateRowsFromData(plan::Plan &plan, llvm::StringRef dataSpec) {
  const plan::Program *workerProgram = plan::findProgram(plan, "worker:0");
  if (!workerProgram)
    return false;
  auto worker = plan::parseProgram(*workerProgram);
  if (!worker)
    return worker.takeError();
  auto rows = sampleRowsPerStep(plan, **worker, dataSpec);
  if (!rows)
    return rows.takeError();
  if (!*rows)
    return false;
  auto shares = sampleRowShares(plan, **worker, dataSpec);
  if (!shares)
    return shares.takeError();
  auto ps = psPrograms(plan);
  if (!ps)
    return ps.takeError();
  std::vector<const ir::Module *> psModules;
  for (const auto &program : *ps)
    psModules.push_back(program.get());
  // With local aggregation, the rows a host's workers read together (workers 0 .. m-1 stand
  // for any m workers of a host).
  std::map<int, double> rowsOfWorkers;
  for (const plan::HostAggregation &a : plan.host_aggregation()) {
    if (rowsOfWorkers.count(a.members_size()))
      continue;
    auto together =
        sampleRowsPerStep(plan, **worker, dataSpec, kRowsPerStepSamples, a.members_size());
    if (!together)
      return together.takeError();
    if (*together)
      rowsOfWorkers[a.members_size()] = **together;
  }
  plan::estimatePlan(plan, **worker, psModules, *rows, rowsOfWorkers, *shares);
  for (plan::TableEstimate &t : *plan.mutable_estimate()->mutable_tables())
    t.set_source("sampled from " + dataSpec.str());
  for (plan::LocalAggregationEstimate &host : *plan.mutable_estimate()->mutable_local_aggregation())
    for (plan::TableEstimate &t : *host.mutable_tables())
      t.set_source("sampled from " + dataSpec.str());
  return true;
}

llvm::Expected<plan::PartitionResult> partitionWithData(std::unique_ptr<ir::Module> model,
                                                        const cluster::Cluster &cluster,
                                                        plan::PartitionOptions options,
                                                        llvm::StringRef dataSpec) {
  const bool given = options.rowsPerStep.has_value();
  if (!dataSpec.empty() && !given && options.automatic.any() &&
      plan::searchable(*model, cluster.numWorkers())) {
    // The rows a worker's step reads depend on the data and the batch, not on the placement:
    // sampled once on the hybrid plan (when it compiles; without one no table goes to PS).
    plan::PartitionOptions probe = options;
    probe.automatic = {};
    probe.placement.strategy = passes::Strategy::Hybrid;
    if (auto hybrid = plan::partition(*model, cluster, probe)) {
      auto rows = sampleRowsPerStep(hybrid->plan, *hybrid->programs.front(), dataSpec);
      if (!rows)
        return rows.takeError();
      options.rowsPerStep = *rows;
      auto shares = sampleRowShares(hybrid->plan, *hybrid->programs.front(), dataSpec);
      if (!shares)
        return shares.takeError();
      options.rowShares = std::move(*shares);
    } else {
      llvm::consumeError(hybrid.takeError());
    }
  }
  auto result = plan::partition(std::move(model), cluster, options);
  if (!result)
    return result.takeError();
  if (!dataSpec.empty() && !given)
    if (auto sampled = estimateRowsFromData(result->plan, dataSpec); !sampled)
      return sampled.takeError();
  return result;
}

} // namespace prism::runtime::job
