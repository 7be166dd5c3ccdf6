// The parameter server: a synchronous gRPC service whose calls wait on one condition variable
// for the step they need; the push that completes a step combines and applies it.
#include "runtime/ps/ParameterServer.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>

#include <grpcpp/grpcpp.h>

#include "ir/Diagnostic.h"
#include "runtime/dist/Tls.h"
#include "runtime/ps/ShardCheckpoint.h"
#include "runtime/ps/Wire.h"
#include "runtime/ps/ps.grpc.pb.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::runtime::ps {
namespace wire = ::prism::ps;
using Clock = std::chrono::system_clock;

namespace {

grpc::Status statusOf(grpc::StatusCode code, llvm::Error error) {
  return grpc::Status(code, ir::messageOf(std::move(error)));
}

} // namespace

class ParameterServer::Service final : public wire::ParameterServer::Service {
public:
  explicit Service(ParameterServerOptions options) : options_(std::move(options)) {
    for (size_t i = 0; i < options_.shards.size(); ++i)
      shardIndex_[options_.shards[i].name] = i;
    contributors_ = options_.contributors;
    countContributors(options_.contributors);
  }

  llvm::Error prepareShards();
  void attach(std::unique_ptr<grpc::Server> server) { server_ = std::move(server); }
  void shutdown();
  int64_t version() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return version_;
  }
  PushCounts counts() const {
    std::lock_guard<std::mutex> lock(mutex_);
    PushCounts counts = counts_;
    if (firstApply_)
      counts.seconds = std::chrono::duration<double>(lastApply_ - *firstApply_).count();
    return counts;
  }
  int64_t changeMembership(int64_t epoch, int64_t contributors);
  llvm::Error save(llvm::StringRef path) const;
  llvm::Error load(llvm::StringRef path);

  grpc::Status Pull(grpc::ServerContext *context, const wire::PullRequest *request,
                    wire::PullResponse *response) override;
  grpc::Status PullRows(grpc::ServerContext *context, const wire::PullRowsRequest *request,
                        wire::PullRowsResponse *response) override;
  grpc::Status PushStep(grpc::ServerContext *context, const wire::PushStepRequest *request,
                        wire::PushStepResponse *response) override;
  grpc::Status Status(grpc::ServerContext *context, const wire::StatusRequest *request,
                      wire::StatusResponse *response) override;

