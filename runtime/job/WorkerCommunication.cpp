// A worker's all-reduce and parameter-server traffic (see WorkerCommunication.h).
#include "runtime/job/WorkerCommunication.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>

#include "ir/Collectives.h"
#include "ir/Diagnostic.h"
#include "runtime/HalfFloat.h"
#include "runtime/cpu/Kernel.h"
#include "runtime/ps/GradientAggregator.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace prism::runtime::job {
namespace {

using Clock = std::chrono::steady_clock;

// `reduce()`, adding the seconds it took to `seconds`.
template <typename Reduce> llvm::Error timed(double &seconds, Reduce &&reduce) {
  const auto started = Clock::now();
  llvm::Error e = reduce();
  seconds += std::chrono::duration<double>(Clock::now() - started).count();
  return e;
}

// Sums `data` over the group, adding the seconds the call took to `seconds`.
template <typename... Args>
llvm::Error timedAllReduce(dist::Collective &collective, double &seconds, Args... args) {
  return timed(seconds, [&] { return collective.allReduceSum(args...); });
}

// Copies the tensors' elements into one buffer, in order, each times `weight`.
template <typename T> void gatherWeighted(llvm::ArrayRef<Tensor *> tensors, T weight, T *to) {
  for (const Tensor *t : tensors) {
    const T *from = t->data<T>();
    for (int64_t i = 0; i < t->numElements(); ++i)
      to[i] = weight * from[i];
    to += t->numElements();
  }
}

// Copies the tensors' elements into one buffer, in order.
template <typename T> void gather(llvm::ArrayRef<Tensor *> tensors, T *to) {
  for (const Tensor *t : tensors) {
    std::memcpy(to, t->data<T>(), static_cast<size_t>(t->numBytes()));
    to += t->numElements();
  }
}

template <typename T> void scatter(const T *from, llvm::ArrayRef<Tensor *> tensors) {
  for (Tensor *t : tensors) {
    std::memcpy(t->data<T>(), from, static_cast<size_t>(t->numBytes()));
    from += t->numElements();
  }
}

// Whether `t` is all-reduced where it lies within a bucket of `tensors` among `ranks`: a large
// one (ir::reducedInPlace) whose memory no other tensor of the bucket shares (in place, such a
// tensor would be reduced twice in one call: a sum of means).
bool reducedInPlace(const Tensor *t, llvm::ArrayRef<Tensor *> tensors, int64_t ranks) {
  if (!ir::reducedInPlace(t->numBytes(), ranks))
    return false;
  return llvm::count_if(tensors, [&](const Tensor *u) { return u->raw() == t->raw(); }) == 1;
}

// The batch-weighted mean over the group, sum(b_i * g_i) / sum(b): each worker weights its
// values by its share b_i / sum(b), so that the group's sum is the mean; the weighted ring
// (Collective::allReduceWeighted) weights them as it first reads them, so weighting takes no pass
// of its own. One call reduces the bucket: its large tensors (the all_reduce kernel's outputs,
// memory of their own) where they lie, its other tensors copied into `buffer` and back (the
// only one left, as a bucket's only tensor is, is reduced where it lies too). Every worker's bucket
// holds the same shapes, so every worker passes the same spans in the same order.
template <typename T>
llvm::Error weightedMean(dist::Collective &collective, llvm::ArrayRef<Tensor *> tensors,
                         std::vector<T> &buffer, double fraction, double &inCollective) {
  llvm::SmallVector<dist::WeightedSpan<T>, 8> spans;
  llvm::SmallVector<Tensor *, 8> staged;
  for (Tensor *t : tensors) {
    if (reducedInPlace(t, tensors, collective.size()))
      spans.push_back({t->data<T>(), static_cast<size_t>(t->numElements())});
    else
      staged.push_back(t);
  }
  size_t total = 0;
  for (const Tensor *t : staged)
    total += static_cast<size_t>(t->numElements());
  if (staged.size() == 1) {
    spans.push_back({staged.front()->data<T>(), total});
    staged.clear();
  } else if (!staged.empty()) {
    buffer.resize(total);
    gather<T>(staged, buffer.data());
    spans.push_back({buffer.data(), total});
  }
  if (auto e = timed(inCollective,
                     [&] { return collective.allReduceWeighted(spans, static_cast<T>(fraction)); }))
    return e;
  if (!staged.empty())
    scatter<T>(buffer.data(), staged);
  return llvm::Error::success();
}

// Error feedback: values += residual; wire = values in `precision`; residual = what that
// rounding took away (values − decode(wire)).
void feedBackError(float *values, std::vector<float> &residual, uint16_t *wire, int64_t n,
                   ir::ComputePrecision precision) {
  if (residual.size() != static_cast<size_t>(n))
    residual.assign(static_cast<size_t>(n), 0.0f);
  float *r = residual.data();
  for (int64_t i = 0; i < n; ++i)
    values[i] += r[i];
  encodeHalf(values, wire, n, precision);
  decodeHalf(wire, r, n, precision);
  // An infinite or NaN value has no rounding error to carry: the next step starts clean.
  for (int64_t i = 0; i < n; ++i)
    r[i] = std::isfinite(values[i]) && std::isfinite(r[i]) ? values[i] - r[i] : 0.0f;
}

} // namespace

