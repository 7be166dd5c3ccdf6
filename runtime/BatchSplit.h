// How a batch is split among workers (by rank) and among a worker's towers: contiguous slices
// in order, the first `batch % parts` one example longer. Data sharding and tower slicing use
// this one rule, so N workers × T towers see exactly the rows one device would.
#pragma once

#include <algorithm>
#include <cstdint>

namespace prism::runtime {

struct BatchSlice {
  int64_t begin = 0;
  int64_t size = 0;
};

inline BatchSlice splitBatch(int64_t batch, int64_t part, int64_t parts) {
  int64_t base = batch / parts, extra = batch % parts;
  return {part * base + std::min(part, extra), base + (part < extra ? 1 : 0)};
}

} // namespace prism::runtime
