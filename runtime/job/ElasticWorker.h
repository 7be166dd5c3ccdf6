// Elastic membership on a worker: keeps what it needs to redo a step, and re-forms the worker
// group when the coordinator publishes a new membership (a worker lost or joined), so training
// goes on without aborting the job (docs/distributed.md, "Elastic membership").
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/dist/CoordinatorClient.h"
#include "runtime/job/WorkerCommunication.h"
#include "runtime/train/Trainer.h"

namespace prism::runtime::job {

struct ElasticOptions {
  int64_t epoch = 0;             // the membership the worker starts in
  int64_t rank = 0, workers = 1; // its place in it (a joining worker's comes with the group)
  bool joining = false;          // a new worker: the group sends it the variables and the step
  std::string bindAddress;       // this host's address that the group's peers reach it at
  std::string workerGroup;       // the plan's worker group (epoch 0's Gloo group name)
  std::vector<std::string> parameterServers; // PS tasks: each publishes its version per epoch
  // How long a failed step waits for the coordinator to publish the membership without the lost
  // worker before the failure is taken as the step's own (the heartbeat timeout and a margin).
  std::chrono::milliseconds lossTimeout{10000};
  // Bounds each regrouping (the members meeting, the rendezvous) and the new group's operations.
  std::chrono::milliseconds groupTimeout{60000};
};

class ElasticWorker {
public:
  ElasticWorker(dist::CoordinatorClient &client, WorkerCommunication &communication,
                ElasticOptions options);
  ~ElasticWorker(); // stops watching the coordinator

  ElasticWorker(const ElasticWorker &) = delete;
  ElasticWorker &operator=(const ElasticWorker &) = delete;

  // Sets the role's step-boundary and failed-step calls; progress, metrics and evaluation follow
  // rank 0.
  void install(train::WorkerRole &role);
  int64_t rank() const { return rank_; }
  int64_t workers() const { return workers_; }

private:
  // The variables after some steps: what the worker needs to redo a step.
  struct Snapshot {
    int64_t steps = -1;
    std::map<std::string, Tensor> values;
  };

  llvm::Expected<std::optional<train::Membership>> atStepBoundary(int64_t steps,
                                                                  runtime::VariableStore &store);
  llvm::Expected<train::Membership> afterFailedStep(llvm::Error failure, int64_t steps,
                                                    runtime::VariableStore &store);
  // Meets the newest membership's members, agrees on the step they go on from, puts `store` at
  // it (a member's own snapshot, then rank 0's variables for all) and re-forms the group.
  // `stepsDone`: none for a joining worker.
  llvm::Expected<train::Membership> regroup(std::optional<int64_t> stepsDone,
                                            runtime::VariableStore &store);
  // One attempt at membership `epoch`; none when a newer one came meanwhile.
  llvm::Expected<std::optional<train::Membership>>
  regroupAt(int64_t epoch, std::optional<int64_t> stepsDone, runtime::VariableStore &store,
            std::chrono::steady_clock::time_point deadline);
  // The step the members of `epoch` go on from: the parameter servers' version when there are
  // any, else the fewest steps a member finished.
  llvm::Expected<int64_t> resumeStep(int64_t epoch, const std::vector<std::string> &members);
  llvm::Expected<int64_t> newestEpoch();
  void keep(int64_t steps, const runtime::VariableStore &store);
  llvm::Error rollBack(int64_t steps, runtime::VariableStore &store) const;
  llvm::Error broadcastVariables(dist::Collective &group, runtime::VariableStore &store);
  void watchCoordinator();

  dist::CoordinatorClient &client_;
  WorkerCommunication &communication_;
  ElasticOptions options_;
  int64_t epoch_, rank_, workers_;
  bool joinPending_;
  // The group was re-formed after a failed step: the next step starts without the membership
  // check, as it does on members that re-formed it at the boundary (a joining worker).
  bool regroupedAfterFailure_ = false;
  std::array<Snapshot, 2> snapshots_; // the newest first
  // The newest epoch the coordinator published, as last seen by the watcher thread.
  std::atomic<int64_t> seenEpoch_;
  std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  std::thread watcher_;
};

} // namespace prism::runtime::job