private:
  // The job token; with TLS, that the caller is a worker (for a push: the contributor).
  grpc::Status authenticate(grpc::ServerContext *context, llvm::StringRef method,
                            std::optional<int64_t> contributor = std::nullopt) const;
  // Waits (lock held) until `ready()`, failing when the server failed or shuts down, or when
  // neither the wait timeout nor the client's deadline leaves time.
  grpc::Status waitUntil(std::unique_lock<std::mutex> &lock, grpc::ServerContext *context,
                         const std::function<bool()> &ready, const std::string &what,
                         int64_t epoch);
  // ABORTED when a call of membership `epoch` comes after the server moved to a newer one.
  std::optional<grpc::Status> staleEpoch(int64_t epoch, const std::string &what) const;
  grpc::Status failedStatus() const {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "parameter server failed: " + failure_);
  }
  const PsShard *findShard(llvm::StringRef name) const {
    auto it = shardIndex_.find(name);
    return it == shardIndex_.end() ? nullptr : &options_.shards[it->second];
  }
  // The stored value of `shard`, checked against its shape (the apply callback could replace it).
  llvm::Expected<const Tensor *> shardValue(const PsShard &shard) const;
  llvm::Expected<GradientSet>
  decodeGradients(const google::protobuf::RepeatedPtrField<wire::Gradient> &gradients) const;
  // Applies every buffered step that a quorum of contributors pushed, in order (lock held).
  void applyCompleteSteps();
  // Contributors push each step: the membership's workers (it changes with elastic membership),
  // or the aggregating hosts' leaders and the other workers (local aggregation).
  int64_t contributorCount() const {
    return options_.contributorIds.empty() ? contributors_
                                           : static_cast<int64_t>(options_.contributorIds.size());
  }
  bool takesFrom(int64_t contributor) const {
    if (options_.contributorIds.empty())
      return contributor >= 0 && contributor < contributors_;
    return std::binary_search(options_.contributorIds.begin(), options_.contributorIds.end(),
                              contributor);
  }
  std::string contributorsText() const {
    if (options_.contributorIds.empty())
      return "0 to " + std::to_string(contributors_ - 1);
    std::string text;
    for (int64_t id : options_.contributorIds)
      text += (text.empty() ? "" : ", ") + std::to_string(id);
    return text;
  }
  // Combines `contributions` and applies them as step version_ (lock held); a failure is
  // recorded in failure_.
  void applyStep(std::map<int64_t, Contribution> contributions);
  // Asynchronous training: applies one contributor's push of `step` at once, then answers when
  // the contributor's next step is within the staleness bound (lock held).
  grpc::Status applyOnArrival(std::unique_lock<std::mutex> &lock, grpc::ServerContext *context,
                              int64_t step, int64_t contributor, Contribution contribution,
                              const std::string &what);
  // Pushes a step needs: every contributor's, or the quorum's with backup workers.
  int64_t quorum() const {
    return options_.policy.quorum > 0 ? options_.policy.quorum : contributorCount();
  }
  // Whether a contributor may go on with `step`: asynchronous, at most maxStaleness steps ahead
  // of the slowest contributor's pushed steps; synchronous, once `step` steps are applied.
  bool mayStart(int64_t step) const {
    if (!options_.policy.async)
      return version_ >= step;
    if (jobPushes_ > 0 && version_ >= jobPushes_)
      return true; // the job's pushes are in: workers stop, none is waited for
    const auto &bound = options_.policy.maxStaleness;
    return !bound || step - *std::min_element(pushed_.begin(), pushed_.end()) <= *bound;
  }

  ParameterServerOptions options_;
  llvm::StringMap<size_t> shardIndex_;
  std::unique_ptr<grpc::Server> server_;

  mutable std::mutex mutex_; // guards everything below and the shards in the store
  std::condition_variable changed_;
  int64_t version_ = 0;
  std::string failure_; // non-empty once an apply failed
  bool shuttingDown_ = false;
  // Buffered pushes of steps version_ and version_ + 1, by step, then contributor index.
  std::map<int64_t, std::map<int64_t, Contribution>> pending_;
  // Asynchronous: steps each contributor pushed (its next step); the job's pushes in all (0:
  // not known yet).
  std::vector<int64_t> pushed_;
  int64_t jobPushes_ = 0;
  PushCounts counts_; // but its seconds, which come from these
  std::optional<Clock::time_point> firstApply_;
  Clock::time_point lastApply_;
  // Elastic membership: the epoch and how many workers push each step in it.
  int64_t epoch_ = 0;
  int64_t contributors_ = 0;
  // Sizes the per-contributor counts for contributor indices below `contributors` (lock held or
  // not yet shared).
  void countContributors(int64_t contributors) {
    const auto n = static_cast<size_t>(std::max<int64_t>(contributors, 0));
    if (pushed_.size() < n)
      pushed_.resize(n, 0);
    if (counts_.applied.size() < n) {
      counts_.applied.resize(n, 0);
      counts_.dropped.resize(n, 0);
    }
  }
};

llvm::Error ParameterServer::Service::prepareShards() {
  for (const PsShard &shard : options_.shards) {
    Tensor *value = options_.variables->find(shard.name);
    if (!value) {
      Tensor zeros(shard.dtype, shard.shape());
      zeros.fillZero();
      options_.variables->set(shard.name, zeros);
    } else if (value->shape() != shard.shape() || value->dtype() != shard.dtype) {
      return ir::makeError("the store holds " + shard.name + " with another shape or dtype " +
                           "than its shard (rows [" + llvm::Twine(shard.rowBegin) + ", " +
                           llvm::Twine(shard.rowEnd) + "))");
    }
  }
  return llvm::Error::success();
}

