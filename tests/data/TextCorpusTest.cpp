// Plain-text corpora: tokenizing, the vocabulary's order and <unk>, sequences and splits.
#include <string>

#include <gtest/gtest.h>

#include "runtime/data/TextCorpus.h"
#include "tests/data/ScratchDir.h"

using namespace prism;
using namespace prism::runtime::data;
using prism::runtime::data::testing::ScratchDir;

TEST(TextCorpus, TokenizesOnWhitespaceAndLowercases) {
  EXPECT_EQ(tokenizeText("  Hello  World\tfoo\nBAR\r\n\v\fIt's "),
            (std::vector<std::string>{"hello", "world", "foo", "bar", "it's"}));
  // Bytes outside ASCII pass through: only A-Z are lowercased.
  EXPECT_EQ(tokenizeText("\xC3\x84"
                         "BC"),
            (std::vector<std::string>{"\xC3\x84"
                                      "bc"}));
  EXPECT_TRUE(tokenizeText(" \n\t ").empty());
}

TEST(TextCorpus, VocabularyByFrequencyThenAlphabet) {
  std::vector<std::string> words = tokenizeText("b a c a b a d <unk> e c");
  Vocabulary vocab = Vocabulary::build(words, 4);
  ASSERT_EQ(vocab.size(), 4);
  EXPECT_EQ(vocab.word(0), "<unk>");
  EXPECT_EQ(vocab.word(1), "a"); // 3 times
  EXPECT_EQ(vocab.word(2), "b"); // 2 times, before c by the alphabet
  EXPECT_EQ(vocab.word(3), "c"); // 2 times
  EXPECT_EQ(vocab.id("a"), 1);
  EXPECT_EQ(vocab.id("c"), 3);
  // Beyond the limit, unseen, and <unk> itself all map to id 0.
  EXPECT_EQ(vocab.id("d"), kUnknownId);
  EXPECT_EQ(vocab.id("e"), kUnknownId);
  EXPECT_EQ(vocab.id("zebra"), kUnknownId);
  EXPECT_EQ(vocab.id("<unk>"), kUnknownId);
  EXPECT_EQ(vocab.count(1), 3);
  EXPECT_EQ(vocab.count(kUnknownId), 3); // d, e and the literal <unk>

  Vocabulary all = Vocabulary::build(words, 100);
  EXPECT_EQ(all.size(), 6); // <unk> a b c d e
  EXPECT_EQ(all.word(4), "d");
  EXPECT_EQ(all.word(5), "e");
  EXPECT_EQ(all.count(kUnknownId), 1);

  Vocabulary tiny = Vocabulary::build(words, 1);
  EXPECT_EQ(tiny.size(), 1);
  EXPECT_EQ(tiny.id("a"), kUnknownId);
}

TEST(TextCorpus, SequencesWithNextTokenTargets) {
  ScratchDir dir;
  // 23 words: with T = 2, (23 - 1) / 2 = 11 sequences: 10 train, 1 test. "zebra" occurs only in
  // the test split's last target.
  std::string text = "The cat sat on the mat . the dog sat on the log .\n"
                     "A cat and a dog sat . The zebra";
  std::string path = dir.write("corpus.txt", text);
  std::vector<std::string> words = tokenizeText(text);
  ASSERT_EQ(words.size(), 23u);
  TextOptions options;
  options.tokens = 2;
  options.vocab = 5;

  auto train = loadTextCorpus(path, options, Split::Train);
  ASSERT_TRUE(bool(train)) << llvm::toString(train.takeError());
  const Vocabulary &vocab = (*train)->vocabulary();
  // Train reads words 0..20: the (4), . and sat (3), then a, cat, dog, on (2): the limit of 5
  // keeps a.
  EXPECT_EQ(vocab.word(1), "the");
  EXPECT_EQ(vocab.word(2), ".");
  EXPECT_EQ(vocab.word(3), "sat");
  EXPECT_EQ(vocab.word(4), "a");
  EXPECT_EQ((*train)->size(), 10);
  const runtime::Tensor &tokens = (*train)->values(0);
  const runtime::Tensor &targets = (*train)->values(1);
  EXPECT_EQ(tokens.shape(), (std::vector<int64_t>{10, 2}));
  for (int64_t i = 0; i < 10; ++i)
    for (int64_t j = 0; j < 2; ++j) {
      EXPECT_EQ(tokens.data<int32_t>()[i * 2 + j], vocab.id(words[i * 2 + j]));
      EXPECT_EQ(targets.data<int32_t>()[i * 2 + j], vocab.id(words[i * 2 + j + 1]));
    }
  EXPECT_EQ(tokens.data<int32_t>()[0], 1); // the
  EXPECT_EQ(tokens.data<int32_t>()[1], 0); // cat: beyond the limit

  auto test = loadTextCorpus(path, options, Split::Test);
  ASSERT_TRUE(bool(test)) << llvm::toString(test.takeError());
  EXPECT_EQ((*test)->size(), 1);
  // Words 20, 21 with targets 21, 22: ". the" -> "the zebra"; zebra, never seen in training, is
  // unknown.
  EXPECT_EQ((*test)->values(0).data<int32_t>()[0], 2);
  EXPECT_EQ((*test)->values(0).data<int32_t>()[1], 1);
  EXPECT_EQ((*test)->values(1).data<int32_t>()[0], 1);
  EXPECT_EQ((*test)->values(1).data<int32_t>()[1], kUnknownId);
  EXPECT_EQ((*test)->vocabulary().word(3), "sat");
}

TEST(TextCorpus, Errors) {
  ScratchDir dir;
  std::string missing = dir.file("missing.txt");
  auto d = loadTextCorpus(missing, TextOptions{}, Split::Train);
  ASSERT_FALSE(bool(d));
  EXPECT_EQ(llvm::toString(d.takeError()).rfind(missing + ": error: cannot read text corpus", 0),
            0u);

  std::string small = dir.write("small.txt", "one two three");
  TextOptions options;
  options.tokens = 3;
  d = loadTextCorpus(small, options, Split::Train);
  ASSERT_FALSE(bool(d));
  EXPECT_EQ(llvm::toString(d.takeError()),
            small + ": error: 3 words make no sequence: one sequence of 3 tokens needs 4 words");

  options.tokens = 2;
  d = loadTextCorpus(small, options, Split::Train);
  ASSERT_TRUE(bool(d)) << llvm::toString(d.takeError());
  EXPECT_EQ((*d)->size(), 1);
  d = loadTextCorpus(small, options, Split::Test);
  ASSERT_FALSE(bool(d));
  EXPECT_NE(llvm::toString(d.takeError()).find("a test split needs at least two"),
            std::string::npos);
}
