// Zipf sampling frequencies and the synthetic token data sets.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "runtime/data/Zipf.h"

using namespace prism;
using namespace prism::runtime::data;

namespace {

std::vector<int64_t> sampleCounts(const ZipfSampler &sampler, int64_t draws, uint64_t seed) {
  std::vector<int64_t> counts(static_cast<size_t>(sampler.vocab()), 0);
  std::mt19937_64 gen(seed);
  for (int64_t i = 0; i < draws; ++i)
    ++counts[sampler.sample(gen)];
  return counts;
}

bool sameTensor(const runtime::Tensor &a, const runtime::Tensor &b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw(), b.raw(), a.numBytes()) == 0;
}

} // namespace

TEST(Zipf, ProbabilitiesFollowThePowerLaw) {
  ZipfSampler sampler(1000, 1.1);
  double total = 0;
  for (int64_t id = 0; id < sampler.vocab(); ++id) {
    total += sampler.probability(id);
    if (id > 0) {
      EXPECT_LT(sampler.probability(id), sampler.probability(id - 1));
    }
  }
  EXPECT_NEAR(total, 1.0, 1e-12);
  EXPECT_NEAR(sampler.probability(0) / sampler.probability(1), std::pow(2.0, 1.1), 1e-9);
  EXPECT_NEAR(sampler.probability(0) / sampler.probability(9), std::pow(10.0, 1.1), 1e-9);
}

TEST(Zipf, SampledFrequencies) {
  ZipfSampler sampler(1000, 1.1);
  std::vector<int64_t> counts = sampleCounts(sampler, 1000000, 42);
  // Rank 1 (id 0) is the most frequent.
  EXPECT_EQ(std::max_element(counts.begin(), counts.end()) - counts.begin(), 0);
  for (int id = 1; id < 8; ++id)
    EXPECT_GT(counts[id - 1], counts[id]) << id;
  // count(rank 1) / count(rank 2) ~ 2^s; with ~180,000 and ~84,000 draws the ratio's standard
  // deviation is about 0.4%.
  double ratio = static_cast<double>(counts[0]) / static_cast<double>(counts[1]);
  EXPECT_NEAR(ratio, std::pow(2.0, 1.1), 0.03 * std::pow(2.0, 1.1));
  EXPECT_NEAR(static_cast<double>(counts[0]) / 1e6, sampler.probability(0), 0.005);
  // Every draw is a valid id; the tail is reached.
  int64_t sum = 0;
  for (int64_t c : counts)
    sum += c;
  EXPECT_EQ(sum, 1000000);
  EXPECT_GT(counts[999], 0);
}

TEST(Zipf, ExponentZeroIsUniform) {
  ZipfSampler sampler(4, 0.0);
  for (int id = 0; id < 4; ++id)
    EXPECT_DOUBLE_EQ(sampler.probability(id), 0.25);
  std::vector<int64_t> counts = sampleCounts(sampler, 400000, 7);
  for (int id = 0; id < 4; ++id)
    EXPECT_NEAR(counts[id], 100000, 1500) << id;
}

TEST(Zipf, ClassifierAndLanguageModelFields) {
  ZipfOptions options;
  options.vocab = 500;
  options.tokens = 8;
  options.classes = 5;
  options.examples = 600;
  auto d = makeZipfDataset(options, Split::Train, 11);
  ASSERT_TRUE(bool(d)) << llvm::toString(d.takeError());
  TensorDataset &train = **d;
  EXPECT_EQ(train.size(), 600);
  EXPECT_EQ(train.description(), "zipf train");
  ASSERT_EQ(train.fields().size(), 3u);
  const runtime::Tensor &tokens = train.values(*train.findField("tokens"));
  const runtime::Tensor &targets = train.values(*train.findField("targets"));
  const runtime::Tensor &labels = train.values(*train.findField("y"));
  EXPECT_EQ(tokens.shape(), (std::vector<int64_t>{600, 8}));
  EXPECT_EQ(targets.shape(), (std::vector<int64_t>{600, 8}));
  EXPECT_EQ(labels.shape(), (std::vector<int64_t>{600}));
  EXPECT_EQ(tokens.dtype(), ir::DType::I32);

  const int32_t *tok = tokens.data<int32_t>();
  const int32_t *tgt = targets.data<int32_t>();
  ZipfVotes votes = zipfVotes(options, 11);
  std::vector<int> perClass(5, 0);
  for (int64_t i = 0; i < 600; ++i) {
    for (int64_t j = 0; j < 8; ++j) {
      EXPECT_GE(tok[i * 8 + j], 0);
      EXPECT_LT(tok[i * 8 + j], 500);
      // Targets are the stream one token further on, across example boundaries too.
      if (j + 1 < 8) {
        EXPECT_EQ(tgt[i * 8 + j], tok[i * 8 + j + 1]);
      } else if (i + 1 < 600) {
        EXPECT_EQ(tgt[i * 8 + j], tok[(i + 1) * 8]);
      }
    }
    int32_t label = labels.data<int32_t>()[i];
    // The label is the class with the largest weight of votes among the tokens.
    std::vector<double> score(5, 0.0);
    for (int64_t j = 0; j < 8; ++j)
      score[votes.classOf[tok[i * 8 + j]]] += votes.weight[tok[i * 8 + j]];
    for (int c = 0; c < 5; ++c)
      EXPECT_LE(score[c], score[label]) << i;
    ++perClass[label];
  }
  for (int c = 0; c < 5; ++c)
    EXPECT_GT(perClass[c], 20) << "class " << c << " almost never occurs";
}

