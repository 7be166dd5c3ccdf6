// Elastic membership on a worker (see ElasticWorker.h).
#include "runtime/job/ElasticWorker.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "ir/Diagnostic.h"
#include "runtime/dist/Collective.h"
#include "runtime/dist/Membership.h"

namespace prism::runtime::job {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How often a waiting worker looks at the coordinator's store again.
constexpr milliseconds kPoll{50};
// How often the watcher thread reads the newest membership epoch.
constexpr milliseconds kWatchPeriod{200};

void logLine(const std::string &line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

} // namespace

ElasticWorker::ElasticWorker(dist::CoordinatorClient &client, WorkerCommunication &communication,
                             ElasticOptions options)
    : client_(client), communication_(communication), options_(std::move(options)),
      epoch_(options_.epoch), rank_(options_.rank), workers_(options_.workers),
      joinPending_(options_.joining), seenEpoch_(options_.epoch) {
  watcher_ = std::thread([this] { watchCoordinator(); });
}

ElasticWorker::~ElasticWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  watcher_.join();
}

void ElasticWorker::install(train::WorkerRole &role) {
  communication_.setMembershipProbe([this] { return seenEpoch_ > epoch_; });
  role.rankZeroReports = true;
  role.joining = joinPending_;
  role.atStepBoundary = [this](int64_t steps, runtime::VariableStore &store) {
    return atStepBoundary(steps, store);
  };
  role.afterFailedStep = [this](llvm::Error failure, int64_t steps, runtime::VariableStore &store) {
    return afterFailedStep(std::move(failure), steps, store);
  };
}

void ElasticWorker::watchCoordinator() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_.wait_for(lock, kWatchPeriod, [this] { return stopping_; })) {
    lock.unlock();
    auto epoch = newestEpoch();
    if (epoch)
      seenEpoch_ = std::max<int64_t>(seenEpoch_, *epoch);
    else
      llvm::consumeError(epoch.takeError()); // the heartbeats decide when the job is gone
    lock.lock();
  }
}

llvm::Expected<int64_t> ElasticWorker::newestEpoch() {
  auto text = client_.get(dist::kMembershipEpochKey, milliseconds(0));
  if (!text)
    return text.takeError();
  int64_t epoch = 0;
  if (llvm::StringRef(*text).getAsInteger(10, epoch))
    return ir::makeError("the coordinator's membership epoch is not a number: '" + *text + "'");
  return epoch;
}

void ElasticWorker::keep(int64_t steps, const runtime::VariableStore &store) {
  if (snapshots_[0].steps == steps)
    return;
  std::swap(snapshots_[0], snapshots_[1]);
  Snapshot &snapshot = snapshots_[0];
  snapshot.steps = steps;
  for (const auto &entry : store.all()) {
    const Tensor &value = entry.getValue();
    if (value.empty()) // held by the parameter servers
      continue;
    Tensor &copy = snapshot.values[entry.getKey().str()];
    if (copy.empty() || copy.dtype() != value.dtype() || copy.shape() != value.shape())
      copy = value.clone();
    else
      std::memcpy(copy.raw(), value.raw(), static_cast<size_t>(value.numBytes()));
  }
}

llvm::Error ElasticWorker::rollBack(int64_t steps, runtime::VariableStore &store) const {
  for (const Snapshot &snapshot : snapshots_) {
    if (snapshot.steps != steps)
      continue;
    for (const auto &[name, copy] : snapshot.values) {
      Tensor *value = store.find(name);
      if (!value || value->numBytes() != copy.numBytes())
        return ir::makeError("variable '" + name + "' changed shape during training");
      std::memcpy(value->raw(), copy.raw(), static_cast<size_t>(copy.numBytes()));
    }
    return llvm::Error::success();
  }
  return ir::makeError("the group goes on from step " + std::to_string(steps) + ", and " +
                       client_.taskName() + " kept the variables of steps " +
                       std::to_string(snapshots_[1].steps) + " and " +
                       std::to_string(snapshots_[0].steps) + " only");
}

