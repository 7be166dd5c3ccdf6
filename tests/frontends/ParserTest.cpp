// The parser: the structure it builds from valid text, and every kind of error, each at its
// exact line and column.
#include <string>

#include <gtest/gtest.h>

#include "TestHelpers.h"
#include "ir/Initializer.h"
#include "ir/OpTable.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

using namespace prism;
using namespace prism::frontends;
using namespace prism::frontends::testing;
using ir::DType;
using ir::TensorType;

namespace {

const char *kMlp = R"(// A small perceptron.
model mlp {
  input x : f32[B, 784]
  input y : i32[B]
  var w1 : f32[784, 256] = glorot_uniform
  var b1 : f32[256] = zeros {trainable = false}
  var w2 : f32[256, 10] = normal(stddev = 0.01)
  %h = relu(add(matmul(x, w1), b1))
  %logits = matmul(%h, w2) : f32[B, 10]
  %loss = softmax_cross_entropy(%logits, y)
  minimize %loss with adam(lr = 0.001)
}
)";

// A module around some statements, which start on line 3.
std::string body(llvm::StringRef statements) {
  return "model m {\n  input x : f32[B, 4]\n" + statements.str() + "}\n";
}

} // namespace

TEST(Parser, BuildsTheModule) {
  auto m = parseOk(kMlp);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->name(), "mlp");
  EXPECT_EQ(m->sourceFile(), "t.prism");
  ASSERT_EQ(m->inputs().size(), 2u);
  EXPECT_EQ(m->inputs()[0]->name(), "x");
  EXPECT_EQ(m->inputs()[0]->type(), TensorType(DType::F32, {ir::kBatchDim, 784}));
  EXPECT_EQ(m->inputs()[1]->type(), TensorType(DType::I32, {ir::kBatchDim}));
  EXPECT_EQ(m->inputs()[0]->loc.line, 3);
  EXPECT_EQ(m->inputs()[0]->loc.column, 9);

  ASSERT_EQ(m->variables().size(), 3u);
  const ir::Variable &b1 = *m->variables()[1];
  EXPECT_EQ(b1.name(), "b1");
  EXPECT_EQ(b1.init.kind, "zeros");
  EXPECT_FALSE(b1.trainable());
  EXPECT_EQ(b1.loc.line, 6);
  EXPECT_EQ(b1.loc.column, 7);
  const ir::Variable &w2 = *m->variables()[2];
  EXPECT_EQ(w2.init.kind, "normal");
  EXPECT_DOUBLE_EQ(w2.init.params.getFloat("stddev"), 0.01);
  EXPECT_TRUE(w2.trainable());

  // The nested expression became three ops; inner ones got fresh numeric names.
  ASSERT_EQ(m->ops().size(), 5u);
  const ir::Op &mm = *opAt(*m, 0);
  EXPECT_EQ(mm.name(), "matmul");
  EXPECT_EQ(mm.result()->name(), "1");
  EXPECT_EQ(mm.operand(0), m->inputs()[0]->value.get());
  EXPECT_EQ(mm.operand(1), m->variables()[0]->value.get());
  EXPECT_EQ(mm.loc.line, 8);
  EXPECT_EQ(mm.loc.column, 17);
  const ir::Op &add = *opAt(*m, 1);
  EXPECT_EQ(add.name(), "add");
  EXPECT_EQ(add.operand(0), mm.result());
  const ir::Op &relu = *opAt(*m, 2);
  EXPECT_EQ(relu.result()->name(), "h");
  EXPECT_EQ(relu.operand(0), add.result());
  EXPECT_EQ(relu.loc.line, 8);
  EXPECT_EQ(relu.loc.column, 3);
  // Types are kept only where written; the parser infers nothing.
  EXPECT_FALSE(relu.result()->hasType());
  EXPECT_EQ(opAt(*m, 3)->result()->type(), TensorType(DType::F32, {ir::kBatchDim, 10}));

  ASSERT_TRUE(m->loss);
  EXPECT_EQ(m->loss->value, opAt(*m, 4)->result());
  EXPECT_EQ(m->loss->loc.line, 11);
  ASSERT_TRUE(m->optimizer);
  EXPECT_EQ(m->optimizer->kind, "adam");
  EXPECT_DOUBLE_EQ(m->optimizer->params.getFloat("lr"), 0.001);
  EXPECT_EQ(m->optimizer->loc.column, 23);
  EXPECT_EQ(m->headerTrivia.leadingComments, std::vector<std::string>{"A small perceptron."});
}

