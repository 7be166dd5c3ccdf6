// The printer: canonical text of built and parsed modules.
#include <gtest/gtest.h>

#include "TestHelpers.h"
#include "ir/Builder.h"
#include "ir/OpTable.h"

using namespace prism;
using namespace prism::frontends::testing;
using ir::Attr;
using ir::DType;
using ir::TensorType;

TEST(Printer, BuiltModuleMatchesTheParsedText) {
  ir::ModuleBuilder b("mlp");
  ir::Value *x = b.input("x", TensorType(DType::F32, {ir::kBatchDim, 784}));
  ir::Value *y = b.input("y", TensorType(DType::I32, {ir::kBatchDim}));
  ir::Value *w1 = b.variable("w1", TensorType(DType::F32, {784, 256}), {"glorot_uniform", {}});
  ir::Value *b1 = b.variable("b1", TensorType(DType::F32, {256}), {"zeros", {}},
                             ir::attrs({{"trainable", Attr::boolean(false)}}));
  ir::Value *w2 = b.variable("w2", TensorType(DType::F32, {256, 10}),
                             {"normal", ir::attrs({{"stddev", Attr::real(0.01)}})});
  ir::Value *h = b.relu(b.op("bias_add", {b.matmul(x, w1, "mm"), b1}, {}, "pre"), "h");
  ir::Value *logits =
      b.op("matmul", {h, w2}, ir::attrs({{"transpose_b", Attr::boolean(false)}}), "logits");
  ir::Value *loss = b.op("softmax_cross_entropy", {logits, y}, {}, "loss");
  b.minimize(loss, "adam", ir::attrs({{"lr", Attr::real(0.001)}, {"beta1", Attr::real(0.9)}}));
  auto built = b.finish();
  ASSERT_TRUE(bool(built)) << llvm::toString(built.takeError());

  const char *text = R"(model mlp {
  input x : f32[B, 784]
  input y : i32[B]
  var w1 : f32[784, 256] = glorot_uniform
  var b1 : f32[256] = zeros {trainable = false}
  var w2 : f32[256, 10] = normal(stddev = 0.01)
  %mm = matmul(x, w1) : f32[B, 256]
  %pre = bias_add(%mm, b1) : f32[B, 256]
  %h = relu(%pre) : f32[B, 256]
  %logits = matmul(%h, w2, transpose_b = false) : f32[B, 10]
  %loss = softmax_cross_entropy(%logits, y) : f32[]
  minimize %loss with adam(lr = 0.001, beta1 = 0.9)
}
)";
  std::string printed = ir::printModule(**built);
  EXPECT_EQ(printed, text);
  EXPECT_EQ(printed, reprint(text));
}

TEST(Printer, TypesOnlyWhenEveryResultHasOne) {
  auto m = parseOk("model m {\n  input x : f32[2]\n  %a = relu(x)\n}\n");
  ASSERT_TRUE(m);
  EXPECT_EQ(ir::printModule(*m), "model m {\n  input x : f32[2]\n  %a = relu(x)\n}\n");
  opAt(*m, 0)->result()->setType(TensorType(DType::F32, {2}));
  EXPECT_EQ(ir::printModule(*m), "model m {\n  input x : f32[2]\n  %a = relu(x) : f32[2]\n}\n");
}

TEST(Printer, ZeroResultOpsLossAndGradients) {
  ir::Module m("m");
  ir::Variable *w = m.addVariable("w", TensorType(DType::F32, {2}), {"zeros", {}});
  ir::Input *x = m.addInput("x", TensorType(DType::F32, {2}));
  ir::Op *g = m.createOp(ir::getOp("mul"), {x->value.get(), x->value.get()}, {}, {"d.w"});
  m.createOp(ir::getOp("apply_sgd"), {w->value.get(), g->result()},
             ir::attrs({{"lr", Attr::real(0.5)}}), {});
  ir::Op *l = m.createOp(ir::getOp("reduce_sum"), {g->result()}, {}, {"loss"});
  m.loss = ir::Loss{l->result(), {}, {}};
  m.gradients.push_back(ir::Gradient{w, g->result(), {}, {}});
  EXPECT_EQ(ir::printModule(m), R"(model m {
  input x : f32[2]
  var w : f32[2] = zeros
  %d.w = mul(x, x)
  apply_sgd(w, %d.w, lr = 0.5)
  %loss = reduce_sum(%d.w)
  loss %loss
  gradient w = %d.w
}
)");
}

TEST(Printer, Trivia) {
  ir::Module m("m");
  m.headerTrivia.leadingComments = {"header", ""};
  m.headerTrivia.blankLineBefore = true;
  m.headerTrivia.trailingComment = "on the model line";
  ir::Input *x = m.addInput("x", TensorType(DType::F32, {2}));
  x->trivia.leadingComments = {"data"};
  x->trivia.trailingComment = "features";
  ir::Op *op = m.createOp(ir::getOp("relu"), {x->value.get()}, {}, {"h"});
  op->trivia.blankLineBefore = true;
  op->trivia.leadingComments = {"two\nlines"};
  m.footerComments = {"the end"};
  const char *expected = R"(// header
//

model m { // on the model line
  // data
  input x : f32[2] // features

  // two
  // lines
  %h = relu(x)
  // the end
}
)";
  EXPECT_EQ(ir::printModule(m), expected);
  EXPECT_EQ(reprint(expected), expected);
}

TEST(Printer, AttributeValues) {
  auto m = parseOk(R"(model m {
  input x : f32[B, 4]
  %c = constant(value = 1e-05, shape = [2, 4], dtype = "f32")
  %r = reshape(x, shape = [B, 2, 2])
  %d = constant(value = nan)
  %e = constant(value = -inf)
  %f = constant(value = 3)
}
)");
  ASSERT_TRUE(m);
  EXPECT_EQ(ir::printModule(*m), R"(model m {
  input x : f32[B, 4]
  %c = constant(value = 1e-05, shape = [2, 4], dtype = f32)
  %r = reshape(x, shape = [B, 2, 2])
  %d = constant(value = nan)
  %e = constant(value = -inf)
  %f = constant(value = 3)
}
)");
}
