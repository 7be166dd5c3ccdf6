// The weighted ring all-reduce (Collective::allReduceWeighted): Σ over the ranks of w_r × x_r,
// with each rank's weight applied where the ring first reads its values, so no pass of its own
// goes over the buffer.
//
// Gloo's ring schedule: the buffer (one span or several, one after another) is cut into segments
// of at most 1 MiB (at least two per rank), so that a segment's addition overlaps the next one's
// transfer while both stay in the caches; rank c's chunk is the c-th run of them, and a segment
// lies within one span (a span's end cuts one short). Reduce-scatter: at step s
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
#include "llvm/ADT/SmallVector.h"

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
  // `spans` (none empty) are the buffer, one after another.
  WeightedRing(gloo::Context &context, llvm::ArrayRef<WeightedSpan<T>> spans, T weight,
               std::chrono::milliseconds timeout)
      : ranks_(static_cast<size_t>(context.size)), rank_(static_cast<size_t>(context.rank)),
        spans_(spans.begin(), spans.end()), weight_(weight), timeout_(timeout),
        right_(static_cast<int>((rank_ + 1) % ranks_)),
        left_(static_cast<int>((rank_ + ranks_ - 1) % ranks_)),
        slot_(gloo::Slot::build(kWeightedRingSlotPrefix, 0)),
        weightSlot_(gloo::Slot::build(kWeightedRingSlotPrefix, 1)), weightPair_{weight, T(0)} {
    cutSegments();
    scratch_.resize(2 * segmentLength_);
    for (const WeightedSpan<T> &span : spans_)
      outs_.push_back(context.createUnboundBuffer(span.data, span.count * sizeof(T)));
    tmp_ = context.createUnboundBuffer(scratch_.data(), scratch_.size() * sizeof(T));
    weights_ = context.createUnboundBuffer(weightPair_, sizeof(weightPair_));
  }

  void run() {
    weights_->recv(left_, weightSlot_, sizeof(T), sizeof(T));
    weights_->send(right_, weightSlot_, 0, sizeof(T));
    pipelined([this](size_t k) { startReduce(k); }, [this](size_t k) { finishReduce(k); });
    pipelined([this](size_t k) { startGather(k); }, [this](size_t k) { finishGather(k); });
  }