WorkerCommunication::WorkerCommunication(int64_t rank, std::unique_ptr<dist::Collective> collective,
                                         std::unique_ptr<ps::PsClient> ps, Compression compression)
    : rank_(rank), collective_(std::move(collective)), ps_(std::move(ps)),
      compression_(compression) {
  reducer_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty())
        return;
      auto job = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      llvm::Error e = job();
      lock.lock();
      busy_ = false;
      if (!inFlight_.empty())
        inFlight_.pop_front();
      if (e) {
        if (!firstError_)
          firstError_ = std::move(e);
        else
          llvm::consumeError(std::move(e));
      }
      changed_.notify_all();
    }
  });
}

WorkerCommunication::~WorkerCommunication() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    queue_.clear();
    inFlight_.clear();
  }
  changed_.notify_all();
  reducer_.join();
  llvm::consumeError(std::move(firstError_));
}

llvm::Error WorkerCommunication::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  std::optional<StallWatch::Wait> wait;
  if (stalls_ && (!queue_.empty() || busy_)) {
    std::string what;
    for (int64_t bucket : inFlight_)
      what += (what.empty() ? "" : ", ") + ir::bucketName(bucket);
    wait.emplace(stalls_,
                 "the all-reduce over group '" + std::string(ir::kWorkerGroup) + "' of " + what);
  }
  changed_.wait(lock, [this] { return queue_.empty() && !busy_; });
  wait.reset();
  nextBuffer_ = 0;
  return std::move(firstError_);
}

void WorkerCommunication::abandonStep() {
  std::unique_lock<std::mutex> lock(mutex_);
  queue_.clear();
  inFlight_.clear();
  changed_.wait(lock, [this] { return !busy_; });
  llvm::consumeError(std::move(firstError_));
  firstError_ = llvm::Error::success();
  nextBuffer_ = 0;
  pending_.clear();
  probeInFlight_ = false;
  // Closing the group's connections fails the peers still waiting in its collective (a ring
  // neighbour of this worker, not of the lost one, would wait out the timeout otherwise).
  collective_.reset();
}

std::optional<double> WorkerCommunication::takeMembershipProbe() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!probeInFlight_)
    return std::nullopt;
  probeInFlight_ = false;
  return probeValue_.dtype() == ir::DType::F64 ? *probeValue_.data<double>()
                                               : static_cast<double>(*probeValue_.data<float>());
}

