// The parser on hostile input: random bytes, random token soup, truncations and single-byte
// mutations of valid modules. It must return, with a module or an error naming the file; a
// module it accepts must print to text that reads back to the same text.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "frontends/text/Parser.h"
#include "ir/Printer.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace prism;
using namespace prism::frontends;

namespace {

const char *kSample = R"(// Sample for mutations.
model sample { // header
  input x : f32[B, 4]
  input ids : i64[B, 3]
  input y : i32[B]

  var w : f32[4, 3] = glorot_uniform
  var b : f32[3] = zeros {trainable = false}
  var emb : f32[100, 4] = normal(stddev = 0.01)
  %h = relu(bias_add(matmul(x, w), b)) : f32[B, 3]
  %e = gather(emb, ids)
  %r = reduce_mean(%e, axes = [1])
  %c = constant(value = -1.5e-05, shape = [1, 4], dtype = f32)
  %s = add(%r, %c) // sum
  %logits = matmul(%s, w)
  %loss = softmax_cross_entropy(%logits, y) : f32[]
  minimize %loss with adam(lr = 0.001, clip_norm = 5)
  gradient w = %logits
  // footer
}
)";

class FuzzChecker {
public:
  // Parses; on success the printed text must be a fixed point of print ∘ parse.
  void check(const std::string &text) {
    ++runs_;
    auto module = parseModule(text, "fuzz.prism");
    if (!module) {
      std::string message = llvm::toString(module.takeError());
      EXPECT_EQ(message.rfind("fuzz.prism:", 0), 0u) << message << "\nfor input:\n" << text;
      return;
    }
    ++accepted_;
    std::string printed = ir::printModule(**module);
    auto again = parseModule(printed, "fuzz.prism");
    if (!again) {
      ADD_FAILURE() << "printed text does not parse: " << llvm::toString(again.takeError())
                    << "\nprinted:\n"
                    << printed << "\nfrom:\n"
                    << text;
      return;
    }
    EXPECT_EQ(ir::printModule(**again), printed) << "from:\n" << text;
  }
  unsigned runs() const { return runs_; }
  unsigned accepted() const { return accepted_; }

private:
  unsigned runs_ = 0;
  unsigned accepted_ = 0;
};

std::vector<std::string> seeds() {
  std::vector<std::string> texts = {kSample};
  std::error_code ec;
  std::string dir = std::string(PRISM_SOURCE_DIR) + "/models";
  std::vector<std::string> paths;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec))
    if (llvm::sys::path::extension(it->path()) == ".prism")
      paths.push_back(it->path());
  std::sort(paths.begin(), paths.end());
  for (const std::string &path : paths)
    if (auto buffer = llvm::MemoryBuffer::getFile(path))
      texts.push_back((*buffer)->getBuffer().str());
  return texts;
}

// Bytes a mutation writes: structure characters, digits, letters, and anything at all.
unsigned char mutationByte(std::mt19937 &rng) {
  static const char interesting[] = "{}()[],:=%?-\"\\/\n 09Bfxe.";
  if (rng() % 2)
    return static_cast<unsigned char>(interesting[rng() % (sizeof(interesting) - 1)]);
  return static_cast<unsigned char>(rng() % 256);
}

} // namespace

TEST(Fuzz, RandomBytes) {
  std::mt19937 rng(20240607);
  FuzzChecker checker;
  for (int i = 0; i < 3000; ++i) {
    std::string text(rng() % 200, '\0');
    for (char &c : text)
      c = static_cast<char>(mutationByte(rng));
    if (i % 3 == 0)
      text = "model m {\n" + text;
    checker.check(text);
  }
  EXPECT_EQ(checker.runs(), 3000u);
}

TEST(Fuzz, TokenSoup) {
  static const char *tokens[] = {
      "model", "m",      "{",        "}",    "(",   ")",  "[",    "]",        ",",
      ":",     "=",      "input",    "var",  "x",   "w",  "%h",   "%1",       "relu",
      "add",   "matmul", "f32",      "i64",  "B",   "?",  "784",  "-1",       "0.5",
      "zeros", "normal", "minimize", "with", "sgd", "lr", "loss", "gradient", "sparse",
      "\"s\"", "// c\n", "\n",       "true", "-",   "inf"};
  std::mt19937 rng(7);
  FuzzChecker checker;
  for (int i = 0; i < 3000; ++i) {
    std::string text = "model m {\n  input x : f32[B, 4]\n  var w : f32[4, 4] = zeros\n";
    unsigned n = rng() % 40;
    for (unsigned k = 0; k < n; ++k) {
      text += tokens[rng() % (sizeof(tokens) / sizeof(tokens[0]))];
      text += ' ';
    }
    if (rng() % 2)
      text += "}\n";
    checker.check(text);
  }
}

TEST(Fuzz, TruncationsAndMutationsOfValidModules) {
  std::mt19937 rng(12345);
  FuzzChecker checker;
  for (const std::string &seed : seeds()) {
    // The seed itself is valid and reaches a fixed point.
    auto module = parseModule(seed, "fuzz.prism");
    ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
    size_t step = std::max<size_t>(1, seed.size() / 1500);
    for (size_t len = 0; len < seed.size(); len += step)
      checker.check(seed.substr(0, len));
    for (int i = 0; i < 1500; ++i) {
      std::string text = seed;
      size_t pos = rng() % text.size();
      switch (rng() % 3) {
      case 0:
        text[pos] = static_cast<char>(mutationByte(rng));
        break;
      case 1:
        text.erase(pos, 1);
        break;
      default:
        text.insert(pos, 1, static_cast<char>(mutationByte(rng)));
        break;
      }
      checker.check(text);
    }
  }
  // Some mutations keep the module valid; those exercise the print-parse fixed point.
  EXPECT_GT(checker.accepted(), 0u);
}
