// The weighted ring all-reduce (Collective::allReduceWeighted): Σ over the ranks of w_r × x_r,
// with each rank's weight applied where the ring first reads its values, so no pass of its own
// goes over the buffer.
//
// Gloo's ring schedule, over the ring's own connections (RingLinks.h): the buffer (one span or
// several, one after another) is cut into segments of at most 1 MiB (at least two per rank);
// rank c's chunk is the c-th run of them, and a segment lies within one span (a span's end cuts
// one short). Reduce-scatter: at step s (0 ≤ s < size − 1) rank r sends chunk r − s to rank
// r + 1 and receives chunk r − s − 1 from rank r − 1 (chunks mod size), a segment at a time, each
// added as its bytes arrive while the sockets' buffers carry what was sent. The chunk it sends at
// step 0 is its own, as it is: first each rank sends its weight to the next, so the receiver
// weights those values, x ← w·x + w_left·received. Every other chunk a rank receives once, a
// partial sum of weighted values: x ← w·x + received. Either is then what it sends at the next
// step. After size − 1 steps rank r holds the whole sum of chunk r + 1. All-gather: at step s rank
// r sends chunk r + 1 − s and receives chunk r − s in place, the chunk it forwards next.
#include <algorithm>
#include <vector>

#include "runtime/cpu/kernels/TargetClones.h"
#include "runtime/dist/Collective.h"
#include "runtime/dist/RingLinks.h"
#include "llvm/ADT/SmallVector.h"

namespace prism::runtime::dist {
namespace {

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

// Gloo's ring takes segments of at most this many bytes (gloo::AllreduceOptions): one stays in
// the caches from its arrival to its addition.
constexpr size_t kMaxSegmentBytes = size_t{1} << 20;

// The ring as the messages each rank sends right and receives from the left, in order (see
// RingLinks::Schedule): message 0 is the rank's weight; message 1 + k is transfer k of the
// reduce-scatter (k < transfers()) or of the all-gather after it. Transfer k moves segment
// k % perRank_ of a chunk at step k / perRank_; the segment a rank sends at transfer k ≥ perRank_
// is the one it received at k − perRank_, in either phase (the all-gather's first step sends
// what the reduce-scatter's last step finished), so that message waits for that one.
template <typename T> class WeightedRing final : public RingLinks::Schedule {
public:
  // `spans` (none empty) are the buffer, one after another.
  WeightedRing(size_t ranks, size_t rank, llvm::ArrayRef<WeightedSpan<T>> spans, T weight)
      : ranks_(ranks), rank_(rank), spans_(spans.begin(), spans.end()),
        weight_(weight), weightPair_{weight, T(0)} {
    cutSegments();
    scratch_.resize(segmentLength_);
  }

  size_t messages() const override { return 1 + 2 * transfers(); }

  const void *sendFrom(size_t m) const override {
    if (m == 0)
      return &weightPair_[0];
    const Segment &s = sent(m - 1);
    return values(s);
  }
  size_t sendBytes(size_t m) const override {
    return m == 0 ? sizeof(T) : sent(m - 1).length * sizeof(T);
  }
  bool maySend(size_t m, size_t received) const override {
    return m <= perRank_ || received > m - perRank_;
  }

  void *receiveInto(size_t m) override {
    if (m == 0)
      return &weightPair_[1];
    const size_t k = m - 1;
    return k < transfers() ? static_cast<void *>(scratch_.data()) : values(received(k));
  }
  size_t receiveBytes(size_t m) const override {
    return m == 0 ? sizeof(T) : received(m - 1).length * sizeof(T);
  }

  // A reduce-scatter segment is added to the rank's own values as its elements arrive.
  void arrived(size_t m, size_t bytes) override {
    if (m == 0 || m - 1 >= transfers())
      return;
    const size_t k = m - 1;
    const Segment &into = reduceReceived(k);
    const size_t whole = bytes / sizeof(T); // a partly arrived element waits for its rest
    T *x = values(into) + added_;
    const T *theirs = scratch_.data() + added_;
    const size_t n = whole - added_;
    if (step(k) == 0) // the left rank's own values, as they are
      addBothWeighted(x, theirs, n, weight_, weightPair_[1]);
    else
      addWeighted(x, theirs, n, weight_);
    added_ = whole == into.length ? 0 : whole;
  }

private:
  // A contiguous piece of one span, sent in one message; an empty one is no message.
  struct Segment {
    size_t span = 0, begin = 0, length = 0;
  };

  // Rank c's chunk is the c-th run of chunkLength elements of the whole buffer (the spans one
  // after another), chunkLength a whole number of segmentLength_; its segments are its pieces
  // within each span, cut every segmentLength_ elements. Every chunk gets perRank_ segments, the
  // most any has and at least two, those it lacks empty. One span is cut as Gloo's ring cuts its
  // buffer.
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

  // A phase's transfers: steps × segments a chunk.
  size_t transfers() const { return (ranks_ - 1) * perRank_; }

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

  // Transfer k over both phases.
  const Segment &sent(size_t k) const {
    return k < transfers() ? reduceSent(k) : gatherSent(k - transfers());
  }
  const Segment &received(size_t k) const {
    return k < transfers() ? reduceReceived(k) : gatherReceived(k - transfers());
  }

  const size_t ranks_, rank_;
  const std::vector<WeightedSpan<T>> spans_;
  const T weight_;
  size_t segmentLength_ = 0; // elements a segment, at most
  size_t perRank_ = 0;       // segments a chunk
  std::vector<Segment> segments_;
  std::vector<T> scratch_; // the reduce-scatter segment arriving
  size_t added_ = 0;       // its elements added so far
  T weightPair_[2];        // this rank's weight, sent right; the left rank's, received
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
  WeightedRing<T> ring(static_cast<size_t>(size_), static_cast<size_t>(rank_), nonEmpty, weight);
  if (llvm::Error e = ring_->run(ring, timeout_))
    return failure("weighted all-reduce of " + llvm::Twine(count) + " " + typeName + "s in " +
                       llvm::Twine(nonEmpty.size()) + " span(s)",
                   std::move(e));
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
