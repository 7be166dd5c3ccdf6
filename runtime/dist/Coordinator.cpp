// The coordinator's gRPC service: token check, task table, key-value store, barriers, the
// heartbeat monitor and the job abort.
#include "runtime/dist/Coordinator.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "ir/Diagnostic.h"
#include "runtime/dist/Membership.h"
#include "runtime/dist/Tls.h"
#include "runtime/dist/coordinator.grpc.pb.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace prism::runtime::dist {
namespace {

namespace proto = ::prism::dist;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The longest a call may block server-side, whatever it asks for.
constexpr milliseconds kMaxWait = std::chrono::hours(24);

// Takes as long wherever the strings differ, so a token cannot be guessed byte by byte.
bool sameToken(llvm::StringRef given, llvm::StringRef expected) {
  if (given.size() != expected.size())
    return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < given.size(); ++i)
    difference |= static_cast<unsigned char>(given[i] ^ expected[i]);
  return difference == 0;
}

// "5.0 s"
std::string seconds(std::chrono::duration<double> duration) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", duration.count());
  return text;
}

void logLine(const llvm::Twine &line) {
  std::fprintf(stderr, "prism coordinator: %s\n", line.str().c_str());
}

// When a blocking call gives up: after its own timeout, and before its caller's deadline.
Clock::time_point waitDeadline(grpc::ServerContext *context, int64_t timeoutMs) {
  milliseconds timeout = std::clamp(milliseconds(timeoutMs), milliseconds(0), kMaxWait);
  auto callerLeft = context->deadline() - std::chrono::system_clock::now();
  if (callerLeft < timeout)
    timeout = std::max(std::chrono::duration_cast<milliseconds>(callerLeft), milliseconds(0));
  return Clock::now() + timeout;
}

struct TaskState {
  bool registered = false;
  bool finished = false;
  std::optional<std::string> dropped; // why, once dropped from an elastic job's membership
  int64_t pid = 0;
  std::string host;
  Clock::time_point lastHeartbeat;
};

struct BarrierState {
  int count = 0;
  std::set<std::string> arrived;
  uint64_t generation = 0; // bumped each time the barrier opens, so a name can be reused
};

} // namespace

class Coordinator::Impl final : public proto::CoordinatorService::Service {
public:
  explicit Impl(CoordinatorOptions opts) : options(std::move(opts)) {
    for (const std::string &task : options.expectedTasks) {
      tasks_[task];
      if (llvm::StringRef(task).startswith("worker:"))
        members_.push_back(task);
    }
    nextWorker_ = static_cast<int>(members_.size());
    publishMembershipLocked("the job started");
  }
  ~Impl() override { shutdown(); }

  grpc::Status Register(grpc::ServerContext *context, const proto::RegisterRequest *request,
                        proto::Ack *) override;
  grpc::Status Set(grpc::ServerContext *context, const proto::SetRequest *request,
                   proto::Ack *) override;
  grpc::Status Get(grpc::ServerContext *context, const proto::GetRequest *request,
                   proto::GetReply *reply) override;
  grpc::Status Wait(grpc::ServerContext *context, const proto::WaitRequest *request,
                    proto::Ack *) override;
  grpc::Status Check(grpc::ServerContext *context, const proto::CheckRequest *request,
                     proto::CheckReply *reply) override;
  grpc::Status Barrier(grpc::ServerContext *context, const proto::BarrierRequest *request,
                       proto::Ack *) override;
  grpc::Status Heartbeat(grpc::ServerContext *context, const proto::TaskRequest *request,
                         proto::Ack *) override;
  grpc::Status ReportFailure(grpc::ServerContext *context,
                             const proto::ReportFailureRequest *request, proto::Ack *) override;
  grpc::Status Finish(grpc::ServerContext *context, const proto::TaskRequest *request,
                      proto::Ack *) override;
  grpc::Status Now(grpc::ServerContext *context, const proto::TaskRequest *request,
                   proto::NowReply *reply) override;
  grpc::Status Join(grpc::ServerContext *context, const proto::JoinRequest *request,
                    proto::JoinReply *reply) override;

