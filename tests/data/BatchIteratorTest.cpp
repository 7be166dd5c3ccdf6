// Epoch orders, batches and shards: determinism, coverage, and shards that add up to the global
// batch.
#include <algorithm>
#include <cstring>
#include <set>

#include <gtest/gtest.h>

#include "runtime/data/BatchIterator.h"
#include "runtime/data/FashionMnist.h"
#include "llvm/Support/FileSystem.h"

using namespace prism;
using namespace prism::runtime::data;

namespace {

// N examples: `id` i32[] is the index, `pair` f32[2] is (index, -index).
std::unique_ptr<TensorDataset> numbered(int64_t n) {
  auto d = std::make_unique<TensorDataset>("numbered");
  runtime::Tensor ids(ir::DType::I32, {n});
  runtime::Tensor pairs(ir::DType::F32, {n, 2});
  for (int64_t i = 0; i < n; ++i) {
    ids.data<int32_t>()[i] = static_cast<int32_t>(i);
    pairs.data<float>()[2 * i] = static_cast<float>(i);
    pairs.data<float>()[2 * i + 1] = -static_cast<float>(i);
  }
  EXPECT_FALSE(bool(d->addField({"id", {"y"}, ir::DType::I32, {}, {}}, ids)));
  EXPECT_FALSE(bool(d->addField({"pair", {"x"}, ir::DType::F32, {2}, {}}, pairs)));
  return d;
}

BatchIterator makeIterator(const Dataset &d, BatchOptions options, int64_t epoch = 0) {
  auto it = BatchIterator::create(d, std::move(options), epoch);
  EXPECT_TRUE(bool(it)) << llvm::toString(it.takeError());
  return std::move(*it);
}

std::vector<Batch> epochBatches(BatchIterator it) {
  std::vector<Batch> batches;
  while (auto batch = it.next())
    batches.push_back(std::move(*batch));
  return batches;
}

bool sameTensor(const runtime::Tensor &a, const runtime::Tensor &b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw(), b.raw(), a.numBytes()) == 0;
}

// The rows of `parts`, in order, as one tensor's bytes.
std::string concatenatedBytes(const std::vector<Batch> &parts, const std::string &key) {
  std::string bytes;
  for (const Batch &part : parts)
    bytes.append(static_cast<const char *>(part.at(key).raw()), part.at(key).numBytes());
  return bytes;
}

} // namespace

TEST(EpochOrder, FollowsTheDocumentedRule) {
  // Computed by an independent implementation of the rule in docs/data.md.
  EXPECT_EQ(epochOrder(10, 42, 3), (std::vector<int64_t>{4, 7, 0, 3, 6, 2, 5, 8, 1, 9}));
  EXPECT_EQ(epochOrder(12, 0, 0), (std::vector<int64_t>{2, 6, 0, 1, 9, 3, 8, 4, 5, 7, 11, 10}));
  EXPECT_EQ(epochOrder(1, 5, 5), (std::vector<int64_t>{0}));
  EXPECT_TRUE(epochOrder(0, 5, 5).empty());
}

TEST(EpochOrder, PureFunctionOfSeedAndEpoch) {
  std::vector<int64_t> a = epochOrder(1000, 7, 2);
  EXPECT_EQ(a, epochOrder(1000, 7, 2));
  EXPECT_NE(a, epochOrder(1000, 8, 2));
  EXPECT_NE(a, epochOrder(1000, 7, 3));
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i)
    ASSERT_EQ(sorted[i], i);
}

TEST(ShardSlice, ContiguousNearlyEqualInRankOrder) {
  std::vector<std::pair<int64_t, int64_t>> slices;
  for (int64_t r = 0; r < 4; ++r) {
    ShardSlice s = shardSlice(10, r, 4);
    slices.emplace_back(s.begin, s.size);
  }
  EXPECT_EQ(slices, (std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 3}, {6, 2}, {8, 2}}));
  EXPECT_EQ(shardSlice(2, 3, 4).size, 0);
  EXPECT_EQ(shardSlice(2, 3, 4).begin, 2);
}

