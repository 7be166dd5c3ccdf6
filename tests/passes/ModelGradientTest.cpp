// Whole-model gradients from autodiff against central finite differences of the loss, in
// float64 on the reference interpreter: small versions of the reference models (dense, conv,
// sparse embedding with two lookups, an LSTM cell unrolled over steps, written out and as a
// function called at each step, a residual block).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "frontends/text/Parser.h"
#include "passes/PassManager.h"
#include "runtime/reference/ReferenceInterpreter.h"

using namespace prism;
namespace ref = runtime::reference;

namespace {

struct Case {
  const char *name;
  const char *text;
  std::map<std::string, int64_t> intBound; // integer inputs draw from [0, bound)
};

const Case kCases[] = {
    {"mlp",
     R"(model mlp {
  input x : f32[B, 6]
  input y : i32[B]
  var w1 : f32[6, 5] = glorot_uniform
  var b1 : f32[5] = uniform(min = -0.1, max = 0.1)
  var w2 : f32[5, 3] = glorot_uniform
  %h = tanh(bias_add(matmul(x, w1), b1))
  %logits = matmul(%h, w2)
  %loss = softmax_cross_entropy(%logits, y)
  minimize %loss with sgd(lr = 0.1)
}
)",
     {{"y", 3}}},
    {"cnn",
     R"(model cnn {
  input x : f32[B, 7, 7, 2]
  input y : i32[B]
  var k1 : f32[3, 3, 2, 3] = glorot_uniform
  var c1 : f32[3] = uniform(min = -0.1, max = 0.1)
  var k2 : f32[2, 2, 3, 2] = glorot_uniform
  var w : f32[8, 4] = glorot_uniform
  %a = relu(bias_add(conv2d(x, k1, stride = [1, 1], padding = same), c1))
  %p = max_pool2d(%a, window = [2, 2], stride = [2, 2], padding = valid)
  %b = conv2d(%p, k2, stride = [2, 2], padding = same)
  %q = avg_pool2d(%b, window = [2, 2], stride = [1, 1], padding = same)
  %flat = reshape(%q, shape = [B, 8])
  %logits = matmul(%flat, w)
  %loss = softmax_cross_entropy(%logits, y)
  minimize %loss with adam(lr = 0.001)
}
)",
     {{"y", 4}}},
    {"embedding",
     R"(model embedding {
  input ids : i32[B, 4]
  input more : i64[B, 2]
  input y : i32[B]
  var emb : f32[9, 3] = uniform(min = -0.5, max = 0.5)
  var w : f32[3, 2] = glorot_uniform
  %e = reduce_mean(gather(emb, ids), axes = [1])
  %f = reduce_sum(gather(emb, more), axes = [1])
  %logits = matmul(add(%e, %f), w)
  %loss = softmax_cross_entropy(%logits, y)
  minimize %loss with adam(lr = 0.01)
}
)",
     {{"ids", 9}, {"more", 9}, {"y", 2}}},
    {"lstm",
     R"(model lstm {
  input tokens : i32[B, 3]
  input y : i32[B]
  var emb : f32[7, 4] = uniform(min = -0.5, max = 0.5)
  var wx : f32[4, 12] = glorot_uniform
  var wh : f32[3, 12] = glorot_uniform
  var bias : f32[12] = uniform(min = -0.1, max = 0.1)
  var out : f32[3, 5] = glorot_uniform
  %e = gather(emb, tokens)
  %x0 = reshape(slice(%e, axis = 1, begin = 0, end = 1), shape = [B, 4])
  %g0 = bias_add(matmul(%x0, wx), bias)
  %c0 = mul(sigmoid(slice(%g0, axis = 1, begin = 0, end = 3)), tanh(slice(%g0, axis = 1, begin = 6, end = 9)))
  %h0 = mul(sigmoid(slice(%g0, axis = 1, begin = 9, end = 12)), tanh(%c0))
  %x1 = reshape(slice(%e, axis = 1, begin = 1, end = 2), shape = [B, 4])
  %g1 = bias_add(add(matmul(%x1, wx), matmul(%h0, wh)), bias)
  %f1 = sigmoid(slice(%g1, axis = 1, begin = 3, end = 6))
  %c1 = add(mul(%f1, %c0), mul(sigmoid(slice(%g1, axis = 1, begin = 0, end = 3)), tanh(slice(%g1, axis = 1, begin = 6, end = 9))))
  %h1 = mul(sigmoid(slice(%g1, axis = 1, begin = 9, end = 12)), tanh(%c1))
  %both = concat(%h0, %h1, axis = 1)
  %pooled = reduce_sum(reshape(%both, shape = [B, 2, 3]), axes = [1])
  %logits = matmul(%pooled, out)
  %loss = softmax_cross_entropy(log_softmax(%logits), y)
  minimize %loss with sgd(lr = 0.1)
}
)",
     {{"tokens", 7}, {"y", 5}}},
    // The same cell as a function called at each step, with a shared weight passed bare and a
    // function calling another: gradients flow through the inlined copies.
    {"lstm_functions",
     R"(model lstm_functions {
  input tokens : i32[B, 3]
  input y : i32[B]
  var emb : f32[7, 4] = uniform(min = -0.5, max = 0.5)
  var wx : f32[4, 12] = glorot_uniform
  var wh : f32[3, 12] = glorot_uniform
  var bias : f32[12] = uniform(min = -0.1, max = 0.1)
  var out : f32[3, 5] = glorot_uniform
  func @gate(%g, %x) -> (%s) {
    %s = sigmoid(%g)
  }
  func @cell(%x, %h, %c, wx, wh, bias) -> (%h2, %c2) {
    %g = bias_add(add(matmul(%x, wx), matmul(%h, wh)), bias)
    %c2 = add(mul(@gate(slice(%g, axis = 1, begin = 3, end = 6), %x), %c), mul(sigmoid(slice(%g, axis = 1, begin = 0, end = 3)), tanh(slice(%g, axis = 1, begin = 6, end = 9))))
    %h2 = mul(sigmoid(slice(%g, axis = 1, begin = 9, end = 12)), tanh(%c2))
  }
  %e = gather(emb, tokens)
  %x0 = reshape(slice(%e, axis = 1, begin = 0, end = 1), shape = [B, 4])
  %zero = mul(matmul(%x0, slice(wx, axis = 1, begin = 0, end = 3)), constant(value = 0.0))
  %h0, %c0 = @cell(%x0, %zero, %zero, wx, wh, bias)
  %x1 = reshape(slice(%e, axis = 1, begin = 1, end = 2), shape = [B, 4])
  %h1, %c1 = @cell(%x1, %h0, %c0, wx, wh, bias)
  %x2 = reshape(slice(%e, axis = 1, begin = 2, end = 3), shape = [B, 4])
  %h2, %c2 = @cell(%x2, %h1, %c1, wx, wh, bias)
  %logits = matmul(add(%h2, %c2), out)
  %loss = softmax_cross_entropy(%logits, y)
  minimize %loss with sgd(lr = 0.1)
}
)",
     {{"tokens", 7}, {"y", 5}}},
    {"residual",
     R"(model residual {
  input x : f32[B, 4, 4, 2]
  input y : i32[B]
  var k : f32[3, 3, 2, 2] = glorot_uniform
  var w : f32[2, 3] = glorot_uniform
  %r = relu(add(x, conv2d(x, k)))
  %gap = reduce_mean(%r, axes = [1, 2])
  %z = matmul(%gap, w)
  %logits = sub(%z, div(exp(%z), sqrt(add(exp(%z), exp(%z)))))
  %loss = softmax_cross_entropy(%logits, y)
  minimize %loss with sgd(lr = 0.1)
}
)",
     {{"y", 3}}},
};

