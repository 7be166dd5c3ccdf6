// The parameter-server client: calls go out through gRPC's callback API, all of one operation at
// once, and the caller waits until each has completed (gRPC ends every call by its deadline).
#include "runtime/ps/PsClient.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <tuple>

#include <grpcpp/grpcpp.h>

#include "ir/Diagnostic.h"
#include "runtime/dist/ChannelArguments.h"
#include "runtime/dist/RpcStatus.h"
#include "runtime/dist/Tls.h"
#include "runtime/ps/Wire.h"
#include "runtime/ps/ps.grpc.pb.h"

namespace prism::runtime::ps {
namespace wire = ::prism::ps;
using Stub = wire::ParameterServer::Stub;

namespace {

template <typename Request, typename Response> struct Call {
  std::string endpoint;
  Request request;
  Response response;
  grpc::ClientContext context;
  grpc::Status status;
};

// Global row indices of an i32 or i64 tensor, each checked against the variable's rows.
llvm::Expected<std::vector<int64_t>> globalRows(llvm::StringRef name, const Tensor &indices,
                                                int64_t rows) {
  if (indices.dtype() != ir::DType::I32 && indices.dtype() != ir::DType::I64)
    return ir::makeError("row indices of " + name + " must be i32 or i64");
  std::vector<int64_t> result(static_cast<size_t>(indices.numElements()));
  for (size_t i = 0; i < result.size(); ++i) {
    result[i] =
        indices.dtype() == ir::DType::I32 ? indices.data<int32_t>()[i] : indices.data<int64_t>()[i];
    if (result[i] < 0 || result[i] >= rows)
      return ir::makeError("row " + llvm::Twine(result[i]) + " of " + name +
                           " is out of range [0, " + llvm::Twine(rows) + ")");
  }
  return result;
}

int64_t rowBytes(const VariableLayout &layout) {
  int64_t bytes = ir::dtypeBytes(layout.dtype);
  for (size_t i = 1; i < layout.shape.size(); ++i)
    bytes *= layout.shape[i];
  return bytes;
}

// Copies a pulled shard's rows into `result`, the whole variable, after checking them.
llvm::Error copyShard(const wire::Tensor &wire, const VariableLayout &layout,
                      const ShardLocation &shard, Tensor &result, llvm::StringRef name,
                      const std::string &server) {
  auto value = fromWire(wire);
  if (!value)
    return value.takeError();
  std::vector<int64_t> shape = layout.shape;
  shape[0] = shard.rowEnd - shard.rowBegin;
  if (value->dtype() != layout.dtype || value->shape() != shape)
    return ir::makeError("parameter server " + server + " holds rows of " + name +
                         " with another dtype or shape than the layout says");
  if (value->numBytes())
    std::memcpy(static_cast<char *>(result.raw()) + shard.rowBegin * rowBytes(layout), value->raw(),
                static_cast<size_t>(value->numBytes()));
  return llvm::Error::success();
}

} // namespace

struct PsClient::Channels {
  std::map<std::string, std::unique_ptr<Stub>> stubs;
};

llvm::Expected<std::unique_ptr<PsClient>> PsClient::create(PsClientOptions options) {
  for (auto &[name, layout] : options.variables) {
    if (layout.shape.empty())
      return ir::makeError("variable " + name + " on parameter servers needs rank 1 or more");
    // By rowBegin, an empty shard before the one starting where it is.
    std::sort(layout.shards.begin(), layout.shards.end(),
              [](const ShardLocation &a, const ShardLocation &b) {
                return std::tie(a.rowBegin, a.rowEnd) < std::tie(b.rowBegin, b.rowEnd);
              });
    int64_t covered = 0;
    std::vector<llvm::StringRef> servers;
    for (const ShardLocation &shard : layout.shards) {
      if (shard.rowBegin != covered || shard.rowEnd < shard.rowBegin || shard.endpoint.empty())
        return ir::makeError("the shards of " + name + " do not cover its rows [0, " +
                             llvm::Twine(layout.shape[0]) + ") once each, in ranges with servers");
      covered = shard.rowEnd;
      servers.push_back(shard.endpoint);
    }
    if (covered != layout.shape[0] || layout.shards.empty())
      return ir::makeError("the shards of " + name + " do not cover its rows [0, " +
                           llvm::Twine(layout.shape[0]) + ")");
    std::sort(servers.begin(), servers.end());
    if (std::adjacent_find(servers.begin(), servers.end()) != servers.end())
      return ir::makeError("two shards of " + name + " on one parameter server");
  }
  std::unique_ptr<PsClient> client(new PsClient(std::move(options)));
  for (const auto &[name, layout] : client->options_.variables)
    for (const ShardLocation &shard : layout.shards)
      if (!client->channels_->stubs.count(shard.endpoint)) {
        grpc::ChannelArguments arguments =
            dist::clusterChannelArguments("prism.ps.ParameterServer");
        // With TLS the server must present the certificate of the task that holds the shard.
        auto server = client->options_.serverNames.find(shard.endpoint);
        if (client->options_.tls && server == client->options_.serverNames.end())
          return ir::makeError("parameter server " + shard.endpoint +
                               ": TLS needs its task name, to check its certificate");
        auto credentials = dist::channelCredentials(
            client->options_.tls,
            server == client->options_.serverNames.end() ? "" : server->second, arguments);
        client->channels_->stubs[shard.endpoint] = wire::ParameterServer::NewStub(
            grpc::CreateCustomChannel(shard.endpoint, credentials, arguments));
        client->endpoints_.push_back(shard.endpoint);
      }
  std::sort(client->endpoints_.begin(), client->endpoints_.end());
  return client;
}

PsClient::PsClient(PsClientOptions options)
    : options_(std::move(options)), channels_(std::make_unique<Channels>()) {}

PsClient::~PsClient() = default;

std::string PsClient::serverName(llvm::StringRef endpoint) const {
  auto it = options_.serverNames.find(endpoint.str());
  return it == options_.serverNames.end() ? endpoint.str()
                                          : it->second + " (" + endpoint.str() + ")";
}

template <typename CallType, typename Start>
llvm::Error PsClient::runAll(llvm::StringRef method, std::vector<std::unique_ptr<CallType>> &calls,
                             Start start) {
  std::mutex mutex;
  std::condition_variable finished;
  size_t done = 0;
  for (auto &call : calls) {
    call->context.set_deadline(std::chrono::system_clock::now() + options_.rpcDeadline);
    if (!options_.jobToken.empty())
      call->context.AddMetadata(kJobTokenKey, options_.jobToken);
    bytesSent_ += call->request.ByteSizeLong();
    start(channels_->stubs.at(call->endpoint)->async(), &call->context, &call->request,
          &call->response, [&, current = call.get()](grpc::Status status) {
            current->status = std::move(status);
            std::lock_guard<std::mutex> lock(mutex); // notify under the lock: the waiter owns it
            ++done;
            finished.notify_one();
          });
  }
  {
    std::unique_lock<std::mutex> lock(mutex);
    finished.wait(lock, [&] { return done == calls.size(); });
  }
  llvm::Error errors = llvm::Error::success();
  for (auto &call : calls) {
    if (call->status.ok()) {
      bytesReceived_ += call->response.ByteSizeLong();
      continue;
    }
    errors = llvm::joinErrors(
        std::move(errors),
        dist::rpcError(call->status,
                       "parameter server " + serverName(call->endpoint) + ": " + method));
  }
  return errors;
}

llvm::Expected<const VariableLayout *> PsClient::layoutOf(llvm::StringRef name) const {
  auto it = options_.variables.find(name.str());
  if (it == options_.variables.end())
    return ir::makeError("variable " + name + " is not on the parameter servers");
  return &it->second;
}

const ShardLocation &PsClient::shardOf(const VariableLayout &layout, int64_t row) const {
  auto it = std::upper_bound(layout.shards.begin(), layout.shards.end(), row,
                             [](int64_t r, const ShardLocation &s) { return r < s.rowBegin; });
  // The last shard starting at or before `row`: never an empty one, as those sort first.
  return *std::prev(it);
}

llvm::Expected<Tensor> PsClient::pull(llvm::StringRef name, int64_t step) {
  auto values = pullMany({name.str()}, step);
  if (!values)
    return values.takeError();
  return std::move(values->front());
}

llvm::Expected<std::vector<Tensor>> PsClient::pullMany(llvm::ArrayRef<std::string> names,
                                                       int64_t step) {
  std::vector<const VariableLayout *> layouts;
  for (const std::string &name : names) {
    auto layout = layoutOf(name);
    if (!layout)
      return layout.takeError();
    layouts.push_back(*layout);
  }
  // One call per server, asking for every shard it holds of the variables, in their order.
  using PullCall = Call<wire::PullRequest, wire::PullResponse>;
  std::vector<std::unique_ptr<PullCall>> calls;
  std::map<std::string, PullCall *> byEndpoint;
  for (size_t v = 0; v < names.size(); ++v)
    for (const ShardLocation &shard : layouts[v]->shards) {
      PullCall *&call = byEndpoint[shard.endpoint];
      if (!call) {
        calls.push_back(std::make_unique<PullCall>());
        call = calls.back().get();
        call->endpoint = shard.endpoint;
        call->request.set_step(step);
        call->request.set_membership_epoch(membershipEpoch_);
      }
      call->request.add_names(names[v]);
    }
  if (auto error = runAll("Pull", calls,
                          [](auto *async, auto *context, auto *request, auto *response, auto done) {
                            async->Pull(context, request, response, std::move(done));
                          }))
    return std::move(error);

  std::vector<Tensor> results;
  std::map<std::string, int> answered; // by endpoint: the values taken from its response so far
  for (size_t v = 0; v < names.size(); ++v) {
    const VariableLayout &layout = *layouts[v];
    Tensor &result = results.emplace_back(layout.dtype, layout.shape);
    for (const ShardLocation &shard : layout.shards) {
      const wire::PullResponse &response = byEndpoint[shard.endpoint]->response;
      const int index = answered[shard.endpoint]++;
      if (index >= response.values_size() || response.values(index).name() != names[v])
        return ir::makeError("parameter server " + serverName(shard.endpoint) +
                             " sent no shard of " + names[v]);
      if (auto e = copyShard(response.values(index).value(), layout, shard, result, names[v],
                             serverName(shard.endpoint)))
        return std::move(e);
    }
  }
  return results;
}

llvm::Expected<Tensor> PsClient::pullRows(llvm::StringRef name, const Tensor &indices,
                                          int64_t step) {
  auto layout = layoutOf(name);
  if (!layout)
    return layout.takeError();
  auto rows = globalRows(name, indices, (*layout)->shape[0]);
  if (!rows)
    return rows.takeError();
  std::vector<int64_t> unique = *rows;
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());

