// Names the parallelizing passes, the plan and the runtime agree on for collective groups.
#pragma once

#include <cstdint>
#include <string>

namespace prism::ir {

// The group of every worker task: gradients of all-reduce variables and the loss are reduced
// over it.
constexpr const char *kWorkerGroup = "workers";
// The loss's all-reduce travels alone, as bucket -1; gradient buckets count up from 0 in the
// order backward produces them.
constexpr int64_t kLossBucket = -1;
// The all-reduces of replica_mean ops (synchronized batch statistics and their gradient sums)
// travel as buckets -2, -3, ... in program order: each alone, in float32, read mid-step.
constexpr int64_t kFirstReplicaMeanBucket = -2;

// How dumps, traces and stall reports name a bucket: `loss`, `replica mean K` (K from 0), or
// `bucket N`.
inline std::string bucketName(int64_t bucket) {
  if (bucket == kLossBucket)
    return "loss";
  if (bucket <= kFirstReplicaMeanBucket)
    return "replica mean " + std::to_string(kFirstReplicaMeanBucket - bucket);
  return "bucket " + std::to_string(bucket);
}

} // namespace prism::ir