void ParameterServer::Service::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shuttingDown_)
      return;
    shuttingDown_ = true;
  }
  changed_.notify_all();
  // Waiting calls return at once now; the deadline only guards against a stuck apply callback.
  server_->Shutdown(Clock::now() + std::chrono::seconds(5));
  server_->Wait();
}

grpc::Status ParameterServer::Service::authenticate(grpc::ServerContext *context,
                                                    llvm::StringRef method,
                                                    std::optional<int64_t> contributor) const {
  const auto &metadata = context->client_metadata();
  auto token = metadata.find(kJobTokenKey);
  if (token != metadata.end() &&
      sameJobToken(llvm::StringRef(token->second.data(), token->second.size()),
                   options_.jobToken)) {
    // With TLS only workers call, and a push comes from the worker it is counted for.
    std::optional<std::string> caller = dist::callerTask(*context);
    if (!caller)
      return grpc::Status::OK;
    std::string expected = contributor ? "worker:" + std::to_string(*contributor) : "worker:";
    if (contributor ? *caller == expected : llvm::StringRef(*caller).startswith(expected))
      return grpc::Status::OK;
    std::string line = "prism-ps: refused " + method.str() + " from " + context->peer() +
                       ": its certificate is " + *caller + "'s\n";
    llvm::errs() << line;
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        method.str() + " with the certificate of " + *caller +
                            (contributor ? ", not of " + expected : ", not a worker's"));
  }
  std::string line;
  llvm::raw_string_ostream(line) << "prism-ps: refused " << method << " from " << context->peer()
                                 << ": " << (token == metadata.end() ? "no" : "wrong")
                                 << " job token\n";
  llvm::errs() << line; // one write, so concurrent refusals do not interleave
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or wrong job token");
}

int64_t ParameterServer::Service::changeMembership(int64_t epoch, int64_t contributors) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (epoch <= epoch_)
    return version_;
  epoch_ = epoch;
  contributors_ = contributors;
  countContributors(contributors);
  // The step in flight is redone by the new membership: what its old members pushed goes.
  pending_.clear();
  changed_.notify_all();
  return version_;
}

std::optional<grpc::Status> ParameterServer::Service::staleEpoch(int64_t epoch,
                                                                 const std::string &what) const {
  if (epoch == epoch_)
    return std::nullopt;
  return grpc::Status(grpc::StatusCode::ABORTED, what + " of membership " + std::to_string(epoch) +
                                                     " refused: the server is at membership " +
                                                     std::to_string(epoch_));
}

grpc::Status ParameterServer::Service::waitUntil(std::unique_lock<std::mutex> &lock,
                                                 grpc::ServerContext *context,
                                                 const std::function<bool()> &ready,
                                                 const std::string &what, int64_t epoch) {
  Clock::time_point deadline = std::min(Clock::now() + options_.waitTimeout, context->deadline());
  for (;;) {
    if (!failure_.empty())
      return failedStatus();
    // Before the shutdown check: a push answered by the last step's apply succeeds even when the
    // job's end (and this server's shutdown) comes right after that apply.
    if (ready())
      return grpc::Status::OK;
    if (auto stale = staleEpoch(epoch, what))
      return *stale;
    if (shuttingDown_)
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "parameter server is shutting down");
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && !ready() &&
        failure_.empty() && !shuttingDown_)
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          what + " timed out at version " + std::to_string(version_));
  }
}

llvm::Expected<const Tensor *> ParameterServer::Service::shardValue(const PsShard &shard) const {
  const Tensor *value = options_.variables->find(shard.name);
  if (!value || value->shape() != shard.shape() || value->dtype() != shard.dtype)
    return ir::makeError("the store no longer holds " + shard.name + " with its shard's shape");
  return value;
}