class ModelGradient : public ::testing::TestWithParam<Case> {};

TEST_P(ModelGradient, MatchesFiniteDifferences) {
  const Case &c = GetParam();
  auto module = frontends::parseModule(c.text, std::string(c.name) + ".prism");
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  auto pm = passes::PassManager::fromPipeline("inline,infer-shapes,autodiff");
  ASSERT_TRUE(bool(pm)) << llvm::toString(pm.takeError());
  auto changed = pm->run(**module, passes::PassOptions());
  ASSERT_TRUE(bool(changed)) << llvm::toString(changed.takeError());
  ir::Module &m = **module;

  // A fixed seed keeps the test repeatable: with relu and max-pool, a fresh draw now and then
  // puts an element within 2h of a kink whose small jump escapes the check below.
  // PRISM_TEST_SEED explores other draws.
  const char *seedText = std::getenv("PRISM_TEST_SEED");
  uint64_t seed = seedText ? std::strtoull(seedText, nullptr, 10) : 20261122;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t batch = 3;
  ref::Feeds feeds;
  for (const auto &in : m.inputs()) {
    std::vector<int64_t> shape;
    for (int64_t d : in->type().dims)
      shape.push_back(d == ir::kBatchDim ? batch : d);
    ref::Tensor t(in->type().dtype, shape);
    for (double &v : t.data())
      v = ir::isFloat(in->type().dtype)
              ? std::uniform_real_distribution<double>(-1, 1)(rng)
              : static_cast<double>(
                    std::uniform_int_distribution<int64_t>(0, c.intBound.at(in->name()) - 1)(rng));
    feeds[in->name()] = t;
  }
  ref::ReferenceInterpreter interp(m);
  ASSERT_FALSE(bool(interp.initializeVariables(seed)));
  auto base = interp.step(feeds);
  ASSERT_TRUE(bool(base)) << llvm::toString(base.takeError());

  ASSERT_FALSE(m.gradients.empty());
  for (const ir::Gradient &g : m.gradients) {
    const std::string &var = g.variable->name();
    // The gradients of the unperturbed step (earlier variables' checks ran other steps).
    ASSERT_TRUE(bool(interp.step(feeds)));
    ref::Tensor analytic = interp.value(g.value->name())->toDense();
    ref::Tensor original = *interp.variable(var);
    // Every element of small variables; a random sample of larger ones.
    std::vector<int64_t> elements;
    for (int64_t i = 0; i < original.numElements(); ++i)
      elements.push_back(i);
    std::shuffle(elements.begin(), elements.end(), rng);
    elements.resize(std::min<size_t>(elements.size(), 24));
    double diff = 0, norm = 0;
    int checked = 0;
    for (int64_t i : elements) {
      // Fourth-order central difference: truncation O(h^4), round-off O(eps / h).
      const double h = 1e-4;
      auto lossAt = [&](double offset) {
        ref::Tensor shifted = original;
        shifted.data()[i] += offset;
        EXPECT_FALSE(bool(interp.setVariable(var, shifted)));
        return *interp.step(feeds)->loss;
      };
      double l0 = lossAt(0), lp = lossAt(h), lm = lossAt(-h);
      double l2p = lossAt(2 * h), l2m = lossAt(-2 * h);
      // Relu and max-pool have kinks; an element whose one-sided slopes disagree sits within
      // 2h of one, where no finite difference is meaningful.
      double forward = (l2p - l0) / (2 * h), backward = (l0 - l2m) / (2 * h);
      if (std::abs(forward - backward) > 1e-2 * (std::abs(forward) + std::abs(backward)) + 1e-6)
        continue;
      ++checked;
      double numeric = (-l2p + 8 * lp - 8 * lm + l2m) / (12 * h);
      diff += (numeric - analytic.data()[i]) * (numeric - analytic.data()[i]);
      norm += numeric * numeric;
    }
    ASSERT_FALSE(bool(interp.setVariable(var, original)));
    EXPECT_GT(checked, 0) << "variable " << var << ": every sampled element sits at a kink";
    EXPECT_LT(std::sqrt(diff) / std::max(std::sqrt(norm), 1e-12), 1e-6) << "variable " << var;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ModelGradient, ::testing::ValuesIn(kCases),
                         [](const auto &info) { return std::string(info.param.name); });

} // namespace
