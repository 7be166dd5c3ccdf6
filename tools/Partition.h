// What the commands that compile a plan share (`partition`, `train --cluster` and `verify`): the
// options, and the summary printed after compiling.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "cluster/Cluster.h"
#include "plan/Partitioner.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {

struct CompileArgs {
  std::string cluster;
  std::string strategy = "hybrid";
  std::string replication = "between-graph";
  int64_t partitions = 0;
  double bucketMb = 25;
  double partitionThresholdMb = 8;
  int64_t batch = 64;
  int64_t steps = 0;
  uint64_t seed = 0;
  bool noFuse = false;

  // --cluster, --strategy, --replication, --partitions, --bucket-mb, --partition-threshold-mb,
  // --no-fuse; with `runOptions` also --batch, --steps, --seed.
  void addOptions(CLI::App &cmd, bool runOptions = true, bool clusterRequired = true);
  cluster::Replication replicationKind() const;
  // Checks the values (naming the option at fault) and fills `options`.
  llvm::Error toOptions(plan::PartitionOptions &options) const;
};

// Every pass's statistics: pass, statistic, count, in aligned columns.
void printPartitionStatistics(const plan::PartitionResult &result, llvm::raw_ostream &os);
// A few lines: what was written, the tasks, where the variables went, bytes per step.
void printPlanSummary(const plan::Plan &plan, llvm::StringRef path, llvm::raw_ostream &os);

} // namespace prism::tools