void WorkerCommunication::replaceGroup(std::unique_ptr<dist::Collective> collective, int64_t rank,
                                       int64_t membershipEpoch) {
  std::lock_guard<std::mutex> lock(mutex_);
  collective_ = std::move(collective);
  rank_ = rank;
  if (ps_)
    ps_->setMembershipEpoch(membershipEpoch);
}

void WorkerCommunication::beginStep(int64_t step, int64_t examples, int64_t globalExamples) {
  step_ = step;
  pushOutcome_ = ps::PushOutcome{};
  examples_ = examples;
  globalExamples_ = globalExamples;
  pending_.clear();
  pullRounds_.clear();
  stepPulled_ = false;
  prefetched_.clear();
  inStep_ = true;
}

template <typename Call>
auto WorkerCommunication::watchedPsCall(const char *category, std::string name, Call call) {
  StallWatch::Wait wait(stalls_, "the parameter servers: " + name);
  if (!trace_ || !ps_)
    return call();
  uint64_t sent = ps_->bytesSent(), received = ps_->bytesReceived();
  TraceSpan span(trace_, "ps", std::move(name), category);
  auto result = call();
  span.addArg("bytes_sent", static_cast<double>(ps_->bytesSent() - sent));
  span.addArg("bytes_received", static_cast<double>(ps_->bytesReceived() - received));
  return result;
}

llvm::Error WorkerCommunication::finishStep() {
  inStep_ = false;
  if (!ps_)
    return llvm::Error::success();
  auto e = watchedPsCall("ps_push", "push step " + std::to_string(step_), [&] {
    // Hosts aggregate only in synchronous plans without backup workers: nothing is dropped.
    return host_ ? host_->push(step_, static_cast<double>(examples_), pending_)
                 : ps_->push(step_, static_cast<double>(examples_), rank_, pending_, &pushOutcome_);
  });
  pending_.clear();
  if (!e && pushOutcome_.dropped) {
    ++droppedPushes_;
    skippedSteps_ += std::max<int64_t>(pushOutcome_.version - (step_ + 1), 0);
  }
  return e;
}

// What allReduce leaves as it is: a loss kept local, and a sole worker's values when it holds the
// whole batch, unless they are compressed or carry the membership probe.
bool WorkerCommunication::keepsValues(llvm::StringRef group, int64_t bucket) const {
  if (group != ir::kWorkerGroup)
    return false;
  if (bucket == ir::kLossBucket)
    return localLoss_ || (!probe_ && aloneWithTheBatch());
  return aloneWithTheBatch() && compression_.precision == ir::ComputePrecision::F32;
}

bool WorkerCommunication::aloneWithTheBatch() const {
  return collective_->size() == 1 && examples_ == globalExamples_;
}

