// print(parse(text)): exact for canonical text, a fixed point for any valid text, for samples
// and for every model in models/.
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "TestHelpers.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace prism;
using namespace prism::frontends;
using namespace prism::frontends::testing;

namespace {

// Canonical samples: every statement kind, attribute kind, and kind of comment placement.
const char *kCanonical[] = {
    R"(model empty {
}
)",
    R"(model functions {
  input x : f32[B, 4]
  var w : f32[4, 4] = glorot_uniform

  // A layer.
  func @layer(%x, w) -> (%y, %x) { // two results
    // the product
    %z = matmul(%x, w) : f32[B, 4]
    %y = tanh(%z)
    // end of the body
  } // after the body
  func @two(%a, w) -> (%b) {
    %h, %same = @layer(%a, w)
    %b, %c = @layer(%h, w)
  }

  %h = @two(x, w)
  %1, %2 = @layer(%h, w)
  %l = reduce_sum(%1)
  minimize %l with sgd(lr = 0.1)
}
)",
    R"(// A model with every statement.
// Second line of the header.

model sample { // the sample
  // Data.
  input x : f32[B, 4]
  input ids : i64[B, 3]
  input y : i32[B]

  // Parameters.
  var w : f32[4, 3] = glorot_uniform
  var b : f32[3] = zeros {trainable = false}
  var emb : f32[100, 4] = normal(mean = 0, stddev = 0.01)
  var c : f32[3] = uniform(min = -0.1, max = 0.1) // small
  var k : f32[3] = constant(value = 0.5) {trainable = false, device = "gpu:0"}

  %h = matmul(x, w) : f32[B, 3]
  %e = gather(emb, ids)
  %r = reduce_mean(%e, axes = [1], keepdims = false)
  %1 = bias_add(%h, b)
  //
  //   indented comment
  %logits = add(%1, c) // logits
  %loss = softmax_cross_entropy(%logits, y) : f32[]
  %dw = matmul(x, %h, transpose_a = true) : f32[4, 3]
  minimize %loss with momentum(lr = 0.1, momentum = 0.9, nesterov = true)
  gradient w = %dw
  // Footer.
}
)",
    R"(model lowered {
  input x : f32[2, 2]
  var w : f32[2, 2] = ones
  %g = matmul(x, w, transpose_a = true)
  apply_sgd(w, %g, lr = 0.5)
  %loss = reduce_sum(%g) : f32[]
  loss %loss
  gradient w = %g
}
)",
    R"(model strings {
  input x : f32[2]
  %a = relu(x)
  %c = cast(%a, dtype = "true")
  %d = max_pool2d(%a, padding = "with \"quotes\" and \\ and\n")
  %e = constant(value = 1.5e+20, shape = [2])
}
)",
};

std::vector<std::string> modelFiles() {
  std::vector<std::string> files;
  std::error_code ec;
  std::string dir = std::string(PRISM_SOURCE_DIR) + "/models";
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec))
    if (llvm::sys::path::extension(it->path()) == ".prism")
      files.push_back(it->path());
  std::sort(files.begin(), files.end());
  return files;
}

} // namespace

TEST(RoundTrip, CanonicalTextIsPrintedBackExactly) {
  for (const char *text : kCanonical)
    EXPECT_EQ(reprint(text), text);
}

TEST(RoundTrip, NestedExpressionsPrintFlat) {
  const char *nested = R"(model m {
  input x : f32[B, 4]
  var w : f32[4, 4] = glorot_uniform
  var b : f32[4] = zeros
  %h = relu(add(matmul(x, w), b)) // layer
}
)";
  const char *flat = R"(model m {
  input x : f32[B, 4]
  var w : f32[4, 4] = glorot_uniform
  var b : f32[4] = zeros
  %1 = matmul(x, w)
  %2 = add(%1, b)
  %h = relu(%2) // layer
}
)";
  EXPECT_EQ(reprint(nested), flat);
  EXPECT_EQ(reprint(flat), flat);
}

TEST(RoundTrip, AnyValidTextReachesAFixedPoint) {
  const char *messy = "  // header\n\n\n// two\n\nmodel   m{input x:f32[B,4]//t\n"
                      "var w:f32[4,4]=normal()  var v : f32[4] = zeros{ trainable=false }\n\n\n"
                      "  // above\n\n  %a=relu(\n // inside\n matmul(x,w)) :f32[B,4]"
                      "%b=reshape(%a,shape=[B,2,2]\t)//   spaced   \r\n"
                      "minimize %b with sgd(lr=1)gradient w=%b\n// foot\n} // after\n// end\n";
  std::string once = reprint(messy);
  ASSERT_FALSE(once.empty());
  EXPECT_EQ(reprint(once), once);
  EXPECT_EQ(once, R"(// header
// two

model m {
  input x : f32[B, 4] // t
  var w : f32[4, 4] = normal
  var v : f32[4] = zeros {trainable = false}

  // above
  // inside
  %1 = matmul(x, w)
  %a = relu(%1) : f32[B, 4]
  %b = reshape(%a, shape = [B, 2, 2]) //   spaced
  minimize %b with sgd(lr = 1)
  gradient w = %b
  // foot
  // after
  // end
}
)");
}

TEST(RoundTrip, ModelsDirectory) {
  for (const std::string &path : modelFiles()) {
    SCOPED_TRACE(path);
    auto buffer = llvm::MemoryBuffer::getFile(path);
    ASSERT_TRUE(bool(buffer));
    auto module = parseModule((*buffer)->getBuffer(), path);
    ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
    std::string once = ir::printModule(**module);
    EXPECT_EQ(reprint(once), once);
    // Models are written in canonical form, so they print back unchanged, except those written
    // with nested expressions, which print flat (with fresh names `%1`, `%2`, ...).
    static const std::regex fresh("%[0-9]+ = ");
    std::string source = (*buffer)->getBuffer().str();
    if (!std::regex_search(source, fresh) && std::regex_search(once, fresh))
      continue;
    EXPECT_EQ(once, source);
  }
}
