// The weighted ring all-reduce (Collective::allReduceWeighted): Σ over the ranks of w_r × x_r,
// with each rank's weight applied where the ring first reads its values, so no pass of its own
// goes over the buffer.
//
// The buffer is cut into 2 × size segments, two per rank's chunk, so that one segment's addition
// overlaps the next one's transfer. Reduce-scatter: at step s (0 ≤ s < size − 1) rank r sends
// chunk r − s to rank r + 1 and receives chunk r − s − 1 from rank r − 1 (chunks mod size). The
// chunk it sends at step 0 is its own: it weights those values right before they leave. Every
// other chunk it receives exactly once, a partial sum of weighted values, and adds its own values
// weighted: x ← w·x + received, which is then what it sends at the next step. After size − 1
// steps rank r holds the whole sum of chunk r + 1. All-gather: at step s rank r sends chunk
// r + 1 − s and receives chunk r − s in place, the chunk it forwards next.
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <chrono>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/dist/Collective.h"

namespace prism::runtime::dist {
namespace {

// Gloo's own collectives use the slot prefixes 1-8 (gloo/types.h).
constexpr uint8_t kWeightedRingSlotPrefix = 0x50;

template <typename T> void scaleInPlace(T *__restrict x, size_t n, T weight) {
  for (size_t i = 0; i < n; ++i)
    x[i] *= weight;
}

template <typename T>
void addWeighted(T *__restrict x, const T *__restrict received, size_t n, T weight) {
  for (size_t i = 0; i < n; ++i)
    x[i] = weight * x[i] + received[i];
}

// A wait that an abort ended (Gloo throws on a timeout or a broken pair) leaves the ring out of
// step: an error.
void check(bool completed, const char *what) {
  if (!completed)
    throw std::runtime_error(std::string("a ring ") + what + " was aborted");
}

template <typename T> class WeightedRing {
public:
  WeightedRing(gloo::Context &context, T *data, size_t count, T weight,
               std::chrono::milliseconds timeout)
      : ranks_(static_cast<size_t>(context.size)), rank_(static_cast<size_t>(context.rank)),
        data_(data), count_(count), weight_(weight), timeout_(timeout),
        longest_((count + 2 * ranks_ - 1) / (2 * ranks_)), scratch_(2 * longest_),
        right_(static_cast<int>((rank_ + 1) % ranks_)),
        left_(static_cast<int>((rank_ + ranks_ - 1) % ranks_)),
        slot_(gloo::Slot::build(kWeightedRingSlotPrefix, 0)),
        out_(context.createUnboundBuffer(data, count * sizeof(T))),
        tmp_(context.createUnboundBuffer(scratch_.data(), scratch_.size() * sizeof(T))) {}

  void run() {
    const size_t transfers = 2 * (ranks_ - 1); // steps × the two halves of a chunk
    for (size_t k = 0; k < transfers; ++k) {
      if (k >= 2)
        finishReduce(k - 2);
      startReduce(k);
    }
    finishReduce(transfers - 2);
    finishReduce(transfers - 1);
    for (size_t k = 0; k < transfers; ++k) {
      if (k >= 2)
        finishGather(k - 2);
      startGather(k);
    }
    finishGather(transfers - 2);
    finishGather(transfers - 1);
  }

private:
  // Transfer k of a phase moves half k % 2 of a chunk at step k / 2.
  size_t segment(size_t chunk, size_t k) const { return 2 * (chunk % ranks_) + k % 2; }
  size_t begin(size_t s) const { return count_ * s / (2 * ranks_); }
  size_t length(size_t s) const { return begin(s + 1) - begin(s); }
  size_t step(size_t k) const { return k / 2; }

  size_t reduceSent(size_t k) const { return segment(rank_ + ranks_ - step(k), k); }
  size_t reduceReceived(size_t k) const { return segment(rank_ + 2 * ranks_ - step(k) - 1, k); }
  size_t gatherSent(size_t k) const { return segment(rank_ + 1 + ranks_ - step(k), k); }
  size_t gatherReceived(size_t k) const { return segment(rank_ + ranks_ - step(k), k); }

  void startReduce(size_t k) {
    const size_t received = reduceReceived(k), sent = reduceSent(k);
    if (length(received) > 0)
      tmp_->recv(left_, slot_, (k % 2) * longest_ * sizeof(T), length(received) * sizeof(T));
    if (length(sent) > 0) {
      if (step(k) == 0) // this rank's own chunk, read here for the first time
        scaleInPlace(data_ + begin(sent), length(sent), weight_);
      out_->send(right_, slot_, begin(sent) * sizeof(T), length(sent) * sizeof(T));
    }
  }

  void finishReduce(size_t k) {
    const size_t received = reduceReceived(k);
    if (length(received) > 0) {
      check(tmp_->waitRecv(timeout_), "receive");
      addWeighted(data_ + begin(received), scratch_.data() + (k % 2) * longest_, length(received),
                  weight_);
    }
    if (length(reduceSent(k)) > 0)
      check(out_->waitSend(timeout_), "send");
  }

  void startGather(size_t k) {
    const size_t received = gatherReceived(k), sent = gatherSent(k);
    if (length(received) > 0)
      out_->recv(left_, slot_, begin(received) * sizeof(T), length(received) * sizeof(T));
    if (length(sent) > 0)
      out_->send(right_, slot_, begin(sent) * sizeof(T), length(sent) * sizeof(T));
  }

  void finishGather(size_t k) {
    if (length(gatherReceived(k)) > 0)
      check(out_->waitRecv(timeout_), "receive");
    if (length(gatherSent(k)) > 0)
      check(out_->waitSend(timeout_), "send");
  }

  const size_t ranks_, rank_;
  T *const data_;
  const size_t count_;
  const T weight_;
  const std::chrono::milliseconds timeout_;
  const size_t longest_; // elements of the longest segment
  std::vector<T> scratch_;
  const int right_, left_;
  const uint64_t slot_;
  std::unique_ptr<gloo::transport::UnboundBuffer> out_, tmp_;
};

} // namespace

template <typename T>
llvm::Error Collective::allReduceWeightedOf(T *data, size_t count, T weight, const char *typeName) {
  if (count == 0)
    return llvm::Error::success();
  if (size_ == 1) {
    if (weight != T(1))
      scaleInPlace(data, count, weight);
    return llvm::Error::success();
  }
  try {
    WeightedRing<T>(*context_, data, count, weight, timeout_).run();
  } catch (const std::exception &exception) {
    return failure("weighted all-reduce of " + llvm::Twine(count) + " " + typeName + "s",
                   exception);
  }
  return llvm::Error::success();
}

llvm::Error Collective::allReduceWeighted(float *data, size_t count, float weight) {
  return allReduceWeightedOf(data, count, weight, "float");
}

llvm::Error Collective::allReduceWeighted(double *data, size_t count, double weight) {
  return allReduceWeightedOf(data, count, weight, "double");
}

} // namespace prism::runtime::dist
