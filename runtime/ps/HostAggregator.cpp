// Local aggregation per host (see HostAggregator.h): the leader's service joins the members'
// calls into rounds, and the last member to arrive makes the round's one call to the servers.
#include "runtime/ps/HostAggregator.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "ir/Diagnostic.h"
#include "runtime/dist/ChannelArguments.h"
#include "runtime/dist/RpcStatus.h"
#include "runtime/ps/GradientAggregator.h"
#include "runtime/ps/Wire.h"
#include "runtime/ps/ps.grpc.pb.h"

namespace prism::runtime::ps {
namespace wire = ::prism::ps;
using Clock = std::chrono::system_clock;

namespace {

// Row indices of an i32 or i64 tensor, in order.
llvm::Expected<std::vector<int64_t>> indicesOf(llvm::StringRef name, const Tensor &indices) {
  if (indices.dtype() != ir::DType::I32 && indices.dtype() != ir::DType::I64)
    return ir::makeError("row indices of " + name + " must be i32 or i64");
  std::vector<int64_t> result(static_cast<size_t>(indices.numElements()));
  for (size_t i = 0; i < result.size(); ++i)
    result[i] =
        indices.dtype() == ir::DType::I32 ? indices.data<int32_t>()[i] : indices.data<int64_t>()[i];
  return result;
}

// A member's gradients of whole variables in a push's wire form (f32 as they are: loopback).
llvm::Error encodeGradients(llvm::ArrayRef<Gradient> gradients,
                            const std::map<std::string, VariableLayout> &variables,
                            wire::PushStepRequest &request) {
  for (const Gradient &gradient : gradients) {
    auto layout = variables.find(gradient.name);
    if (layout == variables.end())
      return ir::makeError("variable " + gradient.name + " is not on the parameter servers");
    wire::Gradient *out = request.add_gradients();
    out->set_name(gradient.name);
    if (gradient.indices.empty()) {
      toWire(gradient.dense, out->mutable_dense());
      continue;
    }
    auto indices = indicesOf(gradient.name, gradient.indices);
    if (!indices)
      return indices.takeError();
    wire::SparseGradient *sparse = out->mutable_sparse();
    sparse->mutable_indices()->Assign(indices->begin(), indices->end());
    wire::Tensor *rows = sparse->mutable_rows();
    rows->set_dtype(ir::dtypeName(gradient.rows.dtype()).str());
    rows->add_shape(static_cast<int64_t>(indices->size()));
    for (size_t d = 1; d < layout->second.shape.size(); ++d)
      rows->add_shape(layout->second.shape[d]);
    setWireData(gradient.rows.raw(), gradient.rows.numElements(), gradient.rows.dtype(),
                ir::ComputePrecision::F32, rows);
  }
  return llvm::Error::success();
}

// `rows` ([n, row shape...]) as the rows of `indices` (indices.shape + row shape).
Tensor shapedLike(const Tensor &rows, const std::vector<int64_t> &indicesShape) {
  std::vector<int64_t> shape = indicesShape;
  shape.insert(shape.end(), rows.shape().begin() + 1, rows.shape().end());
  return rows.reshaped(shape);
}

} // namespace

// Joins the members' calls: one round per step (push), or per variable, step and round (pulls).
class HostAggregator::Rounds {
public:
  explicit Rounds(HostAggregatorOptions options) : options_(std::move(options)) {
    for (const auto &[name, layout] : options_.ps->variables()) {
      PsShard whole; // the whole variable: local row numbers are global ones
      whole.name = name;
      whole.dtype = layout.dtype;
      whole.rowEnd = layout.shape.empty() ? 0 : layout.shape[0];
      whole.fullShape = layout.shape;
      shards_.push_back(whole);
    }
  }

  const HostAggregatorOptions &options() const { return options_; }
  bool isMember(int64_t worker) const {
    return std::binary_search(options_.members.begin(), options_.members.end(), worker);
  }
  int64_t pushes() const { return pushes_; }

  llvm::Expected<GradientSet>
  decode(const google::protobuf::RepeatedPtrField<wire::Gradient> &gradients) const;
  llvm::Error push(int64_t member, int64_t step, double weight, GradientSet gradients);
  llvm::Expected<Tensor> pullRows(int64_t member, int64_t round, const std::string &name,
                                  std::vector<int64_t> indices, int64_t step);
  llvm::Expected<Tensor> pull(int64_t member, int64_t round, const std::string &name, int64_t step);
  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      shuttingDown_ = true;
    }
    changed_.notify_all();
  }

