// A task's gRPC connection to the coordinator, and its heartbeat thread.
#include "runtime/dist/CoordinatorClient.h"
#include "runtime/dist/RpcStatus.h"

#include <cstdio>
#include <optional>

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include "ir/Diagnostic.h"
#include "runtime/dist/Coordinator.h"
#include "runtime/dist/coordinator.grpc.pb.h"
#include "llvm/ADT/StringExtras.h"

namespace prism::runtime::dist {
namespace {

namespace proto = ::prism::dist;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// "5.0 s"
std::string seconds(std::chrono::duration<double> duration) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", duration.count());
  return text;
}

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0)
    return "unknown-host";
  return name;
}

} // namespace

struct CoordinatorClient::Connection {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<proto::CoordinatorService::Stub> stub;
};

CoordinatorClient::CoordinatorClient(CoordinatorClientOptions options)
    : options_(std::move(options)), connection_(std::make_unique<Connection>()) {
  grpc::ChannelArguments arguments;
  // The coordinator is on this host or inside the cluster: never route it through an HTTP proxy
  // that the environment (http_proxy) names.
  arguments.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
  // Find a coordinator that starts after this task soon, not after gRPC's default backoff (1 s
  // growing to 2 min).
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  auto credentials = channelCredentials(options_.tls, options_.coordinatorTask, arguments);
  connection_->channel = grpc::CreateCustomChannel(options_.address, credentials, arguments);
  connection_->stub = proto::CoordinatorService::NewStub(connection_->channel);
}

CoordinatorClient::~CoordinatorClient() {
  stopHeartbeats();
}

void CoordinatorClient::prepare(grpc::ClientContext &context, milliseconds deadline) const {
  if (!options_.jobToken.empty()) // an empty token sends none
    context.AddMetadata(kJobTokenMetadata, options_.jobToken);
  context.set_deadline(std::chrono::system_clock::now() + deadline);
}

template <typename Request, typename Reply, typename Method>
llvm::Error CoordinatorClient::call(const llvm::Twine &what, Method method, const Request &request,
                                    Reply &reply, milliseconds deadline, bool waitForReady) {
  grpc::ClientContext context;
  prepare(context, deadline);
  context.set_wait_for_ready(waitForReady);
  grpc::Status status = (connection_->stub.get()->*method)(&context, request, &reply);
  if (status.ok())
    return llvm::Error::success();
  return rpcError(status, "coordinator call " + what + " by " + options_.taskName + " at " +
                              options_.address);
}

llvm::Error CoordinatorClient::registerTask() {
  proto::RegisterRequest request;
  request.set_task(options_.taskName);
  request.set_pid(getpid());
  request.set_host(hostName());
  proto::Ack ack;
  return call("Register", &proto::CoordinatorService::Stub::Register, request, ack,
              options_.callTimeout, /*waitForReady=*/true);
}

llvm::Expected<int64_t> CoordinatorClient::join() {
  proto::JoinRequest request;
  request.set_pid(getpid());
  request.set_host(hostName());
  proto::JoinReply reply;
  if (auto error = call("Join", &proto::CoordinatorService::Stub::Join, request, reply,
                        options_.callTimeout, /*waitForReady=*/true))
    return std::move(error);
  options_.taskName = reply.task();
  return reply.membership_epoch();
}

llvm::Error CoordinatorClient::set(llvm::StringRef key, llvm::StringRef value) {
  proto::SetRequest request;
  request.set_key(key.str());
  request.set_value(value.str());
  proto::Ack ack;
  return call("Set('" + key + "')", &proto::CoordinatorService::Stub::Set, request, ack,
              options_.callTimeout);
}

llvm::Expected<std::string> CoordinatorClient::get(llvm::StringRef key, milliseconds timeout) {
  proto::GetRequest request;
  request.set_key(key.str());
  request.set_timeout_ms(timeout.count());
  proto::GetReply reply;
  if (llvm::Error error = call("Get('" + key + "')", &proto::CoordinatorService::Stub::Get, request,
                               reply, timeout + options_.callTimeout))
    return std::move(error);
  return std::move(*reply.mutable_value());
}

llvm::Error CoordinatorClient::wait(llvm::ArrayRef<std::string> keys, milliseconds timeout) {
  proto::WaitRequest request;
  request.mutable_keys()->Add(keys.begin(), keys.end());
  request.set_timeout_ms(timeout.count());
  proto::Ack ack;
  return call("Wait(" + llvm::join(keys, ", ") + ")", &proto::CoordinatorService::Stub::Wait,
              request, ack, timeout + options_.callTimeout);
}

llvm::Expected<std::vector<std::string>>
CoordinatorClient::missingKeys(llvm::ArrayRef<std::string> keys) {
  proto::CheckRequest request;
  request.mutable_keys()->Add(keys.begin(), keys.end());
  proto::CheckReply reply;
  if (llvm::Error error =
          call("Check(" + llvm::join(keys, ", ") + ")", &proto::CoordinatorService::Stub::Check,
               request, reply, options_.callTimeout))
    return std::move(error);
  return std::vector<std::string>(reply.missing().begin(), reply.missing().end());
}

