// A task's connection to the job's coordinator: registration, the key-value store, barriers,
// background heartbeats and failure reports. Every call has a deadline; failures come back as
// llvm::Error naming the call, the task and what the coordinator said.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/dist/Tls.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace grpc {
class ClientContext;
} // namespace grpc

namespace prism::runtime::dist {

struct CoordinatorClientOptions {
  std::string address;  // "host:port" of the coordinator
  std::string jobToken; // sent with every call (none when empty)
  std::string taskName; // this task, e.g. "worker:1"
  // The deadline of calls that do not wait by design; waiting calls get their timeout on top.
  std::chrono::milliseconds callTimeout{10000};
  // TLS (Tls.h): this task's identity; the coordinator must present the certificate of
  // `coordinatorTask`. None: plaintext.
  std::optional<TlsIdentity> tls;
  std::string coordinatorTask = "coordinator:0";
};

class CoordinatorClient {
public:
  // Called once, from the heartbeat thread, when the job is over for this task.
  using AbortHandler = std::function<void(std::string reason)>;

  explicit CoordinatorClient(CoordinatorClientOptions options);
  ~CoordinatorClient(); // stops heartbeats

  CoordinatorClient(const CoordinatorClient &) = delete;
  CoordinatorClient &operator=(const CoordinatorClient &) = delete;

  const std::string &taskName() const { return options_.taskName; }
  const std::string &address() const { return options_.address; }

  // Announces this task (pid and host name); waits up to callTimeout for the coordinator to come
  // up, so tasks may start before it.
  llvm::Error registerTask();
  // Elastic membership: joins the job as a new worker instead of registering (waiting up to
  // callTimeout for the coordinator); this client takes the task name the coordinator gives.
  // Returns the first membership epoch the worker is in.
  llvm::Expected<int64_t> join();

  llvm::Error set(llvm::StringRef key, llvm::StringRef value);
  // The value of `key`, waiting up to `timeout` for some task to set it.
  llvm::Expected<std::string> get(llvm::StringRef key, std::chrono::milliseconds timeout);
  // Returns once all keys are set; an error after `timeout`.
  llvm::Error wait(llvm::ArrayRef<std::string> keys, std::chrono::milliseconds timeout);
  // The keys not set yet, without waiting.
  llvm::Expected<std::vector<std::string>> missingKeys(llvm::ArrayRef<std::string> keys);

  // Returns once `count` tasks entered the barrier `name`; an error after `timeout`.
  llvm::Error barrier(llvm::StringRef name, int count, std::chrono::milliseconds timeout);

  // Microseconds to add to this host's clock to read the coordinator's: the best of `samples`
  // round trips (for aligned trace timelines).
  llvm::Expected<int64_t> clockOffsetMicros(int samples = 5);

  // Sends a heartbeat every `interval` from a background thread. `onAbort` is called once, with
  // the coordinator's reason, when the job is aborted, when a heartbeat is refused, or when the
  // coordinator has been unreachable for `giveUpAfter`; then the thread ends.
  llvm::Error startHeartbeats(std::chrono::milliseconds interval, AbortHandler onAbort,
                              std::chrono::milliseconds giveUpAfter = std::chrono::seconds(10));
  void stopHeartbeats();

  // Aborts the job with this task's last words.
  llvm::Error reportFailure(llvm::StringRef lastWords);
  // This task is done: the coordinator stops watching it, and heartbeats stop.
  llvm::Error finish();

private:
  struct Connection;
  void prepare(grpc::ClientContext &context, std::chrono::milliseconds deadline) const;
  template <typename Request, typename Reply, typename Method>
  llvm::Error call(const llvm::Twine &what, Method method, const Request &request, Reply &reply,
                   std::chrono::milliseconds deadline, bool waitForReady = false);
  void sendHeartbeats(std::chrono::milliseconds interval, AbortHandler onAbort,
                      std::chrono::milliseconds giveUpAfter);

  CoordinatorClientOptions options_;
  std::unique_ptr<Connection> connection_;

  std::mutex heartbeatMutex_;
  std::condition_variable heartbeatWake_;
  bool stopHeartbeats_ = false;
  std::thread heartbeatThread_;
};

} // namespace prism::runtime::dist