  void startMonitor() {
    monitor_ = std::thread([this] { monitorHeartbeats(); });
  }
  void abort(llvm::StringRef reason) {
    std::lock_guard<std::mutex> lock(mutex_);
    abortLocked(reason.str());
  }
  std::optional<std::string> abortReason() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return abortReason_;
  }
  std::optional<std::string> value(const std::string &key) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = values_.find(key);
    return it == values_.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  void set(const std::string &key, const std::string &value) {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = value;
    changed_.notify_all();
  }
  bool loseWorker(const std::string &task, const std::string &why) {
    std::lock_guard<std::mutex> lock(mutex_);
    return loseWorkerLocked(task, why);
  }
  bool dropped(const std::string &task) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = tasks_.find(task);
    return it != tasks_.end() && it->second.dropped.has_value();
  }
  bool waitUntilAllFinished(milliseconds timeout);
  void shutdown();

  const CoordinatorOptions options;
  int port = 0;
  // Declared last so that it is destroyed first, while the state its handlers use still exists.
  std::unique_ptr<grpc::Server> server;

private:
  // OK when the call carries the job token; UNAUTHENTICATED (and a log line) otherwise.
  // The job token, and with TLS that the task a request names (`claimed`) is the one its
  // certificate names.
  grpc::Status checkToken(grpc::ServerContext *context, const char *method,
                          const std::string *claimed = nullptr) const;
  bool ended() const { return abortReason_.has_value() || stopping_; }
  // What every call returns once the job is aborted or the server is stopping.
  std::optional<grpc::Status> endStatus() const;
  TaskState *findTask(const std::string &name);
  grpc::Status unknownTask(const std::string &name) const;
  std::vector<std::string> missingKeys(const google::protobuf::RepeatedPtrField<std::string> &keys);
  void abortLocked(std::string reason);
  void monitorHeartbeats();
  bool elastic() const { return options.elasticMax > 0; }
  // Drops a lost member (a new membership) or aborts the job; whether the job goes on.
  bool loseWorkerLocked(const std::string &task, const std::string &why);
  // Publishes members_ as membership epoch_ in the store, with why it began.
  void publishMembershipLocked(const std::string &why);

  mutable std::mutex mutex_;
  std::condition_variable changed_; // any change: a key set, a barrier opening, a finish, the end
  std::map<std::string, TaskState> tasks_;
  std::map<std::string, std::string> values_;
  std::map<std::string, BarrierState> barriers_;
  std::optional<std::string> abortReason_;
  // Elastic membership: the workers in rank order, the epoch, the next joiner's index.
  std::vector<std::string> members_;
  int64_t epoch_ = 0;
  int nextWorker_ = 0;
  bool stopping_ = false;
  std::once_flag shutdownOnce_;
  std::thread monitor_;
};

grpc::Status Coordinator::Impl::checkToken(grpc::ServerContext *context, const char *method,
                                           const std::string *claimed) const {
  const auto &metadata = context->client_metadata();
  auto token = metadata.find(kJobTokenMetadata);
  if (token != metadata.end() &&
      sameToken(llvm::StringRef(token->second.data(), token->second.size()), options.jobToken)) {
    std::optional<std::string> caller = callerTask(*context);
    if (!claimed || !caller || *caller == *claimed)
      return grpc::Status::OK;
    logLine(llvm::Twine("refused ") + method + " as " + *claimed + " from " + context->peer() +
            ", whose certificate is " + *caller + "'s");
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        std::string(method) + " as " + *claimed + " with the certificate of " +
                            *caller);
  }
  const char *problem = token == metadata.end() ? "missing" : "wrong";
  logLine(llvm::Twine("refused ") + method + " from " + context->peer() + ": " + problem +
          " job token");
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      std::string(problem) + " job token (metadata " + kJobTokenMetadata + ")");
}

std::optional<grpc::Status> Coordinator::Impl::endStatus() const {
  if (abortReason_)
    return grpc::Status(grpc::StatusCode::ABORTED, *abortReason_);
  if (stopping_)
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down");
  return std::nullopt;
}

TaskState *Coordinator::Impl::findTask(const std::string &name) {
  auto it = tasks_.find(name);
  return it == tasks_.end() ? nullptr : &it->second;
}

grpc::Status Coordinator::Impl::unknownTask(const std::string &name) const {
  return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown task '" + name +
                                                       "'; this job expects " +
                                                       llvm::join(options.expectedTasks, ", "));
}

std::vector<std::string>
Coordinator::Impl::missingKeys(const google::protobuf::RepeatedPtrField<std::string> &keys) {
  std::vector<std::string> missing;
  for (const std::string &key : keys)
    if (!values_.count(key))
      missing.push_back(key);
  return missing;
}

void Coordinator::Impl::abortLocked(std::string reason) {
  if (abortReason_)
    return;
  logLine("aborting the job: " + reason);
  abortReason_ = std::move(reason);
  changed_.notify_all();
}

