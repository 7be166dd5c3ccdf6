// The partitioner: compiles a single-device training module for a cluster. It runs the
// parallelizing passes (classify, replicate, place, route), splits the routed module into one
// program per task, and emits the plan with its estimate. The plan is verified before it is
// returned.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cluster/Cluster.h"
#include "ir/Module.h"
#include "passes/Pass.h"
#include "plan/plan.pb.h"
#include "llvm/Support/Error.h"

namespace prism::plan {

struct PartitionOptions {
  std::string strategy = "hybrid"; // hybrid | allreduce | ps
  int64_t partitions = 0;          // row ranges per PS table; 0: by size
  double partitionThresholdMb = 8; // tables above this are split over the PS tasks
  double bucketMb = 25;            // all-reduce fusion bucket size
  int64_t globalBatch = 64;
  int64_t steps = 0;
  uint64_t seed = 0;
  // Distinct rows a worker reads per step from each PS table; unset: estimated as uniform draws.
  std::optional<double> rowsPerStep;
  bool fuse = true;     // run the fusion passes on the programs
  std::string jobToken; // empty: a fresh random token
};

struct PartitionResult {
  Plan plan;
  // Every pass's statistics, in pipeline order (for `--stats`).
  std::vector<std::pair<std::string, passes::Pass::Statistic>> statistics;
};

// `model` is the user's module (forward, loss, optimizer). Errors name the option, the cluster
// or the model location at fault.
llvm::Expected<PartitionResult> partition(const ir::Module &model, const cluster::Cluster &cluster,
                                          const PartitionOptions &options);

// A fresh random job token (32 hex digits).
std::string makeJobToken();

} // namespace prism::plan
