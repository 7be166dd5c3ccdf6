// A worker's communication (runtime/job/WorkerCommunication.h) over real Gloo groups: what an
// all-reduce keeps as it is (so a GPU's staged all-reduce copies nothing through the host) and
// what it does not; the batch-weighted mean of buckets mixing tensors reduced where they lie and
// staged ones, on two ranks; with real parameter servers, the step's pulls in one call.
#include <gtest/gtest.h>

#include <future>

#include "ir/Collectives.h"
#include "runtime/job/WorkerCommunication.h"
#include "tests/dist/DistTestSupport.h"
#include "tests/ps/PsTestCluster.h"

using namespace prism;
using namespace prism::runtime;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<dist::Collective> soleRank(dist::CoordinatorClient &client) {
  auto collective = dist::Collective::create(client, "workers", 0, 1, "127.0.0.1", 10s);
  EXPECT_TRUE(bool(collective)) << llvm::toString(collective.takeError());
  return collective ? std::move(*collective) : nullptr;
}

// worker:0 of a one-worker job: the coordinator and the worker's registered client.
class WorkerCommunication : public ::testing::Test {
protected:
  void SetUp() override {
    coordinator = dist::testing::startCoordinator(1);
    ASSERT_TRUE(coordinator);
    client = std::make_unique<dist::CoordinatorClient>(
        dist::testing::clientOptions(coordinator->address(), "worker:0"));
    ASSERT_FALSE(bool(client->registerTask()));
  }

  decltype(dist::testing::startCoordinator(1)) coordinator;
  std::unique_ptr<dist::CoordinatorClient> client;
};

} // namespace

TEST_F(WorkerCommunication, ASoleWorkerWithTheWholeBatchKeepsItsValues) {
  auto collective = soleRank(*client);
  ASSERT_TRUE(collective);
  job::WorkerCommunication communication(0, std::move(collective), nullptr);
  communication.beginStep(0, 8, 8);
  EXPECT_TRUE(communication.keepsValues(ir::kWorkerGroup, 0));
  EXPECT_TRUE(communication.keepsValues(ir::kWorkerGroup, ir::kLossBucket));
  EXPECT_FALSE(communication.keepsValues("towers", 0)); // a group it does not know

  // A share of a larger batch is weighted: the values change.
  communication.beginStep(1, 8, 16);
  EXPECT_FALSE(communication.keepsValues(ir::kWorkerGroup, 0));
  Tensor t(ir::DType::F32, {2});
  t.data<float>()[0] = 2;
  t.data<float>()[1] = 4;
  ASSERT_FALSE(bool(communication.allReduce(ir::kWorkerGroup, 0, {&t})));
  ASSERT_FALSE(bool(communication.synchronize()));
  EXPECT_EQ(t.data<float>()[1], 2.0f); // 8 of 16 examples: half

  // Compressed gradients are coded even alone; the loss is not compressed.
  job::Compression halves;
  halves.precision = ir::ComputePrecision::BF16;
  auto again = soleRank(*client);
  ASSERT_TRUE(again);
  job::WorkerCommunication compressed(0, std::move(again), nullptr, halves);
  compressed.beginStep(0, 8, 8);
  EXPECT_FALSE(compressed.keepsValues(ir::kWorkerGroup, 0));
  EXPECT_TRUE(compressed.keepsValues(ir::kWorkerGroup, ir::kLossBucket));
}

namespace {

// Element i of rank r's tensors: (r + 1) × (i mod 7 + 1), small integers, so the weighted means
// below are exact in float32.
Tensor rankValues(int rank, int64_t elements) {
  Tensor t(ir::DType::F32, {elements});
  for (int64_t i = 0; i < elements; ++i)
    t.data<float>()[i] = static_cast<float>((rank + 1) * (i % 7 + 1));
  return t;
}

// Whether every element of `t` is the mean of rank 0 (4 of 16 examples) and rank 1 (12 of 16):
// 0.25 × x + 0.75 × 2x = 1.75x.
std::string checkMean(const Tensor &t, const std::string &name) {
  for (int64_t i = 0; i < t.numElements(); ++i)
    if (t.data<float>()[i] != 1.75f * static_cast<float>(i % 7 + 1))
      return name + " element " + std::to_string(i) + " is " + std::to_string(t.data<float>()[i]);
  return "";
}

} // namespace