grpc::Status ParameterServer::Service::Pull(grpc::ServerContext *context,
                                            const wire::PullRequest *request,
                                            wire::PullResponse *response) {
  if (auto status = authenticate(context, "Pull"); !status.ok())
    return status;
  std::vector<const PsShard *> shards;
  for (const std::string &name : request->names()) {
    const PsShard *shard = findShard(name);
    if (!shard)
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no shard of " + name + " here");
    shards.push_back(shard);
  }
  if (request->names().empty())
    for (const PsShard &shard : options_.shards)
      shards.push_back(&shard);

  std::unique_lock<std::mutex> lock(mutex_);
  int64_t step = request->step();
  grpc::Status waited = waitUntil(
      lock, context, [&] { return mayStart(step); }, "pull for step " + std::to_string(step),
      request->membership_epoch());
  if (!waited.ok())
    return waited;
  for (const PsShard *shard : shards) {
    auto value = shardValue(*shard);
    if (!value)
      return statusOf(grpc::StatusCode::INTERNAL, value.takeError());
    wire::NamedTensor *out = response->add_values();
    out->set_name(shard->name);
    toWire(**value, out->mutable_value());
  }
  response->set_version(version_);
  return grpc::Status::OK;
}

grpc::Status ParameterServer::Service::PullRows(grpc::ServerContext *context,
                                                const wire::PullRowsRequest *request,
                                                wire::PullRowsResponse *response) {
  if (auto status = authenticate(context, "PullRows"); !status.ok())
    return status;
  const PsShard *shard = findShard(request->name());
  if (!shard)
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no shard of " + request->name() + " here");
  auto encoding = parseWireEncoding(request->encoding());
  if (!encoding)
    return statusOf(grpc::StatusCode::INVALID_ARGUMENT, encoding.takeError());
  for (int64_t row : request->indices())
    if (!shard->ownsRow(row))
      return grpc::Status(grpc::StatusCode::OUT_OF_RANGE,
                          "row " + std::to_string(row) + " of " + shard->name +
                              " is not in this server's rows [" + std::to_string(shard->rowBegin) +
                              ", " + std::to_string(shard->rowEnd) + ")");

  std::unique_lock<std::mutex> lock(mutex_);
  int64_t step = request->step();
  grpc::Status waited = waitUntil(
      lock, context, [&] { return mayStart(step); },
      "pull of rows for step " + std::to_string(step), request->membership_epoch());
  if (!waited.ok())
    return waited;
  auto value = shardValue(*shard);
  if (!value)
    return statusOf(grpc::StatusCode::INTERNAL, value.takeError());
  std::vector<int64_t> shape = shard->rowShape();
  shape.insert(shape.begin(), request->indices_size());
  Tensor rows(shard->dtype, shape);
  size_t rowBytes = static_cast<size_t>(shard->rowElements() * ir::dtypeBytes(shard->dtype));
  auto *to = static_cast<char *>(rows.raw());
  const auto *from = static_cast<const char *>((*value)->raw());
  for (int64_t row : request->indices()) {
    std::memcpy(to, from + static_cast<size_t>(row - shard->rowBegin) * rowBytes, rowBytes);
    to += rowBytes;
  }
  toWire(rows, response->mutable_rows(), *encoding);
  response->set_version(version_);
  return grpc::Status::OK;
}

