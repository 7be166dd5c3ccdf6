// Combining contributions: the batch-weighted mean, sparse rows concatenated in contributor
// order, dense when any contribution is dense, zero for contributors without a gradient.
#include <gtest/gtest.h>

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