llvm::Error CoordinatorClient::barrier(llvm::StringRef name, int count, milliseconds timeout) {
  proto::BarrierRequest request;
  request.set_name(name.str());
  request.set_task(options_.taskName);
  request.set_count(count);
  request.set_timeout_ms(timeout.count());
  proto::Ack ack;
  return call("Barrier('" + name + "', " + llvm::Twine(count) + " tasks)",
              &proto::CoordinatorService::Stub::Barrier, request, ack,
              timeout + options_.callTimeout);
}

llvm::Error CoordinatorClient::reportFailure(llvm::StringRef lastWords) {
  proto::ReportFailureRequest request;
  request.set_task(options_.taskName);
  request.set_last_words(lastWords.str());
  proto::Ack ack;
  return call("ReportFailure", &proto::CoordinatorService::Stub::ReportFailure, request, ack,
              options_.callTimeout);
}

llvm::Error CoordinatorClient::finish() {
  proto::TaskRequest request;
  request.set_task(options_.taskName);
  proto::Ack ack;
  llvm::Error error =
      call("Finish", &proto::CoordinatorService::Stub::Finish, request, ack, options_.callTimeout);
  stopHeartbeats();
  return error;
}

llvm::Expected<int64_t> CoordinatorClient::clockOffsetMicros(int samples) {
  // Cristian's method: the coordinator's clock at the middle of the round trip, from the
  // sample with the shortest round trip (the least room for error).
  auto unixMicros = [] {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  int64_t best = -1, offset = 0;
  for (int i = 0; i < std::max(1, samples); ++i) {
    proto::TaskRequest request;
    request.set_task(options_.taskName);
    proto::NowReply reply;
    int64_t sent = unixMicros();
    if (auto error = call("Now", &proto::CoordinatorService::Stub::Now, request, reply,
                          options_.callTimeout))
      return std::move(error);
    int64_t received = unixMicros(), roundTrip = received - sent;
    if (best < 0 || roundTrip < best) {
      best = roundTrip;
      offset = reply.unix_micros() - (sent + roundTrip / 2);
    }
  }
  return offset;
}

llvm::Error CoordinatorClient::startHeartbeats(milliseconds interval, AbortHandler onAbort,
                                               milliseconds giveUpAfter) {
  if (interval <= milliseconds(0) || giveUpAfter <= milliseconds(0))
    return ir::makeError("heartbeats of " + options_.taskName +
                         ": interval and give-up time must be positive");
  std::lock_guard<std::mutex> lock(heartbeatMutex_);
  if (heartbeatThread_.joinable())
    return ir::makeError("heartbeats of " + options_.taskName + " already started");
  stopHeartbeats_ = false;
  heartbeatThread_ = std::thread([this, interval, giveUpAfter, onAbort = std::move(onAbort)] {
    sendHeartbeats(interval, onAbort, giveUpAfter);
  });
  return llvm::Error::success();
}

void CoordinatorClient::stopHeartbeats() {
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(heartbeatMutex_);
    stopHeartbeats_ = true;
    heartbeatWake_.notify_all();
    thread = std::move(heartbeatThread_);
  }
  if (!thread.joinable())
    return;
  if (thread.get_id() == std::this_thread::get_id())
    thread.detach(); // called from onAbort: the thread ends when it returns
  else
    thread.join();
}

void CoordinatorClient::sendHeartbeats(milliseconds interval, AbortHandler onAbort,
                                       milliseconds giveUpAfter) {
  proto::TaskRequest request;
  request.set_task(options_.taskName);
  // A hung call must not hide a coordinator that stopped answering.
  const milliseconds callDeadline = std::min(std::max(interval, milliseconds(1000)), giveUpAfter);
  Clock::time_point lastAnswer = Clock::now();
  std::unique_lock<std::mutex> lock(heartbeatMutex_);
  while (!stopHeartbeats_) {
    lock.unlock();
    grpc::ClientContext context;
    prepare(context, callDeadline);
    proto::Ack ack;
    grpc::Status status = connection_->stub->Heartbeat(&context, request, &ack);
    const Clock::time_point now = Clock::now();
    std::optional<std::string> reason;
    if (status.ok()) {
      lastAnswer = now;
    } else if (status.error_code() == grpc::StatusCode::ABORTED) {
      reason = status.error_message();
    } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
               status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
               status.error_code() == grpc::StatusCode::CANCELLED) {
      // Unreachable, slow, or cut off by a server shutting down: tolerated for a while.
      std::chrono::duration<double> silence = now - lastAnswer;
      if (silence > giveUpAfter)
        reason = "coordinator at " + options_.address + " unreachable for " + seconds(silence) +
                 " (" + status.error_message() + ")";
    } else {
      reason = "heartbeat of " + options_.taskName +
               " refused: " + ir::messageOf(rpcError(status, "heartbeat"));
    }
    lock.lock();
    if (stopHeartbeats_)
      return;
    if (reason) {
      lock.unlock();
      onAbort(std::move(*reason));
      return;
    }
    heartbeatWake_.wait_for(lock, interval, [&] { return stopHeartbeats_; });
  }
}

} // namespace prism::runtime::dist
