// A group of ranks doing CPU collectives (all-reduce, barrier) over Gloo's TCP transport, meeting
// through the coordinator's key-value store.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "ir/Precision.h"
#include "runtime/dist/CoordinatorClient.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

namespace gloo {
class Context;
} // namespace gloo

namespace prism::runtime::dist {

class RingLinks;

// `count` elements at `data`: a piece of a buffer that a collective call reads and writes.
template <typename T> struct WeightedSpan {
  T *data = nullptr;
  size_t count = 0;
};

// Every rank of a group calls the same operations in the same order, one at a time. After an
// error the group is broken (a peer may be gone or out of step): discard it.
class Collective {
public:
  // The nice value Gloo's event-loop thread runs at: the lowest priority (Collective.cpp says
  // why).
  static constexpr int kEventLoopNice = 19;

  // Connects rank `rank` of `size` to all others. `groupName` must be unique within the job (it
  // prefixes the rendezvous keys); `bindAddress` is this host's IPv4 address that peers reach it
  // at. `timeout` bounds the rendezvous and every later operation.
  static llvm::Expected<std::unique_ptr<Collective>> create(CoordinatorClient &client,
                                                            std::string groupName, int rank,
                                                            int size, std::string bindAddress,
                                                            std::chrono::milliseconds timeout);
  ~Collective();

  // Sums `data` element-wise over all ranks, in place (ring all-reduce: each rank sends about
  // 2 * (size - 1) / size of the buffer, whatever the number of ranks).
  llvm::Error allReduceSum(float *data, size_t count);
  llvm::Error allReduceSum(double *data, size_t count);
  // The same for 16-bit floats (`precision` BF16 or FP16, runtime/HalfFloat.h): each hop adds
  // in float32 and rounds the partial sum back to 16 bits (compressed all-reduce).
  llvm::Error allReduceSum(uint16_t *data, size_t count, ir::ComputePrecision precision);
  // Σ over the ranks of each rank's `weight` × its `data`, into every rank's `data` (ranks may
  // pass different weights): a ring like allReduceSum's that weights each rank's values where it
  // first reads them, as a rank adds them to the partial sum it received (or, for the chunk a rank
  // sends first, as the next rank adds them to its own, having received the sender's weight
  // first), so no pass of its own goes over the buffer (WeightedRing.cpp). The buffer may be
  // several spans, one after another (a bucket's tensors where they lie); every rank passes
  // spans of the same counts in the same order. It runs over the group's own ring connections,
  // in the calling thread (RingLinks.h), not through Gloo's event loop.
  llvm::Error allReduceWeighted(llvm::ArrayRef<WeightedSpan<float>> spans, float weight);
  llvm::Error allReduceWeighted(llvm::ArrayRef<WeightedSpan<double>> spans, double weight);
  // Returns once every rank has entered it.
  llvm::Error barrier();
  // Every rank's `bytes` at `data` become rank `root`'s.
  llvm::Error broadcast(void *data, size_t bytes, int root);

  const std::string &groupName() const { return groupName_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

private:
  Collective(std::string groupName, int rank, int size, std::chrono::milliseconds timeout,
             std::shared_ptr<gloo::Context> context);
  template <typename T>
  llvm::Error allReduceSumOf(T *data, size_t count, const char *typeName,
                             std::function<void(void *, const void *, const void *, size_t)> sum);
  template <typename T>
  llvm::Error allReduceWeightedOf(llvm::ArrayRef<WeightedSpan<T>> spans, T weight,
                                  const char *typeName);
  llvm::Error failure(const llvm::Twine &operation, const std::exception &exception) const;
  llvm::Error failure(const llvm::Twine &operation, llvm::Error error) const;

  std::string groupName_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<gloo::Context> context_;
  std::unique_ptr<RingLinks> ring_; // the weighted ring's connections (2 ranks or more)
};

} // namespace prism::runtime::dist