llvm::Expected<std::optional<train::Membership>>
ElasticWorker::atStepBoundary(int64_t steps, runtime::VariableStore &store) {
  if (joinPending_) {
    joinPending_ = false;
    auto membership = regroup(std::nullopt, store);
    if (!membership)
      return membership.takeError();
    keep(membership->step, store);
    return std::optional<train::Membership>(*membership);
  }
  keep(steps, store);
  // A group formed after a failed step goes straight into the step, as one formed here does.
  if (regroupedAfterFailure_) {
    regroupedAfterFailure_ = false;
    return std::nullopt;
  }
  // Every member takes the same decision at the same step: whether any of them saw a newer
  // membership (a worker joined). The last step's loss all-reduce carried the question; without
  // one (the first step) it is asked here.
  std::optional<double> newer = communication_.takeMembershipProbe();
  if (!newer) {
    double mine = seenEpoch_ > epoch_ ? 1.0 : 0.0;
    if (auto e = communication_.group().allReduceSum(&mine, 1))
      return std::move(e);
    newer = mine;
  }
  if (*newer == 0)
    return std::nullopt;
  auto membership = regroup(steps, store);
  if (!membership)
    return membership.takeError();
  return std::optional<train::Membership>(*membership);
}

llvm::Expected<train::Membership> ElasticWorker::afterFailedStep(llvm::Error failure, int64_t steps,
                                                                 runtime::VariableStore &store) {
  communication_.abandonStep();
  // The step failed because a worker was lost, if the coordinator says so soon.
  const auto deadline = Clock::now() + options_.lossTimeout;
  for (;;) {
    auto epoch = newestEpoch();
    if (!epoch) {
      llvm::consumeError(epoch.takeError());
      return std::move(failure);
    }
    if (*epoch > epoch_)
      break;
    if (Clock::now() > deadline)
      return std::move(failure);
    std::this_thread::sleep_for(kPoll);
  }
  logLine(client_.taskName() + ": step " + std::to_string(steps) +
          " was interrupted by a change of membership (" + ir::messageOf(std::move(failure)) +
          "); it is redone");
  auto membership = regroup(steps, store);
  regroupedAfterFailure_ = static_cast<bool>(membership);
  return membership;
}

llvm::Expected<train::Membership> ElasticWorker::regroup(std::optional<int64_t> stepsDone,
                                                         runtime::VariableStore &store) {
  // Longer than a collective's timeout: a member may be waiting out one with a lost peer.
  const auto deadline = Clock::now() + options_.groupTimeout + options_.lossTimeout;
  for (;;) {
    auto epoch = newestEpoch();
    if (!epoch)
      return epoch.takeError();
    auto membership = regroupAt(*epoch, stepsDone, store, deadline);
    if (!membership)
      return membership.takeError();
    if (*membership)
      return **membership;
  }
}