grpc::Status Coordinator::Impl::Register(grpc::ServerContext *context,
                                         const proto::RegisterRequest *request, proto::Ack *) {
  if (grpc::Status refused = checkToken(context, "Register", &request->task()); !refused.ok())
    return refused;
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto status = endStatus())
    return *status;
  TaskState *task = findTask(request->task());
  if (!task)
    return unknownTask(request->task());
  // The same process may register again (a retried call); another one may not.
  if (task->registered && (task->pid != request->pid() || task->host != request->host()))
    return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                        "task " + request->task() + " is already registered by pid " +
                            std::to_string(task->pid) + " on " + task->host);
  task->registered = true;
  task->pid = request->pid();
  task->host = request->host();
  task->lastHeartbeat = Clock::now();
  return grpc::Status::OK;
}

grpc::Status Coordinator::Impl::Set(grpc::ServerContext *context, const proto::SetRequest *request,
                                    proto::Ack *) {
  if (grpc::Status refused = checkToken(context, "Set"); !refused.ok())
    return refused;
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto status = endStatus())
    return *status;
  values_[request->key()] = request->value();
  changed_.notify_all();
  return grpc::Status::OK;
}

grpc::Status Coordinator::Impl::Get(grpc::ServerContext *context, const proto::GetRequest *request,
                                    proto::GetReply *reply) {
  if (grpc::Status refused = checkToken(context, "Get"); !refused.ok())
    return refused;
  const std::string &key = request->key();
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_until(lock, waitDeadline(context, request->timeout_ms()),
                      [&] { return ended() || values_.count(key); });
  if (auto status = endStatus())
    return *status;
  auto value = values_.find(key);
  if (value == values_.end())
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "key '" + key + "' was not set within " +
                            std::to_string(request->timeout_ms()) + " ms");
  reply->set_value(value->second);
  return grpc::Status::OK;
}

grpc::Status Coordinator::Impl::Wait(grpc::ServerContext *context,
                                     const proto::WaitRequest *request, proto::Ack *) {
  if (grpc::Status refused = checkToken(context, "Wait"); !refused.ok())
    return refused;
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_until(lock, waitDeadline(context, request->timeout_ms()),
                      [&] { return ended() || missingKeys(request->keys()).empty(); });
  if (auto status = endStatus())
    return *status;
  std::vector<std::string> missing = missingKeys(request->keys());
  if (!missing.empty())
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "keys not set within " + std::to_string(request->timeout_ms()) +
                            " ms: " + llvm::join(missing, ", "));
  return grpc::Status::OK;
}

grpc::Status Coordinator::Impl::Check(grpc::ServerContext *context,
                                      const proto::CheckRequest *request,
                                      proto::CheckReply *reply) {
  if (grpc::Status refused = checkToken(context, "Check"); !refused.ok())
    return refused;
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto status = endStatus())
    return *status;
  for (std::string &key : missingKeys(request->keys()))
    reply->add_missing(std::move(key));
  return grpc::Status::OK;
}

grpc::Status Coordinator::Impl::Barrier(grpc::ServerContext *context,
                                        const proto::BarrierRequest *request, proto::Ack *) {
  if (grpc::Status refused = checkToken(context, "Barrier", &request->task()); !refused.ok())
    return refused;
  const std::string &name = request->name(), &taskName = request->task();
  std::unique_lock<std::mutex> lock(mutex_);
  if (auto status = endStatus())
    return *status;
  if (!findTask(taskName))
    return unknownTask(taskName);
  if (request->count() <= 0)
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "barrier '" + name +
                                                                "' needs a positive count, not " +
                                                                std::to_string(request->count()));
  BarrierState &barrier = barriers_[name];
  if (barrier.arrived.empty())
    barrier.count = request->count();
  else if (barrier.count != request->count())
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        taskName + " entered barrier '" + name + "' with count " +
                            std::to_string(request->count()) + ", others with " +
                            std::to_string(barrier.count));
  barrier.arrived.insert(taskName);
  if (static_cast<int>(barrier.arrived.size()) >= barrier.count) {
    ++barrier.generation;
    barrier.arrived.clear();
    changed_.notify_all();
    return grpc::Status::OK;
  }
  const uint64_t generation = barrier.generation;
  changed_.wait_until(lock, waitDeadline(context, request->timeout_ms()),
                      [&] { return ended() || barrier.generation != generation; });
  if (auto status = endStatus())
    return *status;
  if (barrier.generation != generation)
    return grpc::Status::OK;
  std::string message = "barrier '" + name + "': " + std::to_string(barrier.arrived.size()) +
                        " of " + std::to_string(barrier.count) + " tasks arrived within " +
                        std::to_string(request->timeout_ms()) + " ms (" +
                        llvm::join(barrier.arrived, ", ") + ")";
  barrier.arrived.erase(taskName); // a retry must not find this attempt counted
  return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, message);
}