TEST(Parser, LossAndGradientsWithoutOptimizer) {
  auto m = parseOk(R"(model m {
  input x : f32[4]
  var w : f32[4] = zeros
  %p = mul(x, w)
  %loss = reduce_sum(%p)
  %dw = mul(x, x)
  assign(w, %dw)
  loss %loss
  gradient w = %dw
}
)");
  ASSERT_TRUE(m);
  ASSERT_TRUE(m->loss);
  EXPECT_FALSE(m->optimizer);
  ASSERT_EQ(m->gradients.size(), 1u);
  EXPECT_EQ(m->gradients[0].variable, m->variables()[0].get());
  EXPECT_EQ(m->gradients[0].value->name(), "dw");
  EXPECT_EQ(m->gradients[0].loc.line, 9);
  const ir::Op &assign = *opAt(*m, 3);
  EXPECT_EQ(assign.numResults(), 0u);
  EXPECT_EQ(assign.loc.line, 7);
  EXPECT_EQ(assign.loc.column, 3);
}

TEST(Parser, AttributesOfEveryKind) {
  auto m = parseOk(body(R"(  %c = constant(value = -inf, shape = [2, 4], dtype = f32)
  %r = reshape(x, shape = [B, 2, 2])
  %s = reduce_sum(%r, axes = [], keepdims = true)
  %p = max_pool2d(%r, window = [1, 1], padding = "valid")
)"));
  ASSERT_TRUE(m);
  const ir::AttrMap &c = opAt(*m, 0)->attrs;
  EXPECT_TRUE(std::isinf(c.getFloat("value")));
  EXPECT_LT(c.getFloat("value"), 0);
  EXPECT_EQ(c.getInts("shape"), (llvm::SmallVector<int64_t, 4>{2, 4}));
  EXPECT_EQ(c.getString("dtype"), "f32");
  EXPECT_TRUE(opAt(*m, 2)->attrs.getBool("keepdims"));
  EXPECT_TRUE(opAt(*m, 2)->attrs.find("axes")->getInts().empty());
  EXPECT_EQ(opAt(*m, 1)->attrs.getInts("shape"),
            (llvm::SmallVector<int64_t, 4>{ir::kBatchDim, 2, 2}));
  EXPECT_EQ(opAt(*m, 3)->attrs.getString("padding"), "valid");
}

TEST(Parser, FreshNamesAvoidNamesWrittenLater) {
  auto m = parseOk(body("  %a = relu(neg(x))\n  %1 = neg(x)\n  %2 = relu(%1)\n"));
  ASSERT_TRUE(m);
  EXPECT_EQ(opAt(*m, 0)->result()->name(), "3");
}

TEST(Parser, SparseTypesAndDynamicRows) {
  auto type = parseType("sparse f32[?, 64]");
  ASSERT_TRUE(bool(type)) << llvm::toString(type.takeError());
  EXPECT_TRUE(type->sparse);
  EXPECT_EQ(type->dims[0], ir::kDynamicDim);
  EXPECT_EQ(type->str(), "sparse f32[?, 64]");
  auto scalar = parseType("i64[]");
  ASSERT_TRUE(bool(scalar));
  EXPECT_TRUE(scalar->isScalar());
}

TEST(Parser, TypeErrorsForTheCommandLine) {
  auto bad = parseType("f32[B, 784");
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()),
            "error: invalid type 'f32[B, 784': unexpected end of file, expected ',' or ']' "
            "(column 11)");
  auto trailing = parseType("f32[2] x");
  ASSERT_FALSE(bool(trailing));
  EXPECT_EQ(llvm::toString(trailing.takeError()),
            "error: invalid type 'f32[2] x': expected the end of the type, found 'x' (column 8)");
}

