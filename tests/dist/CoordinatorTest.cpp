// Tests of the coordinator over real gRPC on loopback: job token, registration, key-value store,
// barriers, heartbeat loss, failure reports and shutdown.
#include <thread>

#include <gtest/gtest.h>

#include "DistTestSupport.h"
#include "ir/Diagnostic.h"
#include "runtime/dist/Membership.h"

namespace prism::runtime::dist {
namespace {

using namespace std::chrono_literals;
using testing::AbortRecorder;
using testing::clientOptions;
using testing::message;
using testing::startCoordinator;

// Generous bounds for things that should happen in milliseconds, so a loaded machine never fails
// a test that is right; a hang still ends in a failure.
constexpr auto kBound = 20s;

TEST(CoordinatorTest, RightTokenRegisters) {
  auto coordinator = startCoordinator(2);
  ASSERT_TRUE(coordinator);
  EXPECT_GT(coordinator->port(), 0);
  CoordinatorClient client(clientOptions(coordinator->address(), "worker:1"));
  EXPECT_EQ(message(client.registerTask()), "success");
  EXPECT_EQ(message(client.set("k", "v")), "success");
}

TEST(CoordinatorTest, WrongTokenIsRefused) {
  auto coordinator = startCoordinator(1);
  ASSERT_TRUE(coordinator);
  CoordinatorClient client(clientOptions(coordinator->address(), "worker:0", "not-the-token"));
  llvm::Error refused = client.registerTask();
  EXPECT_EQ(ir::errorCode(refused), ir::ErrorCode::PermissionDenied);
  std::string error = message(std::move(refused));
  EXPECT_NE(error.find("UNAUTHENTICATED"), std::string::npos) << error;
  EXPECT_NE(error.find("wrong job token"), std::string::npos) << error;
  EXPECT_NE(error.find("Register by worker:0"), std::string::npos) << error;
  EXPECT_EQ(error.find(testing::kTestToken), std::string::npos) << error;
  error = message(client.set("k", "v"));
  EXPECT_NE(error.find("UNAUTHENTICATED"), std::string::npos) << error;
}

TEST(CoordinatorTest, MissingTokenIsRefused) {
  auto coordinator = startCoordinator(1);
  ASSERT_TRUE(coordinator);
  CoordinatorClient client(clientOptions(coordinator->address(), "worker:0", ""));
  std::string error = message(client.registerTask());
  EXPECT_NE(error.find("UNAUTHENTICATED"), std::string::npos) << error;
  EXPECT_NE(error.find("missing job token"), std::string::npos) << error;
}

TEST(CoordinatorTest, UnknownTaskIsRefused) {
  auto coordinator = startCoordinator(2);
  ASSERT_TRUE(coordinator);
  CoordinatorClient client(clientOptions(coordinator->address(), "worker:7"));
  std::string error = message(client.registerTask());
  EXPECT_NE(error.find("NOT_FOUND"), std::string::npos) << error;
  EXPECT_NE(error.find("unknown task 'worker:7'; this job expects worker:0, worker:1"),
            std::string::npos)
      << error;
}

TEST(CoordinatorTest, RegisterIsIdempotent) {
  auto coordinator = startCoordinator(1);
  ASSERT_TRUE(coordinator);
  CoordinatorClient client(clientOptions(coordinator->address(), "worker:0"));
  ASSERT_EQ(message(client.registerTask()), "success");
  EXPECT_EQ(message(client.registerTask()), "success") << "a retried Register is accepted";
}

TEST(CoordinatorTest, KeyValueAcrossClients) {
  auto coordinator = startCoordinator(2);
  ASSERT_TRUE(coordinator);
  CoordinatorClient writer(clientOptions(coordinator->address(), "worker:0"));
  CoordinatorClient reader(clientOptions(coordinator->address(), "worker:1"));
  const std::string bytes("addr\0\x01\xff", 7);

  // The reader blocks until the writer sets the key.
  auto value = std::async(std::launch::async, [&] { return reader.get("rank/0", 10s); });
  auto keysReady = std::async(std::launch::async, [&] {
    return message(reader.wait({"rank/0", "rank/1"}, 10s));
  });
  ASSERT_EQ(message(writer.set("rank/0", bytes)), "success");
  ASSERT_EQ(value.wait_for(kBound), std::future_status::ready);
  llvm::Expected<std::string> got = value.get();
  ASSERT_TRUE(bool(got)) << llvm::toString(got.takeError());
  EXPECT_EQ(*got, bytes);

  auto missing = reader.missingKeys({"rank/0", "rank/1"});
  ASSERT_TRUE(bool(missing)) << llvm::toString(missing.takeError());
  EXPECT_EQ(*missing, std::vector<std::string>{"rank/1"});
  ASSERT_EQ(message(writer.set("rank/1", "")), "success");
  ASSERT_EQ(keysReady.wait_for(kBound), std::future_status::ready);
  EXPECT_EQ(keysReady.get(), "success");
}

TEST(CoordinatorTest, GetOfMissingKeyTimesOut) {
  auto coordinator = startCoordinator(1);
  ASSERT_TRUE(coordinator);
  CoordinatorClient client(clientOptions(coordinator->address(), "worker:0"));
  auto value = std::async(std::launch::async, [&] { return client.get("never-set", 200ms); });
  ASSERT_EQ(value.wait_for(kBound), std::future_status::ready);
  llvm::Expected<std::string> got = value.get();
  ASSERT_FALSE(bool(got));
  llvm::Error late = got.takeError();
  EXPECT_EQ(ir::errorCode(late), ir::ErrorCode::DeadlineExceeded);
  std::string error = llvm::toString(std::move(late));
  EXPECT_NE(error.find("DEADLINE_EXCEEDED: key 'never-set' was not set within 200 ms"),
            std::string::npos)
      << error;

  error = message(client.wait({"a", "b"}, 100ms));
  EXPECT_NE(error.find("keys not set within 100 ms: a, b"), std::string::npos) << error;
}

// Each of `tasks` clients enters the barrier from its own thread; returns their messages.
std::vector<std::string> enterBarrier(const Coordinator &coordinator, int tasks, int count,
                                      std::chrono::milliseconds timeout) {
  std::vector<std::future<std::string>> results;
  for (int task = 0; task < tasks; ++task)
    results.push_back(std::async(std::launch::async, [&, task] {
      CoordinatorClient client(clientOptions(coordinator.address(), testing::workerNames(3)[task]));
      return message(client.barrier("start", count, timeout));
    }));
  std::vector<std::string> messages;
  for (auto &result : results) {
    if (result.wait_for(kBound) != std::future_status::ready) {
      messages.push_back("hung");
      continue;
    }
    messages.push_back(result.get());
  }
  return messages;
}

TEST(CoordinatorTest, BarrierOfThreeThreads) {
  auto coordinator = startCoordinator(3);
  ASSERT_TRUE(coordinator);
  const std::vector<std::string> allPassed(3, "success");
  EXPECT_EQ(enterBarrier(*coordinator, 3, 3, 10s), allPassed);
  EXPECT_EQ(enterBarrier(*coordinator, 3, 3, 10s), allPassed) << "a barrier name is reusable";
}

TEST(CoordinatorTest, BarrierTimesOutWhenOneIsMissing) {
  auto coordinator = startCoordinator(3);
  ASSERT_TRUE(coordinator);
  for (const std::string &error : enterBarrier(*coordinator, 2, 3, 300ms)) {
    EXPECT_NE(error.find("DEADLINE_EXCEEDED"), std::string::npos) << error;
    EXPECT_NE(error.find("barrier 'start'"), std::string::npos) << error;
    EXPECT_NE(error.find("of 3 tasks arrived within 300 ms"), std::string::npos) << error;
  }
}

TEST(CoordinatorTest, SilentTaskAbortsTheJob) {
  auto coordinator = startCoordinator(2, 1s);
  ASSERT_TRUE(coordinator);
  CoordinatorClient alive(clientOptions(coordinator->address(), "worker:0"));
  CoordinatorClient silent(clientOptions(coordinator->address(), "worker:1"));
  ASSERT_EQ(message(alive.registerTask()), "success");
  ASSERT_EQ(message(silent.registerTask()), "success"); // and never a heartbeat
  AbortRecorder aborted;
  ASSERT_EQ(message(alive.startHeartbeats(100ms, aborted.handler())), "success");
  auto blocked = std::async(std::launch::async, [&] { return alive.get("never-set", 60s); });

  ASSERT_EQ(aborted.reason.wait_for(kBound), std::future_status::ready);
  EXPECT_NE(aborted.reason.get().find("worker:1 stopped answering (no heartbeat for"),
            std::string::npos)
      << aborted.reason.get();
  ASSERT_EQ(blocked.wait_for(kBound), std::future_status::ready) << "a blocked Get must wake";
  llvm::Expected<std::string> got = blocked.get();
  ASSERT_FALSE(bool(got));
  std::string error = llvm::toString(got.takeError());
  EXPECT_NE(error.find("ABORTED: worker:1 stopped answering"), std::string::npos) << error;

  ASSERT_TRUE(coordinator->abortReason().has_value());
  EXPECT_EQ(*coordinator->abortReason(), aborted.reason.get());
  for (std::string later :
       {message(alive.set("k", "v")), message(alive.barrier("b", 2, 10s)), message(alive.finish())})
    EXPECT_NE(later.find("ABORTED: worker:1 stopped answering"), std::string::npos) << later;
  EXPECT_FALSE(coordinator->waitUntilAllFinished(10s));
}

TEST(CoordinatorTest, ReportedFailureReachesOthers) {
  auto coordinator = startCoordinator(2);
  ASSERT_TRUE(coordinator);
  CoordinatorClient watcher(clientOptions(coordinator->address(), "worker:0"));
  CoordinatorClient failing(clientOptions(coordinator->address(), "worker:1"));
  ASSERT_EQ(message(watcher.registerTask()), "success");
  ASSERT_EQ(message(failing.registerTask()), "success");
  AbortRecorder aborted;
  ASSERT_EQ(message(watcher.startHeartbeats(50ms, aborted.handler())), "success");
  auto blocked =
      std::async(std::launch::async, [&] { return message(watcher.barrier("step", 2, 60s)); });

  ASSERT_EQ(message(failing.reportFailure("out of memory in step 12")), "success");
  ASSERT_EQ(aborted.reason.wait_for(kBound), std::future_status::ready);
  EXPECT_EQ(aborted.reason.get(), "worker:1 failed: out of memory in step 12");
  ASSERT_EQ(blocked.wait_for(kBound), std::future_status::ready);
  std::string error = blocked.get();
  EXPECT_NE(error.find("ABORTED: worker:1 failed: out of memory in step 12"), std::string::npos)
      << error;
}

TEST(CoordinatorTest, LauncherAbortWakesWaiters) {
  auto coordinator = startCoordinator(1);
  ASSERT_TRUE(coordinator);
  CoordinatorClient client(clientOptions(coordinator->address(), "worker:0"));
  auto blocked = std::async(std::launch::async, [&] { return message(client.wait({"x"}, 60s)); });
  // Abort whether or not the Wait has arrived yet: it fails either way.
  coordinator->abort("launcher: worker:3 exited with status 9");
  coordinator->abort("a second reason is ignored");
  ASSERT_EQ(blocked.wait_for(kBound), std::future_status::ready);
  std::string error = blocked.get();
  EXPECT_NE(error.find("ABORTED: launcher: worker:3 exited with status 9"), std::string::npos)
      << error;
}

TEST(CoordinatorTest, WaitUntilAllFinished) {
  auto coordinator = startCoordinator(2);
  ASSERT_TRUE(coordinator);
  CoordinatorClient first(clientOptions(coordinator->address(), "worker:0"));
  CoordinatorClient second(clientOptions(coordinator->address(), "worker:1"));
  ASSERT_EQ(message(first.registerTask()), "success");
  ASSERT_EQ(message(second.registerTask()), "success");
  ASSERT_EQ(message(first.startHeartbeats(50ms, [](std::string) {})), "success");
  ASSERT_EQ(message(first.finish()), "success");
  EXPECT_FALSE(coordinator->waitUntilAllFinished(50ms));
  ASSERT_EQ(message(second.finish()), "success");
  EXPECT_TRUE(coordinator->waitUntilAllFinished(kBound));
  EXPECT_FALSE(coordinator->abortReason().has_value());
}

TEST(CoordinatorTest, HeartbeatsNoticeAVanishedCoordinator) {
  auto coordinator = startCoordinator(1);
  ASSERT_TRUE(coordinator);
  CoordinatorClient client(clientOptions(coordinator->address(), "worker:0"));
  ASSERT_EQ(message(client.registerTask()), "success");
  AbortRecorder aborted;
  ASSERT_EQ(message(client.startHeartbeats(50ms, aborted.handler(), 500ms)), "success");
  coordinator->shutdown();
  ASSERT_EQ(aborted.reason.wait_for(kBound), std::future_status::ready);
  EXPECT_NE(
      aborted.reason.get().find("coordinator at " + coordinator->address() + " unreachable for"),
      std::string::npos)
      << aborted.reason.get();
}

TEST(CoordinatorTest, ShutdownWakesBlockedCalls) {
  auto coordinator = startCoordinator(1);
  ASSERT_TRUE(coordinator);
  CoordinatorClient client(clientOptions(coordinator->address(), "worker:0"));
  auto blocked = std::async(std::launch::async, [&] { return message(client.wait({"x"}, 60s)); });
  std::this_thread::sleep_for(100ms); // most likely blocked by now; the call fails either way
  coordinator->shutdown();
  ASSERT_EQ(blocked.wait_for(kBound), std::future_status::ready);
  std::string error = blocked.get();
  EXPECT_NE(error.find("failed: UNAVAILABLE"), std::string::npos) << error;
}

TEST(CoordinatorTest, StartFailsOnATakenPort) {
  auto coordinator = startCoordinator(1);
  ASSERT_TRUE(coordinator);
  CoordinatorOptions options;
  options.listenAddress = coordinator->address();
  options.jobToken = testing::kTestToken;
  options.expectedTasks = {"worker:0"};
  auto second = Coordinator::start(options);
  ASSERT_FALSE(bool(second));
  EXPECT_NE(llvm::toString(second.takeError()).find("cannot listen on"), std::string::npos);
}

// Elastic membership: a lost worker is dropped and a new membership published while enough
// remain; a silent one is found by its heartbeats; then too few remain and the job aborts.
TEST(CoordinatorTest, ElasticJobDropsLostWorkers) {
  auto coordinator = startCoordinator(3, 1s, /*elasticMin=*/1, /*elasticMax=*/3);
  ASSERT_TRUE(coordinator);
  CoordinatorClient survivor(clientOptions(coordinator->address(), "worker:0"));
  CoordinatorClient silent(clientOptions(coordinator->address(), "worker:2"));
  ASSERT_EQ(message(survivor.registerTask()), "success");
  ASSERT_EQ(message(silent.registerTask()), "success"); // and never a heartbeat
  EXPECT_EQ(*coordinator->value(kMembershipEpochKey), "0");
  EXPECT_EQ(*coordinator->value(membershipKey(0)), "worker:0,worker:1,worker:2");

  EXPECT_TRUE(coordinator->loseWorker("worker:1", "was killed by signal Killed"));
  EXPECT_TRUE(coordinator->dropped("worker:1"));
  EXPECT_EQ(*coordinator->value(kMembershipEpochKey), "1");
  EXPECT_EQ(*coordinator->value(membershipKey(1)), "worker:0,worker:2");
  EXPECT_EQ(*coordinator->value(membershipReasonKey(1)),
            "worker:1 was lost: it was killed by signal Killed");

  AbortRecorder aborted;
  ASSERT_EQ(message(survivor.startHeartbeats(100ms, aborted.handler())), "success");
  auto epoch2 = survivor.get(membershipKey(2), kBound);
  ASSERT_TRUE(bool(epoch2)) << llvm::toString(epoch2.takeError());
  EXPECT_EQ(*epoch2, "worker:0");
  EXPECT_NE(coordinator->value(membershipReasonKey(2))
                ->find("worker:2 was lost: it stopped "
                       "answering (no heartbeat for"),
            std::string::npos);
  EXPECT_FALSE(coordinator->abortReason().has_value());
  // A dropped worker that comes back is refused alone; the job goes on.
  std::string refused = message(silent.reportFailure("late"));
  EXPECT_NE(refused.find("ABORTED: worker:2 was dropped from the job"), std::string::npos)
      << refused;
  EXPECT_FALSE(coordinator->abortReason().has_value());

  EXPECT_FALSE(coordinator->loseWorker("worker:0", "exited with status 1"));
  ASSERT_TRUE(coordinator->abortReason().has_value());
  EXPECT_EQ(*coordinator->abortReason(),
            "worker:0 exited with status 1, and the 0 workers left are fewer than --elastic's "
            "minimum of 1");
}

TEST(CoordinatorTest, WorkersJoinUpToTheMaximum) {
  auto coordinator = startCoordinator(2, 5s, /*elasticMin=*/1, /*elasticMax=*/3);
  ASSERT_TRUE(coordinator);
  CoordinatorClient joiner(clientOptions(coordinator->address(), "a joining worker"));
  auto epoch = joiner.join();
  ASSERT_TRUE(bool(epoch)) << llvm::toString(epoch.takeError());
  EXPECT_EQ(*epoch, 1);
  EXPECT_EQ(joiner.taskName(), "worker:2");
  EXPECT_EQ(*coordinator->value(membershipKey(1)), "worker:0,worker:1,worker:2");
  EXPECT_NE(coordinator->value(membershipReasonKey(1))->find("worker:2 joined from"),
            std::string::npos);
  EXPECT_EQ(message(joiner.startHeartbeats(100ms, [](std::string) {})), "success");

  CoordinatorClient another(clientOptions(coordinator->address(), "a joining worker"));
  auto full = another.join();
  ASSERT_FALSE(bool(full));
  std::string error = llvm::toString(full.takeError());
  EXPECT_NE(error.find("RESOURCE_EXHAUSTED: the job has its most workers already (3 of "
                       "--elastic's maximum 3)"),
            std::string::npos)
      << error;
  // A lost worker's place can be taken again; names are never reused.
  EXPECT_TRUE(coordinator->loseWorker("worker:1", "was killed by signal Killed"));
  auto again = another.join();
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
  EXPECT_EQ(another.taskName(), "worker:3");
  EXPECT_EQ(*coordinator->value(membershipKey(*again)), "worker:0,worker:2,worker:3");
}

TEST(CoordinatorTest, JoiningAJobThatIsNotElasticIsRefused) {
  auto coordinator = startCoordinator(2);
  ASSERT_TRUE(coordinator);
  CoordinatorClient joiner(clientOptions(coordinator->address(), "a joining worker"));
  auto refused = joiner.join();
  ASSERT_FALSE(bool(refused));
  std::string error = llvm::toString(refused.takeError());
  EXPECT_NE(error.find("FAILED_PRECONDITION: this job is not elastic"), std::string::npos) << error;
  // Without elastic membership a lost worker aborts the job, as before.
  EXPECT_FALSE(coordinator->loseWorker("worker:1", "was killed by signal Killed"));
  EXPECT_EQ(*coordinator->abortReason(), "worker:1 was killed by signal Killed");
}

} // namespace
} // namespace prism::runtime::dist
