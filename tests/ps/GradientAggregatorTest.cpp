// Combining contributions: the batch-weighted mean, sparse rows concatenated in contributor
// order, dense when any contribution is dense, zero for contributors without a gradient.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "runtime/ps/GradientAggregator.h"

using namespace prism::runtime;
using namespace prism::runtime::ps;
using prism::ir::DType;

namespace {

const PsShard kShard{"emb", DType::F32, 2, 5, {6, 2}}; // rows [2, 5) of f32[6, 2]

Tensor floats(std::vector<int64_t> shape, std::vector<float> values) {
  Tensor t(DType::F32, std::move(shape));
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

Tensor localRows(std::vector<int64_t> rows) {
  Tensor t(DType::I64, {static_cast<int64_t>(rows.size())});
  std::copy(rows.begin(), rows.end(), t.data<int64_t>());
  return t;
}

ShardGradient sparse(std::vector<int64_t> rows, std::vector<float> values) {
  int64_t n = static_cast<int64_t>(rows.size());
  return {Tensor(), localRows(std::move(rows)), floats({n, 2}, std::move(values))};
}

} // namespace

TEST(GradientAggregator, SparseRowsAreConcatenatedInContributorOrderAndScaled) {
  std::vector<Contribution> contributions(3);
  contributions[0] = {1, {{"emb", sparse({2, 0}, {1, 2, 3, 4})}}};
  contributions[1] = {2, {}}; // nothing for emb: a zero gradient, but its weight counts
  contributions[2] = {1, {{"emb", sparse({2}, {8, 8})}}};
  auto result = aggregateGradients({kShard}, contributions);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  const ShardGradient &g = result->at("emb");
  ASSERT_TRUE(g.isSparse());
  ASSERT_EQ(g.indices.numElements(), 3);
  EXPECT_EQ(g.indices.data<int64_t>()[0], 2);
  EXPECT_EQ(g.indices.data<int64_t>()[1], 0);
  EXPECT_EQ(g.indices.data<int64_t>()[2], 2);
  EXPECT_EQ(g.rows.shape(), (std::vector<int64_t>{3, 2}));
  std::vector<float> expected = {0.25f, 0.5f, 0.75f, 1.0f, 2.0f, 2.0f};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(g.rows.data<float>()[i], expected[i]);
}

TEST(GradientAggregator, AnyDenseContributionMakesTheResultDense) {
  std::vector<Contribution> contributions(2);
  contributions[0] = {3, {{"emb", {floats({3, 2}, {4, 4, 4, 4, 4, 4}), Tensor(), Tensor()}}}};
  contributions[1] = {1, {{"emb", sparse({1, 1}, {4, 0, 4, 8})}}};
  auto result = aggregateGradients({kShard}, contributions);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  const ShardGradient &g = result->at("emb");
  ASSERT_FALSE(g.isSparse());
  std::vector<float> expected = {3, 3, 5, 5, 3, 3}; // 3/4 * 4 + 1/4 * (4 + 4, 0 + 8) in row 1
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(g.dense.data<float>()[i], expected[i]);
}

TEST(GradientAggregator, ShardsWithoutGradientsAreLeftOut) {
  std::vector<Contribution> contributions = {{1, {}}};
  auto result = aggregateGradients({kShard}, contributions);
  ASSERT_TRUE(bool(result));
  EXPECT_TRUE(result->empty());
  contributions[0].weight = 0;
  EXPECT_FALSE(bool(aggregateGradients({kShard}, contributions)));
}

TEST(CoalesceRows, RepeatedIdsAddUpInFloat64InFirstAppearanceOrder) {
  // Id 7's first column, 1e8 + 1 - 1e8, is 1 in float64 and 0 if rounded to float on the way.
  ShardGradient out = coalesceRows(localRows({7, 3, 7, 7, 0}),
                                   floats({5, 2}, {1e8f, 1, 2, 3, 1, 2, -1e8f, 4, 5, 6}));
  ASSERT_EQ(out.indices.numElements(), 3);
  EXPECT_EQ(out.indices.data<int64_t>()[0], 7);
  EXPECT_EQ(out.indices.data<int64_t>()[1], 3);
  EXPECT_EQ(out.indices.data<int64_t>()[2], 0);
  ASSERT_EQ(out.rows.shape(), (std::vector<int64_t>{3, 2}));
  const std::vector<float> expected{1, 7, 2, 3, 5, 6};
  EXPECT_EQ(std::vector<float>(out.rows.data<float>(), out.rows.data<float>() + 6), expected);
}

// A step's worth of ids, many repeated and many sharing hash buckets (multiples of a power of
// two), in float64 rows of 3 x 2: each id once, in first-appearance order, its rows' sum.
TEST(CoalesceRows, ThousandsOfIdsMatchASumById) {
  std::mt19937_64 gen(5);
  const int64_t n = 5000, rowElements = 6;
  Tensor ids(DType::I64, {n});
  Tensor rows(DType::F64, {n, 3, 2});
  std::vector<int64_t> order;
  std::map<int64_t, std::vector<double>> sums;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = static_cast<int64_t>(gen() % 1500) * (i % 2 ? 1024 : 1);
    ids.data<int64_t>()[i] = id;
    auto [it, added] = sums.emplace(id, std::vector<double>(rowElements, 0.0));
    if (added)
      order.push_back(id);
    for (int64_t k = 0; k < rowElements; ++k) {
      const double value = static_cast<double>(gen() % 1000) / 8;
      rows.data<double>()[i * rowElements + k] = value;
      it->second[static_cast<size_t>(k)] += value;
    }
  }
  ShardGradient out = coalesceRows(ids, rows);
  ASSERT_EQ(out.indices.numElements(), static_cast<int64_t>(order.size()));
  ASSERT_EQ(out.rows.shape(), (std::vector<int64_t>{out.indices.numElements(), 3, 2}));
  for (size_t s = 0; s < order.size(); ++s) {
    ASSERT_EQ(out.indices.data<int64_t>()[s], order[s]) << "slot " << s;
    for (int64_t k = 0; k < rowElements; ++k)
      EXPECT_EQ(out.rows.data<double>()[static_cast<int64_t>(s) * rowElements + k],
                sums[order[s]][static_cast<size_t>(k)])
          << "id " << order[s];
  }
}

TEST(CoalesceRows, NoRowsGiveNoRows) {
  ShardGradient out = coalesceRows(localRows({}), floats({0, 2}, {}));
  EXPECT_EQ(out.indices.numElements(), 0);
  EXPECT_EQ(out.rows.shape(), (std::vector<int64_t>{0, 2}));
}