llvm::Expected<GradientSet> ParameterServer::Service::decodeGradients(
    const google::protobuf::RepeatedPtrField<wire::Gradient> &gradients) const {
  GradientSet result;
  for (const wire::Gradient &gradient : gradients) {
    const PsShard *shard = findShard(gradient.name());
    if (!shard)
      return ir::makeError("gradient for " + gradient.name() + ", which has no shard here");
    if (result.count(gradient.name()))
      return ir::makeError("two gradients for " + gradient.name());
    ShardGradient &out = result[gradient.name()];
    if (gradient.value_case() == wire::Gradient::kDense) {
      auto dense = fromWire(gradient.dense());
      if (!dense)
        return dense.takeError();
      if (dense->dtype() != shard->dtype || dense->shape() != shard->shape())
        return ir::makeError("dense gradient for " + shard->name +
                             " does not have its shard's dtype and shape");
      out.dense = *dense;
    } else if (gradient.value_case() == wire::Gradient::kSparse) {
      auto rows = fromWire(gradient.sparse().rows());
      if (!rows)
        return rows.takeError();
      std::vector<int64_t> shape = shard->rowShape();
      shape.insert(shape.begin(), gradient.sparse().indices_size());
      if (rows->dtype() != shard->dtype || rows->shape() != shape)
        return ir::makeError("sparse gradient for " + shard->name +
                             " does not have one row of its dtype and row shape per index");
      Tensor indices(ir::DType::I64, {gradient.sparse().indices_size()});
      int64_t *local = indices.data<int64_t>();
      for (int64_t row : gradient.sparse().indices()) {
        if (!shard->ownsRow(row))
          return ir::makeError("sparse gradient for row " + llvm::Twine(row) + " of " +
                               shard->name + ", which is not in this server's rows [" +
                               llvm::Twine(shard->rowBegin) + ", " + llvm::Twine(shard->rowEnd) +
                               ")");
        *local++ = row - shard->rowBegin;
      }
      out.indices = indices;
      out.rows = *rows;
    } else {
      return ir::makeError("gradient for " + shard->name + " carries no value");
    }
  }
  return result;
}

void ParameterServer::Service::applyCompleteSteps() {
  while (failure_.empty()) {
    auto step = pending_.find(version_);
    if (step == pending_.end() || static_cast<int64_t>(step->second.size()) < quorum())
      return;
    std::map<int64_t, Contribution> contributions = std::move(step->second);
    pending_.erase(step);
    applyStep(std::move(contributions));
  }
}

void ParameterServer::Service::applyStep(std::map<int64_t, Contribution> byContributor) {
  // By contributor index (the map's order), never by arrival.
  std::vector<Contribution> contributions;
  std::vector<int64_t> order;
  for (auto &[contributor, contribution] : byContributor) {
    ++counts_.applied[static_cast<size_t>(contributor)];
    counts_.examples += contribution.weight;
    contributions.push_back(std::move(contribution));
    order.push_back(contributor);
  }
  if (options_.combined)
    options_.combined(version_, order);
  llvm::Error error = [&]() -> llvm::Error {
    auto gradients = aggregateGradients(options_.shards, contributions);
    if (!gradients)
      return gradients.takeError();
    if (auto e = options_.apply(version_, *gradients))
      return e;
    ++version_;
    return options_.afterApply ? options_.afterApply(version_) : llvm::Error::success();
  }();
  lastApply_ = Clock::now();
  if (!firstApply_)
    firstApply_ = lastApply_;
  if (error) {
    failure_ = "step " + std::to_string(version_) + ": " + ir::messageOf(std::move(error));
    llvm::errs() << "prism-ps: " + failure_ + "\n";
  }
  changed_.notify_all();
}

grpc::Status ParameterServer::Service::applyOnArrival(std::unique_lock<std::mutex> &lock,
                                                      grpc::ServerContext *context, int64_t step,
                                                      int64_t contributor,
                                                      Contribution contribution,
                                                      const std::string &what) {
  int64_t &pushed = pushed_[static_cast<size_t>(contributor)];
  if (step != pushed)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        what +
                            " refused: asynchronous pushes of a contributor come in order, "
                            "and its next one is of step " +
                            std::to_string(pushed));
  counts_.maxLead =
      std::max(counts_.maxLead, step - *std::min_element(pushed_.begin(), pushed_.end()));
  std::map<int64_t, Contribution> one;
  one[contributor] = std::move(contribution);
  applyStep(std::move(one));
  if (!failure_.empty())
    return failedStatus();
  ++pushed;
  changed_.notify_all();
  return waitUntil(
      lock, context, [&] { return mayStart(step + 1); },
      what + " (waiting for the slowest worker: --max-staleness)", epoch_);
}

