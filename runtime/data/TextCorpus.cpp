// Tokenizing plain text, building the vocabulary, cutting the word stream into sequences.
#include "runtime/data/TextCorpus.h"

#include <algorithm>

#include "ir/Diagnostic.h"
#include "llvm/Support/MemoryBuffer.h"

namespace prism::runtime::data {

namespace {

bool isAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

char asciiLower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

} // namespace

std::vector<std::string> tokenizeText(llvm::StringRef text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && isAsciiSpace(text[i]))
      ++i;
    size_t start = i;
    while (i < text.size() && !isAsciiSpace(text[i]))
      ++i;
    if (i > start) {
      std::string word = text.substr(start, i - start).str();
      std::transform(word.begin(), word.end(), word.begin(), asciiLower);
      words.push_back(std::move(word));
    }
  }
  return words;
}

Vocabulary Vocabulary::build(llvm::ArrayRef<std::string> words, int64_t maxSize) {
  llvm::StringMap<int64_t> frequency;
  int64_t unknown = 0;
  for (const std::string &w : words) {
    if (w == kUnknownWord)
      ++unknown;
    else
      ++frequency[w];
  }
  std::vector<std::pair<llvm::StringRef, int64_t>> ranked;
  ranked.reserve(frequency.size());
  for (const auto &entry : frequency)
    ranked.emplace_back(entry.getKey(), entry.getValue());
  std::sort(ranked.begin(), ranked.end(), [](const auto &a, const auto &b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });

  Vocabulary vocab;
  vocab.words_.push_back(kUnknownWord);
  vocab.counts_.push_back(unknown);
  for (size_t i = 0; i < ranked.size(); ++i) {
    if (static_cast<int64_t>(vocab.words_.size()) < maxSize) {
      vocab.ids_[ranked[i].first] = static_cast<int32_t>(vocab.words_.size());
      vocab.words_.push_back(ranked[i].first.str());
      vocab.counts_.push_back(ranked[i].second);
    } else {
      vocab.counts_[kUnknownId] += ranked[i].second;
    }
  }
  return vocab;
}

int32_t Vocabulary::id(llvm::StringRef word) const {
  auto it = ids_.find(word);
  return it == ids_.end() ? kUnknownId : it->second;
}

llvm::Expected<std::unique_ptr<TextDataset>> makeTextDataset(llvm::ArrayRef<std::string> words,
                                                             const TextOptions &options,
                                                             Split split, llvm::StringRef source) {
  int64_t t = options.tokens;
  if (t < 1 || t >= (int64_t(1) << 31))
    return ir::makeError(source, ir::SourceLoc{},
                         "sequence length " + llvm::Twine(t) + " is out of range [1, 2^31)");
  if (options.vocab < 1 || options.vocab >= (int64_t(1) << 31))
    return ir::makeError(source, ir::SourceLoc{},
                         "vocabulary size " + llvm::Twine(options.vocab) +
                             " is out of range [1, 2^31)");
  int64_t numWords = static_cast<int64_t>(words.size());
  int64_t sequences = numWords > 0 ? (numWords - 1) / t : 0;
  if (sequences < 1)
    return ir::makeError(source, ir::SourceLoc{},
                         llvm::Twine(numWords) + " words make no sequence: one sequence of " +
                             llvm::Twine(t) + " tokens needs " + llvm::Twine(t + 1) + " words");
  int64_t testSequences = sequences >= 2 ? std::max<int64_t>(1, sequences / 10) : 0;
  int64_t trainSequences = sequences - testSequences;
  if (split == Split::Test && testSequences == 0)
    return ir::makeError(source, ir::SourceLoc{},
                         llvm::Twine(numWords) + " words make one sequence of " + llvm::Twine(t) +
                             " tokens; a test split needs at least two");

  Vocabulary vocab = Vocabulary::build(
      words.take_front(static_cast<size_t>(trainSequences * t + 1)), options.vocab);
  int64_t first = split == Split::Train ? 0 : trainSequences;
  int64_t n = split == Split::Train ? trainSequences : testSequences;
  Tensor tokens(ir::DType::I32, {n, t});
  Tensor targets(ir::DType::I32, {n, t});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < t; ++j) {
      size_t position = static_cast<size_t>((first + i) * t + j);
      tokens.data<int32_t>()[i * t + j] = vocab.id(words[position]);
      targets.data<int32_t>()[i * t + j] = vocab.id(words[position + 1]);
    }
  auto dataset = std::make_unique<TextDataset>(
      ("text " + llvm::Twine(source) + " " + splitName(split)).str(), std::move(vocab));
  if (auto err = dataset->addField({"tokens", {"x"}, ir::DType::I32, {t}, {}}, std::move(tokens)))
    return std::move(err);
  if (auto err = dataset->addField({"targets", {"y"}, ir::DType::I32, {t}, {}}, std::move(targets)))
    return std::move(err);
  return std::move(dataset);
}

llvm::Expected<std::unique_ptr<TextDataset>>
loadTextCorpus(llvm::StringRef path, const TextOptions &options, Split split) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return ir::makeError(path, ir::SourceLoc{},
                         "cannot read text corpus: " + buffer.getError().message());
  std::vector<std::string> words = tokenizeText((*buffer)->getBuffer());
  return makeTextDataset(words, options, split, path);
}

} // namespace prism::runtime::data
