// Zipf sampling by inverse CDF, and the synthetic token data sets built on it.
#include "runtime/data/Zipf.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <queue>

#include "ir/Diagnostic.h"
#include "runtime/data/Random.h"

namespace prism::runtime::data {

ZipfSampler::ZipfSampler(int64_t vocab, double exponent) : cdf_(static_cast<size_t>(vocab)) {
  double total = 0;
  for (int64_t r = 1; r <= vocab; ++r) {
    total += std::pow(static_cast<double>(r), -exponent);
    cdf_[r - 1] = total;
  }
  for (double &c : cdf_)
    c /= total;
  // Rounding must not leave a sliver above the last entry that no rank covers.
  if (!cdf_.empty())
    cdf_.back() = 1.0;
}

double ZipfSampler::probability(int64_t id) const {
  return id == 0 ? cdf_[0] : cdf_[id] - cdf_[id - 1];
}

int64_t ZipfSampler::sample(std::mt19937_64 &gen) const {
  double u = unitUniform(gen);
  return std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin();
}

llvm::Error checkZipfOptions(const ZipfOptions &o) {
  if (o.vocab < 1 || o.vocab > kZipfMaxVocab)
    return ir::makeError("zipf: vocabulary size " + llvm::Twine(o.vocab) +
                         " is out of range [1, 2^26]");
  if (o.classes < 1 || o.classes > kZipfMaxClasses)
    return ir::makeError("zipf: class count " + llvm::Twine(o.classes) +
                         " is out of range [1, 65536]");
  if (o.tokens < 1 || o.examples < 1 || o.tokens > kZipfMaxTokens / o.examples)
    return ir::makeError("zipf: " + llvm::Twine(o.examples) + " examples of " +
                         llvm::Twine(o.tokens) +
                         " tokens: both must be at least 1, their product at most 2^28");
  if (!std::isfinite(o.exponent) || o.exponent < 0)
    return ir::makeError("zipf: exponent " + std::to_string(o.exponent) +
                         " must be finite and not negative");
  return llvm::Error::success();
}

ZipfVotes zipfVotes(const ZipfOptions &options, uint64_t seed) {
  ZipfSampler sampler(options.vocab, options.exponent);
  auto classes = static_cast<size_t>(options.classes);
  ZipfVotes votes;
  votes.classOf.assign(static_cast<size_t>(options.vocab), kNoClass);
  votes.weight.assign(static_cast<size_t>(options.vocab), 0.0f);

  // A token holding more than 1/C of the mass still to share out would outweigh a whole class
  // on its own, so it votes for nothing.
  int64_t firstVoter = 0;
  double unshared = 1.0;
  for (; firstVoter < options.vocab; ++firstVoter) {
    double p = sampler.probability(firstVoter);
    if (p * static_cast<double>(classes) <= unshared)
      break;
    unshared -= p;
  }
  // Least-loaded first: (mass so far, class), smallest on top.
  using Load = std::pair<double, int32_t>;
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> loads;
  for (size_t c = 0; c < classes; ++c)
    loads.push({0.0, static_cast<int32_t>(c)});
  for (int64_t id = firstVoter; id < options.vocab; ++id) {
    Load least = loads.top();
    loads.pop();
    votes.classOf[id] = least.second;
    loads.push({least.first + sampler.probability(id), least.second});
  }

  std::mt19937_64 gen(streamSeed(seed, "zipf/votes"));
  std::vector<int32_t> rename(classes);
  std::iota(rename.begin(), rename.end(), 0);
  for (size_t i = classes - 1; i > 0; --i)
    std::swap(rename[i], rename[uniformBelow(gen, i + 1)]);
  // Weights below 1 + 1/T: a class with more votes always wins, weights only settle ties.
  double spread = 1.0 / static_cast<double>(options.tokens + 1);
  for (int64_t id = firstVoter; id < options.vocab; ++id) {
    votes.classOf[id] = rename[votes.classOf[id]];
    votes.weight[id] = static_cast<float>(1.0 + spread * unitUniform(gen));
  }
  return votes;
}

int32_t zipfLabel(llvm::ArrayRef<int32_t> tokens, const ZipfVotes &votes, int64_t classes) {
  std::vector<double> score(static_cast<size_t>(classes), 0.0);
  for (int32_t token : tokens)
    if (votes.classOf[token] != kNoClass)
      score[votes.classOf[token]] += votes.weight[token];
  return static_cast<int32_t>(std::max_element(score.begin(), score.end()) - score.begin());
}

llvm::Expected<std::unique_ptr<TensorDataset>> makeZipfDataset(const ZipfOptions &options,
                                                               Split split, uint64_t seed) {
  if (auto err = checkZipfOptions(options))
    return std::move(err);
  int64_t n = split == Split::Train ? options.examples : std::max<int64_t>(1, options.examples / 6);
  int64_t t = options.tokens;
  ZipfSampler sampler(options.vocab, options.exponent);
  std::mt19937_64 gen(streamSeed(seed, ("zipf/" + splitName(split)).str()));
  std::vector<int32_t> stream(static_cast<size_t>(n * t + 1));
  for (int32_t &token : stream)
    token = static_cast<int32_t>(sampler.sample(gen));

  ZipfVotes votes = zipfVotes(options, seed);
  Tensor tokens(ir::DType::I32, {n, t});
  Tensor targets(ir::DType::I32, {n, t});
  Tensor labels(ir::DType::I32, {n});
  for (int64_t i = 0; i < n; ++i) {
    const int32_t *window = stream.data() + i * t;
    std::copy(window, window + t, tokens.data<int32_t>() + i * t);
    std::copy(window + 1, window + t + 1, targets.data<int32_t>() + i * t);
    labels.data<int32_t>()[i] =
        zipfLabel(llvm::ArrayRef<int32_t>(window, static_cast<size_t>(t)), votes, options.classes);
  }
  auto dataset = std::make_unique<TensorDataset>("zipf " + splitName(split).str());
  if (auto err = dataset->addField({"tokens", {"x"}, ir::DType::I32, {t}, {}}, std::move(tokens)))
    return std::move(err);
  if (auto err = dataset->addField({"targets", {}, ir::DType::I32, {t}, {}}, std::move(targets)))
    return std::move(err);
  if (auto err = dataset->addField({"label", {"y"}, ir::DType::I32, {}, {}}, std::move(labels)))
    return std::move(err);
  return std::move(dataset);
}

} // namespace prism::runtime::data