llvm::Error WorkerCommunication::allReduce(llvm::StringRef group, int64_t bucket,
                                           llvm::ArrayRef<Tensor *> tensors) {
  if (group != ir::kWorkerGroup)
    return ir::makeError("all_reduce over group '" + group.str() +
                         "': this runtime knows only the group '" + ir::kWorkerGroup + "'");
  if (tensors.empty() || (localLoss_ && bucket == ir::kLossBucket))
    return llvm::Error::success();
  bool f64 = tensors.front()->dtype() == ir::DType::F64;
  for (const Tensor *t : tensors)
    if ((t->dtype() == ir::DType::F64) != f64 ||
        (t->dtype() != ir::DType::F32 && t->dtype() != ir::DType::F64))
      return ir::makeError("all_reduce bucket " + std::to_string(bucket) +
                           " mixes dtypes or holds a non-float tensor");
  double mine = static_cast<double>(examples_), all = static_cast<double>(globalExamples_);
  std::vector<Tensor *> targets(tensors.begin(), tensors.end());
  std::lock_guard<std::mutex> lock(mutex_);
  if (bucket == ir::kLossBucket && probe_) {
    if (probeValue_.empty() || probeValue_.dtype() != tensors.front()->dtype())
      probeValue_ = Tensor(tensors.front()->dtype(), {});
    targets.push_back(&probeValue_);
    probeInFlight_ = true;
    // Asked when the all-reduce starts, as late as the step allows.
    auto probe = probe_;
    Tensor *value = &probeValue_;
    queue_.push_back([probe, value, f64] {
      const double seen = probe() ? 1.0 : 0.0;
      if (f64)
        *value->data<double>() = seen;
      else
        *value->data<float>() = static_cast<float>(seen);
      return llvm::Error::success();
    });
    inFlight_.push_back(bucket);
  }
  // Each bucket of a step has its own staging buffer (kept across steps).
  size_t slot = nextBuffer_++;
  if (buffers_.size() <= slot) {
    buffers_.resize(slot + 1);
    buffers64_.resize(slot + 1);
  }
  size_t elements = 0;
  for (const Tensor *t : targets)
    elements += static_cast<size_t>(t->numElements());
  // The loss (bucket -1) always travels in float32, so the reported loss is exact.
  const bool compressed =
      compression_.precision != ir::ComputePrecision::F32 && !f64 && bucket >= 0;
  const size_t wireBytes = elements * (compressed ? sizeof(uint16_t)
                                       : f64      ? sizeof(double)
                                                  : sizeof(float));
  countAllReduce(wireBytes);
  // A sole worker holding the whole batch: its gradients are the mean already (keepsValues), so
  // there is nothing to hand to the all-reduce thread, nor to wait for (a handoff and a wake-up,
  // about 50 us a step on a 2-core machine).
  if (aloneWithTheBatch() && !compressed)
    return llvm::Error::success();
  dist::Collective *collective = collective_.get();
  std::function<llvm::Error()> job;
  if (compressed)
    job = [=, buffer = &halfBuffers_[bucket]] {
      return compressedMean(targets, *buffer, mine / all);
    };
  else if (f64)
    job = [=, buffer = &buffers64_[slot]] {
      return weightedMean(*collective, targets, *buffer, mine / all, inCollective_);
    };
  else
    job = [=, buffer = &buffers_[slot]] {
      return weightedMean(*collective, targets, *buffer, mine / all, inCollective_);
    };
  if (trace_)
    job = [this, job = std::move(job), bucket, wireBytes] {
      TraceSpan span(trace_, "all-reduce", ir::bucketName(bucket), "all_reduce");
      span.addArg("bytes", static_cast<double>(wireBytes));
      inCollective_ = 0;
      llvm::Error e = job();
      // The rest of the span is staging: gathering, copying back, 16-bit coding.
      span.addArg("collective_us", inCollective_ * 1e6);
      return e;
    };
  queue_.push_back(std::move(job));
  inFlight_.push_back(bucket);
  changed_.notify_all();
  return llvm::Error::success();
}

llvm::Error WorkerCommunication::compressedMean(llvm::ArrayRef<Tensor *> tensors,
                                                HalfBuffer &buffer, double fraction) {
  size_t total = 0;
  for (const Tensor *t : tensors)
    total += static_cast<size_t>(t->numElements());
  const auto n = static_cast<int64_t>(total);
  buffer.values.resize(total);
  buffer.wire.resize(total);
  // Each worker's share of the batch-weighted mean, so the 16-bit sum is the mean itself.
  gatherWeighted(tensors, static_cast<float>(fraction), buffer.values.data());
  if (compression_.errorFeedback)
    feedBackError(buffer.values.data(), buffer.residual, buffer.wire.data(), n,
                  compression_.precision);
  else
    encodeHalf(buffer.values.data(), buffer.wire.data(), n, compression_.precision);
  if (auto e = timedAllReduce(*collective_, inCollective_, buffer.wire.data(), total,
                              compression_.precision))
    return e;
  decodeHalf(buffer.wire.data(), buffer.values.data(), n, compression_.precision);
  scatter(buffer.values.data(), tensors);
  return llvm::Error::success();
}

