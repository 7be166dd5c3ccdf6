// Scaling on paper: a model partitioned and its step simulated on clusters of GPU hosts of
// growing size, per strategy (`prism simulate MODEL --scale ...`; docs/simulate.md, "Scale on
// paper").
#pragma once

#include <cstdint>
#include <vector>

#include "cluster/Cluster.h"
#include "ir/Module.h"
#include "passes/ParallelizeOptions.h"
#include "plan/CostProfile.h"
#include "plan/Partitioner.h"
#include "llvm/Support/Error.h"

namespace prism::plan {

struct ScaleOptions {
  std::vector<int> workers; // the worker counts to simulate, each at least 1
  std::vector<passes::Strategy> strategies = {passes::Strategy::Hybrid, passes::Strategy::AllReduce,
                                              passes::Strategy::ParameterServer};
  int gpusPerHost = 8;
  uint64_t linkBitsPerSec = 10'000'000'000;
  int psPerHost = 1;           // parameter servers per host, under the strategies that use them
  int64_t batchPerWorker = 64; // weak scaling: the global batch is workers × this
  // The partitioner's other options; the strategy, the PS count and the global batch are set
  // per point, and placement.partitions when 0: a range of each table per server.
  PartitionOptions partition;
};

struct ScalePoint {
  int workers = 0, hosts = 0;
  passes::Strategy strategy = passes::Strategy::Hybrid;
  int64_t globalBatch = 0;
  double stepSeconds = 0, samplesPerSecond = 0;
  // samples/s over workers × the same strategy's samples/s with one worker (1 is linear).
  double efficiency = 0;
};

// The cluster of `workers` GPU workers: ceil(workers / gpusPerHost) hosts on addresses of their
// own (10.0.x.y), every one with gpusPerHost devices gpu:0.. but the last, which has the rest;
// `psPerHost` parameter servers on each; every link at `linkBitsPerSec`.
cluster::ClusterSpec scaleClusterSpec(int workers, int gpusPerHost, int psPerHost,
                                      uint64_t linkBitsPerSec);

// Every worker count × strategy, by worker count then strategy in the options' order. The
// efficiency's one-worker reference is simulated too when 1 is not among the counts.
llvm::Expected<std::vector<ScalePoint>>
simulateScaling(const ir::Module &model, const ScaleOptions &options, const CostProfile &profile);

} // namespace prism::plan
