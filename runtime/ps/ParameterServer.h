// The parameter server of synchronous data-parallel training: a gRPC service holding shards of
// variables. Workers pull values at the start of step s (which waits until s steps are
// applied) and push gradients at its end; once every contributor pushed step s, the server
// combines them deterministically (GradientAggregator.h) and applies them through a callback
// (e.g. an optimizer), which makes its version s + 1. With backup workers (PushPolicy::quorum) a
// step needs only the first pushes and later ones are dropped; asynchronous (PushPolicy::async)
// each push is applied on arrival.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/dist/Tls.h"
#include "runtime/exec/Executor.h"
#include "runtime/ps/GradientAggregator.h"
#include "runtime/ps/PsShard.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::ps {

// Applies step `step`'s combined gradients to the variables. The server holds its lock meanwhile,
// so no pull reads a half-updated shard (and the callback must not call the server). An error
// puts the server in a failed state, reported by every waiting and later call.
using ApplyGradients = std::function<llvm::Error(int64_t step, const GradientSet &gradients)>;

// How pushes become applied steps (docs/distributed.md, "Asynchronous training and backup
// workers"). The default is synchronous training: a step waits for every contributor.
struct PushPolicy {
  // Synchronous: a step is applied once this many contributors pushed it (0: all of them);
  // pushes for a step already applied are dropped and answered at once (backup workers).
  int64_t quorum = 0;
  // Asynchronous: each push is applied on arrival, alone, and the version counts applied
  // pushes. Pulls do not wait for a version.
  bool async = false;
  // Asynchronous: a pull for step s, and the answer to a push of step s - 1, wait until s is at
  // most this many steps ahead of the slowest contributor's pushed steps; none: never wait.
  std::optional<int64_t> maxStaleness;
};

// What the server did with pushes so far (the job's log line and Status).
struct PushCounts {
  std::vector<int64_t> applied, dropped; // by contributor
  int64_t maxLead = 0; // asynchronous: the most steps a push was ahead of the slowest
  double examples = 0; // the weights (examples) of applied pushes
  double seconds = 0;  // from the first apply to the last
};

struct ParameterServerOptions {
  // host:port to listen on; port 0 picks a free one (see ParameterServer::port()).
  std::string address = "127.0.0.1:0";
  // Every call must carry the metadata `prism-job-token: <jobToken>` (non-empty).
  std::string jobToken;
  // The shards this server holds, at most one per variable.
  std::vector<PsShard> shards;
  // The store holding the shards under their variable names, of the shard's shape (not the
  // full one); a shard missing from it is added, zero-filled. Optimizer state may live in it too.
  std::shared_ptr<runtime::VariableStore> variables;
  // Contributors 0 .. contributors-1 each push every step to this server (an empty push when they
  // have nothing for it).
  int64_t contributors = 1;
  // When not empty, the contributors are these indices instead (ascending; with local
  // aggregation a host's leader pushes for the host's workers, which count as one).
  std::vector<int64_t> contributorIds;
  PushPolicy policy;
  ApplyGradients apply;
  // Called before each apply, under the same lock, with the contributors whose pushes it
  // combines, in the order combined (for traces). Optional.
  std::function<void(int64_t step, llvm::ArrayRef<int64_t> contributors)> combined;
  // Called with the new version after each apply, under the same lock (a checkpoint written
  // here is of one version: no pull or apply runs meanwhile); an error fails the server as an
  // apply's does. Optional.
  std::function<llvm::Error(int64_t version)> afterApply;
  // The longest a call waits for a step (pull) or for its step to be applied (push); a client's
  // earlier deadline and shutdown end the wait sooner.
  std::chrono::milliseconds waitTimeout{60000};
  // TLS (runtime/dist/Tls.h): this server's identity; callers must be workers, and a push must
  // come from the worker it is counted for. None: plaintext.
  std::optional<dist::TlsIdentity> tls;
};

class ParameterServer {
public:
  // Checks the options, prepares the shards in the store and starts serving.
  static llvm::Expected<std::unique_ptr<ParameterServer>> start(ParameterServerOptions options);
  // Shuts down (see shutdown()).
  ~ParameterServer();
  ParameterServer(const ParameterServer &) = delete;
  ParameterServer &operator=(const ParameterServer &) = delete;

  // The port it listens on, and "host:port" for clients (the listening host; 127.0.0.1 when it
  // listens on every interface).
  int port() const { return port_; }
  std::string endpoint() const;
  // Steps applied so far (asynchronous: pushes applied).
  int64_t version() const;
  PushCounts counts() const;
  // Elastic membership: from now on `contributors` workers push each step, in membership
  // `epoch`. The pushes of the step not yet applied are dropped, and every waiting or later call
  // of an older epoch fails (ABORTED), so the workers redo that step in the new membership.
  // Returns the version the new membership starts at (an older epoch changes nothing).
  int64_t changeMembership(int64_t epoch, int64_t contributors);
  // Wakes every waiting call (they fail), then stops serving. Idempotent.
  void shutdown();

  // Writes every shard and the version to `path` atomically (a temporary file renamed in place).
  llvm::Error save(llvm::StringRef path) const;
  // Replaces every shard and the version with those of a file save() wrote for the same shards
  // (names, row ranges, shapes and dtypes must match). Refused while pushes of an unapplied step
  // are buffered; clears a failed state.
  llvm::Error load(llvm::StringRef path);

private:
  class Service; // the gRPC service and the server's state, in ParameterServer.cpp
  ParameterServer(std::unique_ptr<Service> service, std::string host, int port);

  std::unique_ptr<Service> service_;
  std::string host_;
  int port_ = 0;
};

} // namespace prism::runtime::ps