private:
  // A contiguous piece of one span, sent in one message; an empty one is no message.
  struct Segment {
    size_t span = 0, begin = 0, length = 0;
  };

  // Rank c's chunk is the c-th run of chunkLength elements of the whole buffer (the spans one
  // after another), chunkLength a whole number of segmentLength_; its segments are its pieces
  // within each span, cut every segmentLength_ elements. Every chunk gets perRank_ segments, the
  // most any has and at least two, those it lacks empty: with two transfers in flight, the
  // segment a rank forwards at transfer k it received at k − perRank_, which has finished. One
  // span is cut as Gloo's ring cuts its buffer.
  void cutSegments() {
    size_t count = 0;
    for (const WeightedSpan<T> &span : spans_)
      count += span.count;
    segmentLength_ = std::min((count + 2 * ranks_ - 1) / (2 * ranks_),
                              std::max<size_t>(1, kMaxSegmentBytes / sizeof(T)));
    const size_t segments = std::max((count + segmentLength_ - 1) / segmentLength_, 2 * ranks_);
    const size_t chunkLength = (segments + ranks_ - 1) / ranks_ * segmentLength_;
    std::vector<std::vector<Segment>> chunks(ranks_);
    size_t at = 0; // the first element of the span, in the whole buffer
    for (size_t s = 0; s < spans_.size(); at += spans_[s].count, ++s)
      for (size_t i = 0; i < spans_[s].count;) {
        const size_t chunk = (at + i) / chunkLength;
        const size_t end =
            std::min({spans_[s].count, i + segmentLength_, (chunk + 1) * chunkLength - at});
        chunks[chunk].push_back({s, i, end - i});
        i = end;
      }
    perRank_ = 2;
    for (const auto &chunk : chunks)
      perRank_ = std::max(perRank_, chunk.size());
    segments_.assign(ranks_ * perRank_, Segment{});
    for (size_t c = 0; c < ranks_; ++c)
      std::copy(chunks[c].begin(), chunks[c].end(), segments_.begin() + c * perRank_);
  }

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

  // Transfer k of a phase moves segment k % perRank_ of a chunk at step k / perRank_.
  const Segment &segment(size_t chunk, size_t k) const {
    return segments_[(chunk % ranks_) * perRank_ + k % perRank_];
  }
  size_t step(size_t k) const { return k / perRank_; }
  T *values(const Segment &s) const { return spans_[s.span].data + s.begin; }

  const Segment &reduceSent(size_t k) const { return segment(rank_ + ranks_ - step(k), k); }
  const Segment &reduceReceived(size_t k) const {
    return segment(rank_ + 2 * ranks_ - step(k) - 1, k);
  }
  const Segment &gatherSent(size_t k) const { return segment(rank_ + 1 + ranks_ - step(k), k); }
  const Segment &gatherReceived(size_t k) const { return segment(rank_ + ranks_ - step(k), k); }

  void send(const Segment &s) {
    if (s.length > 0)
      outs_[s.span]->send(right_, slot_, s.begin * sizeof(T), s.length * sizeof(T));
  }

  void startReduce(size_t k) {
    const Segment &received = reduceReceived(k);
    if (received.length > 0)
      tmp_->recv(left_, slot_, (k % 2) * segmentLength_ * sizeof(T), received.length * sizeof(T));
    send(reduceSent(k));
  }

  void finishReduce(size_t k) {
    if (k == 0) { // the left rank's weight came first on the same connection
      check(weights_->waitRecv(timeout_), "receive of a weight");
      check(weights_->waitSend(timeout_), "send of a weight");
    }
    const Segment &received = reduceReceived(k);
    if (received.length > 0) {
      check(tmp_->waitRecv(timeout_), "receive");
      const T *theirs = scratch_.data() + (k % 2) * segmentLength_;
      if (step(k) == 0) // the left rank's own values, as they are
        addBothWeighted(values(received), theirs, received.length, weight_, weightPair_[1]);
      else
        addWeighted(values(received), theirs, received.length, weight_);
    }
    if (const Segment &sent = reduceSent(k); sent.length > 0)
      check(outs_[sent.span]->waitSend(timeout_), "send");
  }

  void startGather(size_t k) {
    if (const Segment &received = gatherReceived(k); received.length > 0)
      outs_[received.span]->recv(left_, slot_, received.begin * sizeof(T),
                                 received.length * sizeof(T));
    send(gatherSent(k));
  }

  void finishGather(size_t k) {
    if (const Segment &received = gatherReceived(k); received.length > 0)
      check(outs_[received.span]->waitRecv(timeout_), "receive");
    if (const Segment &sent = gatherSent(k); sent.length > 0)
      check(outs_[sent.span]->waitSend(timeout_), "send");
  }

  const size_t ranks_, rank_;
  const std::vector<WeightedSpan<T>> spans_;
  const T weight_;
  const std::chrono::milliseconds timeout_;
  size_t segmentLength_ = 0; // elements a segment, at most
  size_t perRank_ = 0;       // segments a chunk
  std::vector<Segment> segments_;
  std::vector<T> scratch_;
  const int right_, left_;
  const uint64_t slot_, weightSlot_;
  T weightPair_[2]; // this rank's weight, sent right; the left rank's, received
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> outs_; // a span each
  std::unique_ptr<gloo::transport::UnboundBuffer> tmp_, weights_;
};

} // namespace

template <typename T>
llvm::Error Collective::allReduceWeightedOf(llvm::ArrayRef<WeightedSpan<T>> spans, T weight,
                                            const char *typeName) {
  llvm::SmallVector<WeightedSpan<T>, 8> nonEmpty;
  size_t count = 0;
  for (const WeightedSpan<T> &span : spans)
    if (span.count > 0) {
      nonEmpty.push_back(span);
      count += span.count;
    }
  if (nonEmpty.empty())
    return llvm::Error::success();
  if (size_ == 1) {
    if (weight != T(1))
      for (const WeightedSpan<T> &span : nonEmpty)
        scaleInPlace(span.data, span.count, weight);
    return llvm::Error::success();
  }
  try {
    WeightedRing<T>(*context_, nonEmpty, weight, timeout_).run();
  } catch (const std::exception &exception) {
    return failure("weighted all-reduce of " + llvm::Twine(count) + " " + typeName + "s in " +
                       llvm::Twine(nonEmpty.size()) + " span(s)",
                   exception);
  }
  return llvm::Error::success();
}

llvm::Error Collective::allReduceWeighted(llvm::ArrayRef<WeightedSpan<float>> spans, float weight) {
  return allReduceWeightedOf(spans, weight, "float");
}

llvm::Error Collective::allReduceWeighted(llvm::ArrayRef<WeightedSpan<double>> spans,
                                          double weight) {
  return allReduceWeightedOf(spans, weight, "double");
}

} // namespace prism::runtime::dist