TEST(Zipf, VotesBalanceClassesByProbabilityMass) {
  ZipfOptions options;
  options.vocab = 10000;
  options.classes = 10;
  ZipfSampler sampler(options.vocab, options.exponent);
  ZipfVotes votes = zipfVotes(options, 3);
  // The most frequent token holds more than 1/C of the mass: it votes for nothing.
  ASSERT_GT(sampler.probability(0), 0.1);
  EXPECT_EQ(votes.classOf[0], kNoClass);
  EXPECT_EQ(votes.weight[0], 0.0f);
  EXPECT_NE(votes.classOf[1], kNoClass);
  std::vector<double> mass(10, 0.0);
  for (int64_t id = 1; id < options.vocab; ++id) {
    ASSERT_GE(votes.classOf[id], 0);
    ASSERT_LT(votes.classOf[id], 10);
    EXPECT_GE(votes.weight[id], 1.0f);
    EXPECT_LT(votes.weight[id], 1.0f + 1.0f / 21);
    mass[votes.classOf[id]] += sampler.probability(id);
  }
  // Every class gets close to an equal share of the voting mass.
  std::sort(mass.begin(), mass.end());
  EXPECT_LT(mass[9] - mass[0], 0.001);
  EXPECT_NEAR(mass[0] * 10, 1.0 - sampler.probability(0), 0.01);

  // Labels are spread over the classes: none below 4% or above 16% of the examples.
  options.examples = 20000;
  auto d = makeZipfDataset(options, Split::Train, 3);
  ASSERT_TRUE(bool(d)) << llvm::toString(d.takeError());
  std::vector<int> perClass(10, 0);
  for (int64_t i = 0; i < (*d)->size(); ++i)
    ++perClass[(*d)->values(2).data<int32_t>()[i]];
  for (int c = 0; c < 10; ++c) {
    EXPECT_GT(perClass[c], 800) << c;
    EXPECT_LT(perClass[c], 3200) << c;
  }
}

TEST(Zipf, SeededAndSplitsDiffer) {
  ZipfOptions options;
  options.vocab = 100;
  options.examples = 60;
  auto a = makeZipfDataset(options, Split::Train, 5);
  auto b = makeZipfDataset(options, Split::Train, 5);
  auto c = makeZipfDataset(options, Split::Train, 6);
  auto test = makeZipfDataset(options, Split::Test, 5);
  ASSERT_TRUE(a && b && c && test);
  for (size_t f = 0; f < 3; ++f)
    EXPECT_TRUE(sameTensor((*a)->values(f), (*b)->values(f))) << f;
  EXPECT_FALSE(sameTensor((*a)->values(0), (*c)->values(0)));
  EXPECT_EQ((*test)->size(), 10);
  EXPECT_EQ((*test)->description(), "zipf test");
  EXPECT_NE(
      std::memcmp((*test)->values(0).raw(), (*a)->values(0).raw(), (*test)->values(0).numBytes()),
      0);
  // Both splits share the votes (the same task); another seed makes another task.
  ZipfVotes votes = zipfVotes(options, 5);
  EXPECT_EQ(votes.classOf, zipfVotes(options, 5).classOf);
  EXPECT_EQ(votes.weight, zipfVotes(options, 5).weight);
  EXPECT_NE(votes.weight, zipfVotes(options, 6).weight);
}

TEST(Zipf, RejectsBadOptions) {
  auto expectError = [](ZipfOptions o, const std::string &text) {
    auto d = makeZipfDataset(o, Split::Train, 0);
    ASSERT_FALSE(bool(d));
    std::string error = llvm::toString(d.takeError());
    EXPECT_NE(error.find(text), std::string::npos) << error;
  };
  ZipfOptions o;
  o.vocab = 0;
  expectError(o, "vocabulary size 0 is out of range");
  o.vocab = 10;
  o.classes = 0;
  expectError(o, "class count 0 is out of range [1, 65536]");
  o.classes = 2;
  o.tokens = 1 << 20;
  o.examples = 1 << 20;
  expectError(o, "their product at most 2^28");
  o.tokens = 4;
  o.examples = 4;
  o.exponent = -1;
  expectError(o, "must be finite and not negative");
}