void WorkerCommunication::countAllReduce(size_t bytes) {
  const int64_t ranks = collective_->size();
  if (ranks > 1)
    allReduceBytes_ +=
        static_cast<uint64_t>(2.0 * static_cast<double>(ranks - 1) / static_cast<double>(ranks) *
                              static_cast<double>(bytes));
}

uint64_t WorkerCommunication::bytesSent() const {
  return allReduceBytes_ + (ps_ ? ps_->bytesSent() : 0);
}

uint64_t WorkerCommunication::bytesReceived() const {
  return allReduceBytes_ + (ps_ ? ps_->bytesReceived() : 0);
}

llvm::Expected<Tensor> WorkerCommunication::pull(llvm::StringRef variable) {
  if (!ps_)
    return ir::makeError("'" + variable.str() + "' is pulled, but the job has no PS variables");
  if (inStep_ && !host_ && !stepPulled_ && llvm::is_contained(stepPulls_, variable))
    return pullWithTheStep(variable);
  if (auto it = prefetched_.find(variable.str()); it != prefetched_.end()) {
    Tensor value = std::move(it->second);
    prefetched_.erase(it);
    return value;
  }
  return watchedPsCall("ps_pull", "pull " + variable.str(), [&] {
    return host_ && inStep_ ? host_->pull(pullRounds_["pull/" + variable.str()]++, variable, step_)
                            : ps_->pull(variable, step_);
  });
}

// The step's first pull of a variable it pulls whole: asks for all of them at once.
llvm::Expected<Tensor> WorkerCommunication::pullWithTheStep(llvm::StringRef variable) {
  stepPulled_ = true;
  auto values = watchedPsCall("ps_pull", "pull " + llvm::join(stepPulls_, ", "),
                              [&] { return ps_->pullMany(stepPulls_, step_); });
  if (!values)
    return values.takeError();
  for (size_t i = 0; i < stepPulls_.size(); ++i)
    prefetched_[stepPulls_[i]] = std::move((*values)[i]);
  return pull(variable);
}

llvm::Expected<Tensor> WorkerCommunication::pullRows(llvm::StringRef variable,
                                                     const Tensor &indices) {
  if (!ps_)
    return ir::makeError("rows of '" + variable.str() +
                         "' are pulled, but the job has no PS variables");
  return watchedPsCall("ps_pull_rows", "pull rows of " + variable.str(), [&] {
    return host_ && inStep_
               ? host_->pullRows(pullRounds_["rows/" + variable.str()]++, variable, indices, step_)
               : ps_->pullRows(variable, indices, step_);
  });
}

llvm::Error WorkerCommunication::push(llvm::StringRef variable,
                                      const runtime::RuntimeValue &gradient) {
  if (!gradient.sparse) {
    Tensor dense = gradient.dense;
    if (compression_.errorFeedback && dense.dtype() == ir::DType::F32) {
      dense = dense.clone(); // the step's own gradient stays as computed
      std::vector<uint16_t> wire(static_cast<size_t>(dense.numElements()));
      feedBackError(dense.data<float>(), pushResiduals_[variable.str()], wire.data(),
                    dense.numElements(), compression_.precision);
    }
    pending_.push_back(ps::Gradient::ofDense(variable.str(), dense));
    return llvm::Error::success();
  }
  // Rows of one id add up: send each id once (fewer bytes; the servers' sum is the same).
  ps::ShardGradient coalesced = ps::coalesceRows(gradient.indices, gradient.dense);
  pending_.push_back(ps::Gradient::ofRows(variable.str(), coalesced.indices, coalesced.rows));
  return llvm::Error::success();
}

llvm::Expected<const runtime::RuntimeValue *>
WorkerCommunication::gradient(llvm::StringRef variable) {
  return ir::makeError("'" + variable.str() +
                       "': combined gradients exist on parameter servers, not on workers");
}

} // namespace prism::runtime::job