private:
  struct Arrival {
    double weight = 0;
    GradientSet gradients;
    std::vector<int64_t> indices;
  };
  using Arrivals = std::map<int64_t, Arrival>; // by member index: the order of combination
  using Results = std::map<int64_t, Tensor>;
  using Action = std::function<llvm::Expected<Results>(Arrivals &)>;
  struct Round {
    Arrivals arrivals;
    bool done = false;
    ir::ErrorCode code = ir::ErrorCode::Internal;
    std::string error; // non-empty when the round's call failed
    Results results;
    size_t collected = 0;
  };
  // Adds `member`'s arrival to round `key`; the last member to arrive runs `action` (outside the
  // lock), whose result (or error) every member of the round returns.
  llvm::Expected<Tensor> join(const std::string &key, const std::string &what, int64_t member,
                              Arrival arrival, const Action &action);
  std::string missing(const Round &round) const;

  HostAggregatorOptions options_;
  std::vector<PsShard> shards_;
  std::atomic<int64_t> pushes_{0};
  std::mutex mutex_; // guards everything below
  std::condition_variable changed_;
  std::map<std::string, Round> rounds_;
  bool shuttingDown_ = false;
};

std::string HostAggregator::Rounds::missing(const Round &round) const {
  std::string names;
  for (int64_t m : options_.members)
    if (!round.arrivals.count(m))
      names += (names.empty() ? "worker:" : ", worker:") + std::to_string(m);
  return names;
}

llvm::Expected<Tensor> HostAggregator::Rounds::join(const std::string &key, const std::string &what,
                                                    int64_t member, Arrival arrival,
                                                    const Action &action) {
  const std::string where = "local aggregation on host " + options_.host + ": " + what;
  std::unique_lock<std::mutex> lock(mutex_);
  if (shuttingDown_)
    return ir::makeError(ir::ErrorCode::Unavailable, where + ": the leader is shutting down");
  Round &round = rounds_[key];
  if (!round.arrivals.emplace(member, std::move(arrival)).second)
    return ir::makeError(where + ": worker:" + std::to_string(member) + " came twice");
  if (round.arrivals.size() == options_.members.size()) {
    // The arrivals are read by this thread alone now: every member is in, none adds any.
    lock.unlock();
    auto results = action(round.arrivals);
    lock.lock();
    if (results) {
      round.results = std::move(*results);
    } else {
      llvm::Error error = results.takeError();
      round.code = ir::errorCode(error);
      round.error = ir::messageOf(std::move(error));
    }
    round.done = true;
    changed_.notify_all();
  } else {
    // The members' wait, then the servers' (each bounded by the timeout).
    auto deadline = Clock::now() + 2 * options_.timeout;
    if (!changed_.wait_until(lock, deadline, [&] { return round.done || shuttingDown_; }))
      return ir::makeError(ir::ErrorCode::DeadlineExceeded,
                           where + " timed out waiting for " +
                               (round.arrivals.size() < options_.members.size()
                                    ? missing(round)
                                    : std::string("the parameter servers")));
    if (!round.done)
      return ir::makeError(ir::ErrorCode::Unavailable, where + ": the leader is shutting down");
  }
  llvm::Expected<Tensor> result = round.error.empty()
                                      ? llvm::Expected<Tensor>(std::move(round.results[member]))
                                      : ir::makeError(round.code, where + ": " + round.error);
  if (++round.collected == options_.members.size())
    rounds_.erase(key);
  return result;
}

