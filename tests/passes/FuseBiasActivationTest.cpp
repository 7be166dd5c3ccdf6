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
#include "tests/passes/ReferenceEquivalence.h"

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
  return prism::testing::differentiated(c.text, c.name);
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

  prism::testing::expectSameLossAndGradients(*before, *after);
}

INSTANTIATE_TEST_SUITE_P(Models, FuseBiasActivation, ::testing::ValuesIn(kCases),
                         [](const auto &info) { return std::string(info.param.name); });

TEST(FuseBiasActivationRun, SecondRunChangesNothing) {
  auto module = differentiated(kCases[0]);
  ASSERT_TRUE(module);
  prism::testing::expectSecondRunChangesNothing(*module, "fuse-bias-activation");
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