  // Sorted unique rows fall into the shards (sorted by rowBegin) in contiguous runs.
  using RowsCall = Call<wire::PullRowsRequest, wire::PullRowsResponse>;
  std::vector<std::unique_ptr<RowsCall>> calls;
  const ShardLocation *current = nullptr;
  for (int64_t row : unique) {
    const ShardLocation &shard = shardOf(**layout, row);
    if (&shard != current) {
      current = &shard;
      calls.push_back(std::make_unique<RowsCall>());
      calls.back()->endpoint = shard.endpoint;
      calls.back()->request.set_name(name.str());
      calls.back()->request.set_step(step);
      calls.back()->request.set_membership_epoch(membershipEpoch_);
      if (options_.compress != ir::ComputePrecision::F32 && (*layout)->dtype == ir::DType::F32)
        calls.back()->request.set_encoding(ir::precisionName(options_.compress).str());
    }
    calls.back()->request.add_indices(row);
  }
  if (auto error = runAll("PullRows", calls,
                          [](auto *async, auto *context, auto *request, auto *response, auto done) {
                            async->PullRows(context, request, response, std::move(done));
                          }))
    return std::move(error);

  // The unique rows in order, then one copy per requested index.
  int64_t bytesPerRow = rowBytes(**layout);
  std::string uniqueRows;
  uniqueRows.reserve(unique.size() * static_cast<size_t>(bytesPerRow));
  for (const auto &call : calls) {
    auto received = fromWire(call->response.rows());
    if (!received)
      return ir::withContext(received.takeError(), "rows of " + name + " from parameter server " +
                                                       serverName(call->endpoint));
    if (received->dtype() != (*layout)->dtype ||
        received->numBytes() != call->request.indices_size() * bytesPerRow)
      return ir::makeError("parameter server " + serverName(call->endpoint) + " sent rows of " +
                           name + " with another dtype or size than asked");
    uniqueRows.append(static_cast<const char *>(received->raw()),
                      static_cast<size_t>(received->numBytes()));
  }
  std::vector<int64_t> shape = indices.shape();
  shape.insert(shape.end(), (*layout)->shape.begin() + 1, (*layout)->shape.end());
  Tensor result((*layout)->dtype, shape);
  auto *out = static_cast<char *>(result.raw());
  for (int64_t row : *rows) {
    size_t position = std::lower_bound(unique.begin(), unique.end(), row) - unique.begin();
    std::memcpy(out, uniqueRows.data() + position * bytesPerRow, static_cast<size_t>(bytesPerRow));
    out += bytesPerRow;
  }
  return result;
}

