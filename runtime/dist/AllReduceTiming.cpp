// Timed Gloo all-reduces of one size (see AllReduceTiming.h).
#include "runtime/dist/AllReduceTiming.h"

#include <algorithm>
#include <chrono>

namespace prism::runtime::dist {

llvm::Expected<std::vector<double>> timeAllReduces(Collective &group, size_t bytes, int repeats) {
  using Clock = std::chrono::steady_clock;
  std::vector<float> data(std::max<size_t>(1, bytes / sizeof(float)), 1.0f);
  std::vector<double> times;
  times.reserve(static_cast<size_t>(std::max(repeats, 0)));
  for (int i = 0; i <= repeats; ++i) {
    if (auto e = group.barrier())
      return std::move(e);
    const auto started = Clock::now();
    if (auto e = group.allReduceSum(data.data(), data.size()))
      return std::move(e);
    if (i > 0)
      times.push_back(std::chrono::duration<double>(Clock::now() - started).count());
  }
  return times;
}

} // namespace prism::runtime::dist
