// Timed all-reduces of one size (see AllReduceTiming.h).
#include "runtime/dist/AllReduceTiming.h"

#include <algorithm>
#include <chrono>

namespace prism::runtime::dist {

void busyFor(std::chrono::microseconds duration) {
  const auto until = std::chrono::steady_clock::now() + duration;
  volatile uint64_t sink = 0;
  while (std::chrono::steady_clock::now() < until)
    for (uint64_t i = 0; i < 1000; ++i)
      sink = sink + i;
}

const char *ringName(Ring ring) {
  return ring == Ring::Gloo ? "gloo" : "weighted";
}

llvm::Expected<std::vector<double>> timeAllReduces(Collective &group, Ring ring, size_t bytes,
                                                   int repeats,
                                                   std::chrono::microseconds workBefore) {
  using Clock = std::chrono::steady_clock;
  std::vector<float> data(std::max<size_t>(1, bytes / sizeof(float)), 1.0f);
  std::vector<double> times;
  times.reserve(static_cast<size_t>(std::max(repeats, 0)));
  for (int i = 0; i <= repeats; ++i) {
    if (auto e = group.barrier())
      return std::move(e);
    if (workBefore.count() > 0)
      busyFor(workBefore);
    const auto started = Clock::now();
    llvm::Error e = ring == Ring::Gloo
                        ? group.allReduceSum(data.data(), data.size())
                        : group.allReduceWeighted({{data.data(), data.size()}}, 1.0f);
    if (e)
      return std::move(e);
    if (i > 0)
      times.push_back(std::chrono::duration<double>(Clock::now() - started).count());
  }
  return times;
}

} // namespace prism::runtime::dist
