// Local aggregation per host: the workers of one host send their parameter-server traffic to the
// host's leader over loopback instead of each to the servers. The leader combines a step's
// pushes (the batch-weighted mean the servers take, GradientAggregator.h; duplicate rows summed)
// and pushes once per server with the members' summed weight, so a server counts the host as one
// contributor; a pull of rows waits for every member's pull of the same variable and round and
// fetches the union of their rows once (a dense pull: the variable once).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/Tensor.h"
#include "runtime/dist/Tls.h"
#include "runtime/ps/PsClient.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::ps {

// What a worker of an aggregating host calls instead of the PS client, during a step. `round`
// counts a worker's pulls of one variable in one step from 0 (the same on every member: they run
// one program), so the leader can tell the pulls of different micro-batches apart.
class HostChannel {
public:
  virtual ~HostChannel() = default;
  // This worker's gradients of step `step` (whole variables, global row indices) and its
  // weight; returns once the leader's push of the host's combined gradients was applied.
  virtual llvm::Error push(int64_t step, double weight, llvm::ArrayRef<Gradient> gradients) = 0;
  // As PsClient::pullRows and PsClient::pull.
  virtual llvm::Expected<Tensor> pullRows(int64_t round, llvm::StringRef name,
                                          const Tensor &indices, int64_t step) = 0;
  virtual llvm::Expected<Tensor> pull(int64_t round, llvm::StringRef name, int64_t step) = 0;
  // Bytes of the messages to and from the leader (none for the leader's own calls).
  virtual uint64_t bytesSent() const { return 0; }
  virtual uint64_t bytesReceived() const { return 0; }
};

struct HostAggregatorOptions {
  std::string host;             // the host's name, for messages
  std::vector<int64_t> members; // the host's workers' indices, ascending; the first leads
  // The leader's client of the parameter servers (outlives the aggregator); the variables are
  // its layout's.
  PsClient *ps = nullptr;
  std::string jobToken;
  // How long a call waits for the other members, and for the servers after them.
  std::chrono::milliseconds timeout{60000};
  std::optional<dist::TlsIdentity> tls; // callers must then be the host's workers
};

class HostAggregator {
public:
  // Listens on 127.0.0.1 (a free port): the members share the leader's network namespace.
  static llvm::Expected<std::unique_ptr<HostAggregator>> start(HostAggregatorOptions options);
  ~HostAggregator(); // shuts down: waiting calls fail, then the service stops
  HostAggregator(const HostAggregator &) = delete;
  HostAggregator &operator=(const HostAggregator &) = delete;

  std::string endpoint() const; // 127.0.0.1:port
  // The leader's own calls (it is a member too); the channel must not outlive the aggregator.
  std::unique_ptr<HostChannel> leaderChannel();
  // Pushes combined and pulls made for the host so far (each counts once for all members).
  int64_t pushesCombined() const;

  class Rounds; // the members' calls, joined per step, variable and round (HostAggregator.cpp)

private:
  class Service;
  HostAggregator() = default;
  std::unique_ptr<Rounds> rounds_;
  std::unique_ptr<Service> service_;
  int port_ = 0;
};

// A member's channel to its host's leader at `endpoint` (TLS: the leader's task name is
// `leaderTask`), for the variables of `variables` (the PS client's layout). Calls have the
// deadline `timeout` twice over: the wait for the other members, then for the servers.
llvm::Expected<std::unique_ptr<HostChannel>>
connectToHostAggregator(const std::string &endpoint, int64_t member,
                        std::map<std::string, VariableLayout> variables,
                        const std::string &jobToken, std::chrono::milliseconds timeout,
                        const std::optional<dist::TlsIdentity> &tls, llvm::StringRef leaderTask);

} // namespace prism::runtime::ps