TEST(BatchIterator, EveryExampleExactlyOncePerEpoch) {
  auto d = numbered(50);
  BatchOptions options;
  options.batchSize = 7;
  options.seed = 3;
  BatchIterator it = makeIterator(*d, options);
  EXPECT_EQ(it.numBatches(), 8);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    it.startEpoch(epoch);
    std::vector<Batch> batches = epochBatches(it);
    ASSERT_EQ(batches.size(), 8u);
    std::multiset<int64_t> seen;
    for (size_t s = 0; s < batches.size(); ++s) {
      const Batch &b = batches[s];
      EXPECT_EQ(b.step, static_cast<int64_t>(s));
      EXPECT_EQ(b.epoch, epoch);
      EXPECT_EQ(b.size(), s < 7 ? 7 : 1); // the last partial batch is kept
      EXPECT_EQ(b.globalSize, b.size());
      EXPECT_EQ(b.at("id").shape(), (std::vector<int64_t>{b.size()}));
      EXPECT_EQ(b.at("pair").shape(), (std::vector<int64_t>{b.size(), 2}));
      for (int64_t row = 0; row < b.size(); ++row) {
        seen.insert(b.indices[row]);
        EXPECT_EQ(b.at("id").data<int32_t>()[row], b.indices[row]);
        EXPECT_EQ(b.at("pair").data<float>()[2 * row + 1], -static_cast<float>(b.indices[row]));
      }
    }
    ASSERT_EQ(seen.size(), 50u);
    for (int64_t i = 0; i < 50; ++i)
      EXPECT_EQ(seen.count(i), 1u) << "epoch " << epoch << " example " << i;
  }
}

TEST(BatchIterator, DropLastAndNoShuffle) {
  auto d = numbered(50);
  BatchOptions options;
  options.batchSize = 7;
  options.dropLast = true;
  options.shuffle = false;
  std::vector<Batch> batches = epochBatches(makeIterator(*d, options));
  ASSERT_EQ(batches.size(), 7u);
  for (size_t s = 0; s < batches.size(); ++s)
    for (int64_t row = 0; row < 7; ++row)
      EXPECT_EQ(batches[s].indices[row], static_cast<int64_t>(s * 7 + row));
  options.batchSize = 60;
  EXPECT_EQ(makeIterator(*d, options).numBatches(), 0);
}

TEST(BatchIterator, SameSeedSameBatchesOtherSeedOtherOrder) {
  auto d = numbered(40);
  BatchOptions options;
  options.batchSize = 8;
  options.seed = 99;
  std::vector<Batch> a = epochBatches(makeIterator(*d, options, 1));
  std::vector<Batch> b = epochBatches(makeIterator(*d, options, 1));
  ASSERT_EQ(a.size(), b.size());
  for (size_t s = 0; s < a.size(); ++s) {
    EXPECT_EQ(a[s].indices, b[s].indices);
    EXPECT_TRUE(sameTensor(a[s].at("pair"), b[s].at("pair")));
    EXPECT_TRUE(sameTensor(a[s].at("id"), b[s].at("id")));
  }
  EXPECT_EQ(makeIterator(*d, options, 1).order(), epochOrder(40, 99, 1));
  options.seed = 100;
  EXPECT_NE(epochBatches(makeIterator(*d, options, 1))[0].indices, a[0].indices);
  options.seed = 99;
  EXPECT_NE(epochBatches(makeIterator(*d, options, 2))[0].indices, a[0].indices);
}

TEST(BatchIterator, RequestedFieldsKeysAndShapes) {
  auto d = numbered(6);
  BatchOptions options;
  options.batchSize = 4;
  options.shuffle = false;
  options.fields = {{"x", "features", std::vector<int64_t>{1, 2}}, {"y", "", std::nullopt}};
  BatchIterator it = makeIterator(*d, options);
  Batch first = *it.next();
  EXPECT_EQ(first.tensors.size(), 2u);
  EXPECT_EQ(first.at("features").shape(), (std::vector<int64_t>{4, 1, 2}));
  EXPECT_EQ(first.at("features").data<float>()[6], 3.0f);
  EXPECT_EQ(first.at("y").data<int32_t>()[3], 3);
  Batch last = *it.next();
  EXPECT_EQ(last.size(), 2);
  EXPECT_FALSE(it.next().has_value());
}

TEST(BatchIterator, Errors) {
  auto d = numbered(6);
  auto error = [&](BatchOptions options) {
    auto it = BatchIterator::create(*d, std::move(options));
    if (it) {
      ADD_FAILURE() << "created";
      return std::string();
    }
    return llvm::toString(it.takeError());
  };
  BatchOptions options;
  options.batchSize = 0;
  EXPECT_EQ(error(options), "error: batch size 0 must be at least 1");
  options.batchSize = 2;
  options.rank = 2;
  options.numShards = 2;
  EXPECT_EQ(error(options), "error: shard 2 of 2: need 0 <= rank < numShards");
  options.rank = 0;
  options.fields = {{"image", "", std::nullopt}};
  EXPECT_EQ(error(options), "error: numbered has no field 'image' (it has id, pair)");
  options.fields = {{"pair", "", std::vector<int64_t>{3}}};
  EXPECT_NE(error(options).find("has shape [2] per example, which cannot be read as [3]"),
            std::string::npos);
  options.fields = {{"pair", "k", std::nullopt}, {"id", "k", std::nullopt}};
  EXPECT_EQ(error(options), "error: batch key 'k' is requested twice");
  EXPECT_FALSE(bool(makeIterator(*d, BatchOptions{}).shard(-1, 2)));
}