TEST(Parser, ReadsFiles) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("parser-test", "prism", path));
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    ASSERT_FALSE(ec);
    os << kMlp;
  }
  auto m = parseModuleFile(path);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  EXPECT_EQ((*m)->sourceFile(), path.str().str());
  llvm::sys::fs::remove(path);

  auto missing = parseModuleFile("/nonexistent/dir/m.prism");
  ASSERT_FALSE(bool(missing));
  EXPECT_EQ(llvm::toString(missing.takeError()),
            "error: cannot read /nonexistent/dir/m.prism: No such file or directory");
}

// Errors, each at the place a reader would look.

TEST(ParserErrors, EmptyFile) {
  EXPECT_EQ(parseError(""), "t.prism:1:1: error: unexpected end of file, expected 'model'");
  EXPECT_EQ(parseError("// only a comment\n"),
            "t.prism:2:1: error: unexpected end of file, expected 'model'");
  EXPECT_EQ(parseError("input x : f32[]"), "t.prism:1:1: error: expected 'model', found 'input'");
}

TEST(ParserErrors, BadBytes) {
  EXPECT_EQ(parseError("model m {\n  \x01\n}"), "t.prism:2:3: error: unexpected character '\\x01'");
  EXPECT_EQ(parseError("\x7f\x45\x4c\x46"), "t.prism:1:1: error: unexpected character '\\x7f'");
  EXPECT_EQ(parseError(body("  %h = relu(x) $\n")),
            "t.prism:3:16: error: unexpected character '$'");
}

TEST(ParserErrors, TruncatedFile) {
  EXPECT_EQ(parseError("model m {\n  input x : f32[2]\n"),
            "t.prism:3:1: error: unexpected end of file, expected '}'");
  EXPECT_EQ(parseError("model m {\n  %h = relu(x"),
            "t.prism:2:13: error: use of undefined value 'x'");
  EXPECT_EQ(parseError("model m {\n  input x : f32[2]\n  %h = relu(x"),
            "t.prism:3:14: error: unexpected end of file, expected ',' or ')'");
  EXPECT_EQ(parseError("model m {\n  input x : f32[2"),
            "t.prism:2:18: error: unexpected end of file, expected ',' or ']'");
  EXPECT_EQ(parseError("model"), "t.prism:1:6: error: unexpected end of file, expected the "
                                 "model's name");
}

TEST(ParserErrors, TextAfterTheModule) {
  EXPECT_EQ(parseError("model m {\n}\nmodel n {\n}\n"),
            "t.prism:3:1: error: expected the end of the file after '}', found 'model'");
}

TEST(ParserErrors, UnknownOp) {
  EXPECT_EQ(parseError(body("  %h = mtamul(x, x)\n")),
            "t.prism:3:8: error: unknown op 'mtamul'; did you mean 'matmul'?");
  EXPECT_EQ(parseError(body("  %h = rleu(x)\n")),
            "t.prism:3:8: error: unknown op 'rleu'; did you mean 'relu'?");
  EXPECT_EQ(parseError(body("  %h = frobnicate(x)\n")),
            "t.prism:3:8: error: unknown op 'frobnicate'");
  EXPECT_EQ(parseError(body("  %h = relu(foo(x))\n")), "t.prism:3:13: error: unknown op 'foo'");
}

TEST(ParserErrors, WrongArity) {
  EXPECT_EQ(parseError(body("  %h = matmul(x)\n")),
            "t.prism:3:3: error: 'matmul' takes 2 operands, got 1: matmul(a, b, transpose_a = "
            "false, transpose_b = false)");
  EXPECT_EQ(parseError(body("  %h = relu(neg(x, x))\n")),
            "t.prism:3:13: error: 'neg' takes 1 operand, got 2: neg(x)");
}