llvm::Expected<GradientSet> HostAggregator::Rounds::decode(
    const google::protobuf::RepeatedPtrField<wire::Gradient> &gradients) const {
  GradientSet result;
  for (const wire::Gradient &gradient : gradients) {
    auto shard = std::find_if(shards_.begin(), shards_.end(),
                              [&](const PsShard &s) { return s.name == gradient.name(); });
    if (shard == shards_.end())
      return ir::makeError("gradient for " + gradient.name() + ", which is not on the servers");
    if (result.count(gradient.name()))
      return ir::makeError("two gradients for " + gradient.name());
    ShardGradient &out = result[gradient.name()];
    if (gradient.value_case() == wire::Gradient::kDense) {
      auto dense = fromWire(gradient.dense());
      if (!dense)
        return dense.takeError();
      if (dense->dtype() != shard->dtype || dense->shape() != shard->fullShape)
        return ir::makeError("dense gradient for " + shard->name +
                             " does not have its variable's dtype and shape");
      out.dense = *dense;
      continue;
    }
    auto rows = fromWire(gradient.sparse().rows());
    if (!rows)
      return rows.takeError();
    const int n = gradient.sparse().indices_size();
    std::vector<int64_t> shape = shard->rowShape();
    shape.insert(shape.begin(), n);
    if (rows->dtype() != shard->dtype || rows->shape() != shape)
      return ir::makeError("sparse gradient for " + shard->name +
                           " does not have one row of its dtype and row shape per index");
    out.indices = Tensor(ir::DType::I64, {n});
    for (int i = 0; i < n; ++i) {
      int64_t row = gradient.sparse().indices(i);
      if (!shard->ownsRow(row))
        return ir::makeError("row " + llvm::Twine(row) + " of " + shard->name +
                             " is out of range [0, " + llvm::Twine(shard->rowEnd) + ")");
      out.indices.data<int64_t>()[i] = row;
    }
    out.rows = *rows;
  }
  return result;
}

llvm::Error HostAggregator::Rounds::push(int64_t member, int64_t step, double weight,
                                         GradientSet gradients) {
  Arrival arrival;
  arrival.weight = weight;
  arrival.gradients = std::move(gradients);
  const int64_t leader = options_.members.front();
  auto result = join("push/" + std::to_string(step), "push of step " + std::to_string(step), member,
                     std::move(arrival), [&](Arrivals &arrivals) -> llvm::Expected<Results> {
                       // The servers' own combination over the host's workers; the host then weighs
                       // as much as they do together.
                       std::vector<Contribution> contributions;
                       double total = 0;
                       for (auto &[m, a] : arrivals) {
                         total += a.weight;
                         contributions.push_back({a.weight, std::move(a.gradients)});
                       }
                       auto combined = aggregateGradients(shards_, contributions);
                       if (!combined)
                         return combined.takeError();
                       std::vector<Gradient> out;
                       for (auto &[name, g] : *combined) {
                         if (!g.isSparse()) {
                           out.push_back(Gradient::ofDense(name, g.dense));
                           continue;
                         }
                         ShardGradient rows = coalesceRows(g.indices, g.rows);
                         out.push_back(Gradient::ofRows(name, rows.indices, rows.rows));
                       }
                       if (auto e = options_.ps->push(step, total, leader, out))
                         return std::move(e);
                       ++pushes_;
                       return Results{};
                     });
  return result ? llvm::Error::success() : result.takeError();
}

llvm::Expected<Tensor> HostAggregator::Rounds::pullRows(int64_t member, int64_t round,
                                                        const std::string &name,
                                                        std::vector<int64_t> indices,
                                                        int64_t step) {
  Arrival arrival;
  arrival.indices = std::move(indices);
  std::string what =
      "pull " + std::to_string(round) + " of rows of " + name + " in step " + std::to_string(step);
  return join("rows/" + name + "/" + std::to_string(step) + "/" + std::to_string(round), what,
              member, std::move(arrival), [&](Arrivals &arrivals) -> llvm::Expected<Results> {
                // The union of the members' rows, pulled once.
                std::vector<int64_t> all;
                for (const auto &[m, a] : arrivals)
                  all.insert(all.end(), a.indices.begin(), a.indices.end());
                std::sort(all.begin(), all.end());
                all.erase(std::unique(all.begin(), all.end()), all.end());
                Tensor ids(ir::DType::I64, {static_cast<int64_t>(all.size())});
                std::copy(all.begin(), all.end(), ids.data<int64_t>());
                auto rows = options_.ps->pullRows(name, ids, step);
                if (!rows)
                  return rows.takeError();
                const size_t rowBytes =
                    all.empty() ? 0 : static_cast<size_t>(rows->numBytes()) / all.size();
                Results results;
                for (const auto &[m, a] : arrivals) {
                  std::vector<int64_t> shape = rows->shape();
                  shape[0] = static_cast<int64_t>(a.indices.size());
                  Tensor mine(rows->dtype(), shape);
                  auto *to = static_cast<char *>(mine.raw());
                  for (int64_t row : a.indices) {
                    size_t at = std::lower_bound(all.begin(), all.end(), row) - all.begin();
                    std::memcpy(to, static_cast<const char *>(rows->raw()) + at * rowBytes,
                                rowBytes);
                    to += rowBytes;
                  }
                  results[m] = std::move(mine);
                }
                return results;
              });
}

