// Tests of Gloo collectives that meet through the coordinator: ranks as threads of this process,
// real TCP between them on loopback.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <limits>
#include <map>

#include "DistTestSupport.h"
#include "runtime/HalfFloat.h"

namespace prism::runtime::dist {
namespace {

using namespace std::chrono_literals;
using testing::clientOptions;
using testing::message;
using testing::onEachRank;

TEST(CollectiveTest, ThreeRanksAllReduceFloats) {
  auto coordinator = testing::startCoordinator(3);
  ASSERT_TRUE(coordinator);
  auto messages = onEachRank(*coordinator, 3, [](int rank, CoordinatorClient &client) {
    auto collective = Collective::create(client, "floats", rank, 3, "127.0.0.1", 30s);
    if (!collective)
      return llvm::toString(collective.takeError());
    for (size_t count : {size_t(1), size_t(1000), size_t(1000003)})
      if (std::string problem = testing::checkFloatAllReduce(**collective, count); !problem.empty())
        return problem;
    return message((*collective)->barrier());
  });
  EXPECT_EQ(messages, std::vector<std::string>(3, "success"));
}

TEST(CollectiveTest, ThreeRanksAllReduceDoubles) {
  auto coordinator = testing::startCoordinator(3);
  ASSERT_TRUE(coordinator);
  auto messages = onEachRank(*coordinator, 3, [](int rank, CoordinatorClient &client) {
    auto collective = Collective::create(client, "doubles", rank, 3, "127.0.0.1", 30s);
    if (!collective)
      return llvm::toString(collective.takeError());
    // 1 / (rank + 3) does not add up exactly in binary: the sum shows the rounding of doubles.
    std::vector<double> data(4097);
    for (size_t i = 0; i < data.size(); ++i)
      data[i] = (i + 1.0) / (rank + 3.0);
    if (llvm::Error error = (*collective)->allReduceSum(data.data(), data.size()))
      return llvm::toString(std::move(error));
    for (size_t i = 0; i < data.size(); ++i) {
      double expected = (i + 1.0) / 3.0 + (i + 1.0) / 4.0 + (i + 1.0) / 5.0;
      if (std::abs(data[i] - expected) > 1e-12 * expected)
        return "element " + std::to_string(i) + ": " + std::to_string(data[i]);
    }
    return std::string("success");
  });
  EXPECT_EQ(messages, std::vector<std::string>(3, "success"));
}

// 16-bit all-reduce (--compress): small integers add up exactly in fp16 and bf16; other values
// within the rounding of each hop.
TEST(CollectiveTest, ThreeRanksAllReduceHalfFloats) {
  auto coordinator = testing::startCoordinator(3);
  ASSERT_TRUE(coordinator);
  auto messages = onEachRank(*coordinator, 3, [](int rank, CoordinatorClient &client) {
    auto collective = Collective::create(client, "halves", rank, 3, "127.0.0.1", 30s);
    if (!collective)
      return llvm::toString(collective.takeError());
    for (ir::ComputePrecision precision :
         {ir::ComputePrecision::FP16, ir::ComputePrecision::BF16}) {
      const size_t n = 100003;
      std::vector<float> exact(n), inexact(n);
      for (size_t i = 0; i < n; ++i) {
        exact[i] = static_cast<float>((i % 32) * (rank + 1)); // sums to 6 (i % 32) <= 186
        inexact[i] = 0.01f * std::sin(0.001f * static_cast<float>(i)) / (rank + 3.0f);
      }
      for (auto *values : {&exact, &inexact}) {
        std::vector<uint16_t> wire(n);
        encodeHalf(values->data(), wire.data(), static_cast<int64_t>(n), precision);
        if (llvm::Error error = (*collective)->allReduceSum(wire.data(), n, precision))
          return llvm::toString(std::move(error));
        decodeHalf(wire.data(), values->data(), static_cast<int64_t>(n), precision);
      }
      // Three rounded inputs and two rounded additions, each off by at most half a unit in the
      // last place (2^-11 of the value in fp16, 2^-8 in bf16; fp16 subnormals by 2^-25).
      const double unit = precision == ir::ComputePrecision::FP16 ? 0x1p-11 : 0x1p-8;
      for (size_t i = 0; i < n; ++i) {
        if (exact[i] != static_cast<float>(6 * (i % 32)))
          return "exact element " + std::to_string(i) + ": " + std::to_string(exact[i]);
        double x = 0.01 * std::sin(0.001 * static_cast<double>(i));
        double expected = x / 3 + x / 4 + x / 5;
        if (std::abs(inexact[i] - expected) > 5 * unit * std::abs(expected) + 2e-7)
          return "element " + std::to_string(i) + ": " + std::to_string(inexact[i]) +
                 ", expected " + std::to_string(expected);
      }
    }
    return std::string("success");
  });
  EXPECT_EQ(messages, std::vector<std::string>(3, "success"));
}

// Rank r's weight in the weighted all-reduce tests: all different, none a power of two.
double testWeight(int rank) {
  return (rank + 1.0) / 7.0;
}

// The spans the weighted all-reduce tests cut a buffer of `count` into: the whole buffer, or
// pieces of lengths 1, 3, 0 and 2 (cut short at the end), then a quarter of it, then a fifth of
// the rest and the rest, so that spans begin and end inside the ring's chunks and segments.
template <typename T> std::vector<WeightedSpan<T>> spansOf(T *data, size_t count, bool split) {
  if (!split)
    return {{data, count}};
  std::vector<WeightedSpan<T>> spans;
  size_t at = 0;
  auto take = [&](size_t n) {
    n = std::min(n, count - at);
    spans.push_back({data + at, n});
    at += n;
  };
  for (size_t n : {size_t(1), size_t(3), size_t(0), size_t(2), count / 4})
    take(n);
  take((count - at) / 5);
  take(count - at);
  return spans;
}

// Σ_r w_r · x_r through allReduceWeighted against the same sum in double, for counts shorter
// than the ring's segments (some empty), uneven ones and large ones, in one span or several,
// interleaved with plain sums on the same group; "" when right.
template <typename T> std::string checkWeightedAllReduce(Collective &collective, bool split) {
  const int ranks = collective.size();
  for (size_t count : {size_t(1), size_t(2), size_t(5), size_t(7), size_t(1000), size_t(1000003)}) {
    std::vector<T> data(count);
    for (size_t i = 0; i < count; ++i)
      data[i] = static_cast<T>(testing::testValue(collective.rank(), i));
    const T weight = static_cast<T>(testWeight(collective.rank()));
    if (llvm::Error error =
            collective.allReduceWeighted(spansOf(data.data(), count, split), weight))
      return llvm::toString(std::move(error));
    for (size_t i = 0; i < count; ++i) {
      double expected = 0, magnitude = 0;
      for (int rank = 0; rank < ranks; ++rank) {
        const double term = static_cast<double>(static_cast<T>(testWeight(rank))) *
                            static_cast<double>(static_cast<T>(testing::testValue(rank, i)));
        expected += term;
        magnitude += std::abs(term);
      }
      // A rounded product per rank and size - 1 rounded additions.
      const double epsilon = std::numeric_limits<T>::epsilon();
      if (std::abs(static_cast<double>(data[i]) - expected) > 2 * ranks * epsilon * magnitude)
        return "rank " + std::to_string(collective.rank()) + " of " + std::to_string(ranks) +
               ", element " + std::to_string(i) + " of " + std::to_string(count) +
               (split ? " (in spans)" : "") + ": " + std::to_string(data[i]) + ", expected " +
               std::to_string(expected);
    }
    if (std::string problem = testing::checkFloatAllReduce(collective, count); !problem.empty())
      return "a plain sum after the weighted one: " + problem;
  }
  return "";
}

// onEachRank with a group of `ranks` made for each: what `body(group)` returned on each rank, or
// the error that kept the group from forming.
std::vector<std::string> inGroup(int ranks, const std::function<std::string(Collective &)> &body) {
  auto coordinator = testing::startCoordinator(ranks);
  if (!coordinator)
    return {"no coordinator"};
  return onEachRank(*coordinator, ranks, [&](int rank, CoordinatorClient &client) {
    auto group = Collective::create(client, "group", rank, ranks, "127.0.0.1", 30s);
    return group ? body(**group) : llvm::toString(group.takeError());
  });
}

TEST(CollectiveTest, WeightedAllReduceOnTwoThreeAndFourRanks) {
  for (int ranks : {2, 3, 4}) {
    auto messages = inGroup(ranks, [](Collective &group) {
      for (bool split : {false, true}) {
        if (std::string problem = checkWeightedAllReduce<float>(group, split); !problem.empty())
          return problem;
        if (std::string problem = checkWeightedAllReduce<double>(group, split); !problem.empty())
          return problem;
      }
      return message(group.barrier());
    });
    EXPECT_EQ(messages, std::vector<std::string>(static_cast<size_t>(ranks), "success"))
        << ranks << " ranks";
  }
}

// One rank holds the whole sum: its values times its weight, in each span.
TEST(CollectiveTest, WeightedAllReduceOfOneRankIsItsWeightedValues) {
  auto messages = inGroup(1, [](Collective &group) {
    std::vector<float> data = {1.0f, -2.0f, 3.5f};
    const std::vector<WeightedSpan<float>> spans = {{data.data(), 1}, {data.data() + 1, 2}};
    if (llvm::Error error = group.allReduceWeighted(spans, 0.25f))
      return llvm::toString(std::move(error));
    return data == std::vector<float>{0.25f, -0.5f, 0.875f} ? std::string("success")
                                                            : std::string("not weighted");
  });
  EXPECT_EQ(messages, std::vector<std::string>{"success"});
}

TEST(CollectiveTest, OneRankGroupIsItsOwnSum) {
  auto coordinator = testing::startCoordinator(1);
  ASSERT_TRUE(coordinator);
  auto messages = onEachRank(*coordinator, 1, [](int rank, CoordinatorClient &client) {
    auto collective = Collective::create(client, "alone", rank, 1, "127.0.0.1", 10s);
    if (!collective)
      return llvm::toString(collective.takeError());
    if (std::string problem = testing::checkFloatAllReduce(**collective, 10); !problem.empty())
      return problem;
    return message((*collective)->barrier());
  });
  EXPECT_EQ(messages, std::vector<std::string>{"success"});
}

// Each thread of this process by id, with its nice value.
std::map<pid_t, int> threadNiceValues() {
  std::map<pid_t, int> values;
  for (const auto &entry : std::filesystem::directory_iterator("/proc/self/task")) {
    pid_t thread = std::stoi(entry.path().filename().string());
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, static_cast<id_t>(thread));
    if (errno == 0)
      values[thread] = nice;
  }
  return values;
}

TEST(CollectiveTest, EventLoopThreadRunsBelowTheCallersPriority) {
  const int callerNice = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
  const int expected = Collective::kEventLoopNice;
  if (callerNice >= expected)
    GTEST_SKIP() << "this process already runs at nice " << callerNice;
  auto coordinator = testing::startCoordinator(1);
  ASSERT_TRUE(coordinator);
  auto messages = onEachRank(*coordinator, 1, [&](int rank, CoordinatorClient &client) {
    std::map<pid_t, int> before = threadNiceValues();
    auto collective = Collective::create(client, "nice", rank, 1, "127.0.0.1", 10s);
    if (!collective)
      return llvm::toString(collective.takeError());
    int lowered = 0;
    for (auto [thread, nice] : threadNiceValues())
      if (!before.count(thread) && nice == expected)
        ++lowered;
    if (lowered != 1)
      return "threads started at nice " + std::to_string(expected) + ": " +
             std::to_string(lowered) + ", expected 1 (Gloo's event loop)";
    int nice = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
    if (nice != callerNice)
      return "the caller's nice value became " + std::to_string(nice);
    return message((*collective)->barrier());
  });
  EXPECT_EQ(messages, std::vector<std::string>{"success"});
}

TEST(CollectiveTest, RankWhosePeerNeverComesFails) {
  auto coordinator = testing::startCoordinator(3);
  ASSERT_TRUE(coordinator);
  // Ranks 0 and 1 of 3 meet; rank 2 never shows up.
  auto messages = onEachRank(*coordinator, 2, [](int rank, CoordinatorClient &client) {
    auto collective = Collective::create(client, "incomplete", rank, 3, "127.0.0.1", 1500ms);
    return collective ? std::string("created") : llvm::toString(collective.takeError());
  });
  ASSERT_EQ(messages.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(messages[rank].find("rendezvous at 127.0.0.1 in group 'incomplete' failed at rank " +
                                  std::to_string(rank) + " of 3"),
              std::string::npos)
        << messages[rank];
    EXPECT_NE(messages[rank].find("DEADLINE_EXCEEDED"), std::string::npos) << messages[rank];
  }
}

TEST(CollectiveTest, UnusableBindAddressIsAnError) {
  auto coordinator = testing::startCoordinator(1);
  ASSERT_TRUE(coordinator);
  CoordinatorClient client(clientOptions(coordinator->address(), "worker:0"));
  // 192.0.2.0/24 is reserved for documentation: no interface of this host has it.
  auto collective = Collective::create(client, "nowhere", 0, 2, "192.0.2.1", 1s);
  ASSERT_FALSE(bool(collective));
  std::string error = llvm::toString(collective.takeError());
  EXPECT_NE(error.find("rendezvous at 192.0.2.1 in group 'nowhere' failed at rank 0 of 2"),
            std::string::npos)
      << error;
}

TEST(CollectiveTest, BadRankIsAnError) {
  auto coordinator = testing::startCoordinator(1);
  ASSERT_TRUE(coordinator);
  CoordinatorClient client(clientOptions(coordinator->address(), "worker:0"));
  auto collective = Collective::create(client, "g", 3, 3, "127.0.0.1", 1s);
  ASSERT_FALSE(bool(collective));
  EXPECT_EQ(llvm::toString(collective.takeError()),
            "error: group 'g': rank 3 of 3 is out of range");
}

} // namespace
} // namespace prism::runtime::dist
