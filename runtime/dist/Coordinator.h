// The coordinator of a distributed job: a gRPC server that registers the job's tasks, holds a
// key-value store and barriers for them, watches their heartbeats and aborts the job when one
// fails or falls silent.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/dist/Tls.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::dist {

// The metadata key that carries the job token on every call.
inline constexpr const char *kJobTokenMetadata = "prism-job-token";

struct CoordinatorOptions {
  std::string listenAddress = "127.0.0.1:0"; // host:port; port 0 picks a free port
  std::string jobToken;                      // calls without it are refused
  std::vector<std::string> expectedTasks;    // "worker:0", "ps:1": the only tasks that may register
  // A registered, unfinished task silent for this long aborts the job.
  std::chrono::milliseconds heartbeatTimeout{5000};
  // TLS (Tls.h): the coordinator's identity; a call that names a task must come with that
  // task's certificate. None: plaintext.
  std::optional<TlsIdentity> tls;
  // Elastic membership (Membership.h): a lost worker is dropped from the membership while at
  // least `elasticMin` workers remain, instead of aborting the job, and new workers may join up
  // to `elasticMax`. 0: not elastic.
  int elasticMin = 0, elasticMax = 0;
};

class Coordinator {
public:
  // Starts serving at once; fails when the address cannot be bound or the options are unusable.
  static llvm::Expected<std::unique_ptr<Coordinator>> start(CoordinatorOptions options);
  ~Coordinator(); // shuts down

  Coordinator(const Coordinator &) = delete;
  Coordinator &operator=(const Coordinator &) = delete;

  int port() const;
  // "host:port" with the bound port, for clients.
  std::string address() const;

  // Aborts the job (the first reason sticks): every later call fails with ABORTED and the
  // reason, and blocked Get/Wait/Barrier calls return at once.
  void abort(llvm::StringRef reason);
  std::optional<std::string> abortReason() const;
  // The value tasks set for `key` in the job's key-value store; none when none is set.
  std::optional<std::string> value(llvm::StringRef key) const;
  // Sets `key` in the job's key-value store (as a task's Set does).
  void set(llvm::StringRef key, llvm::StringRef value);
  // Elastic membership: worker `task` is gone (`why`: "was killed by signal Killed"). While
  // enough workers remain it is dropped and a new membership published; otherwise, or when the
  // job is not elastic, the job is aborted. Whether the job goes on.
  bool loseWorker(llvm::StringRef task, llvm::StringRef why);
  // Whether `task` was dropped from the membership (its process is to be stopped).
  bool dropped(llvm::StringRef task) const;
  // True once every expected task has called Finish; false on timeout or when the job aborts.
  bool waitUntilAllFinished(std::chrono::milliseconds timeout);
  // Wakes blocked calls (UNAVAILABLE), stops serving and the heartbeat monitor. Idempotent.
  void shutdown();

private:
  class Impl;
  explicit Coordinator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace prism::runtime::dist
