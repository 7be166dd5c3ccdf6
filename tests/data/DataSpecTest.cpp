// The --data spec: its syntax, canonical spelling, errors, and opening what it names.
#include <string>

#include <gtest/gtest.h>

#include "runtime/data/DataSpec.h"
#include "runtime/data/FashionMnist.h"
#include "tests/data/ScratchDir.h"

using namespace prism::runtime::data;
using prism::runtime::data::testing::ScratchDir;

namespace {

DataSpec parseOk(const std::string &text) {
  auto spec = parseDataSpec(text);
  EXPECT_TRUE(bool(spec)) << text << ": " << llvm::toString(spec.takeError());
  return spec ? *spec : DataSpec{};
}

std::string parseError(const std::string &text) {
  auto spec = parseDataSpec(text);
  if (spec) {
    ADD_FAILURE() << text << " parsed as " << spec->str();
    return "";
  }
  return llvm::toString(spec.takeError());
}

} // namespace

TEST(DataSpec, FashionMnist) {
  DataSpec spec = parseOk("fashion-mnist");
  EXPECT_EQ(spec.source, DataSource::FashionMnist);
  EXPECT_EQ(spec.path, kFashionMnistDefaultDir);
  EXPECT_EQ(spec.str(), "fashion-mnist");
  spec = parseOk("fashion-mnist:/data/fm");
  EXPECT_EQ(spec.path, "/data/fm");
  EXPECT_EQ(spec.str(), "fashion-mnist:/data/fm");
}

TEST(DataSpec, ZipfDefaultsAndOptions) {
  DataSpec spec = parseOk("zipf:100000");
  EXPECT_EQ(spec.source, DataSource::Zipf);
  EXPECT_EQ(spec.zipf.vocab, 100000);
  EXPECT_EQ(spec.zipf.tokens, 20);
  EXPECT_EQ(spec.zipf.classes, 10);
  EXPECT_DOUBLE_EQ(spec.zipf.exponent, 1.1);
  EXPECT_EQ(spec.zipf.examples, 60000);
  EXPECT_EQ(spec.str(), "zipf:100000,tokens=20,classes=10,exponent=1.1,examples=60000");

  spec = parseOk("zipf:500,exponent=1.25,classes=3,examples=77,tokens=9");
  EXPECT_EQ(spec.zipf.vocab, 500);
  EXPECT_EQ(spec.zipf.tokens, 9);
  EXPECT_EQ(spec.zipf.classes, 3);
  EXPECT_DOUBLE_EQ(spec.zipf.exponent, 1.25);
  EXPECT_EQ(spec.zipf.examples, 77);
  // The canonical spelling parses back to itself.
  EXPECT_EQ(parseOk(spec.str()).str(), spec.str());
}

TEST(DataSpec, Text) {
  DataSpec spec = parseOk("text:corpus.txt");
  EXPECT_EQ(spec.source, DataSource::Text);
  EXPECT_EQ(spec.path, "corpus.txt");
  EXPECT_EQ(spec.text.tokens, 20);
  EXPECT_EQ(spec.text.vocab, 10000);
  spec = parseOk("text:/tmp/a b.txt,vocab=50,tokens=35");
  EXPECT_EQ(spec.path, "/tmp/a b.txt");
  EXPECT_EQ(spec.text.vocab, 50);
  EXPECT_EQ(spec.text.tokens, 35);
  EXPECT_EQ(spec.str(), "text:/tmp/a b.txt,tokens=35,vocab=50");
}

TEST(DataSpec, Errors) {
  EXPECT_NE(parseError("mnist").find("data spec 'mnist': unknown data source 'mnist' (expected "
                                     "fashion-mnist, fashion-mnist:DIR, zipf:VOCAB"),
            std::string::npos);
  EXPECT_NE(parseError("fashion-mnist:").find("expected a directory"), std::string::npos);
  EXPECT_NE(parseError("zipf").find("expected zipf:VOCAB"), std::string::npos);
  EXPECT_NE(parseError("zipf:").find("expected zipf:VOCAB"), std::string::npos);
  EXPECT_NE(parseError("zipf:lots").find("VOCAB must be a positive integer, got 'lots'"),
            std::string::npos);
  EXPECT_NE(parseError("zipf:10,tokens=0").find("tokens must be a positive integer, got '0'"),
            std::string::npos);
  EXPECT_NE(parseError("zipf:10,tokens=2,tokens=3").find("'tokens' is given twice"),
            std::string::npos);
  EXPECT_NE(parseError("zipf:10,exponent=-1").find("exponent must be a number >= 0"),
            std::string::npos);
  EXPECT_NE(parseError("zipf:10,vocab=3").find("unknown option 'vocab' (zipf takes tokens"),
            std::string::npos);
  EXPECT_NE(parseError("zipf:10,20").find("expected key=value, got '20'"), std::string::npos);
  EXPECT_NE(parseError("zipf:100000000").find("vocabulary size 100000000 is out of range"),
            std::string::npos);
  EXPECT_NE(parseError("text:").find("expected text:FILE"), std::string::npos);
  EXPECT_NE(parseError("text:a.txt,classes=3").find("unknown option 'classes' (text takes"),
            std::string::npos);
}

TEST(DataSpec, OpensWhatItNames) {
  auto zipf = openDataset(parseOk("zipf:50,tokens=4,examples=12"), Split::Train, 1);
  ASSERT_TRUE(bool(zipf)) << llvm::toString(zipf.takeError());
  EXPECT_EQ((*zipf)->size(), 12);
  EXPECT_TRUE((*zipf)->findField("tokens").has_value());
  EXPECT_TRUE((*zipf)->findField("targets").has_value());
  EXPECT_TRUE((*zipf)->findField("label").has_value());

  ScratchDir dir;
  std::string corpus = dir.write("c.txt", "a b c d e f g h i j k");
  auto text = openDataset(parseOk("text:" + corpus + ",tokens=2"), Split::Train, 1);
  ASSERT_TRUE(bool(text)) << llvm::toString(text.takeError());
  EXPECT_EQ((*text)->size(), 4); // (11 - 1) / 2 = 5 sequences, the last one held out

  auto missing = openDataset(parseOk("fashion-mnist:" + dir.path()), Split::Test, 1);
  ASSERT_FALSE(bool(missing));
  EXPECT_EQ(llvm::toString(missing.takeError()),
            "error: Fashion-MNIST not found in " + dir.path() +
                ": install Debian's dataset-fashion-mnist (apt-get install "
                "dataset-fashion-mnist) or pass --data fashion-mnist:DIR");
}
