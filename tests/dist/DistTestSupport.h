// Helpers shared by the distributed runtime's tests: a coordinator on a free loopback port,
// clients for it, and the all-reduce check that threads and worker processes both run.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "runtime/dist/Collective.h"
#include "runtime/dist/Coordinator.h"
#include "runtime/dist/CoordinatorClient.h"

namespace prism::runtime::dist::testing {

inline const std::string kTestToken = "test-token-5f1c";

inline std::vector<std::string> workerNames(int count) {
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i)
    names.push_back("worker:" + std::to_string(i));
  return names;
}

// A coordinator for `workers` workers on 127.0.0.1 and a port of the kernel's choice; null (and
// the error printed) when it cannot start.
inline std::unique_ptr<Coordinator>
startCoordinator(int workers, std::chrono::milliseconds heartbeatTimeout = std::chrono::seconds(5),
                 int elasticMin = 0, int elasticMax = 0) {
  CoordinatorOptions options;
  options.jobToken = kTestToken;
  options.expectedTasks = workerNames(workers);
  options.heartbeatTimeout = heartbeatTimeout;
  options.elasticMin = elasticMin;
  options.elasticMax = elasticMax;
  auto coordinator = Coordinator::start(std::move(options));
  if (!coordinator) {
    std::fprintf(stderr, "%s\n", llvm::toString(coordinator.takeError()).c_str());
    return nullptr;
  }
  return std::move(*coordinator);
}

inline CoordinatorClientOptions clientOptions(const std::string &address, const std::string &task,
                                              const std::string &token = kTestToken) {
  CoordinatorClientOptions options;
  options.address = address;
  options.jobToken = token;
  options.taskName = task;
  options.callTimeout = std::chrono::seconds(10);
  return options;
}

// How long onEachRank waits for a rank's body.
constexpr std::chrono::seconds kRankBound(60);

// Runs `body(rank, client)` for each rank on its own thread, each with its own registered client;
// returns what each body returned, or "hung" for one that did not end within kRankBound.
inline std::vector<std::string>
onEachRank(const Coordinator &coordinator, int ranks,
           const std::function<std::string(int, CoordinatorClient &)> &body) {
  std::vector<std::future<std::string>> results;
  for (int rank = 0; rank < ranks; ++rank)
    results.push_back(std::async(std::launch::async, [&, rank] {
      CoordinatorClient client(
          clientOptions(coordinator.address(), "worker:" + std::to_string(rank)));
      if (llvm::Error error = client.registerTask())
        return llvm::toString(std::move(error));
      return body(rank, client);
    }));
  std::vector<std::string> messages;
  for (auto &result : results)
    messages.push_back(result.wait_for(kRankBound) == std::future_status::ready ? result.get()
                                                                                : "hung");
  return messages;
}

// The message of `error`, or "success".
inline std::string message(llvm::Error error) {
  return error ? llvm::toString(std::move(error)) : "success";
}

// Records the reason of the first (and only) onAbort call.
struct AbortRecorder {
  std::shared_ptr<std::promise<std::string>> promise =
      std::make_shared<std::promise<std::string>>();
  std::shared_future<std::string> reason = promise->get_future().share();
  CoordinatorClient::AbortHandler handler() const {
    return [promise = promise](std::string reason) { promise->set_value(std::move(reason)); };
  }
};

// A value that differs by rank and element, with both signs and several magnitudes.
inline float testValue(int rank, size_t i) {
  return static_cast<float>(std::sin(0.37 * i + 1.3 * rank) * 1000.0 * (rank + 1) +
                            1.0 / (i + 1.0));
}

// All-reduces `count` test values and compares them with the sum computed in double: "" when
// right, otherwise what went wrong.
inline std::string checkFloatAllReduce(Collective &collective, size_t count) {
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i)
    data[i] = testValue(collective.rank(), i);
  if (llvm::Error error = collective.allReduceSum(data.data(), count))
    return llvm::toString(std::move(error));
  for (size_t i = 0; i < count; ++i) {
    double expected = 0, magnitude = 0;
    for (int rank = 0; rank < collective.size(); ++rank) {
      expected += testValue(rank, i);
      magnitude += std::abs(testValue(rank, i));
    }
    // Each of the size - 1 float additions rounds once.
    if (std::abs(data[i] - expected) > collective.size() * FLT_EPSILON * magnitude)
      return "rank " + std::to_string(collective.rank()) + ", element " + std::to_string(i) +
             " of " + std::to_string(count) + ": " + std::to_string(data[i]) + ", expected " +
             std::to_string(expected);
  }
  return "";
}

} // namespace prism::runtime::dist::testing