llvm::Expected<Tensor> HostAggregator::Rounds::pull(int64_t member, int64_t round,
                                                    const std::string &name, int64_t step) {
  std::string what =
      "pull " + std::to_string(round) + " of " + name + " in step " + std::to_string(step);
  return join("pull/" + name + "/" + std::to_string(step) + "/" + std::to_string(round), what,
              member, Arrival{}, [&](Arrivals &arrivals) -> llvm::Expected<Results> {
                auto value = options_.ps->pull(name, step);
                if (!value)
                  return value.takeError();
                Results results;
                for (const auto &[m, a] : arrivals)
                  results[m] = value->clone();
                return results;
              });
}

namespace {

// The leader's own calls, joined to the rounds in its process.
class LeaderChannel : public HostChannel {
public:
  LeaderChannel(HostAggregator::Rounds *rounds, int64_t leader) : rounds_(rounds), self_(leader) {}
  llvm::Error push(int64_t step, double weight, llvm::ArrayRef<Gradient> gradients) override;
  llvm::Expected<Tensor> pullRows(int64_t round, llvm::StringRef name, const Tensor &indices,
                                  int64_t step) override;
  llvm::Expected<Tensor> pull(int64_t round, llvm::StringRef name, int64_t step) override;

private:
  HostAggregator::Rounds *rounds_;
  int64_t self_;
};

} // namespace

llvm::Error LeaderChannel::push(int64_t step, double weight, llvm::ArrayRef<Gradient> gradients) {
  // Through the wire form, as the members' come: one checked way into the rounds.
  wire::PushStepRequest request;
  if (auto e = encodeGradients(gradients, rounds_->options().ps->variables(), request))
    return e;
  auto set = rounds_->decode(request.gradients());
  if (!set)
    return set.takeError();
  return rounds_->push(self_, step, weight, std::move(*set));
}

llvm::Expected<Tensor> LeaderChannel::pullRows(int64_t round, llvm::StringRef name,
                                               const Tensor &indices, int64_t step) {
  auto rows = indicesOf(name, indices);
  if (!rows)
    return rows.takeError();
  auto result = rounds_->pullRows(self_, round, name.str(), std::move(*rows), step);
  if (!result)
    return result.takeError();
  return shapedLike(*result, indices.shape());
}

llvm::Expected<Tensor> LeaderChannel::pull(int64_t round, llvm::StringRef name, int64_t step) {
  return rounds_->pull(self_, round, name.str(), step);
}

// The gRPC face of the rounds, for the other members.
class HostAggregator::Service final : public wire::HostAggregator::Service {
public:
  explicit Service(Rounds *rounds) : rounds_(rounds) {}
  void attach(std::unique_ptr<grpc::Server> server) { server_ = std::move(server); }
  void shutdown() {
    rounds_->shutdown();
    if (server_) {
      server_->Shutdown(Clock::now() + std::chrono::seconds(5));
      server_->Wait();
      server_.reset();
    }
  }