TEST(ParserErrors, Attributes) {
  EXPECT_EQ(parseError(body("  %h = relu(x, alpha = 1)\n")),
            "t.prism:3:3: error: 'relu' has no attribute 'alpha': relu(x)");
  EXPECT_EQ(parseError(body("  %h = reshape(x)\n")),
            "t.prism:3:3: error: 'reshape' needs attribute 'shape': reshape(x, shape)");
  EXPECT_EQ(parseError(body("  %h = reshape(x, shape = 4)\n")),
            "t.prism:3:3: error: attribute 'shape' of 'reshape' must be a list of integers, got 4");
  EXPECT_EQ(parseError(body("  %h = reshape(x, shape = [4], shape = [4])\n")),
            "t.prism:3:32: error: attribute 'shape' is given twice");
  EXPECT_EQ(parseError(body("  %h = reshape(shape = [4], x)\n")),
            "t.prism:3:29: error: operand 'x' after attributes: operands come first");
  EXPECT_EQ(parseError(body("  %h = reshape(x, shape = [4, x])\n")),
            "t.prism:3:31: error: expected an integer, 'B' or '?', found 'x'");
  EXPECT_EQ(parseError(body("  %h = cast(x, dtype = B)\n")),
            "t.prism:3:24: error: 'B' stands for the batch only inside a list such as [B, 10]; "
            "write \"B\" for the name");
}

TEST(ParserErrors, ResultCount) {
  EXPECT_EQ(parseError(body("  %a, %b = relu(x)\n")),
            "t.prism:3:3: error: 'relu' gives 1 result, but 2 names are given");
  EXPECT_EQ(parseError(body("  relu(x)\n")),
            "t.prism:3:3: error: 'relu' gives 1 result, but no name is given");
  EXPECT_EQ(parseError("model m {\n  var w : f32[2] = zeros\n  %a = assign(w, w)\n}\n"),
            "t.prism:3:3: error: 'assign' gives no result, but 1 name is given");
  EXPECT_EQ(parseError("model m {\n  var w : f32[2] = zeros\n  %a = relu(assign(w, w))\n}\n"),
            "t.prism:3:13: error: 'assign' gives no result, so it cannot be an operand of "
            "another op");
  EXPECT_EQ(parseError(body("  %a = relu(x) : f32[B, 4], f32[B, 4]\n")),
            "t.prism:3:16: error: 2 types given for 1 result of 'relu'");
}

TEST(ParserErrors, UndefinedValue) {
  EXPECT_EQ(parseError(body("  %a = relu(%h)\n")),
            "t.prism:3:13: error: use of undefined value '%h'");
  EXPECT_EQ(parseError(body("  %a = relu(w9)\n")),
            "t.prism:3:13: error: use of undefined value 'w9'");
  EXPECT_EQ(parseError(body("  %a = relu(%x)\n")),
            "t.prism:3:13: error: use of undefined value '%x'; did you mean 'x'?");
  EXPECT_EQ(parseError(body("  %a = relu(x)\n  %b = relu(a)\n")),
            "t.prism:4:13: error: use of undefined value 'a'; did you mean '%a'?");
  // A value is defined by its statement, not before.
  EXPECT_EQ(parseError(body("  %a = relu(%a)\n")),
            "t.prism:3:13: error: use of undefined value '%a'");
  EXPECT_EQ(parseError(body("  minimize %nope with sgd(lr = 0.1)\n")),
            "t.prism:3:12: error: use of undefined value '%nope'");
  EXPECT_EQ(parseError(body("  gradient w9 = %g\n")),
            "t.prism:3:12: error: use of undefined variable 'w9'");
  EXPECT_EQ(parseError(body("  %g = relu(x)\n  gradient x = %g\n")),
            "t.prism:4:12: error: 'x' is not a variable");
}

TEST(ParserErrors, DuplicateNames) {
  EXPECT_EQ(parseError("model m {\n  var w1 : f32[2] = zeros\n  var w1 : f32[2] = zeros\n}\n"),
            "t.prism:3:7: error: 'w1' is defined twice (first at 2:7)");
  EXPECT_EQ(parseError(body("  input x : f32[2]\n")),
            "t.prism:3:9: error: 'x' is defined twice (first at 2:9)");
  EXPECT_EQ(parseError(body("  %h = relu(x)\n  %h = neg(x)\n")),
            "t.prism:4:3: error: '%h' is defined twice (first at 3:3)");
  EXPECT_EQ(parseError(body("  %h, %h = relu(x)\n")),
            "t.prism:3:7: error: '%h' is defined twice (first at 3:3)");
  EXPECT_EQ(parseError(body("  %x = relu(x)\n")),
            "t.prism:3:3: error: '%x' is defined twice (first at 2:9)");
  EXPECT_EQ(parseError(body("  %l = reduce_sum(x)\n  loss %l\n  loss %l\n")),
            "t.prism:5:3: error: the loss is declared twice (first at 4:3)");
}