// Large tensors (ir::reducedInPlace: 1 MiB and up on two ranks) are reduced where they lie, the
// rest through the bucket's buffer, spans of one call; a tensor that appears twice in a bucket
// comes out as the mean too.
TEST(WorkerCommunicationTwoRanks, BucketsMixingLargeAndSmallTensorsGetTheWeightedMean) {
  auto coordinator = dist::testing::startCoordinator(2);
  ASSERT_TRUE(coordinator);
  const int64_t large = ir::kInPlaceAllReduceBytesPerHop / 4 + 3, small = 5;
  ASSERT_TRUE(ir::reducedInPlace(large * 4, 2));
  ASSERT_FALSE(ir::reducedInPlace(large * 4, 3)); // 2 MiB for two hops
  auto rank = [&](int r) -> std::string {
    dist::CoordinatorClient client(
        dist::testing::clientOptions(coordinator->address(), "worker:" + std::to_string(r)));
    if (llvm::Error e = client.registerTask())
      return llvm::toString(std::move(e));
    auto collective = dist::Collective::create(client, "workers", r, 2, "127.0.0.1", 30s);
    if (!collective)
      return llvm::toString(collective.takeError());
    job::WorkerCommunication communication(r, std::move(*collective), nullptr);
    communication.beginStep(0, r == 0 ? 4 : 12, 16);
    Tensor a = rankValues(r, large), b = rankValues(r, small), c = rankValues(r, large + 1),
           d = rankValues(r, 1), twice = rankValues(r, large), alone = rankValues(r, small);
    for (auto [bucket, tensors] : {std::pair<int64_t, std::vector<Tensor *>>{0, {&a, &b, &c, &d}},
                                   {1, {&twice, &twice}},
                                   {2, {&alone, &a}}}) {
      if (llvm::Error e = communication.allReduce(ir::kWorkerGroup, bucket, tensors))
        return llvm::toString(std::move(e));
      if (llvm::Error e = communication.synchronize())
        return llvm::toString(std::move(e));
      if (bucket != 0)
        continue;
      if (std::string problem = checkMean(a, "a in bucket 0"); !problem.empty())
        return "rank " + std::to_string(r) + ": " + problem;
      a = rankValues(r, large); // reduced again in bucket 2, from its own values
    }
    for (auto [name, t] : {std::pair<const char *, Tensor *>{"a", &a},
                           {"b", &b},
                           {"c", &c},
                           {"d", &d},
                           {"twice", &twice},
                           {"alone", &alone}})
      if (std::string problem = checkMean(*t, name); !problem.empty())
        return "rank " + std::to_string(r) + ": " + problem;
    return "ok";
  };
  auto other = std::async(std::launch::async, rank, 1);
  const std::string mine = rank(0);
  ASSERT_EQ(other.wait_for(60s), std::future_status::ready) << "rank 1 hung";
  EXPECT_EQ(mine, "ok");
  EXPECT_EQ(other.get(), "ok");
}

namespace {

// The names of the recorded spans of `category`, in order.
std::vector<std::string> spansOf(const TraceRecorder &trace, llvm::StringRef category) {
  std::vector<std::string> names;
  for (const TraceRecorder::Recorded &span : trace.recorded())
    if (category == span.category)
      names.push_back(span.name);
  return names;
}

void expectInitialValue(llvm::Expected<Tensor> value, const std::string &name) {
  ASSERT_TRUE(bool(value)) << llvm::toString(value.takeError());
  for (int64_t i = 0; i < value->numElements(); ++i)
    ASSERT_EQ(value->data<float>()[i], static_cast<float>(ps::testing::initialValue(name, i)))
        << name << " element " << i;
}

} // namespace

TEST_F(WorkerCommunication, AStepPullsItsWholeVariablesInOneCall) {
  ps::testing::TestCluster servers(1);
  auto collective = soleRank(*client);
  ASSERT_TRUE(collective);
  job::WorkerCommunication communication(0, std::move(collective), servers.client());
  TraceRecorder trace("worker:0");
  communication.setTrace(&trace);
  communication.setStepPulls({"emb", "w", "bias"});
  for (int64_t step = 0; step < 2; ++step) {
    communication.beginStep(step, 8, 8);
    // In another order than the list: each comes from the step's one call.
    expectInitialValue(communication.pull("w"), "w");
    expectInitialValue(communication.pull("bias"), "bias");
    expectInitialValue(communication.pull("emb"), "emb");
    // A second pull of a variable in the step asks again.
    expectInitialValue(communication.pull("w"), "w");
    ASSERT_FALSE(bool(communication.finishStep()));
  }
  // Outside a step (an evaluation's pull) each variable is its own call.
  expectInitialValue(communication.pull("emb"), "emb");
  EXPECT_EQ(spansOf(trace, "ps_pull"),
            (std::vector<std::string>{"pull emb, w, bias", "pull w", "pull emb, w, bias", "pull w",
                                      "pull emb"}));
}