grpc::Status Coordinator::Impl::Heartbeat(grpc::ServerContext *context,
                                          const proto::TaskRequest *request, proto::Ack *) {
  if (grpc::Status refused = checkToken(context, "Heartbeat", &request->task()); !refused.ok())
    return refused;
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto status = endStatus())
    return *status;
  TaskState *task = findTask(request->task());
  if (!task)
    return unknownTask(request->task());
  if (!task->registered)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "heartbeat from " + request->task() + " before it registered");
  if (task->dropped)
    return grpc::Status(grpc::StatusCode::ABORTED,
                        request->task() + " was dropped from the job: " + *task->dropped);
  task->lastHeartbeat = Clock::now();
  return grpc::Status::OK;
}

grpc::Status Coordinator::Impl::Now(grpc::ServerContext *context, const proto::TaskRequest *request,
                                    proto::NowReply *reply) {
  if (grpc::Status refused = checkToken(context, "Now", &request->task()); !refused.ok())
    return refused;
  reply->set_unix_micros(std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count());
  return grpc::Status::OK;
}

grpc::Status Coordinator::Impl::ReportFailure(grpc::ServerContext *context,
                                              const proto::ReportFailureRequest *request,
                                              proto::Ack *) {
  if (grpc::Status refused = checkToken(context, "ReportFailure", &request->task()); !refused.ok())
    return refused;
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto status = endStatus())
    return *status;
  TaskState *task = findTask(request->task());
  if (!task)
    return unknownTask(request->task());
  // A dropped worker that comes back (a stopped process continued) fails alone.
  if (task->dropped)
    return grpc::Status(grpc::StatusCode::ABORTED,
                        request->task() + " was dropped from the job: " + *task->dropped);
  abortLocked(request->task() + " failed: " + request->last_words());
  return grpc::Status::OK;
}

grpc::Status Coordinator::Impl::Finish(grpc::ServerContext *context,
                                       const proto::TaskRequest *request, proto::Ack *) {
  if (grpc::Status refused = checkToken(context, "Finish", &request->task()); !refused.ok())
    return refused;
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto status = endStatus())
    return *status;
  TaskState *task = findTask(request->task());
  if (!task)
    return unknownTask(request->task());
  task->finished = true;
  changed_.notify_all();
  return grpc::Status::OK;
}

void Coordinator::Impl::publishMembershipLocked(const std::string &why) {
  values_[membershipKey(epoch_)] = llvm::join(members_, ",");
  values_[membershipReasonKey(epoch_)] = why;
  values_[kMembershipEpochKey] = std::to_string(epoch_);
  if (epoch_ > 0)
    logLine("membership " + llvm::Twine(epoch_) + ": " + llvm::join(members_, ", ") + " (" + why +
            ")");
  changed_.notify_all();
}

bool Coordinator::Impl::loseWorkerLocked(const std::string &task, const std::string &why) {
  if (ended())
    return false;
  TaskState *state = findTask(task);
  if (state && state->dropped)
    return true;
  if (!elastic() || !state || !llvm::is_contained(members_, task)) {
    abortLocked(task + " " + why);
    return false;
  }
  if (static_cast<int>(members_.size()) - 1 < options.elasticMin) {
    abortLocked(task + " " + why + ", and the " + std::to_string(members_.size() - 1) +
                " workers left are fewer than --elastic's minimum of " +
                std::to_string(options.elasticMin));
    return false;
  }
  state->dropped = why;
  llvm::erase_value(members_, task);
  ++epoch_;
  publishMembershipLocked(task + " was lost: it " + why);
  return true;
}