  grpc::Status Push(grpc::ServerContext *context, const wire::PushStepRequest *request,
                    wire::PushStepResponse *) override {
    if (auto status = authenticate(*context, request->contributor()); !status.ok())
      return status;
    auto gradients = rounds_->decode(request->gradients());
    if (!gradients)
      return statusOf(gradients.takeError());
    if (!(request->weight() > 0))
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a push's weight must be positive");
    return statusOf(rounds_->push(request->contributor(), request->step(), request->weight(),
                                  std::move(*gradients)));
  }
  grpc::Status PullRows(grpc::ServerContext *context, const wire::LocalPullRowsRequest *request,
                        wire::PullRowsResponse *response) override {
    if (auto status = authenticate(*context, request->member()); !status.ok())
      return status;
    const wire::PullRowsRequest &rows = request->rows();
    auto result = rounds_->pullRows(request->member(), request->round(), rows.name(),
                                    {rows.indices().begin(), rows.indices().end()}, rows.step());
    if (!result)
      return statusOf(result.takeError());
    toWire(*result, response->mutable_rows());
    return grpc::Status::OK;
  }
  grpc::Status Pull(grpc::ServerContext *context, const wire::LocalPullRequest *request,
                    wire::PullResponse *response) override {
    if (auto status = authenticate(*context, request->member()); !status.ok())
      return status;
    if (request->pull().names_size() != 1)
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a local pull names one variable");
    const std::string &name = request->pull().names(0);
    auto result = rounds_->pull(request->member(), request->round(), name, request->pull().step());
    if (!result)
      return statusOf(result.takeError());
    wire::NamedTensor *out = response->add_values();
    out->set_name(name);
    toWire(*result, out->mutable_value());
    return grpc::Status::OK;
  }

private:
  static grpc::Status statusOf(llvm::Error error) {
    if (!error)
      return grpc::Status::OK;
    const bool timedOut = ir::errorCode(error) == ir::ErrorCode::DeadlineExceeded;
    return grpc::Status(timedOut ? grpc::StatusCode::DEADLINE_EXCEEDED : grpc::StatusCode::ABORTED,
                        ir::messageOf(std::move(error)));
  }
  // The job token, a member of this host, and with TLS that member's certificate.
  grpc::Status authenticate(const grpc::ServerContext &context, int64_t member) const {
    const auto &metadata = context.client_metadata();
    auto token = metadata.find(kJobTokenKey);
    if (token == metadata.end() ||
        !sameJobToken(llvm::StringRef(token->second.data(), token->second.size()),
                      rounds_->options().jobToken))
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or wrong job token");
    if (!rounds_->isMember(member))
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "worker:" + std::to_string(member) +
                                                                   " is not a worker of host " +
                                                                   rounds_->options().host);
    std::optional<std::string> caller = dist::callerTask(context);
    if (caller && *caller != "worker:" + std::to_string(member))
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          "a call for worker:" + std::to_string(member) +
                              " with the certificate of " + *caller);
    return grpc::Status::OK;
  }

  Rounds *rounds_;
  std::unique_ptr<grpc::Server> server_;
};

llvm::Expected<std::unique_ptr<HostAggregator>>
HostAggregator::start(HostAggregatorOptions options) {
  if (options.members.size() < 2 || !options.ps)
    return ir::makeError("local aggregation needs two or more workers and the leader's client");
  std::unique_ptr<HostAggregator> aggregator(new HostAggregator());
  auto credentials = dist::serverCredentials(options.tls);
  aggregator->rounds_ = std::make_unique<Rounds>(std::move(options));
  aggregator->service_ = std::make_unique<Service>(aggregator->rounds_.get());
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", credentials, &aggregator->port_);
  builder.RegisterService(aggregator->service_.get());
  builder.SetMaxReceiveMessageSize(-1); // whole dense gradients travel in one message
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || aggregator->port_ == 0)
    return ir::makeError("local aggregation on host " + aggregator->rounds_->options().host +
                         ": cannot listen on 127.0.0.1");
  aggregator->service_->attach(std::move(server));
  return aggregator;
}

HostAggregator::~HostAggregator() {
  if (service_)
    service_->shutdown();
}

std::string HostAggregator::endpoint() const {
  return "127.0.0.1:" + std::to_string(port_);
}

std::unique_ptr<HostChannel> HostAggregator::leaderChannel() {
  return std::make_unique<LeaderChannel>(rounds_.get(), rounds_->options().members.front());
}

int64_t HostAggregator::pushesCombined() const {
  return rounds_->pushes();
}

namespace {

// A member's calls to its leader, synchronous, each with its deadline.
class RemoteChannel : public HostChannel {
public:
  RemoteChannel(std::unique_ptr<wire::HostAggregator::Stub> stub, int64_t member,
                std::map<std::string, VariableLayout> variables, std::string jobToken,
                std::chrono::milliseconds timeout, std::string leader)
      : stub_(std::move(stub)), member_(member), variables_(std::move(variables)),
        jobToken_(std::move(jobToken)), timeout_(timeout), leader_(std::move(leader)) {}

