// Timed all-reduces of one size: what `prism calibrate` fits its all-reduce cost to and
// `prism bench-allreduce` reports.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/dist/Collective.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::dist {

// The ring an all-reduce takes: Gloo's (Collective::allReduceSum, its event loop moving the
// bytes) or the weighted ring a training step's buckets take (Collective::allReduceWeighted, over
// the group's own connections), here with weight 1.
enum class Ring { Gloo, Weighted };

// "gloo" or "weighted"
const char *ringName(Ring ring);

// Every rank of `group` calls it with the same arguments, at the same point. One untimed
// all-reduce of `bytes` (as float32 elements; the first of a size sets up the ring's buffers), then
// `repeats` timed ones, each entered after a barrier so that it times the collective, not the
// ranks' arrival, and after `workBefore` of each rank's own work when it is given (as a training
// step's all-reduces follow its kernels). Returns their durations in seconds, as this rank saw
// them.
llvm::Expected<std::vector<double>>
timeAllReduces(Collective &group, Ring ring, size_t bytes, int repeats,
               std::chrono::microseconds workBefore = std::chrono::microseconds(0));

// Keeps this thread busy (computing, not waiting) for `duration`.
void busyFor(std::chrono::microseconds duration);

} // namespace prism::runtime::dist
