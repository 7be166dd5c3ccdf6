// Local aggregation per host with real gRPC on loopback: a host of two workers (0 leads, 1 is a
// member) in front of the two test servers. The servers see one contribution per step, with
// the host's combined gradients and summed weight; row pulls of the host are one pull of the
// union of its rows; a member that never comes is named when the wait ends.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "PsTestCluster.h"
#include "runtime/ps/HostAggregator.h"

namespace prism::runtime::ps {
namespace {

using testing::kLearningRate;
using testing::kToken;
using testing::TestCluster;

Tensor rowsOf(std::vector<int64_t> ids) {
  Tensor t(ir::DType::I64, {static_cast<int64_t>(ids.size())});
  std::copy(ids.begin(), ids.end(), t.data<int64_t>());
  return t;
}

Tensor valuesOf(std::vector<int64_t> shape, std::vector<float> values) {
  Tensor t(ir::DType::F32, std::move(shape));
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

struct Host {
  std::unique_ptr<PsClient> leaderClient;
  std::unique_ptr<HostAggregator> aggregator;
  std::unique_ptr<HostChannel> leader, member;

  Host(const TestCluster &cluster, std::chrono::milliseconds timeout) {
    leaderClient = cluster.client();
    HostAggregatorOptions options;
    options.host = "h0";
    options.members = {0, 1};
    options.ps = leaderClient.get();
    options.jobToken = kToken;
    options.timeout = timeout;
    auto started = HostAggregator::start(std::move(options));
    EXPECT_TRUE(static_cast<bool>(started)) << llvm::toString(started.takeError());
    aggregator = std::move(*started);
    leader = aggregator->leaderChannel();
    auto connected = connectToHostAggregator(aggregator->endpoint(), 1, leaderClient->variables(),
                                             kToken, timeout, std::nullopt, "worker:0");
    EXPECT_TRUE(static_cast<bool>(connected));
    member = std::move(*connected);
  }
};

TEST(HostAggregator, TheServersSeeOneContributionWithTheHostsWeight) {
  TestCluster cluster(1); // only worker:0, the leader, pushes to the servers
  Host host(cluster, std::chrono::milliseconds(20000));
  auto before = cluster.client()->pull("emb", 0);
  auto wBefore = cluster.client()->pull("w", 0);
  ASSERT_TRUE(before && wBefore);

  // The leader (weight 3) has rows 1 and 5; the member (weight 1) rows 1, 7 and 7 again, and a
  // dense gradient of w.
  std::vector<Gradient> leaderGradients = {
      Gradient::ofRows("emb", rowsOf({1, 5}), valuesOf({2, 3}, {1, 2, 3, 4, 5, 6}))};
  std::vector<float> ones(8, 1.0f);
  std::vector<Gradient> memberGradients = {
      Gradient::ofRows("emb", rowsOf({1, 7, 7}), valuesOf({3, 3}, {8, 8, 8, 1, 1, 1, 2, 2, 2})),
      Gradient::ofDense("w", valuesOf({4, 2}, ones))};
  auto member =
      std::async(std::launch::async, [&] { return host.member->push(0, 1.0, memberGradients); });
  llvm::Error leaderPushed = host.leader->push(0, 3.0, leaderGradients);
  ASSERT_FALSE(static_cast<bool>(leaderPushed)) << llvm::toString(std::move(leaderPushed));
  llvm::Error memberPushed = member.get();
  ASSERT_FALSE(static_cast<bool>(memberPushed)) << llvm::toString(std::move(memberPushed));
  EXPECT_EQ(host.aggregator->pushesCombined(), 1);

  auto after = cluster.client()->pull("emb", 1);
  auto wAfter = cluster.client()->pull("w", 1);
  ASSERT_TRUE(after && wAfter);
  // The batch-weighted mean over the host's two workers: (3 g_leader + 1 g_member) / 4.
  const float step = static_cast<float>(kLearningRate) / 4;
  auto expectRow = [&](int64_t row, std::vector<float> gradient) {
    for (int k = 0; k < 3; ++k)
      EXPECT_NEAR(after->data<float>()[row * 3 + k],
                  before->data<float>()[row * 3 + k] - step * gradient[k], 1e-6)
          << "row " << row << " element " << k;
  };
  expectRow(1, {3 * 1 + 8, 3 * 2 + 8, 3 * 3 + 8});
  expectRow(5, {3 * 4, 3 * 5, 3 * 6});
  expectRow(7, {1 + 2, 1 + 2, 1 + 2});
  expectRow(2, {0, 0, 0});
  for (int i = 0; i < 8; ++i)
    EXPECT_NEAR(wAfter->data<float>()[i], wBefore->data<float>()[i] - step, 1e-6);
}

TEST(HostAggregator, RowPullsOfTheHostAreOnePullOfTheUnion) {
  TestCluster cluster(1);
  Host host(cluster, std::chrono::milliseconds(20000));
  auto direct = cluster.client();
  const uint64_t received = direct->bytesReceived();
  auto expected = direct->pullRows("emb", rowsOf({1, 2, 7}), 0);
  ASSERT_TRUE(static_cast<bool>(expected));
  const uint64_t unionBytes = direct->bytesReceived() - received;

  const uint64_t leaderBefore = host.leaderClient->bytesReceived();
  auto member = std::async(std::launch::async, [&] {
    return host.member->pullRows(0, "emb", rowsOf({7, 1, 7}), 0);
  });
  auto mine = host.leader->pullRows(0, "emb", rowsOf({1, 2}), 0);
  auto theirs = member.get();
  ASSERT_TRUE(mine && theirs);
  // The leader fetched rows 1, 2 and 7 once: as many bytes as one pull of the union.
  EXPECT_EQ(host.leaderClient->bytesReceived() - leaderBefore, unionBytes);
  auto row = [&](const Tensor &t, int64_t i) {
    return std::vector<float>(t.data<float>() + 3 * i, t.data<float>() + 3 * i + 3);
  };
  EXPECT_EQ(mine->shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(theirs->shape(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(row(*mine, 0), row(*expected, 0));
  EXPECT_EQ(row(*mine, 1), row(*expected, 1));
  EXPECT_EQ(row(*theirs, 0), row(*expected, 2));
  EXPECT_EQ(row(*theirs, 1), row(*expected, 0));
  EXPECT_EQ(row(*theirs, 2), row(*expected, 2));
  // The second pull of the same table in the step is a round of its own.
  auto again = std::async(std::launch::async, [&] { return host.member->pull(0, "w", 0); });
  auto w = host.leader->pull(0, "w", 0);
  auto wMember = again.get();
  ASSERT_TRUE(w && wMember);
  EXPECT_EQ(w->shape(), wMember->shape());
}

TEST(HostAggregator, AMemberThatNeverComesIsNamed) {
  TestCluster cluster(1);
  Host host(cluster, std::chrono::milliseconds(200));
  llvm::Error e = host.leader->push(0, 1.0, {});
  ASSERT_TRUE(static_cast<bool>(e));
  EXPECT_EQ(ir::errorCode(e), ir::ErrorCode::DeadlineExceeded);
  std::string message = ir::messageOf(std::move(e));
  EXPECT_NE(message.find("local aggregation on host h0: push of step 0 timed out waiting for "
                         "worker:1"),
            std::string::npos)
      << message;
}

TEST(HostAggregator, CallersMustBeMembersWithTheJobToken) {
  TestCluster cluster(1);
  Host host(cluster, std::chrono::milliseconds(2000));
  auto stranger =
      connectToHostAggregator(host.aggregator->endpoint(), 5, host.leaderClient->variables(),
                              kToken, std::chrono::milliseconds(2000), std::nullopt, "worker:0");
  ASSERT_TRUE(static_cast<bool>(stranger));
  llvm::Error e = (*stranger)->push(0, 1.0, {});
  ASSERT_TRUE(static_cast<bool>(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("worker:5 is not a worker of host h0"),
            std::string::npos);
  auto wrongToken =
      connectToHostAggregator(host.aggregator->endpoint(), 1, host.leaderClient->variables(),
                              "wrong", std::chrono::milliseconds(2000), std::nullopt, "worker:0");
  ASSERT_TRUE(static_cast<bool>(wrongToken));
  e = (*wrongToken)->push(0, 1.0, {});
  ASSERT_TRUE(static_cast<bool>(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("missing or wrong job token"), std::string::npos);
}

} // namespace
} // namespace prism::runtime::ps