llvm::Error PsClient::push(int64_t step, double weight, int64_t contributor,
                           llvm::ArrayRef<Gradient> gradients, PushOutcome *outcome) {
  using PushCall = Call<wire::PushStepRequest, wire::PushStepResponse>;
  std::vector<std::unique_ptr<PushCall>> calls;
  std::map<std::string, wire::PushStepRequest *> requestOf;
  for (const std::string &endpoint : endpoints_) {
    calls.push_back(std::make_unique<PushCall>());
    calls.back()->endpoint = endpoint;
    calls.back()->request.set_contributor(contributor);
    calls.back()->request.set_step(step);
    calls.back()->request.set_membership_epoch(membershipEpoch_);
    calls.back()->request.set_weight(weight);
    calls.back()->request.set_job_pushes(jobPushes_);
    requestOf[endpoint] = &calls.back()->request;
  }

  for (const Gradient &gradient : gradients) {
    auto layout = layoutOf(gradient.name);
    if (!layout)
      return layout.takeError();
    ir::DType dtype = (*layout)->dtype;
    int64_t bytesPerRow = rowBytes(**layout);
    std::vector<int64_t> rowShape((*layout)->shape.begin() + 1, (*layout)->shape.end());
    const int64_t elementsPerRow = bytesPerRow / ir::dtypeBytes(dtype);
    auto addTensor = [&](wire::Tensor *message, int64_t rows, const char *bytes) {
      message->set_dtype(ir::dtypeName(dtype).str());
      message->add_shape(rows);
      for (int64_t d : rowShape)
        message->add_shape(d);
      setWireData(bytes, rows * elementsPerRow, dtype, options_.compress, message);
    };

    if (gradient.indices.empty()) {
      if (gradient.dense.dtype() != dtype || gradient.dense.shape() != (*layout)->shape)
        return ir::makeError("dense gradient for " + gradient.name +
                             " does not have its variable's dtype and shape");
      const auto *bytes = static_cast<const char *>(gradient.dense.raw());
      for (const ShardLocation &shard : (*layout)->shards) {
        wire::Gradient *out = requestOf[shard.endpoint]->add_gradients();
        out->set_name(gradient.name);
        addTensor(out->mutable_dense(), shard.rowEnd - shard.rowBegin,
                  bytes + shard.rowBegin * bytesPerRow);
      }
      continue;
    }

    auto rows = globalRows(gradient.name, gradient.indices, (*layout)->shape[0]);
    if (!rows)
      return rows.takeError();
    if (gradient.rows.dtype() != dtype ||
        gradient.rows.numBytes() != static_cast<int64_t>(rows->size()) * bytesPerRow)
      return ir::makeError("sparse gradient for " + gradient.name +
                           " does not have one row of its variable's dtype and shape per index");
    // Per server owning some of the rows: its global indices and their rows, in given order.
    std::map<std::string, std::pair<std::vector<int64_t>, std::string>> byServer;
    const auto *bytes = static_cast<const char *>(gradient.rows.raw());
    for (size_t i = 0; i < rows->size(); ++i) {
      auto &[serverRows, serverBytes] = byServer[shardOf(**layout, (*rows)[i]).endpoint];
      serverRows.push_back((*rows)[i]);
      serverBytes.append(bytes + i * bytesPerRow, static_cast<size_t>(bytesPerRow));
    }
    for (auto &[endpoint, part] : byServer) {
      wire::Gradient *out = requestOf[endpoint]->add_gradients();
      out->set_name(gradient.name);
      wire::SparseGradient *sparse = out->mutable_sparse();
      sparse->mutable_indices()->Assign(part.first.begin(), part.first.end());
      addTensor(sparse->mutable_rows(), static_cast<int64_t>(part.first.size()),
                part.second.data());
    }
  }
  if (auto e = runAll("PushStep", calls,
                      [](auto *async, auto *context, auto *request, auto *response, auto done) {
                        async->PushStep(context, request, response, std::move(done));
                      }))
    return e;
  if (outcome) {
    *outcome = PushOutcome{};
    for (const auto &call : calls) {
      outcome->version = std::max(outcome->version, call->response.version());
      outcome->dropped |= call->response.dropped();
    }
  }
  return llvm::Error::success();
}