llvm::Expected<std::optional<train::Membership>>
ElasticWorker::regroupAt(int64_t epoch, std::optional<int64_t> stepsDone,
                         runtime::VariableStore &store, Clock::time_point deadline) {
  auto listed = client_.get(dist::membershipKey(epoch), milliseconds(0));
  if (!listed)
    return listed.takeError();
  const std::vector<std::string> members = dist::splitMembers(*listed);
  auto self = std::find(members.begin(), members.end(), client_.taskName());
  if (self == members.end())
    return ir::makeError(client_.taskName() + " is not in membership " + std::to_string(epoch) +
                         " (" + *listed + "): the job dropped it");
  const auto rank = static_cast<int64_t>(self - members.begin());
  const auto newer = [&] {
    auto now = newestEpoch();
    if (!now) {
      llvm::consumeError(now.takeError());
      return false;
    }
    return *now > epoch;
  };
  if (auto e = client_.set(dist::membershipReadyKey(epoch, client_.taskName()),
                           stepsDone ? std::to_string(*stepsDone) : "join"))
    return std::move(e);
  // Every member and parameter server of the epoch reports before anyone goes on.
  std::vector<std::string> keys;
  for (const std::string &member : members)
    keys.push_back(dist::membershipReadyKey(epoch, member));
  for (const std::string &server : options_.parameterServers)
    keys.push_back(dist::membershipVersionKey(epoch, server));
  for (;;) {
    auto missing = client_.missingKeys(keys);
    if (!missing)
      return missing.takeError();
    if (missing->empty())
      break;
    if (newer())
      return std::nullopt;
    // The others may finish the job before they notice a joining worker.
    if (!stepsDone) {
      auto done = client_.missingKeys({std::string(dist::kJobDoneKey)});
      if (!done)
        return done.takeError();
      if (done->empty())
        return ir::makeError(client_.taskName() + " joined as the job finished training: "
                                                  "there was nothing left to do");
    }
    if (Clock::now() > deadline)
      return ir::makeError(
          "membership " + std::to_string(epoch) + " (" + *listed +
          "): these did not report within " +
          std::to_string((options_.groupTimeout + options_.lossTimeout).count() / 1000) +
          " s: " + llvm::join(*missing, ", "));
    std::this_thread::sleep_for(kPoll);
  }
  auto step = resumeStep(epoch, members);
  if (!step)
    return step.takeError();
  if (stepsDone)
    if (auto e = rollBack(*step, store))
      return std::move(e);
  auto group = dist::Collective::create(client_, dist::membershipGroup(options_.workerGroup, epoch),
                                        static_cast<int>(rank), static_cast<int>(members.size()),
                                        options_.bindAddress, options_.groupTimeout);
  if (!group) {
    if (newer()) {
      llvm::consumeError(group.takeError());
      return std::nullopt;
    }
    return group.takeError();
  }
  if (auto e = broadcastVariables(**group, store)) {
    if (newer()) {
      llvm::consumeError(std::move(e));
      return std::nullopt;
    }
    return std::move(e);
  }
  communication_.replaceGroup(std::move(*group), rank, epoch);
  epoch_ = epoch;
  rank_ = rank;
  workers_ = static_cast<int64_t>(members.size());
  if (rank == 0) {
    auto why = client_.get(dist::membershipReasonKey(epoch), milliseconds(0));
    std::string reason = why ? *why : ir::messageOf(why.takeError());
    logLine(client_.taskName() + ": membership " + std::to_string(epoch) + " from step " +
            std::to_string(*step) + ": " + std::to_string(members.size()) + " workers (" +
            llvm::join(members, ", ") + "); " + reason);
  }
  return std::optional<train::Membership>(train::Membership{rank, workers_, *step});
}

llvm::Expected<int64_t> ElasticWorker::resumeStep(int64_t epoch,
                                                  const std::vector<std::string> &members) {
  auto number = [&](const std::string &key) -> llvm::Expected<std::optional<int64_t>> {
    auto text = client_.get(key, milliseconds(0));
    if (!text)
      return text.takeError();
    int64_t value = 0;
    if (*text == "join")
      return std::nullopt;
    if (llvm::StringRef(*text).getAsInteger(10, value))
      return ir::makeError(key + " is not a step: '" + *text + "'");
    return std::optional<int64_t>(value);
  };
  std::optional<int64_t> fewest, version;
  for (const std::string &member : members) {
    auto steps = number(dist::membershipReadyKey(epoch, member));
    if (!steps)
      return steps.takeError();
    if (*steps)
      fewest = std::min(fewest.value_or(**steps), **steps);
    else if (member == members.front())
      return ir::makeError("membership " + std::to_string(epoch) + ": its first worker, " + member +
                           ", is new; no member holds the variables");
  }
  for (const std::string &server : options_.parameterServers) {
    auto at = number(dist::membershipVersionKey(epoch, server));
    if (!at)
      return at.takeError();
    if (version && **at != *version)
      return ir::makeError("membership " + std::to_string(epoch) +
                           ": the parameter servers are at different steps (" + server + " at " +
                           std::to_string(**at) + ", another at " + std::to_string(*version) +
                           "): a worker was lost between its pushes to them");
    version = **at;
  }
  if (!fewest)
    return ir::makeError("membership " + std::to_string(epoch) + " has no worker that trained");
  return version ? *version : *fewest;
}

llvm::Error ElasticWorker::broadcastVariables(dist::Collective &group,
                                              runtime::VariableStore &store) {
  // In name order, the same on every member (the same program: the same variables).
  std::vector<std::string> names;
  for (const auto &entry : store.all())
    if (!entry.getValue().empty())
      names.push_back(entry.getKey().str());
  std::sort(names.begin(), names.end());
  for (const std::string &name : names) {
    Tensor *value = store.find(name);
    if (auto e = group.broadcast(value->raw(), static_cast<size_t>(value->numBytes()), 0))
      return ir::withContext(std::move(e), "sending variable '" + name + "' to the group");
  }
  return llvm::Error::success();
}

} // namespace prism::runtime::job
