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

// Whether a tensor of `bytes` in a bucket of several is all-reduced where it lies among `ranks`
// ranks: the bucket's call reduces such tensors as spans of its buffer, and gathers the others
// into one buffer of its own, copied back after the call (a bucket's only tensor, or the only
// one left, is reduced where it lies too). In place, a tensor costs two passes over its bytes
// less (the weighted ring weights either as it goes) and, where a span ends inside a chunk of
// the ring, a message more in each of the ring's 2(ranks − 1) steps: on loopback a pass takes
// about 0.2 ns a byte and a message about 50 µs, so they break even at about 0.25 MiB a hop;
// this rule asks for four times that. The runtime (runtime/job/WorkerCommunication.cpp) and the
// simulator (plan/Simulator.cpp) both follow it.
constexpr int64_t kInPlaceAllReduceBytesPerHop = int64_t{1} << 20;
inline bool reducedInPlace(int64_t bytes, int64_t ranks) {
  return bytes >= kInPlaceAllReduceBytesPerHop * (ranks > 1 ? ranks - 1 : 1);
}

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
