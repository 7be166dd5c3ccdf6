// fuse-bias-activation: the module before and after the pass gives the same loss and gradients
// on the reference interpreter, and the pass fuses (and declines to fuse) the chains it should.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>

#include "frontends/text/Parser.h"
#include "ir/Builder.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"
#include "runtime/reference/ReferenceInterpreter.h"

using namespace prism;
namespace ref = runtime::reference;

namespace {

struct Case {
  const char *name;
  const char *text;
  std::map<std::string, int64_t> expectedStats;
};

const Case kCases[] = {
    {"mlp",
     R"(model mlp {
  input x : f32[B, 6]
  input y : i32[B]
  var w1 : f32[6, 5] = glorot_uniform
  var b1 : f32[5] = uniform(min = -0.1, max = 0.1)
  var w2 : f32[5, 4] = glorot_uniform
  var b2 : f32[4] = uniform(min = -0.1, max = 0.1)
  var w3 : f32[3, 4] = glorot_uniform
  var b3 : f32[3] = uniform(min = -0.1, max = 0.1)
  %h1 = relu(bias_add(matmul(x, w1), b1))
  %h2 = relu(bias_add(matmul(%h1, w2), b2))
  %logits = bias_add(matmul(%h2, w3, transpose_b = true), b3)
  %loss = softmax_cross_entropy(%logits, y)
  minimize %loss with sgd(lr = 0.1)
}
)",
     {{"chains fused (matmul)", 3}, {"chains fused (conv2d)", 0}, {"relu_grad rewritten", 2}}},
    {"cnn",
     R"(model cnn {
  input x : f32[B, 8, 8, 2]
  input y : i32[B]
  var k1 : f32[3, 3, 2, 3] = glorot_uniform
  var c1 : f32[3] = uniform(min = -0.1, max = 0.1)
  var k2 : f32[2, 2, 3, 2] = glorot_uniform
  var c2 : f32[2] = uniform(min = -0.1, max = 0.1)
  var w : f32[8, 4] = glorot_uniform
  var b : f32[4] = uniform(min = -0.1, max = 0.1)
  %a = relu(bias_add(conv2d(x, k1, stride = [1, 1], padding = valid), c1))
  %p = max_pool2d(%a, window = [2, 2], stride = [2, 2], padding = valid)
  %c = bias_add(conv2d(%p, k2, stride = [2, 2], padding = same), c2)
  %flat = reshape(%c, shape = [B, 8])
  %logits = bias_add(matmul(%flat, w), b)
  %loss = softmax_cross_entropy(%logits, y)
  minimize %loss with adam(lr = 0.001)
}
)",
     {{"chains fused (matmul)", 1}, {"chains fused (conv2d)", 2}, {"relu_grad rewritten", 1}}},
    // The pre-activation value of the first layer is also read by `add`, so the relu stays
    // and only matmul + bias_add fuse; the second product is read twice, so it stays unfused.
    {"shared",
     R"(model shared {
  input x : f32[B, 6]
  input y : i32[B]
  var w1 : f32[6, 3] = glorot_uniform
  var b1 : f32[3] = uniform(min = -0.1, max = 0.1)
  var w2 : f32[3, 3] = glorot_uniform
  var b2 : f32[3] = uniform(min = -0.1, max = 0.1)
  %pre = bias_add(matmul(x, w1), b1)
  %h = add(relu(%pre), %pre)
  %mm = matmul(%h, w2)
  %logits = add(relu(bias_add(%mm, b2)), %mm)
  %loss = softmax_cross_entropy(%logits, y)
  minimize %loss with sgd(lr = 0.1)
}
)",
     {{"chains fused (matmul)", 1}, {"chains fused (conv2d)", 0}, {"relu_grad rewritten", 0}}},
};

std::unique_ptr<ir::Module> differentiated(const Case &c) {
  auto module = frontends::parseModule(c.text, std::string(c.name) + ".prism");
  EXPECT_TRUE(bool(module)) << llvm::toString(module.takeError());
  if (!module)
    return nullptr;
  auto pm = passes::PassManager::fromPipeline("infer-shapes,autodiff");
  EXPECT_TRUE(bool(pm)) << llvm::toString(pm.takeError());
  auto changed = pm->run(**module, passes::PassOptions());
  EXPECT_TRUE(bool(changed)) << llvm::toString(changed.takeError());
  return std::move(*module);
}

ref::Feeds randomFeeds(const ir::Module &m, int64_t batch, std::mt19937_64 &rng) {
  ref::Feeds feeds;
  for (const auto &in : m.inputs()) {
    std::vector<int64_t> shape;
    for (int64_t d : in->type().dims)
      shape.push_back(d == ir::kBatchDim ? batch : d);
    ref::Tensor t(in->type().dtype, shape);
    // Labels are 0 or 1: valid for the class count of every case.
    for (double &v : t.data())
      v = ir::isFloat(in->type().dtype)
              ? std::uniform_real_distribution<double>(-1, 1)(rng)
              : static_cast<double>(std::uniform_int_distribution<int64_t>(0, 1)(rng));
    feeds[in->name()] = t;
  }
  return feeds;
}