grpc::Status Coordinator::Impl::Join(grpc::ServerContext *context,
                                     const proto::JoinRequest *request, proto::JoinReply *reply) {
  if (grpc::Status refused = checkToken(context, "Join"); !refused.ok())
    return refused;
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto status = endStatus())
    return *status;
  if (!elastic())
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this job is not elastic: a worker may join only a plan made with "
                        "--elastic MIN:MAX");
  if (values_.count(kJobDoneKey))
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "the job has finished training; there is nothing left to join");
  if (static_cast<int>(members_.size()) >= options.elasticMax)
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "the job has its most workers already (" + std::to_string(members_.size()) +
                            " of --elastic's maximum " + std::to_string(options.elasticMax) + ")");
  std::string name;
  do
    name = "worker:" + std::to_string(nextWorker_++);
  while (tasks_.count(name));
  TaskState &task = tasks_[name];
  task.registered = true;
  task.pid = request->pid();
  task.host = request->host();
  task.lastHeartbeat = Clock::now();
  members_.push_back(name);
  ++epoch_;
  publishMembershipLocked(name + " joined from " + request->host() + " (pid " +
                          std::to_string(request->pid()) + ")");
  reply->set_task(name);
  reply->set_membership_epoch(epoch_);
  return grpc::Status::OK;
}

void Coordinator::Impl::monitorHeartbeats() {
  const milliseconds period =
      std::clamp(options.heartbeatTimeout / 5, milliseconds(10), milliseconds(1000));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!changed_.wait_for(lock, period, [&] { return ended(); })) {
    const Clock::time_point now = Clock::now();
    for (const auto &[name, task] : tasks_) {
      if (!task.registered || task.finished)
        continue;
      std::chrono::duration<double> silence = now - task.lastHeartbeat;
      if (task.dropped || silence <= options.heartbeatTimeout)
        continue;
      std::string why = "stopped answering (no heartbeat for " + seconds(silence) + ")";
      if (elastic() && llvm::is_contained(members_, name)) {
        if (loseWorkerLocked(name, why))
          continue;
        break;
      }
      abortLocked(name + " " + why);
      break;
    }
  }
}

bool Coordinator::Impl::waitUntilAllFinished(milliseconds timeout) {
  auto allFinished = [&] {
    return llvm::all_of(tasks_, [](const auto &entry) {
      return entry.second.finished || entry.second.dropped.has_value();
    });
  };
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return ended() || allFinished(); });
  return !abortReason_ && allFinished();
}

void Coordinator::Impl::shutdown() {
  std::call_once(shutdownOnce_, [&] {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      changed_.notify_all();
    }
    // Blocked handlers have been woken; the deadline only bounds calls arriving meanwhile.
    if (server)
      server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    if (monitor_.joinable())
      monitor_.join();
  });
}

Coordinator::Coordinator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Coordinator::~Coordinator() = default;

llvm::Expected<std::unique_ptr<Coordinator>> Coordinator::start(CoordinatorOptions options) {
  if (options.jobToken.empty())
    return ir::makeError("coordinator: the job token must not be empty");
  if (options.expectedTasks.empty())
    return ir::makeError("coordinator: no expected tasks");
  if (options.heartbeatTimeout <= milliseconds(0))
    return ir::makeError("coordinator: the heartbeat timeout must be positive");
  auto impl = std::make_unique<Impl>(std::move(options));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(impl->options.listenAddress, serverCredentials(impl->options.tls),
                           &impl->port);
  // gRPC binds with SO_REUSEPORT by default: a second server on a taken port would "succeed".
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(impl.get());
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->port == 0)
    return ir::makeError("coordinator: cannot listen on " + impl->options.listenAddress);
  impl->startMonitor();
  return std::unique_ptr<Coordinator>(new Coordinator(std::move(impl)));
}

int Coordinator::port() const {
  return impl_->port;
}

std::string Coordinator::address() const {
  llvm::StringRef host = llvm::StringRef(impl_->options.listenAddress).rsplit(':').first;
  return host.str() + ":" + std::to_string(impl_->port);
}

void Coordinator::abort(llvm::StringRef reason) {
  impl_->abort(reason);
}
std::optional<std::string> Coordinator::abortReason() const {
  return impl_->abortReason();
}

std::optional<std::string> Coordinator::value(llvm::StringRef key) const {
  return impl_->value(key.str());
}

void Coordinator::set(llvm::StringRef key, llvm::StringRef value) {
  impl_->set(key.str(), value.str());
}

bool Coordinator::loseWorker(llvm::StringRef task, llvm::StringRef why) {
  return impl_->loseWorker(task.str(), why.str());
}

bool Coordinator::dropped(llvm::StringRef task) const {
  return impl_->dropped(task.str());
}

bool Coordinator::waitUntilAllFinished(std::chrono::milliseconds timeout) {
  return impl_->waitUntilAllFinished(timeout);
}
void Coordinator::shutdown() {
  impl_->shutdown();
}

} // namespace prism::runtime::dist