TEST(BatchIterator, ShardsConcatenateToTheGlobalBatch) {
  auto d = numbered(23);
  for (int64_t batchSize : {1, 2, 5, 7, 8, 23, 30}) {
    for (int64_t numShards : {1, 2, 3, 4}) {
      BatchOptions options;
      options.batchSize = batchSize;
      options.seed = 17;
      BatchIterator global = makeIterator(*d, options, 4);
      std::vector<BatchIterator> shards;
      for (int64_t r = 0; r < numShards; ++r) {
        auto shard = global.shard(r, numShards);
        ASSERT_TRUE(bool(shard)) << llvm::toString(shard.takeError());
        EXPECT_EQ(shard->numBatches(), global.numBatches());
        shards.push_back(std::move(*shard));
      }
      int64_t steps = 0;
      while (auto whole = global.next()) {
        std::vector<Batch> parts;
        int64_t smallest = whole->size(), largest = 0, offset = 0;
        for (BatchIterator &shard : shards) {
          auto part = shard.next();
          ASSERT_TRUE(part.has_value());
          EXPECT_EQ(part->step, whole->step);
          EXPECT_EQ(part->globalSize, whole->size());
          EXPECT_EQ(part->offset, offset);
          offset += part->size();
          smallest = std::min(smallest, part->size());
          largest = std::max(largest, part->size());
          EXPECT_EQ(part->at("pair").shape(), (std::vector<int64_t>{part->size(), 2}));
          parts.push_back(std::move(*part));
        }
        SCOPED_TRACE("batch " + std::to_string(batchSize) + ", shards " +
                     std::to_string(numShards) + ", step " + std::to_string(whole->step));
        EXPECT_LE(largest - smallest, 1);
        std::vector<int64_t> indices;
        for (const Batch &part : parts)
          indices.insert(indices.end(), part.indices.begin(), part.indices.end());
        EXPECT_EQ(indices, whole->indices);
        for (const char *key : {"id", "pair"})
          EXPECT_EQ(concatenatedBytes(parts, key),
                    std::string(static_cast<const char *>(whole->at(key).raw()),
                                whole->at(key).numBytes()))
              << key;
        ++steps;
      }
      EXPECT_EQ(steps, global.numBatches());
      for (BatchIterator &shard : shards)
        EXPECT_FALSE(shard.next().has_value());
    }
  }
}

TEST(BatchIterator, RealFashionMnistEpoch) {
  if (!llvm::sys::fs::exists(std::string(kFashionMnistDefaultDir) + "/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  auto d = loadFashionMnist(kFashionMnistDefaultDir, Split::Test);
  ASSERT_TRUE(bool(d)) << llvm::toString(d.takeError());
  std::vector<InputSlot> inputs = {{"x", ir::TensorType(ir::DType::F32, {ir::kBatchDim, 784})},
                                   {"y", ir::TensorType(ir::DType::I32, {ir::kBatchDim})}};
  auto requests = requestsForInputs(**d, inputs);
  ASSERT_TRUE(bool(requests)) << llvm::toString(requests.takeError());
  BatchOptions options;
  options.batchSize = 512;
  options.seed = 1;
  options.fields = *requests;
  BatchIterator it = makeIterator(**d, options);
  EXPECT_EQ(it.numBatches(), 20);
  std::vector<int> perClass(10, 0);
  int64_t examples = 0;
  while (auto batch = it.next()) {
    EXPECT_EQ(batch->at("x").shape(), (std::vector<int64_t>{batch->size(), 784}));
    for (int64_t row = 0; row < batch->size(); ++row) {
      int32_t label = batch->at("y").data<int32_t>()[row];
      EXPECT_EQ(label, (*d)->label(batch->indices[row]));
      ++perClass[label];
    }
    examples += batch->size();
  }
  EXPECT_EQ(examples, 10000);
  for (int c = 0; c < 10; ++c)
    EXPECT_EQ(perClass[c], 1000) << c;
}