double relativeError(const ref::Tensor &a, const ref::Tensor &b) {
  double diff = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.data().size(); ++i) {
    diff += (a.data()[i] - b.data()[i]) * (a.data()[i] - b.data()[i]);
    na += a.data()[i] * a.data()[i];
    nb += b.data()[i] * b.data()[i];
  }
  return std::sqrt(diff) / std::max({std::sqrt(na), std::sqrt(nb), 1e-12});
}

class FuseBiasActivation : public ::testing::TestWithParam<Case> {};

TEST_P(FuseBiasActivation, KeepsLossAndGradients) {
  const Case &c = GetParam();
  auto before = differentiated(c);
  ASSERT_TRUE(before);
  auto after = before->clone();
  auto pass = passes::createPass("fuse-bias-activation");
  auto changed = pass->run(*after, passes::PassOptions());
  ASSERT_TRUE(bool(changed)) << llvm::toString(changed.takeError());
  EXPECT_TRUE(*changed);
  llvm::Error valid = ir::verify(*after);
  ASSERT_FALSE(bool(valid)) << llvm::toString(std::move(valid));
  std::map<std::string, int64_t> stats(pass->statistics().begin(), pass->statistics().end());
  EXPECT_EQ(stats, c.expectedStats);

  uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  ref::Feeds feeds = randomFeeds(*before, /*batch=*/3, rng);
  ref::ReferenceInterpreter unfused(*before), fused(*after);
  ASSERT_FALSE(bool(unfused.initializeVariables(seed)));
  ASSERT_FALSE(bool(fused.initializeVariables(seed)));
  auto unfusedStep = unfused.step(feeds);
  ASSERT_TRUE(bool(unfusedStep)) << llvm::toString(unfusedStep.takeError());
  auto fusedStep = fused.step(feeds);
  ASSERT_TRUE(bool(fusedStep)) << llvm::toString(fusedStep.takeError());
  ASSERT_TRUE(unfusedStep->loss && fusedStep->loss);
  EXPECT_LE(std::abs(*unfusedStep->loss - *fusedStep->loss),
            1e-12 * std::max(std::abs(*unfusedStep->loss), 1e-12));

  ASSERT_EQ(before->gradients.size(), after->gradients.size());
  for (const ir::Gradient &g : before->gradients) {
    const std::string &var = g.variable->name();
    const ref::Tensor *expected = unfused.gradient(var), *actual = fused.gradient(var);
    ASSERT_TRUE(expected && actual) << "variable " << var;
    EXPECT_LT(relativeError(expected->toDense(), actual->toDense()), 1e-12) << "variable " << var;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, FuseBiasActivation, ::testing::ValuesIn(kCases),
                         [](const auto &info) { return std::string(info.param.name); });

TEST(FuseBiasActivationRun, SecondRunChangesNothing) {
  auto module = differentiated(kCases[0]);
  ASSERT_TRUE(module);
  ASSERT_TRUE(bool(passes::createPass("fuse-bias-activation")->run(*module, {})));
  auto again = passes::createPass("fuse-bias-activation")->run(*module, {});
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
  EXPECT_FALSE(*again);
}

} // namespace

// The fused ops' shape rules: the unfused op's checks, then the bias and the activation.
TEST(FusedOps, ShapeRulesCheckBiasAndActivation) {
  using ir::Attr;
  using ir::DType;
  using ir::TensorType;
  auto error = [](const char *opName, ir::Dims x, ir::Dims w, ir::Dims bias,
                  const char *activation) {
    ir::ModuleBuilder b("m");
    ir::Value *xv = b.input("x", TensorType(DType::F32, x));
    ir::Value *wv = b.input("w", TensorType(DType::F32, w));
    ir::Value *bv = b.input("bias", TensorType(DType::F32, bias));
    b.op(opName, {xv, wv, bv}, ir::attrs({{"activation", Attr::string(activation)}}), "y");
    auto m = b.finish();
    return m ? std::string() : llvm::toString(m.takeError());
  };
  EXPECT_EQ(error("fused_matmul", {2, 3}, {3, 4}, {4}, "relu"), "");
  EXPECT_EQ(error("fused_conv2d", {1, 5, 5, 2}, {3, 3, 2, 4}, {4}, "none"), "");
  EXPECT_NE(error("fused_matmul", {2, 3}, {3, 4}, {3}, "relu").find("does not match"),
            std::string::npos);
  EXPECT_NE(error("fused_matmul", {2, 3}, {4, 4}, {4}, "relu").find("contracted"),
            std::string::npos);
  EXPECT_NE(error("fused_conv2d", {1, 5, 5, 2}, {3, 3, 2, 4}, {2}, "relu").find("does not match"),
            std::string::npos);
  EXPECT_NE(error("fused_matmul", {2, 3}, {3, 4}, {4}, "tanh").find("activation must be"),
            std::string::npos);
}