TEST(ParserErrors, ShapeMismatchReportedByTheVerifier) {
  EXPECT_EQ(parseError(body("  %h = relu(x) : f32[B, 5]\n")),
            "t.prism:3:3: error: 'relu' defining %h: result %h is declared f32[B, 5] but the op "
            "gives f32[B, 4]");
  EXPECT_EQ(parseError(body("  %h = matmul(x, x)\n"))
                .rfind("t.prism:3:3: error: 'matmul' defining %h: ", 0),
            0u);
  EXPECT_EQ(parseError("model m {\n  var w : f32[B, 2] = zeros\n}\n"),
            "t.prism:2:7: error: variable 'w' cannot have the batch dimension B: f32[B, 2]");
}

TEST(ParserErrors, AbsurdNumbers) {
  EXPECT_EQ(parseError("model m {\n  input x : f32[99999999999999999999]\n}\n"),
            "t.prism:2:17: error: integer literal out of range: '99999999999999999999'");
  EXPECT_EQ(parseError("model m {\n  input x : f32[1000000, 1000000, 1000000]\n}\n"),
            "t.prism:2:13: error: type f32[1000000, 1000000, 1000000] is too large: more than "
            "2^40 elements");
  EXPECT_EQ(parseError("model m {\n  input x : f32[-3]\n}\n"),
            "t.prism:2:17: error: a dimension cannot be negative, found '-3'");
  EXPECT_EQ(parseError(body("  %c = constant(value = 1e999)\n")),
            "t.prism:3:25: error: float literal out of range: '1e999'");
  EXPECT_EQ(parseError(body("  %c = constant(value = 1, shape = [99999999999999999999])\n")),
            "t.prism:3:37: error: integer literal out of range: '99999999999999999999'");
}

TEST(ParserErrors, DeepNesting) {
  std::string deep = "  %h = ";
  for (int i = 0; i < 300; ++i)
    deep += "neg(";
  deep += "x";
  for (int i = 0; i < 300; ++i)
    deep += ")";
  // The 257th `neg(` starts at column 8 + 256 * 4.
  EXPECT_EQ(parseError(body(deep + "\n")),
            "t.prism:3:1032: error: expressions nested deeper than 256");

  std::string ok = "  %h = ";
  for (int i = 0; i < 256; ++i)
    ok += "neg(";
  ok += "x";
  for (int i = 0; i < 256; ++i)
    ok += ")";
  auto m = parseOk(body(ok + "\n"));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->ops().size(), 256u);
}

TEST(ParserErrors, Syntax) {
  EXPECT_EQ(parseError(body("  input y f32[2]\n")),
            "t.prism:3:11: error: expected ':' and the input's type, found 'f32'");
  EXPECT_EQ(parseError(body("  input y : f16[2]\n")),
            "t.prism:3:13: error: unknown element type 'f16' (expected f32, f64, i32, i64 or "
            "bool)");
  EXPECT_EQ(parseError(body("  %h relu(x)\n")),
            "t.prism:3:6: error: expected ',' or '=', found 'relu'");
  EXPECT_EQ(parseError(body("  %h = relu x\n")),
            "t.prism:3:13: error: expected '(' after 'relu', found 'x'");
  EXPECT_EQ(parseError(body("  %h = relu(x,)\n")),
            "t.prism:3:15: error: expected an operand or an attribute, found ')'");
  EXPECT_EQ(parseError(body("  = relu(x)\n")),
            "t.prism:3:3: error: expected a statement (input, data, var, func, an op, minimize, "
            "loss, gradient) or '}', found '='");
  EXPECT_EQ(parseError(body("  %l = reduce_sum(x)\n  minimize %l using sgd(lr = 1)\n")),
            "t.prism:4:15: error: expected 'with' and an optimizer, found 'using'");
  EXPECT_EQ(parseError(body("  var w : f32[2]\n")),
            "t.prism:4:1: error: expected '=' and an initializer, found '}'");
  EXPECT_EQ(parseError(body("  %c = cast(x, dtype = \"f32)\n")),
            "t.prism:3:24: error: unterminated string");
}