llvm::Expected<ServerStatus> PsClient::status(llvm::StringRef endpoint) {
  if (!channels_->stubs.count(endpoint.str()))
    return ir::makeError("parameter server " + serverName(endpoint) + " is not in the layout");
  using StatusCall = Call<wire::StatusRequest, wire::StatusResponse>;
  std::vector<std::unique_ptr<StatusCall>> calls;
  calls.push_back(std::make_unique<StatusCall>());
  calls.back()->endpoint = endpoint.str();
  if (auto error = runAll("Status", calls,
                          [](auto *async, auto *context, auto *request, auto *response, auto done) {
                            async->Status(context, request, response, std::move(done));
                          }))
    return std::move(error);
  const wire::StatusResponse &response = calls.back()->response;
  ServerStatus result;
  result.version = response.version();
  result.contributors = response.contributors();
  result.failure = response.failure();
  result.appliedPushes.assign(response.applied_pushes().begin(), response.applied_pushes().end());
  result.droppedPushes.assign(response.dropped_pushes().begin(), response.dropped_pushes().end());
  result.maxLead = response.max_lead();
  for (const wire::ShardInfo &info : response.shards()) {
    PsShard shard;
    shard.name = info.name();
    shard.dtype = ir::parseDType(info.dtype()).value_or(ir::DType::F32);
    shard.rowBegin = info.row_begin();
    shard.rowEnd = info.row_end();
    shard.fullShape.assign(info.full_shape().begin(), info.full_shape().end());
    result.shards.push_back(std::move(shard));
  }
  return result;
}

} // namespace prism::runtime::ps