  llvm::Error push(int64_t step, double weight, llvm::ArrayRef<Gradient> gradients) override {
    wire::PushStepRequest request;
    request.set_contributor(member_);
    request.set_step(step);
    request.set_weight(weight);
    if (auto e = encodeGradients(gradients, variables_, request))
      return e;
    wire::PushStepResponse response;
    return call("Push", request, response, [&](grpc::ClientContext *context) {
      return stub_->Push(context, request, &response);
    });
  }
  llvm::Expected<Tensor> pullRows(int64_t round, llvm::StringRef name, const Tensor &indices,
                                  int64_t step) override {
    auto rows = indicesOf(name, indices);
    if (!rows)
      return rows.takeError();
    wire::LocalPullRowsRequest request;
    request.set_member(member_);
    request.set_round(round);
    request.mutable_rows()->set_name(name.str());
    request.mutable_rows()->set_step(step);
    request.mutable_rows()->mutable_indices()->Assign(rows->begin(), rows->end());
    wire::PullRowsResponse response;
    if (auto e = call("PullRows", request, response, [&](grpc::ClientContext *context) {
          return stub_->PullRows(context, request, &response);
        }))
      return std::move(e);
    auto result = fromWire(response.rows());
    if (!result)
      return result.takeError();
    if (result->rank() == 0 || result->dim(0) != static_cast<int64_t>(rows->size()))
      return ir::makeError("the leader " + leader_ + " sent another number of rows of " + name);
    return shapedLike(*result, indices.shape());
  }
  llvm::Expected<Tensor> pull(int64_t round, llvm::StringRef name, int64_t step) override {
    wire::LocalPullRequest request;
    request.set_member(member_);
    request.set_round(round);
    request.mutable_pull()->add_names(name.str());
    request.mutable_pull()->set_step(step);
    wire::PullResponse response;
    if (auto e = call("Pull", request, response, [&](grpc::ClientContext *context) {
          return stub_->Pull(context, request, &response);
        }))
      return std::move(e);
    if (response.values_size() != 1)
      return ir::makeError("the leader " + leader_ + " sent no value of " + name);
    return fromWire(response.values(0).value());
  }
  uint64_t bytesSent() const override { return sent_; }
  uint64_t bytesReceived() const override { return received_; }

private:
  template <typename Request, typename Response, typename Send>
  llvm::Error call(const char *method, const Request &request, const Response &response,
                   Send send) {
    grpc::ClientContext context;
    // The members' wait, then the servers': each bounded by the timeout.
    context.set_deadline(Clock::now() + 2 * timeout_);
    context.AddMetadata(kJobTokenKey, jobToken_);
    sent_ += request.ByteSizeLong();
    grpc::Status status = send(&context);
    if (!status.ok())
      return dist::rpcError(status, "the host's leader " + leader_ + ": " + method);
    received_ += response.ByteSizeLong();
    return llvm::Error::success();
  }

  std::unique_ptr<wire::HostAggregator::Stub> stub_;
  int64_t member_;
  std::map<std::string, VariableLayout> variables_;
  std::string jobToken_;
  std::chrono::milliseconds timeout_;
  std::string leader_;
  std::atomic<uint64_t> sent_{0}, received_{0};
};

} // namespace

llvm::Expected<std::unique_ptr<HostChannel>>
connectToHostAggregator(const std::string &endpoint, int64_t member,
                        std::map<std::string, VariableLayout> variables,
                        const std::string &jobToken, std::chrono::milliseconds timeout,
                        const std::optional<dist::TlsIdentity> &tls, llvm::StringRef leaderTask) {
  grpc::ChannelArguments arguments = dist::clusterChannelArguments("prism.ps.HostAggregator");
  auto credentials = dist::channelCredentials(tls, leaderTask, arguments);
  auto channel = grpc::CreateCustomChannel(endpoint, credentials, arguments);
  return std::make_unique<RemoteChannel>(wire::HostAggregator::NewStub(channel), member,
                                         std::move(variables), jobToken, timeout, leaderTask.str());
}

} // namespace prism::runtime::ps
