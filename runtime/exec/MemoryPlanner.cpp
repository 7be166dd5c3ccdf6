// Static memory planning, greedy by size.
#include "runtime/exec/MemoryPlanner.h"

#include <algorithm>
#include <numeric>

namespace prism::runtime {

namespace {
constexpr size_t kAlignment = 64;
size_t alignUp(size_t n) {
  return (n + kAlignment - 1) / kAlignment * kAlignment;
}
} // namespace

MemoryPlan planMemory(llvm::ArrayRef<BufferRequest> requests) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first; ties by first use keep the plan deterministic.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (requests[a].bytes != requests[b].bytes)
      return requests[a].bytes > requests[b].bytes;
    return requests[a].firstUse < requests[b].firstUse;
  });
  std::vector<size_t> placed;
  for (size_t r : order) {
    const BufferRequest &req = requests[r];
    size_t bytes = alignUp(std::max<size_t>(req.bytes, 1));
    // Buffers alive at the same time as this one, by offset.
    std::vector<size_t> live;
    for (size_t p : placed)
      if (requests[p].firstUse <= req.lastUse && req.firstUse <= requests[p].lastUse)
        live.push_back(p);
    std::sort(live.begin(), live.end(),
              [&](size_t a, size_t b) { return plan.offsets[a] < plan.offsets[b]; });
    size_t offset = 0;
    for (size_t p : live) {
      if (plan.offsets[p] >= offset + bytes)
        break; // fits in the gap before p
      offset = std::max(offset, plan.offsets[p] + alignUp(std::max<size_t>(requests[p].bytes, 1)));
    }
    plan.offsets[r] = offset;
    plan.totalBytes = std::max(plan.totalBytes, offset + bytes);
    placed.push_back(r);
  }
  return plan;
}

} // namespace prism::runtime
