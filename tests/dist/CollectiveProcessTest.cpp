// Tests with one process per rank (posix_spawn of prism_dist_test_worker, so no child inherits
// this process's gRPC or Gloo threads): all-reduce across processes, and a dying worker.
#include <csignal>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>

#include <gtest/gtest.h>

#include "DistTestSupport.h"

extern char **environ;

namespace prism::runtime::dist {
namespace {

using namespace std::chrono_literals;

// Worker processes, killed if still running when this goes away.
class WorkerProcesses {
public:
  ~WorkerProcesses() {
    for (pid_t pid : running_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }

  // Starts rank `rank` of `size`; false when it cannot be spawned.
  bool spawn(const Coordinator &coordinator, int rank, int size, const std::string &group,
             const std::string &mode) {
    std::vector<std::string> args = {PRISM_DIST_TEST_WORKER,
                                     coordinator.address(),
                                     testing::kTestToken,
                                     std::to_string(rank),
                                     std::to_string(size),
                                     group,
                                     mode};
    std::vector<char *> argv;
    for (std::string &arg : args)
      argv.push_back(arg.data());
    argv.push_back(nullptr);
    pid_t pid;
    if (posix_spawn(&pid, PRISM_DIST_TEST_WORKER, nullptr, nullptr, argv.data(), environ) != 0)
      return false;
    running_.push_back(pid);
    return true;
  }

  // The exit status of each worker, in spawn order; -1 for one still running after `bound`
  // (then killed) or killed by a signal.
  std::vector<int> waitAll(std::chrono::seconds bound) {
    std::vector<int> statuses(running_.size(), -1);
    const auto deadline = std::chrono::steady_clock::now() + bound;
    for (size_t i = 0; i < running_.size(); ++i) {
      int status = 0;
      pid_t done = 0;
      while ((done = waitpid(running_[i], &status, WNOHANG)) == 0 &&
             std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(20ms);
      if (done == 0) {
        kill(running_[i], SIGKILL);
        waitpid(running_[i], &status, 0);
      } else if (WIFEXITED(status)) {
        statuses[i] = WEXITSTATUS(status);
      }
    }
    running_.clear();
    return statuses;
  }

private:
  std::vector<pid_t> running_;
};

TEST(CollectiveProcessTest, ThreeProcessesAllReduce) {
  auto coordinator = testing::startCoordinator(3);
  ASSERT_TRUE(coordinator);
  WorkerProcesses workers;
  for (int rank = 0; rank < 3; ++rank)
    ASSERT_TRUE(workers.spawn(*coordinator, rank, 3, "processes", "allreduce"));
  EXPECT_TRUE(coordinator->waitUntilAllFinished(120s))
      << coordinator->abortReason().value_or("timed out");
  EXPECT_EQ(workers.waitAll(60s), (std::vector<int>{0, 0, 0}));
}

TEST(CollectiveProcessTest, DeadWorkerAbortsTheJob) {
  auto coordinator = testing::startCoordinator(3, 1s);
  ASSERT_TRUE(coordinator);
  WorkerProcesses workers;
  ASSERT_TRUE(workers.spawn(*coordinator, 0, 3, "doomed", "allreduce"));
  ASSERT_TRUE(workers.spawn(*coordinator, 1, 3, "doomed", "allreduce"));
  ASSERT_TRUE(workers.spawn(*coordinator, 2, 3, "doomed", "die"));
  EXPECT_FALSE(coordinator->waitUntilAllFinished(60s));
  ASSERT_TRUE(coordinator->abortReason().has_value());
  EXPECT_NE(coordinator->abortReason()->find("worker:2 stopped answering"), std::string::npos)
      << *coordinator->abortReason();
  std::vector<int> statuses = workers.waitAll(60s);
  ASSERT_EQ(statuses.size(), 3u);
  EXPECT_EQ(statuses[2], 7);
  // The survivors learn of the abort from a heartbeat (3) or from their blocked rendezvous (1).
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_TRUE(statuses[rank] == 1 || statuses[rank] == 3)
        << "rank " << rank << ": " << statuses[rank];
}

} // namespace
} // namespace prism::runtime::dist