TEST(ParserErrors, Initializers) {
  EXPECT_EQ(parseError(body("  var w : f32[2] = gaussian\n")),
            "t.prism:3:20: error: unknown initializer 'gaussian'; accepted: zeros, ones, "
            "constant(value), glorot_uniform, normal(mean = 0, stddev = 1), uniform(min = "
            "-0.05, max = 0.05), values(file, offset = 0)");
  EXPECT_EQ(parseError(body("  var w : f32[2] = normal(std = 1)\n")),
            "t.prism:3:20: error: initializer 'normal' has no parameter 'std'; accepted: "
            "normal(mean = 0, stddev = 1)");
  EXPECT_EQ(parseError(body("  var w : f32[2] = constant\n")),
            "t.prism:3:20: error: initializer 'constant' needs parameter 'value': "
            "constant(value)");
  EXPECT_EQ(parseError(body("  var w : f32[2] = zeros(value = 1)\n")),
            "t.prism:3:20: error: initializer 'zeros' takes no parameters, got 'value'");
  EXPECT_EQ(parseError(body("  var w : f32[2] = uniform(min = 1, max = 0)\n")),
            "t.prism:3:20: error: initializer 'uniform' needs min <= max, got min = 1.0, max = "
            "0.0");
  EXPECT_EQ(parseError(body("  var w : f32[2] = normal(stddev = fast)\n")),
            "t.prism:3:20: error: parameter 'stddev' of initializer 'normal' must be a number, "
            "got fast");
}

TEST(ParserErrors, Optimizers) {
  std::string loss = "  %l = reduce_sum(x)\n";
  EXPECT_EQ(parseError(body(loss + "  minimize %l with adagrad(lr = 0.1)\n")),
            "t.prism:4:20: error: unknown optimizer 'adagrad' (expected sgd, momentum or adam)");
  EXPECT_EQ(parseError(body(loss + "  minimize %l with adam(lr = 0.1, beta3 = 0.9)\n")),
            "t.prism:4:20: error: optimizer 'adam' has no parameter 'beta3'; accepted: lr, "
            "beta1, beta2, epsilon, clip_norm, loss_scale, loss_scale_interval");
  EXPECT_EQ(parseError(body(loss + "  minimize %l with momentum(lr = 0.1, nesterov = 1)\n")),
            "t.prism:4:20: error: parameter 'nesterov' of optimizer 'momentum' must be a "
            "boolean, got 1");
  EXPECT_EQ(parseError(body(loss + "  minimize %l with sgd()\n")),
            "t.prism:4:20: error: optimizer 'sgd' needs a positive lr");
  EXPECT_EQ(parseError(body(loss + "  minimize %l with sgd(lr = 0.1, clip_norm = 0)\n")),
            "t.prism:4:20: error: optimizer 'sgd' needs a positive clip_norm, got 0");
  auto m = parseOk(body(loss + "  minimize %l with momentum(lr = 0.1, momentum = 0.9, "
                               "nesterov = true, clip_norm = 5)\n"));
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->optimizer->params.getBool("nesterov"));
}

TEST(ParserErrors, LossMustBeAFloatScalar) {
  EXPECT_EQ(parseError(body("  %h = relu(x) : f32[B, 4]\n  loss %h\n")),
            "t.prism:4:3: error: the loss %h must be a float scalar, got f32[B, 4]");
}

TEST(Parser, HugeFile) {
  std::string text = "model big {\n  input x : f32[B, 8]\n  %v0 = relu(x)\n";
  const int n = 50000;
  for (int i = 1; i < n; ++i)
    text += "  %v" + std::to_string(i) + " = add(%v" + std::to_string(i - 1) + ", x) // c\n";
  text += "}\n";
  auto m = parseOk(text);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->ops().size(), static_cast<size_t>(n));
  EXPECT_EQ(ir::printModule(*m), text);
}
