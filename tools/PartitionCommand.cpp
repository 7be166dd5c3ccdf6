// `prism partition MODEL --cluster C -o plan.pb`: compile a single-device model into a plan.
#include <set>
#include <string>

#include "cluster/ClusterParser.h"
#include "ir/OpTable.h"
#include "passes/PassManager.h"
#include "plan/Estimate.h"
#include "plan/Partitioner.h"
#include "plan/PlanFile.h"
#include "plan/PlanVerifier.h"
#include "runtime/data/BatchIterator.h"
#include "runtime/data/DataSpec.h"
#include "tools/Commands.h"
#include "tools/Partition.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {
namespace {

struct PartitionArgs {
  std::string file;
  std::string output;
  std::string data;
  std::optional<double> rowsPerStep;
  bool stats = false;
  CompileArgs compile;
};

// Distinct rows per step, measured: the distinct ids each worker's share of a few global
// batches holds in the inputs its row pulls read.
llvm::Expected<std::optional<double>>
sampleRowsPerStep(const plan::Plan &plan, const ir::Module &worker, const std::string &dataSpec) {
  std::set<std::string> idInputs;
  for (const auto &op : worker.ops()) {
    if (op->name() != "ps_pull_rows")
      continue;
    const ir::Value *indices = op->operand(1);
    // Through tower slices to the input itself.
    while (indices->kind() == ir::ValueKind::OpResult && indices->definingOp()->numOperands() == 1)
      indices = indices->definingOp()->operand(0);
    if (indices->kind() == ir::ValueKind::Input)
      idInputs.insert(indices->name());
  }
  if (idInputs.empty())
    return std::nullopt;
  auto spec = runtime::data::parseDataSpec(dataSpec);
  if (!spec)
    return spec.takeError();
  auto dataset = runtime::data::openDataset(*spec, runtime::data::Split::Train, plan.run().seed());
  if (!dataset)
    return dataset.takeError();
  std::vector<runtime::data::InputSlot> slots;
  for (const auto &in : worker.inputs())
    slots.push_back({in->name(), in->type()});
  auto fields = runtime::data::requestsForInputs(**dataset, slots);
  if (!fields)
    return fields.takeError();
  int64_t workers = 0;
  for (const plan::Task &t : plan.cluster().tasks())
    workers += t.role() == "worker";
  runtime::data::BatchOptions options;
  options.batchSize = plan.run().global_batch();
  options.seed = plan.run().seed();
  options.numShards = workers;
  options.fields = *fields;
  auto batches = runtime::data::BatchIterator::create(**dataset, options);
  if (!batches)
    return batches.takeError();
  double distinct = 0;
  int64_t samples = 0;
  const int64_t kSampleBatches = 20;
  for (int64_t step = 0; step < std::min(kSampleBatches, batches->numBatches()); ++step) {
    runtime::data::Batch batch = batches->batch(step);
    std::set<int64_t> ids;
    for (const std::string &input : idInputs) {
      const runtime::Tensor &t = batch.at(input);
      for (int64_t i = 0; i < t.numElements(); ++i)
        ids.insert(t.dtype() == ir::DType::I64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i]);
    }
    distinct += static_cast<double>(ids.size());
    ++samples;
  }
  if (samples == 0)
    return std::nullopt;
  return distinct / static_cast<double>(samples) / static_cast<double>(idInputs.size());
}

int runPartition(const PartitionArgs &args) {
  auto model = loadModule(args.file, /*inferShapes=*/false);
  if (!model)
    return reportError(model.takeError());
  auto options = args.compile.toOptions();
  if (!options)
    return reportError(options.takeError());
  options->rowsPerStep = args.rowsPerStep;
  auto cluster = cluster::loadCluster(args.compile.cluster, args.compile.replicationKind());
  if (!cluster)
    return reportError(cluster.takeError());
  auto result = plan::partition(**model, *cluster, *options);
  if (!result)
    return reportError(result.takeError());
  plan::Plan &plan = result->plan;
  if (!args.data.empty() && !args.rowsPerStep) {
    auto worker = plan::parseProgram(*plan::findProgram(plan, "worker:0"));
    if (!worker)
      return reportError(worker.takeError());
    auto rows = sampleRowsPerStep(plan, **worker, args.data);
    if (!rows)
      return reportError(rows.takeError());
    if (*rows) {
      std::vector<std::unique_ptr<ir::Module>> ps;
      std::vector<const ir::Module *> psModules;
      for (const plan::Task &t : plan.cluster().tasks())
        if (t.role() == "ps") {
          auto program = plan::parseProgram(*plan::findProgram(plan, t.name()));
          if (!program)
            return reportError(program.takeError());
          ps.push_back(std::move(*program));
          psModules.push_back(ps.back().get());
        }
      plan::estimatePlan(plan, **worker, psModules, *rows);
      for (plan::TableEstimate &t : *plan.mutable_estimate()->mutable_tables())
        t.set_source("sampled from " + args.data);
    }
  }
  if (args.stats)
    printPartitionStatistics(*result, llvm::errs());
  if (auto e = plan::writePlan(plan, args.output))
    return reportError(std::move(e));
  printPlanSummary(plan, args.output, llvm::outs());
  return 0;
}

} // namespace

void registerPartitionCommand(CLI::App &app) {
  auto args = std::make_shared<PartitionArgs>();
  auto *cmd = app.add_subcommand("partition", "Compile a model for a cluster into a plan");
  cmd->add_option("file", args->file, "Model file (.prism)")->required();
  args->compile.addOptions(*cmd);
  cmd->add_option("-o,--output", args->output, "Where to write the plan (plan.pb)")->required();
  cmd->add_option("--rows-per-step", args->rowsPerStep,
                  "Distinct rows a worker reads per step from each PS table (for the estimate)");
  cmd->add_option("--data", args->data,
                  "Sample this data set to estimate the rows read per step (see prism train)");
  cmd->add_flag("--stats", args->stats, "Print each pass's statistics on stderr");
  cmd->callback([args]() {
    int status = runPartition(*args);
    if (status)
      throw CLI::RuntimeError(status);
  });
}

} // namespace prism::tools
