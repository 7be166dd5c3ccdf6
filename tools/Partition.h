// What the commands that compile a plan share (`partition`, `train --cluster` and `verify`): the
// options, and the summary printed after compiling.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "cluster/Cluster.h"
#include "plan/Partitioner.h"
#include "prism/Prism.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {

struct CompileArgs {
  std::string cluster;
  // auto, or a strategy; --partitions: auto, a count or search; --bucket-mb: auto or a size.
  std::string strategy = "auto";
  std::string partitions = "auto";
  std::string bucketMb = "auto";
  bool explain = false; // --explain: print the automatic choices and their alternatives
  std::string profile;  // --profile: the cost profile the choices predict with; empty: cached
  std::string replication = cluster::replicationName(cluster::Replication::BetweenGraph).str();
  bool noFuse = false;
  std::string precision = ir::precisionName(ir::ComputePrecision::F32).str();
  std::string lrScaleRule = plan::lrScaleRuleName(plan::LearningRateScaling().rule).str();
  std::string compress = "none";
  std::string localAggregation = plan::localAggregationName(plan::LocalAggregationMode::Auto).str();
  std::string sync = plan::syncModeName(plan::SyncMode::Sync).str();
  int64_t maxStaleness = 0, backupWorkers = 0;
  CLI::Option *maxStalenessOption = nullptr; // given or not: unset means unbounded
  std::string elastic;                       // --elastic MIN:MAX; empty: not elastic
  // With --partitions search: --search-partitions (empty: the defaults) and --search-steps.
  std::string searchPartitions;
  int64_t searchSteps = plan::PartitionSearchOptions().timedSteps;
  // The flags' values land here; the defaults are the typed options' own.
  plan::PartitionOptions options;

  // --cluster, --strategy, --replication, --partitions, --bucket-mb, --partition-threshold-mb,
  // --no-fuse, --precision, --accumulate, --lr-scale-rule, --lr-base-batch, --compress,
  // --error-feedback, --local-aggregation, --sync, --max-staleness, --backup-workers,
  // --elastic, --explain, --profile, --search-partitions, --search-steps; with `runOptions`
  // also --batch, --steps, --seed.
  void addOptions(CLI::App &cmd, bool runOptions = true, bool clusterRequired = true);
  cluster::Replication replicationKind() const;
  // Checks the values (naming the option at fault) and returns the partitioner's options.
  llvm::Expected<plan::PartitionOptions> toOptions() const;
  // The same, checked, as the library's compile options.
  llvm::Expected<api::CompileOptions> toApiOptions() const;
  // --lr-scale-rule and --lr-base-batch, checked (also for `prism train` on one device).
  llvm::Expected<plan::LearningRateScaling> lrScaling() const;
  // --sync, --max-staleness and --backup-workers, checked (all but against the worker count).
  llvm::Expected<plan::Synchronization> synchronization() const;
  // --partitions, --search-partitions and --search-steps, checked, into `options`.
  llvm::Error partitionCount(plan::PartitionOptions &options) const;
};

// Every pass's statistics: pass, statistic, count, in aligned columns.
void printPartitionStatistics(const plan::PartitionResult &result, llvm::raw_ostream &os);
// A few lines: what was written, the tasks, where the variables went, bytes per step.
// `temporary`: a plan the command removes when the job ends (prism train --cluster).
void printPlanSummary(const plan::Plan &plan, llvm::StringRef path, llvm::raw_ostream &os,
                      bool temporary = false);

} // namespace prism::tools