grpc::Status ParameterServer::Service::PushStep(grpc::ServerContext *context,
                                                const wire::PushStepRequest *request,
                                                wire::PushStepResponse *response) {
  if (auto status = authenticate(context, "PushStep", request->contributor()); !status.ok())
    return status;
  int64_t step = request->step(), contributor = request->contributor();
  std::string what =
      "push of step " + std::to_string(step) + " by contributor " + std::to_string(contributor);
  if (contributor < 0)
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, what + ": a negative contributor");
  if (!(request->weight() > 0) || !std::isfinite(request->weight()))
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        what + ": its weight is not a positive number");
  auto gradients = decodeGradients(request->gradients());
  if (!gradients)
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        what + ": " + ir::messageOf(gradients.takeError()));

  std::unique_lock<std::mutex> lock(mutex_);
  if (!failure_.empty())
    return failedStatus();
  if (auto stale = staleEpoch(request->membership_epoch(), what))
    return *stale;
  // The workers of the membership (it changes with elastic membership), or the hosts' leaders.
  if (!takesFrom(contributor))
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        what + ": contributors are " + contributorsText());
  if (options_.policy.async) {
    jobPushes_ = std::max(jobPushes_, request->job_pushes());
    grpc::Status applied =
        applyOnArrival(lock, context, step, contributor,
                       Contribution{request->weight(), std::move(*gradients)}, what);
    response->set_version(version_);
    return applied;
  }
  // Backup workers: the step was applied with the first pushes; this one is late.
  if (step < version_ && quorum() < contributorCount()) {
    ++counts_.dropped[static_cast<size_t>(contributor)];
    response->set_dropped(true);
    response->set_version(version_);
    return grpc::Status::OK;
  }
  if (step != version_ && step != version_ + 1)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        what + " refused: the server is at version " + std::to_string(version_) +
                            " and takes pushes of steps " + std::to_string(version_) + " and " +
                            std::to_string(version_ + 1));
  auto &contributions = pending_[step];
  if (contributions.count(contributor))
    return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                        what + " refused: it already pushed step " + std::to_string(step));
  contributions[contributor] = Contribution{request->weight(), std::move(*gradients)};
  applyCompleteSteps();
  grpc::Status waited = waitUntil(
      lock, context, [&] { return version_ > step; }, what, request->membership_epoch());
  if (!waited.ok())
    return waited;
  response->set_version(version_);
  return grpc::Status::OK;
}

grpc::Status ParameterServer::Service::Status(grpc::ServerContext *context,
                                              const wire::StatusRequest *request,
                                              wire::StatusResponse *response) {
  if (auto status = authenticate(context, "Status"); !status.ok())
    return status;
  std::lock_guard<std::mutex> lock(mutex_);
  response->set_version(version_);
  response->set_contributors(contributorCount());
  response->set_failure(failure_);
  response->mutable_applied_pushes()->Assign(counts_.applied.begin(), counts_.applied.end());
  response->mutable_dropped_pushes()->Assign(counts_.dropped.begin(), counts_.dropped.end());
  response->set_max_lead(counts_.maxLead);
  for (const PsShard &shard : options_.shards) {
    wire::ShardInfo *info = response->add_shards();
    info->set_name(shard.name);
    info->set_dtype(ir::dtypeName(shard.dtype).str());
    info->set_row_begin(shard.rowBegin);
    info->set_row_end(shard.rowEnd);
    info->mutable_full_shape()->Assign(shard.fullShape.begin(), shard.fullShape.end());
  }
  return grpc::Status::OK;
}

llvm::Error ParameterServer::Service::save(llvm::StringRef path) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return writeShardCheckpoint(path, version_, options_.shards, *options_.variables);
}

llvm::Error ParameterServer::Service::load(llvm::StringRef path) {
  auto checkpoint = readShardCheckpoint(path, options_.shards);
  if (!checkpoint)
    return checkpoint.takeError();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pending_.empty())
      return ir::makeError("cannot load " + path + " while pushes of step " +
                           llvm::Twine(pending_.begin()->first) + " are buffered");
    for (auto &[name, value] : checkpoint->shards)
      options_.variables->set(name, std::move(value));
    version_ = checkpoint->version;
    failure_.clear();
  }
  changed_.notify_all();
  return llvm::Error::success();
}

