// Options and output shared by the commands that compile plans.
#include "tools/Partition.h"

#include "ir/Diagnostic.h"
#include "plan/PlanDump.h"
#include "plan/PlanTasks.h"
#include "plan/PlanVariables.h"
#include "llvm/Support/Format.h"

namespace prism::tools {

void CompileArgs::addOptions(CLI::App &cmd, bool runOptions, bool clusterRequired) {
  cmd.add_option("--cluster", cluster,
                 "Cluster file (YAML, JSON, resource_info) or local:N[,ps=M][,devices=D]")
      ->required(clusterRequired);
  cmd.add_option("--strategy", strategy,
                 "hybrid (sparse to PS, dense all-reduced), allreduce, or ps");
  cmd.add_option("--replication", replication, "between-graph (a task per device) or in-graph");
  cmd.add_option("--partitions", partitions, "Row ranges per PS table (0: by size)");
  cmd.add_option("--bucket-mb", bucketMb, "All-reduce fusion bucket size in MiB");
  cmd.add_option("--partition-threshold-mb", partitionThresholdMb,
                 "Split PS tables larger than this over the PS tasks");
  cmd.add_flag("--no-fuse", noFuse, "Leave out the fusion passes");
  if (!runOptions)
    return;
  cmd.add_option("--batch", batch, "Global batch size (all workers together)");
  cmd.add_option("--steps", steps, "Training steps the plan runs (0: decided at run time)");
  cmd.add_option("--seed", seed, "Seed of initial values and data order");
}

cluster::Replication CompileArgs::replicationKind() const {
  return replication == "in-graph" ? cluster::Replication::InGraph
                                   : cluster::Replication::BetweenGraph;
}

llvm::Error CompileArgs::toOptions(plan::PartitionOptions &options) const {
  if (strategy != "hybrid" && strategy != "allreduce" && strategy != "ps")
    return ir::makeError("option --strategy: expected hybrid, allreduce or ps, got '" + strategy +
                         "'");
  if (replication != "between-graph" && replication != "in-graph")
    return ir::makeError("option --replication: expected between-graph or in-graph, got '" +
                         replication + "'");
  if (partitions < 0)
    return ir::makeError("option --partitions: expected 0 or more, got " +
                         std::to_string(partitions));
  if (!(bucketMb > 0))
    return ir::makeError("option --bucket-mb: expected a positive size, got " +
                         std::to_string(bucketMb));
  if (!(partitionThresholdMb > 0))
    return ir::makeError("option --partition-threshold-mb: expected a positive size, got " +
                         std::to_string(partitionThresholdMb));
  if (batch < 1)
    return ir::makeError("option --batch: expected at least 1, got " + std::to_string(batch));
  if (steps < 0)
    return ir::makeError("option --steps: expected 0 or more, got " + std::to_string(steps));
  options.strategy = strategy;
  options.partitions = partitions;
  options.bucketMb = bucketMb;
  options.partitionThresholdMb = partitionThresholdMb;
  options.globalBatch = batch;
  options.steps = steps;
  options.seed = seed;
  options.fuse = !noFuse;
  return llvm::Error::success();
}

void printPartitionStatistics(const plan::PartitionResult &result, llvm::raw_ostream &os) {
  size_t passWidth = 4, statWidth = 9;
  for (const auto &[pass, statistic] : result.statistics) {
    passWidth = std::max(passWidth, pass.size());
    statWidth = std::max(statWidth, statistic.first.size());
  }
  os << llvm::left_justify("pass", passWidth) << "  " << llvm::left_justify("statistic", statWidth)
     << "  count\n";
  for (const auto &[pass, statistic] : result.statistics)
    os << llvm::left_justify(pass, passWidth) << "  "
       << llvm::left_justify(statistic.first, statWidth) << "  " << statistic.second << "\n";
}

void printPlanSummary(const plan::Plan &plan, llvm::StringRef path, llvm::raw_ostream &os) {
  const int workers = plan::countTasks(plan, "worker"), ps = plan::countTasks(plan, "ps");
  os << "wrote " << path << ": " << plan.model() << ", " << plan.strategy() << ", "
     << plan.replication() << ", " << workers << (workers == 1 ? " worker" : " workers") << ", "
     << ps << " PS, " << plan.cluster().hosts_size()
     << (plan.cluster().hosts_size() == 1 ? " host" : " hosts") << "\n";
  int64_t reduced = 0, onPs = 0;
  double reducedBytes = 0, psBytes = 0;
  for (const plan::Variable &v : plan.variables()) {
    if (!v.trainable())
      continue;
    if (plan::placementOf(v) == ir::Placement::AllReduce) {
      ++reduced;
      reducedBytes += static_cast<double>(v.bytes());
    } else if (plan::onParameterServers(v)) {
      ++onPs;
      psBytes += static_cast<double>(v.bytes());
    }
  }
  size_t buckets = 0;
  for (const plan::CollectiveGroup &g : plan.groups())
    for (const plan::Bucket &b : g.buckets())
      buckets += b.id() >= 0;
  auto variables = [](int64_t n) {
    return std::to_string(n) + (n == 1 ? " variable" : " variables");
  };
  os << "  all-reduce: " << variables(reduced) << ", " << plan::formatBytes(reducedBytes) << " in "
     << buckets << (buckets == 1 ? " bucket" : " buckets") << "\n";
  os << "  parameter servers: " << variables(onPs) << ", " << plan::formatBytes(psBytes) << "\n";
  double workerBytes = 0;
  for (const plan::TaskEstimate &t : plan.estimate().tasks())
    if (t.task() == "worker:0")
      workerBytes = t.bytes_sent_per_step() + t.bytes_received_per_step();
  os << "  worker:0 sends and receives " << plan::formatBytes(workerBytes)
     << " per step (estimate); `prism dump " << path << "` shows the placement\n";
}

} // namespace prism::tools
