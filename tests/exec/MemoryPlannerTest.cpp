// The memory planner: buffers whose lifetimes do not overlap share bytes, others never do.
#include <gtest/gtest.h>

#include "runtime/exec/Executor.h"
#include "runtime/exec/MemoryPlanner.h"

using namespace prism::runtime;

TEST(MemoryPlanner, ReusesMemoryOfDeadBuffers) {
  // a: [0,1], b: [1,2], c: [2,3]: a and c never live together.
  std::vector<BufferRequest> requests = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}};
  MemoryPlan plan = planMemory(requests);
  EXPECT_EQ(plan.offsets[0], plan.offsets[2]);
  EXPECT_NE(plan.offsets[0], plan.offsets[1]);
  EXPECT_EQ(plan.totalBytes, 2 * 1024u);
}

TEST(MemoryPlanner, OverlappingBuffersNeverShareBytes) {
  std::vector<BufferRequest> requests;
  for (int i = 0; i < 40; ++i)
    requests.push_back({static_cast<size_t>(64 * (1 + (i * 7) % 13)), i % 10, i % 10 + i % 4});
  MemoryPlan plan = planMemory(requests);
  for (size_t a = 0; a < requests.size(); ++a)
    for (size_t b = a + 1; b < requests.size(); ++b) {
      bool timeOverlap = requests[a].firstUse <= requests[b].lastUse &&
                         requests[b].firstUse <= requests[a].lastUse;
      bool spaceOverlap = plan.offsets[a] < plan.offsets[b] + requests[b].bytes &&
                          plan.offsets[b] < plan.offsets[a] + requests[a].bytes;
      EXPECT_FALSE(timeOverlap && spaceOverlap) << a << " and " << b;
    }
}
