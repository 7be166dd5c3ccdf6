// Options and output shared by the commands that compile plans.
#include "tools/Partition.h"

#include <limits>

#include "ir/Diagnostic.h"
#include "plan/CommunicationCost.h"
#include "plan/ElasticRange.h"
#include "plan/PlanDump.h"
#include "plan/PlanTasks.h"
#include "plan/PlanVariables.h"
#include "llvm/Support/Format.h"

namespace prism::tools {

void CompileArgs::addOptions(CLI::App &cmd, bool runOptions, bool clusterRequired) {
  cmd.add_option("--cluster", cluster,
                 "Cluster file (YAML, JSON, resource_info) or local:N[,ps=M][,devices=D|gpu|gpu:K]")
      ->required(clusterRequired);
  cmd.add_option("--strategy", strategy,
                 "auto (per variable, from predicted step times), hybrid (sparse to PS, dense "
                 "all-reduced), allreduce, or ps")
      ->capture_default_str();
  cmd.add_option("--replication", replication, "between-graph (a task per device) or in-graph")
      ->capture_default_str();
  cmd.add_option("--partitions", partitions,
                 "Row ranges per PS table: auto (from predicted step times), a count (0: by "
                 "size), or search: time a few steps of each count of --search-partitions in "
                 "the job and train with the fastest")
      ->capture_default_str();
  cmd.add_option("--search-partitions", searchPartitions,
                 "With --partitions search: the counts to time, e.g. 1,2,4 (default 1,2,4,8 up "
                 "to the PS tasks and the largest table's rows)");
  cmd.add_option("--search-steps", searchSteps,
                 "With --partitions search: timed steps per count, after 2 warm-up steps")
      ->capture_default_str();
  cmd.add_option("--bucket-mb", bucketMb,
                 "All-reduce fusion bucket size in MiB, or auto (from predicted step times)")
      ->capture_default_str();
  cmd.add_flag("--explain", explain,
               "Print each automatic choice with the predicted step of its alternatives");
  cmd.add_option("--profile", profile,
                 "Cost profile (`prism calibrate`) the automatic choices predict with; default: "
                 "this machine's cached one, else the built-in one");
  cmd.add_option("--partition-threshold-mb", options.placement.partitionThresholdMb,
                 "Split PS tables larger than this over the PS tasks")
      ->capture_default_str();
  cmd.add_flag("--no-fuse", noFuse, "Leave out the fusion passes");
  cmd.add_option("--precision", precision,
                 "f32, or bf16: matmuls and convolutions compute in bf16, variables stay f32")
      ->capture_default_str();
  cmd.add_option("--accumulate", options.accumulate,
                 "Micro-batches per optimizer step (gradient accumulation; 1: none)")
      ->capture_default_str();
  cmd.add_option("--lr-scale-rule", lrScaleRule,
                 "none, or linear: lr times the global batch over --lr-base-batch")
      ->capture_default_str();
  cmd.add_option("--lr-base-batch", options.lrScaling.baseBatch,
                 "The batch the model's lr is for (--lr-scale-rule linear)")
      ->capture_default_str();
  cmd.add_option("--compress", compress,
                 "none, fp16 or bf16: gradients (all-reduce buckets, PS pushes) and pulled rows "
                 "travel as 16-bit floats")
      ->capture_default_str();
  cmd.add_flag("--error-feedback", options.errorFeedback,
               "With --compress: add each worker's rounding error to its next contribution");
  cmd.add_option("--local-aggregation", localAggregation,
                 "auto, on or off: the workers of a host combine their PS pushes and pulls and "
                 "one of them sends them (auto: between-graph, hosts with several workers, "
                 "tables pulled by rows)")
      ->capture_default_str();
  cmd.add_option("--sync", sync,
                 "sync, or async: parameter servers apply each worker's push on arrival "
                 "(all-reduce variables stay synchronous)")
      ->capture_default_str();
  maxStalenessOption = cmd.add_option("--max-staleness", maxStaleness,
                                      "With --sync async: the most steps a worker may run ahead of "
                                      "the slowest (default: no bound)");
  cmd.add_option("--backup-workers", backupWorkers,
                 "Each synchronous step applies the first workers - K gradients to arrive and "
                 "drops the late ones; every trained variable goes to the parameter servers")
      ->capture_default_str();
  cmd.add_option("--elastic", elastic,
                 "MIN:MAX: a lost worker leaves the others training while MIN remain, and "
                 "workers may join (prism task --join) up to MAX");
  if (!runOptions)
    return;
  cmd.add_option("--batch", options.globalBatch, "Global batch size (all workers together)")
      ->capture_default_str();
  cmd.add_option("--steps", options.steps, "Training steps the plan runs (0: decided at run time)");
  cmd.add_option("--seed", options.seed, "Seed of initial values and data order");
}

cluster::Replication CompileArgs::replicationKind() const {
  return replication == cluster::replicationName(cluster::Replication::InGraph)
             ? cluster::Replication::InGraph
             : cluster::Replication::BetweenGraph;
}

namespace {

// "auto" (sets `automatic`), or what `parse` makes of the text.
template <class T, class Parse>
llvm::Error parseAutomatic(const std::string &text, bool &automatic, T &value, Parse parse) {
  automatic = text == "auto";
  if (automatic)
    return llvm::Error::success();
  auto parsed = parse(text);
  if (!parsed)
    return parsed.takeError();
  value = *parsed;
  return llvm::Error::success();
}

llvm::Expected<double> parseSize(llvm::StringRef option, const std::string &text) {
  double value = 0;
  if (llvm::StringRef(text).getAsDouble(value) || !(value > 0))
    return ir::makeError("option " + option + ": expected auto or a positive size, got '" + text +
                         "'");
  return value;
}

} // namespace

llvm::Expected<plan::PartitionOptions> CompileArgs::toOptions() const {
  plan::PartitionOptions checked = options;
  if (auto e = parseAutomatic(strategy, checked.automatic.strategy, checked.placement.strategy,
                              [](const std::string &text) -> llvm::Expected<passes::Strategy> {
                                auto parsed = passes::parseStrategy(text);
                                if (parsed)
                                  return parsed;
                                llvm::consumeError(parsed.takeError());
                                return ir::makeError("option --strategy: expected auto, hybrid, "
                                                     "allreduce or ps, got '" +
                                                     text + "'");
                              }))
    return std::move(e);
  if (auto e = partitionCount(checked))
    return std::move(e);
  if (auto e =
          parseAutomatic(bucketMb, checked.automatic.bucketMb, checked.routing.bucketMb,
                         [](const std::string &text) { return parseSize("--bucket-mb", text); }))
    return std::move(e);
  if (replication != cluster::replicationName(cluster::Replication::BetweenGraph) &&
      replication != cluster::replicationName(cluster::Replication::InGraph))
    return ir::makeError("option --replication: expected between-graph or in-graph, got '" +
                         replication + "'");
  if (!(options.placement.partitionThresholdMb > 0))
    return ir::makeError("option --partition-threshold-mb: expected a positive size, got " +
                         std::to_string(options.placement.partitionThresholdMb));
  if (options.globalBatch < 1)
    return ir::makeError("option --batch: expected at least 1, got " +
                         std::to_string(options.globalBatch));
  if (options.accumulate < 1)
    return ir::makeError("option --accumulate: expected a number of micro-batches per step, at "
                         "least 1, got " +
                         std::to_string(options.accumulate));
  if (options.steps < 0)
    return ir::makeError("option --steps: expected 0 or more, got " +
                         std::to_string(options.steps));
  auto scaling = lrScaling();
  if (!scaling)
    return scaling.takeError();
  checked.lrScaling = *scaling;
  checked.fuse = !noFuse;
  auto parsedPrecision = ir::parsePrecision(precision);
  if (!parsedPrecision)
    return ir::withContext(parsedPrecision.takeError(), "option --precision");
  checked.precision = *parsedPrecision;
  auto parsedCompress = plan::parseCompression(compress);
  if (!parsedCompress)
    return ir::withContext(parsedCompress.takeError(), "option --compress");
  checked.compress = *parsedCompress;
  if (checked.errorFeedback && checked.compress == ir::ComputePrecision::F32)
    return ir::makeError("option --error-feedback: it needs --compress fp16 or bf16");
  auto parsedAggregation = plan::parseLocalAggregation(localAggregation);
  if (!parsedAggregation)
    return ir::withContext(parsedAggregation.takeError(), "option --local-aggregation");
  checked.localAggregation = *parsedAggregation;
  auto synchronization = this->synchronization();
  if (!synchronization)
    return synchronization.takeError();
  checked.synchronization = *synchronization;
  if (!profile.empty()) {
    auto read = plan::readProfile(profile);
    if (!read)
      return ir::withContext(read.takeError(), "option --profile");
    checked.profile = std::make_shared<const plan::CostProfile>(std::move(*read));
    checked.profileSource = profile;
  }
  auto parsedElastic = plan::parseElasticRange(elastic);
  if (!parsedElastic)
    return parsedElastic.takeError();
  checked.elasticMin = parsedElastic->min;
  checked.elasticMax = parsedElastic->max;
  return checked;
}

llvm::Expected<api::CompileOptions> CompileArgs::toApiOptions() const {
  auto checked = toOptions();
  if (!checked)
    return checked.takeError();
  api::CompileOptions result;
  result.cluster = cluster;
  result.strategy = strategy;
  result.replication = replication;
  if (!checked->automatic.partitions)
    result.partitions = checked->placement.partitions;
  if (!checked->automatic.bucketMb)
    result.bucketMb = checked->routing.bucketMb;
  result.profile = profile;
  if (checked->partitionSearch) {
    result.partitionSearch = true;
    result.searchPartitions = checked->partitionSearch->candidates;
    result.searchSteps = checked->partitionSearch->timedSteps;
  }
  result.partitionThresholdMb = checked->placement.partitionThresholdMb;
  result.batch = checked->globalBatch;
  result.steps = checked->steps;
  result.seed = checked->seed;
  result.fuse = checked->fuse;
  result.precision = ir::precisionName(checked->precision).str();
  result.accumulate = checked->accumulate;
  if (checked->elasticMax > 0)
    result.elastic =
        std::to_string(checked->elasticMin) + ":" + std::to_string(checked->elasticMax);
  result.lrScaleRule = plan::lrScaleRuleName(checked->lrScaling.rule).str();
  result.lrBaseBatch = checked->lrScaling.baseBatch;
  result.compress = plan::compressionName(checked->compress).str();
  result.errorFeedback = checked->errorFeedback;
  result.localAggregation = plan::localAggregationName(checked->localAggregation).str();
  result.sync = plan::syncModeName(checked->synchronization.mode).str();
  result.maxStaleness = checked->synchronization.maxStaleness;
  result.backupWorkers = checked->synchronization.backupWorkers;
  return result;
}

llvm::Expected<plan::Synchronization> CompileArgs::synchronization() const {
  plan::Synchronization result;
  auto mode = plan::parseSyncMode(sync);
  if (!mode)
    return mode.takeError();
  result.mode = *mode;
  if (maxStalenessOption && maxStalenessOption->count() > 0)
    result.maxStaleness = maxStaleness;
  result.backupWorkers = backupWorkers;
  // The worker count is the cluster's: the partitioner checks --backup-workers against it.
  if (auto e = plan::checkSynchronization(result, std::numeric_limits<int64_t>::max()))
    return std::move(e);
  return result;
}

llvm::Error CompileArgs::partitionCount(plan::PartitionOptions &checked) const {
  auto parsed = plan::parsePartitions(partitions);
  if (!parsed)
    return parsed.takeError();
  checked.automatic.partitions = parsed->automatic;
  if (!parsed->automatic)
    checked.placement.partitions = parsed->count;
  if (!parsed->search) {
    if (!searchPartitions.empty())
      return ir::makeError("option --search-partitions: it needs --partitions search, got "
                           "--partitions " +
                           partitions);
    return llvm::Error::success();
  }
  plan::PartitionSearchOptions search;
  if (!searchPartitions.empty()) {
    auto counts = plan::parseSearchPartitions(searchPartitions);
    if (!counts)
      return counts.takeError();
    search.candidates = std::move(*counts);
  }
  if (searchSteps < 1)
    return ir::makeError("option --search-steps: expected at least 1 timed step, got " +
                         std::to_string(searchSteps));
  search.timedSteps = searchSteps;
  checked.partitionSearch = std::move(search);
  return llvm::Error::success();
}

llvm::Expected<plan::LearningRateScaling> CompileArgs::lrScaling() const {
  plan::LearningRateScaling scaling = options.lrScaling;
  auto rule = plan::parseLrScaleRule(lrScaleRule);
  if (!rule)
    return rule.takeError();
  scaling.rule = *rule;
  if (scaling.baseBatch < 1)
    return ir::makeError("option --lr-base-batch: expected at least 1, got " +
                         std::to_string(scaling.baseBatch));
  return scaling;
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

void printPlanSummary(const plan::Plan &plan, llvm::StringRef path, llvm::raw_ostream &os,
                      bool temporary) {
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
  if (plan.has_partition_search())
    os << "  partition search: " << plan::candidateCounts(plan.partition_search())
       << " row ranges per table, each timed in the job; it trains with the fastest\n";
  if (plan.host_aggregation_size() > 0)
    os << "  local aggregation: " << plan.host_aggregation_size()
       << (plan.host_aggregation_size() == 1 ? " host pushes and pulls" : " hosts push and pull")
       << " once for their workers\n";
  double workerBytes = 0;
  for (const plan::TaskEstimate &t : plan.estimate().tasks())
    if (t.task() == "worker:0")
      workerBytes = t.bytes_sent_per_step() + t.bytes_received_per_step();
  os << "  worker:0 sends and receives " << plan::formatBytes(workerBytes) << " per step (estimate";
  if (!plan.run().compress().empty())
    os << ", gradients in " << plan.run().compress()
       << (plan.run().error_feedback() ? " with error feedback" : "");
  os << ")";
  if (temporary)
    os << "; the plan goes when the job ends (`prism partition -o FILE` keeps one)\n";
  else
    os << "; `prism dump " << path << "` shows the placement\n";
}

} // namespace prism::tools
