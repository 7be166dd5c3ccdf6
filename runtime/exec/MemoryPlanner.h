// Static memory planning: offsets in one arena for buffers with known lifetimes, so buffers
// whose lifetimes do not overlap share memory (greedy by size, as TFLite's arena planner).
#pragma once

#include <cstddef>
#include <vector>

#include "llvm/ADT/ArrayRef.h"

namespace prism::runtime {

struct BufferRequest {
  size_t bytes = 0;
  int firstUse = 0; // index of the op that writes it
  int lastUse = 0;  // index of the last op that reads it (inclusive)
};

struct MemoryPlan {
  std::vector<size_t> offsets; // per request, 64-byte aligned
  size_t totalBytes = 0;
};

MemoryPlan planMemory(llvm::ArrayRef<BufferRequest> requests);

} // namespace prism::runtime
