// Seeded epoch orders, global batches and their shards.
#include "runtime/data/BatchIterator.h"

#include "runtime/BatchSplit.h"

#include <algorithm>
#include <cassert>
#include <numeric>
#include <random>

#include "ir/Diagnostic.h"
#include "runtime/data/Random.h"

namespace prism::runtime::data {

std::vector<int64_t> epochOrder(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 gen(splitmix64(seed + static_cast<uint64_t>(epoch)));
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(order[i], order[uniformBelow(gen, static_cast<uint64_t>(i + 1))]);
  return order;
}

ShardSlice shardSlice(int64_t batchSize, int64_t rank, int64_t numShards) {
  BatchSlice slice = splitBatch(batchSize, rank, numShards);
  return {slice.begin, slice.size};
}

namespace {

llvm::Error checkShard(int64_t rank, int64_t numShards) {
  if (numShards < 1 || rank < 0 || rank >= numShards)
    return ir::makeError("shard " + llvm::Twine(rank) + " of " + llvm::Twine(numShards) +
                         ": need 0 <= rank < numShards");
  return llvm::Error::success();
}

} // namespace

llvm::Expected<BatchIterator> BatchIterator::create(const Dataset &dataset, BatchOptions options,
                                                    int64_t epoch) {
  if (options.batchSize < 1)
    return ir::makeError("batch size " + llvm::Twine(options.batchSize) + " must be at least 1");
  if (dataset.size() < 1)
    return ir::makeError(dataset.description() + " has no examples");
  if (epoch < 0)
    return ir::makeError("epoch " + llvm::Twine(epoch) + " must not be negative");
  if (auto err = checkShard(options.rank, options.numShards))
    return std::move(err);
  auto fields = resolveFields(dataset, options.fields);
  if (!fields)
    return fields.takeError();
  BatchIterator it(dataset, std::move(options), std::move(*fields));
  it.startEpoch(epoch);
  return std::move(it);
}

llvm::Expected<BatchIterator> BatchIterator::shard(int64_t rank, int64_t numShards) const {
  if (auto err = checkShard(rank, numShards))
    return std::move(err);
  BatchIterator copy = *this;
  copy.options_.rank = rank;
  copy.options_.numShards = numShards;
  return std::move(copy);
}

void BatchIterator::startEpoch(int64_t epoch) {
  int64_t n = dataset_->size();
  int64_t b = options_.batchSize;
  epoch_ = epoch;
  position_ = 0;
  numBatches_ = options_.dropLast ? n / b : (n + b - 1) / b;
  if (options_.shuffle) {
    order_ = std::make_shared<const std::vector<int64_t>>(epochOrder(n, options_.seed, epoch));
  } else {
    std::vector<int64_t> identity(static_cast<size_t>(n));
    std::iota(identity.begin(), identity.end(), 0);
    order_ = std::make_shared<const std::vector<int64_t>>(std::move(identity));
  }
}

std::optional<Batch> BatchIterator::next() {
  if (position_ >= numBatches_)
    return std::nullopt;
  return batch(position_++);
}

Batch BatchIterator::batch(int64_t step) const {
  assert(step >= 0 && step < numBatches_ && "batch step out of range");
  int64_t n = dataset_->size();
  int64_t start = step * options_.batchSize;
  int64_t globalSize = std::min(options_.batchSize, n - start);
  ShardSlice slice = shardSlice(globalSize, options_.rank, options_.numShards);
  Batch out;
  out.epoch = epoch_;
  out.step = step;
  out.globalSize = globalSize;
  out.offset = slice.begin;
  auto first = order_->begin() + start + slice.begin;
  out.indices.assign(first, first + slice.size);
  out.tensors = gatherFields(*dataset_, fields_, out.indices);
  return out;
}

} // namespace prism::runtime::data
