// Names the parallelizing passes, the plan and the runtime agree on for collective groups.
#pragma once

#include <cstdint>

namespace prism::ir {

// The group of every worker task: gradients of all-reduce variables and the loss are reduced
// over it.
constexpr const char *kWorkerGroup = "workers";
// The loss's all-reduce travels alone, as bucket -1; gradient buckets count up from 0 in the
// order backward produces them.
constexpr int64_t kLossBucket = -1;

} // namespace prism::ir
