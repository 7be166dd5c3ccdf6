// Epochs of batches: the seeded example order, batching, and sharding each global batch among
// data-parallel workers so that together they see exactly the single-device batch.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/data/Dataset.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::data {

// The example order of an epoch, a pure function of (n, seed, epoch): start from 0, 1, ..., n-1
// and, for i = n-1 down to 1, swap position i with position j = uniformBelow(gen, i + 1), where
// gen is std::mt19937_64 seeded with splitmix64(seed + epoch) (Fisher-Yates).
std::vector<int64_t> epochOrder(int64_t n, uint64_t seed, int64_t epoch);

// The slice of a global batch of `batchSize` examples that worker `rank` of `numShards` takes:
// contiguous, in rank order, the first batchSize % numShards workers one example more.
struct ShardSlice {
  int64_t begin = 0;
  int64_t size = 0;
};
ShardSlice shardSlice(int64_t batchSize, int64_t rank, int64_t numShards);

struct BatchOptions {
  int64_t batchSize = 32; // the global batch B
  uint64_t seed = 0;
  bool shuffle = true;   // false: examples in index order
  bool dropLast = false; // drop a last batch smaller than B instead of yielding it
  int64_t rank = 0;      // this worker's shard of every global batch
  int64_t numShards = 1;
  std::vector<FieldRequest> fields; // empty: every field under its own name and shape
};

// The local batch of one worker at one step.
struct Batch {
  int64_t epoch = 0;
  int64_t step = 0;                      // global batch number within the epoch
  int64_t globalSize = 0;                // examples in the global batch, all shards together
  int64_t offset = 0;                    // where this shard starts within the global batch
  std::vector<int64_t> indices;          // data-set index of each row
  std::map<std::string, Tensor> tensors; // key -> [size(), shape...]

  int64_t size() const { return static_cast<int64_t>(indices.size()); }
  const Tensor &at(const std::string &key) const { return tensors.at(key); }
};

// The batches of one epoch, in order, for one shard. Every shard yields the same number of
// batches; a shard's part of a small last batch may be empty (tensors [0, ...]), so workers stay
// in step. The data set must outlive the iterator.
class BatchIterator {
public:
  static llvm::Expected<BatchIterator> create(const Dataset &dataset, BatchOptions options,
                                              int64_t epoch = 0);

  // The same epoch and position seen by worker `rank` of `numShards`.
  llvm::Expected<BatchIterator> shard(int64_t rank, int64_t numShards) const;

  const BatchOptions &options() const { return options_; }
  int64_t epoch() const { return epoch_; }
  int64_t numBatches() const { return numBatches_; }
  // The step next() yields next.
  int64_t position() const { return position_; }
  const std::vector<int64_t> &order() const { return *order_; }

  // Starts epoch `epoch` from its first batch.
  void startEpoch(int64_t epoch);
  // The next batch of this epoch, or nothing at its end.
  std::optional<Batch> next();
  // Batch `step` (in [0, numBatches())) of this epoch, this shard's part.
  Batch batch(int64_t step) const;

private:
  BatchIterator(const Dataset &dataset, BatchOptions options, std::vector<ResolvedField> fields)
      : dataset_(&dataset), options_(std::move(options)), fields_(std::move(fields)) {}

  const Dataset *dataset_;
  BatchOptions options_;
  std::vector<ResolvedField> fields_;
  int64_t epoch_ = 0;
  int64_t numBatches_ = 0;
  int64_t position_ = 0;
  // Shared by the shards of one iterator: an order is computed once per epoch.
  std::shared_ptr<const std::vector<int64_t>> order_;
};

} // namespace prism::runtime::data
