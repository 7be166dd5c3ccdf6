// fuse-elementwise: the module before and after the pass gives the same loss and gradients on
// the reference interpreter, and the pass fuses (and declines to fuse) the groups it should.
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
};

const Case kCases[] = {
    // Two unrolled steps of an LSTM cell built from primitive ops: the gate arithmetic forward
    // and the sigmoid_grad / tanh_grad / mul chains backward fuse.
    {"lstm",
     R"(model lstm {
  input x : f32[B, 6]
  input y : i32[B]
  var w : f32[10, 16] = glorot_uniform
  var b : f32[16] = uniform(min = -0.1, max = 0.1)
  var wo : f32[4, 3] = glorot_uniform
  %half = constant(value = 0.5)
  %h0 = tanh(slice(x, axis = 1, begin = 0, end = 4))
  %c0 = mul(sigmoid(slice(x, axis = 1, begin = 2, end = 6)), %half)
  %g1 = bias_add(matmul(concat(x, %h0, axis = 1), w), b)
  %c1 = add(mul(sigmoid(slice(%g1, axis = 1, begin = 4, end = 8)), %c0),
            mul(sigmoid(slice(%g1, axis = 1, begin = 0, end = 4)),
                tanh(slice(%g1, axis = 1, begin = 8, end = 12))))
  %h1 = mul(sigmoid(slice(%g1, axis = 1, begin = 12, end = 16)), tanh(%c1))
  %g2 = bias_add(matmul(concat(x, %h1, axis = 1), w), b)
  %c2 = add(mul(sigmoid(slice(%g2, axis = 1, begin = 4, end = 8)), %c1),
            mul(sigmoid(slice(%g2, axis = 1, begin = 0, end = 4)),
                tanh(slice(%g2, axis = 1, begin = 8, end = 12))))
  %h2 = mul(sigmoid(slice(%g2, axis = 1, begin = 12, end = 16)), tanh(%c2))
  %logits = matmul(div(%h2, add(exp(%c2), %half)), wo)
  %loss = softmax_cross_entropy(%logits, y)
  minimize %loss with sgd(lr = 0.1)
}
)"},
    {"mlp",
     R"(model mlp {
  input x : f32[B, 6]
  input y : i32[B]
  var w1 : f32[6, 5] = glorot_uniform
  var b1 : f32[5] = uniform(min = -0.1, max = 0.1)
  var w2 : f32[5, 4] = glorot_uniform
  var b2 : f32[4] = uniform(min = -0.1, max = 0.1)
  var w3 : f32[3, 4] = glorot_uniform
  %scale = constant(value = 1.5)
  %h1 = relu(bias_add(matmul(x, w1), b1))
  %h2 = sqrt(add(exp(neg(relu(bias_add(matmul(%h1, w2), b2)))), %scale))
  %logits = matmul(sub(log(add(%h2, %scale)), tanh(%h2)), w3, transpose_b = true)
  %loss = softmax_cross_entropy(%logits, y)
  minimize %loss with adam(lr = 0.001)
}
)"},
};

std::unique_ptr<ir::Module> differentiated(const Case &c) {
  return prism::testing::differentiated(c.text, c.name);
}

class FuseElementwise : public ::testing::TestWithParam<Case> {};

TEST_P(FuseElementwise, KeepsLossAndGradients) {
  const Case &c = GetParam();
  auto before = differentiated(c);
  ASSERT_TRUE(before);
  auto after = before->clone();
  auto pass = passes::createPass("fuse-elementwise");
  auto changed = pass->run(*after, passes::PassOptions());
  ASSERT_TRUE(bool(changed)) << llvm::toString(changed.takeError());
  EXPECT_TRUE(*changed);
  llvm::Error valid = ir::verify(*after);
  ASSERT_FALSE(bool(valid)) << llvm::toString(std::move(valid));
  std::map<std::string, int64_t> stats(pass->statistics().begin(), pass->statistics().end());
  EXPECT_GE(stats["groups fused"], 2);
  EXPECT_GE(stats["ops fused"], 2 * stats["groups fused"]);
  EXPECT_EQ(before->ops().size() - after->ops().size(),
            static_cast<size_t>(stats["ops fused"] - stats["groups fused"]));

  prism::testing::expectSameLossAndGradients(*before, *after);
}

INSTANTIATE_TEST_SUITE_P(Models, FuseElementwise, ::testing::ValuesIn(kCases),
                         [](const auto &info) { return std::string(info.param.name); });

TEST(FuseElementwiseRun, SecondRunChangesNothing) {
  auto module = differentiated(kCases[0]);
  ASSERT_TRUE(module);
  prism::testing::expectSecondRunChangesNothing(*module, "fuse-elementwise");
}

} // namespace

// The shape rule: one float dtype, one shape or scalars, a valid expression that uses every
// operand.
TEST(FusedElementwiseOp, ShapeRuleChecksOperandsAndExpression) {
  using ir::Attr;
  using ir::DType;
  using ir::TensorType;
  auto error = [](std::vector<TensorType> types, const char *expr) {
    ir::ModuleBuilder b("m");
    std::vector<ir::Value *> operands;
    for (size_t i = 0; i < types.size(); ++i)
      operands.push_back(b.input("x" + std::to_string(i), types[i]));
    b.op("fused_elementwise", operands, ir::attrs({{"expr", Attr::string(expr)}}), "y");
    auto m = b.finish();
    return m ? std::string() : llvm::toString(m.takeError());
  };
  TensorType matrix(DType::F32, {2, 3}), scalar(DType::F32, {});
  EXPECT_EQ(error({matrix, scalar}, "mul(sigmoid($0), tanh($1))"), "");
  EXPECT_EQ(error({matrix, matrix}, " tanh_grad( $0 ,relu($1) ) "), "");
  EXPECT_EQ(error({scalar}, "$0"), "");
  EXPECT_NE(error({matrix, TensorType(DType::F32, {3})}, "add($0, $1)").find("one shape"),
            std::string::npos);
  EXPECT_NE(error({matrix, TensorType(DType::F64, {2, 3})}, "add($0, $1)").find("dtypes differ"),
            std::string::npos);
  EXPECT_NE(error({TensorType(DType::I32, {2})}, "neg($0)").find("must be f32 or f64"),
            std::string::npos);
  EXPECT_NE(error({matrix}, "add($0, $1)").find("references $1"), std::string::npos);
  EXPECT_NE(error({matrix, matrix}, "exp($0)").find("does not use"), std::string::npos);
  EXPECT_NE(error({matrix}, "frob($0)").find("unknown op"), std::string::npos);
  EXPECT_NE(error({matrix}, "matmul($0, $0)").find("elementwise"), std::string::npos);
  EXPECT_NE(error({matrix}, "bias_add($0, $0)").find("elementwise"), std::string::npos);
  EXPECT_NE(error({matrix}, "exp($0, $0)").find("takes 1 operands"), std::string::npos);
  EXPECT_NE(error({matrix}, "add($0)").find("takes 2 operands"), std::string::npos);
  EXPECT_NE(error({matrix}, "exp($0))").find("unexpected"), std::string::npos);
  EXPECT_NE(error({matrix}, "exp($x)").find("operand number"), std::string::npos);
}
