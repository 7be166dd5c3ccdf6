// A worker's all-reduce and parameter-server traffic (see WorkerCommunication.h).
#include "runtime/job/WorkerCommunication.h"

#include <cstring>
#include <unordered_map>

#include "ir/Collectives.h"
#include "ir/Diagnostic.h"
#include "runtime/cpu/Kernel.h"

namespace prism::runtime::job {
namespace {

// A batch-weighted mean over the group: scale by this worker's examples, sum, divide by all.
template <typename T>
llvm::Error weightedMean(dist::Collective &collective, llvm::ArrayRef<Tensor *> tensors,
                         std::vector<T> &buffer, double examples, double globalExamples) {
  size_t total = 0;
  for (const Tensor *t : tensors)
    total += static_cast<size_t>(t->numElements());
  buffer.resize(total);
  size_t at = 0;
  const T scale = static_cast<T>(examples);
  for (const Tensor *t : tensors) {
    const T *src = t->data<T>();
    for (int64_t i = 0; i < t->numElements(); ++i)
      buffer[at + static_cast<size_t>(i)] = scale * src[i];
    at += static_cast<size_t>(t->numElements());
  }
  if (auto e = collective.allReduceSum(buffer.data(), buffer.size()))
    return e;
  at = 0;
  const T inverse = static_cast<T>(1.0 / globalExamples);
  for (Tensor *t : tensors) {
    T *dst = t->data<T>();
    for (int64_t i = 0; i < t->numElements(); ++i)
      dst[i] = buffer[at + static_cast<size_t>(i)] * inverse;
    at += static_cast<size_t>(t->numElements());
  }
  return llvm::Error::success();
}

} // namespace

WorkerCommunication::WorkerCommunication(int64_t rank, std::unique_ptr<dist::Collective> collective,
                                         std::unique_ptr<ps::PsClient> ps)
    : rank_(rank), collective_(std::move(collective)), ps_(std::move(ps)) {
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
  }
  changed_.notify_all();
  reducer_.join();
  llvm::consumeError(std::move(firstError_));
}

llvm::Error WorkerCommunication::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return queue_.empty() && !busy_; });
  nextBuffer_ = 0;
  return std::move(firstError_);
}

void WorkerCommunication::beginStep(int64_t step, int64_t examples, int64_t globalExamples) {
  step_ = step;
  examples_ = examples;
  globalExamples_ = globalExamples;
  pending_.clear();
}

llvm::Error WorkerCommunication::finishStep() {
  if (!ps_)
    return llvm::Error::success();
  auto e = ps_->push(step_, static_cast<double>(examples_), rank_, pending_);
  pending_.clear();
  return e;
}

llvm::Error WorkerCommunication::allReduce(llvm::StringRef group, int64_t bucket,
                                           llvm::ArrayRef<Tensor *> tensors) {
  if (group != ir::kWorkerGroup)
    return ir::makeError("all_reduce over group '" + group.str() +
                         "': this runtime knows only the group '" + ir::kWorkerGroup + "'");
  if (tensors.empty())
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
  // Each bucket of a step has its own staging buffer (kept across steps).
  size_t slot = nextBuffer_++;
  if (buffers_.size() <= slot) {
    buffers_.resize(slot + 1);
    buffers64_.resize(slot + 1);
  }
  dist::Collective *collective = collective_.get();
  if (f64)
    queue_.push_back([=, buffer = &buffers64_[slot]] {
      return weightedMean(*collective, targets, *buffer, mine, all);
    });
  else
    queue_.push_back([=, buffer = &buffers_[slot]] {
      return weightedMean(*collective, targets, *buffer, mine, all);
    });
  changed_.notify_all();
  return llvm::Error::success();
}

llvm::Expected<Tensor> WorkerCommunication::pull(llvm::StringRef variable) {
  if (!ps_)
    return ir::makeError("'" + variable.str() + "' is pulled, but the job has no PS variables");
  return ps_->pull(variable, step_);
}

llvm::Expected<Tensor> WorkerCommunication::pullRows(llvm::StringRef variable,
                                                     const Tensor &indices) {
  if (!ps_)
    return ir::makeError("rows of '" + variable.str() +
                         "' are pulled, but the job has no PS variables");
  return ps_->pullRows(variable, indices, step_);
}

llvm::Error WorkerCommunication::push(llvm::StringRef variable,
                                      const runtime::RuntimeValue &gradient) {
  if (!gradient.sparse) {
    pending_.push_back(ps::Gradient::ofDense(variable.str(), gradient.dense));
    return llvm::Error::success();
  }
  // Rows of one id add up: send each id once (fewer bytes; the servers' sum is the same).
  const Tensor &indices = gradient.indices;
  const Tensor &rows = gradient.dense;
  int64_t n = indices.numElements();
  int64_t rowElements = n ? rows.numElements() / n : 0;
  std::unordered_map<int64_t, int64_t> slotOf;
  slotOf.reserve(static_cast<size_t>(n));
  std::vector<int64_t> order;
  for (int64_t i = 0; i < n; ++i)
    if (slotOf.emplace(indices.data<int64_t>()[i], static_cast<int64_t>(order.size())).second)
      order.push_back(indices.data<int64_t>()[i]);
  int64_t unique = static_cast<int64_t>(order.size());
  std::vector<int64_t> rowShape = rows.shape();
  rowShape[0] = unique;
  Tensor coalescedIndices(ir::DType::I64, {unique});
  std::memcpy(coalescedIndices.raw(), order.data(), order.size() * sizeof(int64_t));
  Tensor coalescedRows(rows.dtype(), rowShape);
  coalescedRows.fillZero();
  auto add = [&](auto *dst, const auto *src) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t slot = slotOf[indices.data<int64_t>()[i]];
      for (int64_t k = 0; k < rowElements; ++k)
        dst[slot * rowElements + k] += src[i * rowElements + k];
    }
  };
  if (rows.dtype() == ir::DType::F64)
    add(coalescedRows.data<double>(), rows.data<double>());
  else
    add(coalescedRows.data<float>(), rows.data<float>());
  pending_.push_back(ps::Gradient::ofRows(variable.str(), coalescedIndices, coalescedRows));
  return llvm::Error::success();
}

llvm::Expected<const runtime::RuntimeValue *>
WorkerCommunication::gradient(llvm::StringRef variable) {
  return ir::makeError("'" + variable.str() +
                       "': combined gradients exist on parameter servers, not on workers");
}

} // namespace prism::runtime::job
