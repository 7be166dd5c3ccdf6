// A plain-text corpus as language-model data: words, a vocabulary by frequency, and sequences of
// T token ids with next-token targets.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/Dataset.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::data {

// Words outside the vocabulary, and the word `<unk>` itself when a text contains it.
constexpr int32_t kUnknownId = 0;
constexpr const char *kUnknownWord = "<unk>";

// Splits on ASCII whitespace and lowercases ASCII letters; other bytes (UTF-8) are kept as is.
std::vector<std::string> tokenizeText(llvm::StringRef text);

// Word <-> id. Id 0 is `<unk>`; ids 1, 2, ... go to words by falling frequency, ties in byte
// order of the words, up to a size limit that counts `<unk>`.
class Vocabulary {
public:
  // The `maxSize - 1` most frequent words of `words` (maxSize >= 1), `<unk>` not counted.
  static Vocabulary build(llvm::ArrayRef<std::string> words, int64_t maxSize);

  int64_t size() const { return static_cast<int64_t>(words_.size()); }
  // The id of `word`, kUnknownId when it is not in the vocabulary.
  int32_t id(llvm::StringRef word) const;
  llvm::StringRef word(int32_t id) const { return words_[id]; }
  // How often the word occurred in the text it was built from; for `<unk>`, how many occurrences
  // map to it.
  int64_t count(int32_t id) const { return counts_[id]; }

private:
  std::vector<std::string> words_;
  std::vector<int64_t> counts_;
  llvm::StringMap<int32_t> ids_;
};

struct TextOptions {
  int64_t tokens = 20;   // T: tokens per sequence
  int64_t vocab = 10000; // vocabulary size limit, `<unk>` included
};

// Sequences of a text file. The file's W words make S = (W - 1) / T sequences: sequence i is the
// words [i T, i T + T), its targets the words one further on. The last max(1, S / 10) sequences
// are the test split (none when S < 2), the others the train split; the vocabulary is built from
// the words the train split reads (tokens and targets). Fields:
//   tokens  i32[T]  (alias x)
//   targets i32[T]  (alias y)
class TextDataset : public TensorDataset {
public:
  TextDataset(std::string description, Vocabulary vocabulary)
      : TensorDataset(std::move(description)), vocabulary_(std::move(vocabulary)) {}
  const Vocabulary &vocabulary() const { return vocabulary_; }

private:
  Vocabulary vocabulary_;
};

// The sequences of `words` (already tokenized) for one split; `source` names them in messages.
llvm::Expected<std::unique_ptr<TextDataset>> makeTextDataset(llvm::ArrayRef<std::string> words,
                                                             const TextOptions &options,
                                                             Split split, llvm::StringRef source);
// Reads and tokenizes a text file, then makeTextDataset.
llvm::Expected<std::unique_ptr<TextDataset>>
loadTextCorpus(llvm::StringRef path, const TextOptions &options, Split split);

} // namespace prism::runtime::data
