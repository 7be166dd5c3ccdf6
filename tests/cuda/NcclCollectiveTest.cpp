// NCCL all-reduce meeting through a real coordinator on loopback: one rank on GPU 0, then one
// rank per GPU as threads of this process. Every test skips where there is no CUDA device.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>

#include "CudaTestSupport.h"
#include "runtime/cuda/NcclCollective.h"
#include "tests/dist/DistTestSupport.h"

namespace prism::runtime::cuda {
namespace {

using namespace std::chrono_literals;
using dist::testing::testValue;
using testing::throwIfError;
using testing::valueOrThrow;

// Bounds a test's ranks; also the coordinator's heartbeat timeout (the ranks send none, and
// CUDA's first context on a device can take seconds).
constexpr auto kBound = 60s;

class NcclCollectiveTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (std::string reason = testing::noDeviceReason(); !reason.empty())
      GTEST_SKIP() << "no CUDA device: " << reason;
  }
};

// Rank `rank` of `size` on GPU `rank`: joins the group, all-reduces `count` test values and
// compares them with the sum in double. "success", or what went wrong.
std::string allReduceOnRank(const dist::Coordinator &coordinator, const std::string &group,
                            int rank, int size, size_t count) {
  try {
    dist::CoordinatorClient client(
        dist::testing::clientOptions(coordinator.address(), "worker:" + std::to_string(rank)));
    throwIfError(client.registerTask());
    auto collective =
        valueOrThrow(NcclCollective::create(client, group, rank, size, /*device=*/rank, 30s));
    CudaStream stream = valueOrThrow(CudaStream::create());
    Tensor input(ir::DType::F32, {static_cast<int64_t>(count)});
    for (size_t i = 0; i < count; ++i)
      input.data<float>()[i] = testValue(rank, i);
    DeviceBuffer buffer = valueOrThrow(DeviceBuffer::upload(input, stream.get()));
    throwIfError(collective->allReduceSum(buffer.data(), count, stream.get()));
    Tensor output = valueOrThrow(buffer.download({static_cast<int64_t>(count)}));
    for (size_t i = 0; i < count; ++i) {
      double expected = 0, magnitude = 0;
      for (int r = 0; r < size; ++r) {
        expected += testValue(r, i);
        magnitude += std::abs(testValue(r, i));
      }
      float actual = output.data<float>()[i];
      // One rank's sum is its input, exactly; otherwise each of size - 1 additions rounds once.
      bool right = size == 1 ? actual == input.data<float>()[i]
                             : std::abs(actual - expected) <= size * FLT_EPSILON * magnitude;
      if (!right)
        return "rank " + std::to_string(rank) + ", element " + std::to_string(i) + ": " +
               std::to_string(actual) + ", expected " + std::to_string(expected);
    }
    return "success";
  } catch (const std::exception &exception) {
    return exception.what();
  }
}

TEST_F(NcclCollectiveTest, OneRankAllReduceIsTheInput) {
  auto coordinator = dist::testing::startCoordinator(1, kBound);
  ASSERT_TRUE(coordinator);
  EXPECT_EQ(allReduceOnRank(*coordinator, "alone", 0, 1, 100003), "success");
}

TEST_F(NcclCollectiveTest, OneRankPerGpu) {
  int gpus = valueOrThrow(cudaDeviceCount());
  if (gpus < 2)
    GTEST_SKIP() << "one rank per GPU needs 2 GPUs or more, there is " << gpus;
  auto coordinator = dist::testing::startCoordinator(gpus, kBound);
  ASSERT_TRUE(coordinator);
  std::vector<std::future<std::string>> results;
  for (int rank = 0; rank < gpus; ++rank)
    results.push_back(std::async(std::launch::async, [&, rank] {
      return allReduceOnRank(*coordinator, "every-gpu", rank, gpus, 1000003);
    }));
  for (auto &result : results)
    EXPECT_EQ(result.wait_for(kBound) == std::future_status::ready ? result.get() : "hung",
              "success");
}

TEST_F(NcclCollectiveTest, RankOutOfRangeIsAnError) {
  auto coordinator = dist::testing::startCoordinator(1, kBound);
  ASSERT_TRUE(coordinator);
  dist::CoordinatorClient client(dist::testing::clientOptions(coordinator->address(), "worker:0"));
  auto collective = NcclCollective::create(client, "bad", 2, 2, 0, 1s);
  ASSERT_FALSE(bool(collective));
  EXPECT_NE(llvm::toString(collective.takeError()).find("rank 2 of 2 is out of range"),
            std::string::npos);
}

} // namespace
} // namespace prism::runtime::cuda