namespace {
// The largest request a worker may legitimately send: a push of every shard's gradient as a
// whole (dense values, or every row with its index), twice over for the encoding, plus 4 MiB for
// everything else. gRPC reads a whole message before the service sees its token, so this bound
// is what an unauthenticated caller can make the server buffer (it used to be unlimited).
int64_t largestRequestBytes(const std::vector<PsShard> &shards) {
  int64_t bytes = 0;
  for (const PsShard &shard : shards)
    bytes += shard.rows() * (shard.rowElements() * ir::dtypeBytes(shard.dtype) +
                             static_cast<int64_t>(sizeof(int64_t)));
  return std::min<int64_t>(2 * bytes + (int64_t(4) << 20), std::numeric_limits<int>::max());
}
} // namespace

llvm::Expected<std::unique_ptr<ParameterServer>>
ParameterServer::start(ParameterServerOptions options) {
  if (options.jobToken.empty())
    return ir::makeError("a parameter server needs a job token");
  if (!options.variables)
    return ir::makeError("a parameter server needs a variable store");
  if (!options.apply)
    return ir::makeError("a parameter server needs an apply callback");
  if (options.contributors < 1 && options.contributorIds.empty())
    return ir::makeError("a parameter server needs at least one contributor");
  if (!std::is_sorted(options.contributorIds.begin(), options.contributorIds.end()) ||
      std::adjacent_find(options.contributorIds.begin(), options.contributorIds.end()) !=
          options.contributorIds.end())
    return ir::makeError("a parameter server's contributor indices must ascend without repeats");
  if (options.policy.quorum < 0 || options.policy.quorum > options.contributors ||
      (options.policy.async && options.policy.quorum > 0))
    return ir::makeError("a parameter server's quorum is 1 to its contributors, and only "
                         "synchronous");
  if (!options.contributorIds.empty() && (options.policy.async || options.policy.quorum > 0))
    return ir::makeError("a parameter server takes hosts' combined pushes only synchronously, "
                         "without backup workers");
  llvm::StringSet<> names;
  for (const PsShard &shard : options.shards) {
    if (auto error = shard.verify())
      return std::move(error);
    if (!names.insert(shard.name).second)
      return ir::makeError("two shards of " + shard.name + " on one parameter server");
  }
  std::string address = options.address;
  const int64_t requestLimit = largestRequestBytes(options.shards);
  auto credentials = dist::serverCredentials(options.tls);
  auto service = std::make_unique<Service>(std::move(options));
  if (auto error = service->prepareShards())
    return std::move(error);

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, credentials, &port);
  builder.RegisterService(service.get());
  builder.SetMaxReceiveMessageSize(static_cast<int>(requestLimit));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0)
    return ir::makeError("parameter server cannot listen on " + address);
  service->attach(std::move(server));
  llvm::StringRef host = llvm::StringRef(address).rsplit(':').first;
  if (host.empty() || host == "0.0.0.0" || host == "[::]")
    host = "127.0.0.1";
  return std::unique_ptr<ParameterServer>(
      new ParameterServer(std::move(service), host.str(), port));
}

ParameterServer::ParameterServer(std::unique_ptr<Service> service, std::string host, int port)
    : service_(std::move(service)), host_(std::move(host)), port_(port) {}

ParameterServer::~ParameterServer() {
  shutdown();
}

std::string ParameterServer::endpoint() const {
  return host_ + ":" + std::to_string(port_);
}

int64_t ParameterServer::version() const {
  return service_->version();
}

PushCounts ParameterServer::counts() const {
  return service_->counts();
}

int64_t ParameterServer::changeMembership(int64_t epoch, int64_t contributors) {
  return service_->changeMembership(epoch, contributors);
}

void ParameterServer::shutdown() {
  service_->shutdown();
}

llvm::Error ParameterServer::save(llvm::StringRef path) const {
  return service_->save(path);
}

llvm::Error ParameterServer::load(llvm::StringRef path) {
  return service_->load(path);
}

} // namespace prism::runtime::ps
