// Parallel loops for the CPU kernels: an index range split into one contiguous block per OpenMP
// thread, run inline when the range is too small for threads to pay for themselves.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace prism::runtime::cpu {

// Work per thread below which starting a parallel region costs more than it saves: about 10 µs
// of streaming a simple elementwise loop. Kernels with costlier elements pass smaller grains.
constexpr int64_t kCheapGrain = int64_t(1) << 15;
constexpr int64_t kCostlyGrain = int64_t(1) << 12;

// How many blocks [0, n) is split into: at most `threads`, each at least `grain` long.
inline int parallelBlocks(int64_t n, int threads, int64_t grain) {
  int64_t blocks = std::min<int64_t>(threads, n / std::max<int64_t>(grain, 1));
  return static_cast<int>(std::max<int64_t>(blocks, 1));
}

// Calls body(block, begin, end) for `blocks` contiguous blocks that cover [0, n), one per
// thread; body must be safe to run concurrently on different blocks.
template <typename Body> void forEachBlock(int64_t n, int blocks, const Body &body) {
  if (n <= 0)
    return;
  if (blocks <= 1) {
    body(0, int64_t(0), n);
    return;
  }
#pragma omp parallel for num_threads(blocks) schedule(static, 1)
  for (int block = 0; block < blocks; ++block) {
    int64_t begin = n * block / blocks, end = n * (block + 1) / blocks;
    if (begin < end)
      body(block, begin, end);
  }
}

// Calls body(begin, end) on disjoint blocks that cover [0, n), using at most `threads` threads.
template <typename Body> void parallelFor(int64_t n, int threads, int64_t grain, const Body &body) {
  forEachBlock(n, parallelBlocks(n, threads, grain),
               [&](int, int64_t begin, int64_t end) { body(begin, end); });
}

} // namespace prism::runtime::cpu
