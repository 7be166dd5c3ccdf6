// A worker's side of the parameter servers: pulls variables (or some of their rows) from the
// shards that hold them, and pushes a step's gradients split by shard, one PushStep per server,
// to every server in parallel. Safe to call from several threads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/Precision.h"
#include "runtime/Tensor.h"
#include "runtime/dist/Tls.h"
#include "runtime/ps/PsShard.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::ps {

struct ShardLocation {
  std::string endpoint; // host:port of the server holding rows [rowBegin, rowEnd)
  int64_t rowBegin = 0;
  int64_t rowEnd = 0;
};

struct VariableLayout {
  ir::DType dtype = ir::DType::F32;
  std::vector<int64_t> shape; // the full shape: [rows, row shape...]
  // Cover rows [0, shape[0]) without overlap, in any order; at most one per server.
  std::vector<ShardLocation> shards;
};

struct PsClientOptions {
  std::map<std::string, VariableLayout> variables;
  std::string jobToken; // sent as `prism-job-token` metadata (not sent when empty)
  // Per call. A push waits until every contributor pushed and the step is applied, so this
  // bounds how long the slowest contributor may lag.
  std::chrono::milliseconds rpcDeadline{60000};
  // The servers' task names by endpoint (host:port), for messages: "parameter server ps:0
  // (127.0.0.1:7003)". Without one a server is named by its endpoint.
  std::map<std::string, std::string> serverNames;
  // TLS (runtime/dist/Tls.h): this worker's identity; each server must present the certificate
  // of its task in serverNames. None: plaintext.
  std::optional<dist::TlsIdentity> tls;
  // BF16 or FP16 (--compress): f32 gradients are pushed, and rows pulled, as 16-bit floats.
  ir::ComputePrecision compress = ir::ComputePrecision::F32;
};

// A gradient of a whole variable: dense, of its full shape; or rows by global row index.
struct Gradient {
  std::string name;
  Tensor dense;   // empty when sparse
  Tensor indices; // i32 or i64, any shape; may repeat (repeated rows add up)
  Tensor rows;    // indices.shape + row shape

  static Gradient ofDense(std::string name, Tensor dense) {
    return {std::move(name), dense, {}, {}};
  }
  static Gradient ofRows(std::string name, Tensor indices, Tensor rows) {
    return {std::move(name), Tensor(), indices, rows};
  }
};

struct ServerStatus {
  int64_t version = 0;
  int64_t contributors = 0;
  std::vector<PsShard> shards;
  std::string failure;                               // empty while healthy
  std::vector<int64_t> appliedPushes, droppedPushes; // by contributor
  int64_t maxLead = 0;                               // asynchronous: see ps.proto
};

// What the servers answered a push: the highest version among them, and whether any dropped it
// (backup workers: the step was applied without it).
struct PushOutcome {
  int64_t version = 0;
  bool dropped = false;
};

class PsClient {
public:
  // Checks the layout and opens one channel per server.
  static llvm::Expected<std::unique_ptr<PsClient>> create(PsClientOptions options);
  ~PsClient();

  // The whole variable as of step `step` (each shard waits until its server applied `step`
  // steps).
  llvm::Expected<Tensor> pull(llvm::StringRef name, int64_t step);
  // The same for several variables at once: one call per server holding any of them.
  llvm::Expected<std::vector<Tensor>> pullMany(llvm::ArrayRef<std::string> names, int64_t step);
  // Rows `indices` (i32 or i64, any shape) of a variable as of step `step`: a tensor of shape
  // indices.shape + row shape. Asks only the shards owning some of the rows, each unique row once.
  llvm::Expected<Tensor> pullRows(llvm::StringRef name, const Tensor &indices, int64_t step);
  // Pushes this contributor's gradients for `step` with its weight (local batch size): every
  // server gets one PushStep, empty when it owns none of the gradients, and answers once the
  // step is applied. Gradients are f32 or f64 like their variable.
  llvm::Error push(int64_t step, double weight, int64_t contributor,
                   llvm::ArrayRef<Gradient> gradients, PushOutcome *outcome = nullptr);
  llvm::Expected<ServerStatus> status(llvm::StringRef endpoint);
  // Asynchronous training: the pushes the whole job makes, sent with every later push (ps.proto).
  void setJobPushes(int64_t pushes) { jobPushes_ = pushes; }

  // The variables on the servers and where their rows are.
  const std::map<std::string, VariableLayout> &variables() const { return options_.variables; }
  // Elastic membership: the epoch every later call carries (the servers refuse older ones).
  void setMembershipEpoch(int64_t epoch) { membershipEpoch_ = epoch; }

  // Every server of the layout, sorted.
  const std::vector<std::string> &endpoints() const { return endpoints_; }
  // Serialized request and response message bytes so far (the payload, without gRPC framing).
  uint64_t bytesSent() const { return bytesSent_; }
  uint64_t bytesReceived() const { return bytesReceived_; }

private:
  struct Channels;
  explicit PsClient(PsClientOptions options);
  template <typename Call, typename Start>
  llvm::Error runAll(llvm::StringRef method, std::vector<std::unique_ptr<Call>> &calls,
                     Start start);
  llvm::Expected<const VariableLayout *> layoutOf(llvm::StringRef name) const;
  // The shard owning `row` (shards are sorted by rowBegin).
  const ShardLocation &shardOf(const VariableLayout &layout, int64_t row) const;

  // "ps:0 (host:port)", or the endpoint alone when options_ names no task for it.
  std::string serverName(llvm::StringRef endpoint) const;
  PsClientOptions options_;
  std::vector<std::string> endpoints_;
  std::unique_ptr<Channels> channels_;
  std::atomic<uint64_t> bytesSent_{0};
  std::atomic<uint64_t> bytesReceived_{0};
  std::atomic<int64_t> jobPushes_{0};
  std::atomic<int64_t> membershipEpoch_{0};
};

} // namespace prism::runtime::ps
