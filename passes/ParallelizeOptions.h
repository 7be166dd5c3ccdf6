// The options of the parallelizing passes, typed, each default defined here once. `prism opt`
// reads them from its `--key=value` flags (fromPassOptions); the partitioner fills them from
// the cluster and its own flags and hands them to the passes (addTo).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "passes/Pass.h"
#include "llvm/Support/Error.h"

namespace prism::passes {

// Where trainable variables go: sparse ones to PS and dense ones to all-reduce (hybrid),
// everything to all-reduce, or everything to parameter servers.
enum class Strategy : uint8_t { Hybrid, AllReduce, ParameterServer };
llvm::StringRef strategyName(Strategy strategy); // "hybrid", "allreduce", "ps"
// The error names the option (`--strategy`) and the text.
llvm::Expected<Strategy> parseStrategy(llvm::StringRef text);

// place-variables: --strategy, --ps, --partitions, --partition-threshold-mb, --ps-variables,
// --allreduce-variables.
struct PlaceVariablesOptions {
  Strategy strategy = Strategy::Hybrid;
  // Trainable variables placed by name whatever the strategy says (the automatic strategy's
  // per-variable choice, plan/AutoParallel.h); comma-separated in the pass options.
  std::vector<std::string> psVariables, allReduceVariables;
  int64_t psTasks = 1;             // parameter-server tasks to balance over
  int64_t partitions = 0;          // row ranges per PS table; 0: by size
  double partitionThresholdMb = 8; // a table splits into ceil(size / this) ranges (at most psTasks)

  static llvm::Expected<PlaceVariablesOptions> fromPassOptions(const PassOptions &options);
  void addTo(PassOptions &options) const;
};

// route-gradients: --bucket-mb.
struct RouteGradientsOptions {
  double bucketMb = 25; // all-reduce fusion bucket size

  static llvm::Expected<RouteGradientsOptions> fromPassOptions(const PassOptions &options);
  void addTo(PassOptions &options) const;
};

// replicate-between-graph (--workers) and replicate-in-graph (--devices).
struct ReplicateOptions {
  int64_t workers = 1; // worker tasks (between-graph)
  int64_t devices = 1; // towers in each worker (in-graph)

  static llvm::Expected<ReplicateOptions> fromPassOptions(const PassOptions &options);
  void addTo(PassOptions &options) const;
};

} // namespace prism::passes
