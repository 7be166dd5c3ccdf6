// The weighted ring all-reduce (Collective::allReduceWeighted): Σ over the ranks of w_r × x_r,
// with each rank's weight applied where the ring first reads its values, so no pass of its own
// goes over the buffer.
//
// Gloo's ring schedule: the buffer is cut into segments of at most 1 MiB (at least two per rank),
// so that a segment's addition overlaps the next one's transfer while both stay in the caches;
// rank c's chunk is the c-th run of segments_per_rank of them. Reduce-scatter: at step s
// (0 ≤ s < size − 1) rank r sends chunk r − s to rank r + 1 and receives chunk r − s − 1 from
// rank r − 1 (chunks mod size), a segment at a time, two in flight. The chunk it sends at step 0
// is its own, as it is: first each rank sends its weight to the next, so the receiver weights
// those values, x ← w·x + w_left·received. Every other chunk a rank receives once, a partial sum
// of weighted values: x ← w·x + received. Either is then what it sends at the next step. After
// size − 1 steps rank r holds the whole sum of chunk r + 1. All-gather: at step s rank r sends
// chunk r + 1 − s and receives chunk r − s in place, the chunk it forwards next.
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/cpu/kernels/TargetClones.h"
#include "runtime/dist/Collective.h"

namespace prism::runtime::dist {
namespace {

// Gloo's own collectives use the slot prefixes 1-8 (gloo/types.h).
constexpr uint8_t kWeightedRingSlotPrefix = 0x50;

// The ring's loops over values, vectorized for the CPU it runs on (this file is built with -O3:
// runtime/dist/CMakeLists.txt).
template <typename T> PRISM_TARGET_CLONES void scaleInPlace(T *__restrict x, size_t n, T weight) {
  for (size_t i = 0; i < n; ++i)
    x[i] *= weight;
}

// x ← weight·x + received
template <typename T>
PRISM_TARGET_CLONES void addWeighted(T *__restrict x, const T *__restrict received, size_t n,
                                     T weight) {
  for (size_t i = 0; i < n; ++i)
    x[i] = weight * x[i] + received[i];
}

// x ← weight·x + theirs·received
template <typename T>
PRISM_TARGET_CLONES void addBothWeighted(T *__restrict x, const T *__restrict received, size_t n,
                                         T weight, T theirs) {
  for (size_t i = 0; i < n; ++i)
    x[i] = weight * x[i] + theirs * received[i];
}

// A wait that an abort ended (Gloo throws on a timeout or a broken pair) leaves the ring out of
// step: an error.
void check(bool completed, const char *what) {
  if (!completed)
    throw std::runtime_error(std::string("a ring ") + what + " was aborted");
}

// Gloo's ring takes segments of at most this many bytes (gloo::AllreduceOptions): one stays in
// the caches from its arrival to its addition.
constexpr size_t kMaxSegmentBytes = size_t{1} << 20;

template <typename T> class WeightedRing {
public:
  WeightedRing(gloo::Context &context, T *data, size_t count, T weight,
               std::chrono::milliseconds timeout)
      : ranks_(static_cast<size_t>(context.size)), rank_(static_cast<size_t>(context.rank)),
        data_(data), count_(count), weight_(weight), timeout_(timeout),
        segmentLength_(std::min((count + 2 * ranks_ - 1) / (2 * ranks_),
                                std::max<size_t>(1, kMaxSegmentBytes / sizeof(T)))),
        perRank_(
            roundUp(std::max((count + segmentLength_ - 1) / segmentLength_, 2 * ranks_), ranks_) /
            ranks_),
        scratch_(2 * segmentLength_), right_(static_cast<int>((rank_ + 1) % ranks_)),
        left_(static_cast<int>((rank_ + ranks_ - 1) % ranks_)),
        slot_(gloo::Slot::build(kWeightedRingSlotPrefix, 0)),
        weightSlot_(gloo::Slot::build(kWeightedRingSlotPrefix, 1)), weightPair_{weight, T(0)},
        out_(context.createUnboundBuffer(data, count * sizeof(T))),
        tmp_(context.createUnboundBuffer(scratch_.data(), scratch_.size() * sizeof(T))),
        weights_(context.createUnboundBuffer(weightPair_, sizeof(weightPair_))) {}

  void run() {
    weights_->recv(left_, weightSlot_, sizeof(T), sizeof(T));
    weights_->send(right_, weightSlot_, 0, sizeof(T));
    pipelined([this](size_t k) { startReduce(k); }, [this](size_t k) { finishReduce(k); });
    pipelined([this](size_t k) { startGather(k); }, [this](size_t k) { finishGather(k); });
  }

private:
  // A phase's transfers in order, two in flight: transfer k starts once k − 2 finished.
  template <typename Start, typename Finish> void pipelined(Start &&start, Finish &&finish) {
    const size_t transfers = (ranks_ - 1) * perRank_; // steps × segments a chunk
    for (size_t k = 0; k < transfers; ++k) {
      if (k >= 2)
        finish(k - 2);
      start(k);
    }
    finish(transfers - 2);
    finish(transfers - 1);
  }

  static size_t roundUp(size_t n, size_t multiple) {
    return (n + multiple - 1) / multiple * multiple;
  }

  // Transfer k of a phase moves segment k % perRank_ of a chunk at step k / perRank_; a
  // segment past the buffer's end is empty.
  size_t segment(size_t chunk, size_t k) const {
    return (chunk % ranks_) * perRank_ + k % perRank_;
  }
  size_t begin(size_t s) const { return std::min(count_, s * segmentLength_); }
  size_t length(size_t s) const { return std::min(count_, begin(s) + segmentLength_) - begin(s); }
  size_t step(size_t k) const { return k / perRank_; }

  size_t reduceSent(size_t k) const { return segment(rank_ + ranks_ - step(k), k); }
  size_t reduceReceived(size_t k) const { return segment(rank_ + 2 * ranks_ - step(k) - 1, k); }
  size_t gatherSent(size_t k) const { return segment(rank_ + 1 + ranks_ - step(k), k); }
  size_t gatherReceived(size_t k) const { return segment(rank_ + ranks_ - step(k), k); }

  void startReduce(size_t k) {
    const size_t received = reduceReceived(k), sent = reduceSent(k);
    if (length(received) > 0)
      tmp_->recv(left_, slot_, (k % 2) * segmentLength_ * sizeof(T), length(received) * sizeof(T));
    if (length(sent) > 0)
      out_->send(right_, slot_, begin(sent) * sizeof(T), length(sent) * sizeof(T));
  }

  void finishReduce(size_t k) {
    if (k == 0) { // the left rank's weight came first on the same connection
      check(weights_->waitRecv(timeout_), "receive of a weight");
      check(weights_->waitSend(timeout_), "send of a weight");
    }
    const size_t received = reduceReceived(k);
    if (length(received) > 0) {
      check(tmp_->waitRecv(timeout_), "receive");
      T *x = data_ + begin(received);
      const T *theirs = scratch_.data() + (k % 2) * segmentLength_;
      if (step(k) == 0) // the left rank's own values, as they are
        addBothWeighted(x, theirs, length(received), weight_, weightPair_[1]);
      else
        addWeighted(x, theirs, length(received), weight_);
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
  const size_t segmentLength_; // elements a segment
  const size_t perRank_;       // segments a chunk
  std::vector<T> scratch_;
  const int right_, left_;
  const uint64_t slot_, weightSlot_;
  T weightPair_[2]; // this rank's weight, sent right; the left rank's, received
  std::unique_ptr<gloo::transport::UnboundBuffer> out_, tmp_, weights_;
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
