// Synthetic token data with Zipf-distributed tokens, for the embedding classifier (tokens and a
// label the tokens decide) and the language model (tokens and next-token targets).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "runtime/data/Dataset.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::data {

// Draws token ids in [0, V): id r - 1 (rank r) with probability proportional to 1 / r^s. A draw
// is one uniform double u in [0, 1) (unitUniform) and a binary search for the first rank whose
// cumulative probability exceeds u.
class ZipfSampler {
public:
  ZipfSampler(int64_t vocab, double exponent);

  int64_t vocab() const { return static_cast<int64_t>(cdf_.size()); }
  double probability(int64_t id) const;
  int64_t sample(std::mt19937_64 &gen) const;

private:
  std::vector<double> cdf_; // cdf_[i]: probability of an id <= i; the last is exactly 1
};

struct ZipfOptions {
  int64_t vocab = 0;
  int64_t tokens = 20;      // T: tokens per example
  int64_t classes = 10;     // C: label values
  double exponent = 1.1;    // s
  int64_t examples = 60000; // train examples; the test split has examples / 6 (at least 1)
};

// Bounds that keep a synthetic data set in memory: the CDF holds a double per token id, the
// train split N * T tokens in each of two fields.
constexpr int64_t kZipfMaxVocab = int64_t(1) << 26;
constexpr int64_t kZipfMaxTokens = int64_t(1) << 28;
constexpr int64_t kZipfMaxClasses = 65536;

// Checks the ranges: vocab in [1, 2^26], classes in [1, 65536], tokens and examples at least 1 with
// examples * tokens at most 2^28, exponent finite and >= 0.
llvm::Error checkZipfOptions(const ZipfOptions &options);

// What each token says about the label: a class and a weight, or nothing. The most frequent
// tokens, as long as one alone holds more than 1/C of the probability mass of itself and all
// rarer tokens, are neutral (like stop words): classOf kNoClass, weight 0. The others are balanced
// by mass so that every class is about equally likely as a label: in rank order each goes to the
// class with the least mass so far (ties to the smallest class). Then, from the stream
// "zipf/votes" of the seed, the classes are renamed by a permutation (Fisher-Yates with
// uniformBelow) and each voting token, in id order, gets the weight 1 + unitUniform / (T + 1).
// The same for both splits.
constexpr int32_t kNoClass = -1;
struct ZipfVotes {
  std::vector<int32_t> classOf;
  std::vector<float> weight;
};
ZipfVotes zipfVotes(const ZipfOptions &options, uint64_t seed);
// The label of a token sequence: the class with the largest sum of weights over the tokens that
// vote for it (summed in double, in token order), the smallest class on a tie; so the class with
// the most votes, the weights settling ties. A bag-of-embeddings model can represent it exactly.
int32_t zipfLabel(llvm::ArrayRef<int32_t> tokens, const ZipfVotes &votes, int64_t classes);

// One split: a stream of N * T + 1 tokens from the stream "zipf/train" or "zipf/test" of `seed`;
// example i is the window [i T, i T + T). Fields:
//   tokens  i32[T]  (alias x)
//   targets i32[T]  the next token of each position: stream[i T + 1, i T + T + 1)
//   label   i32[]   (alias y) zipfLabel of the tokens
llvm::Expected<std::unique_ptr<TensorDataset>> makeZipfDataset(const ZipfOptions &options,
                                                               Split split, uint64_t seed);

} // namespace prism::runtime::data
