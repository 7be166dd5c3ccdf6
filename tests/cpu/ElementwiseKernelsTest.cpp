// The CPU elementwise kernels against the reference interpreter: broadcasting arithmetic in every
// pattern the broadcast plan distinguishes, maximum, minimum and where, unary math, activations
// and their backward ops, bias_add, integer dtypes, and the parallel paths.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "ir/Builder.h"
#include "ir/OpTable.h"
#include "runtime/cpu/Kernel.h"
#include "runtime/exec/Executor.h"
#include "tests/cpu/ReferenceCheck.h"

namespace {

using namespace prism;
using ir::Attr;
using ir::DType;
using ir::TensorType;
using prism::testing::ReferenceCheckOptions;

constexpr int64_t B = ir::kBatchDim;

std::string describe(llvm::StringRef op, const std::vector<TensorType> &inputs) {
  std::string s = op.str() + "(";
  for (size_t i = 0; i < inputs.size(); ++i)
    s += (i ? ", " : "") + inputs[i].str();
  return s + ")";
}

// y = op(x0, x1, ...) over inputs of the given types, compared with the reference.
void expectOpMatches(llvm::StringRef op, const std::vector<TensorType> &inputs,
                     ir::AttrMap attrs = {}, const ReferenceCheckOptions &options = {}) {
  SCOPED_TRACE(describe(op, inputs));
  ir::ModuleBuilder b("single_op");
  std::vector<ir::Value *> operands;
  for (size_t i = 0; i < inputs.size(); ++i)
    operands.push_back(b.input("x" + std::to_string(i), inputs[i]));
  b.op(op, operands, std::move(attrs), "y");
  auto module = b.finish();
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  prism::testing::expectMatchesReference(**module, {"y"}, options);
}

TensorType f32(llvm::ArrayRef<int64_t> dims) {
  return TensorType(DType::F32, dims);
}

// Operand shape pairs covering each broadcast pattern: same shapes, scalars on either side,
// [C] and [1, C] rows, [N, 1] columns, outer products, and rank 4 with tables of row starts.
const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> kBroadcastShapes = {
    {{B, 5}, {B, 5}},
    {{B, 5}, {}},
    {{}, {B, 5}},
    {{B, 7}, {7}},
    {{7}, {B, 7}},
    {{B, 7}, {1, 7}},
    {{B, 1}, {B, 7}},
    {{B, 7}, {B, 1}},
    {{4, 1}, {1, 5}},
    {{B, 3, 4, 5}, {3, 1, 5}},
    {{B, 1, 4, 1}, {1, 3, 1, 5}},
    {{2, 3, 4, 5}, {5}},
    {{B, 3, 4, 5}, {B, 3, 4, 5}},
    {{B, 3, 1, 5}, {B, 1, 4, 1}},
    {{1}, {B, 3}},
};

TEST(ElementwiseKernels, ArithmeticBroadcastsLikeTheReference) {
  ReferenceCheckOptions options;
  options.batch = 3;
  for (const char *op : {"add", "sub", "mul", "div"})
    for (const auto &[a, b] : kBroadcastShapes)
      expectOpMatches(op, {f32(a), f32(b)}, {}, options);
}

TEST(ElementwiseKernels, ArithmeticOnEveryNumericDtype) {
  for (DType dtype : {DType::F64, DType::I32, DType::I64})
    for (const char *op : {"add", "sub", "mul"})
      for (const auto &[a, b] :
           {std::pair<std::vector<int64_t>, std::vector<int64_t>>{{B, 6}, {B, 6}},
            {{B, 6}, {6}},
            {{B, 1, 6}, {4, 1}}})
        expectOpMatches(op, {TensorType(dtype, a), TensorType(dtype, b)});
  expectOpMatches("div", {TensorType(DType::F64, {B, 6}), TensorType(DType::F64, {6})});
}

TEST(ElementwiseKernels, MaximumAndMinimumBroadcastLikeTheReference) {
  for (const char *op : {"maximum", "minimum"}) {
    for (const auto &[a, b] : kBroadcastShapes)
      expectOpMatches(op, {f32(a), f32(b)});
    // Integers from [0, 10) tie often.
    for (DType dtype : {DType::F64, DType::I32, DType::I64})
      expectOpMatches(op, {TensorType(dtype, {B, 6}), TensorType(dtype, {6})});
  }
}

// The shares of maximum's and minimum's gradient: dy, a and b broadcast in several patterns.
TEST(ElementwiseKernels, MaximumAndMinimumGradients) {
  for (const char *op : {"maximum_grad", "minimum_grad"})
    for (DType dtype : {DType::F32, DType::F64}) {
      auto t = [&](llvm::ArrayRef<int64_t> dims) { return TensorType(dtype, dims); };
      expectOpMatches(op, {t({B, 7}), t({B, 7}), t({B, 7})});
      expectOpMatches(op, {t({B, 7}), t({7}), t({B, 1})});
      expectOpMatches(op, {t({B, 3, 4, 5}), t({3, 1, 5}), t({B, 1, 4, 1})});
      expectOpMatches(op, {t({B, 3, 4, 5}), t({}), t({B, 3, 4, 5})});
    }
}

// a and b the same value: every element ties, and both ops give a all of dy.
TEST(ElementwiseKernels, MaximumAndMinimumGradientsGoToAOnTies) {
  for (const char *op : {"maximum_grad", "minimum_grad"}) {
    SCOPED_TRACE(op);
    ir::ModuleBuilder b("ties");
    ir::Value *dy = b.input("dy", f32({B, 9}));
    ir::Value *x = b.input("x", f32({B, 9}));
    b.op(op, {dy, x, x}, {}, "y");
    auto module = b.finish();
    ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
    prism::testing::expectMatchesReference(**module, {"y"});
  }
}

// where(cond, a, b) with conditions of every dtype (integers from {0, 1}, floats of either
// sign, never zero) and each operand broadcast in turn.
TEST(ElementwiseKernels, WhereSelectsLikeTheReference) {
  ReferenceCheckOptions options;
  options.intBound["x0"] = 2;
  const std::vector<std::vector<std::vector<int64_t>>> shapes = {
      {{B, 5}, {B, 5}, {B, 5}},       {{B, 5}, {5}, {}},          {{5}, {B, 5}, {B, 1}},
      {{B, 1, 4}, {3, 1}, {B, 3, 4}}, {{}, {B, 2, 3}, {B, 2, 3}}, {{B, 3, 4, 5}, {5}, {4, 1}}};
  for (DType cond : {DType::Bool, DType::I32, DType::I64, DType::F32, DType::F64})
    for (const auto &s : shapes)
      expectOpMatches("where", {TensorType(cond, s[0]), f32(s[1]), f32(s[2])}, {}, options);
  expectOpMatches(
      "where",
      {TensorType(DType::I32, {B, 4}), TensorType(DType::F64, {B, 4}), TensorType(DType::F64, {4})},
      {}, options);
}

// Integer division truncates toward zero: numerators in [-5, 5), divisors in [1, 10] or
// [-10, -1], so that no divisor is zero.
TEST(ElementwiseKernels, IntegerDivisionTruncatesTowardZero) {
  for (DType dtype : {DType::I32, DType::I64})
    for (double shift : {1.0, -10.0}) {
      ir::ModuleBuilder b("int_div");
      ir::Value *x = b.input("x", TensorType(dtype, {B, 8}));
      ir::Value *d = b.input("d", TensorType(dtype, {8}));
      auto constant = [&](double value) {
        return b.op("constant", {},
                    ir::attrs({{"value", Attr::real(value)},
                               {"dtype", Attr::string(ir::dtypeName(dtype).str())}}));
      };
      ir::Value *numerator = b.op("sub", {x, constant(5)});
      ir::Value *divisor = b.op("add", {d, constant(shift)});
      b.op("div", {numerator, divisor}, {}, "y");
      auto module = b.finish();
      ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
      ReferenceCheckOptions options;
      options.batch = 5;
      prism::testing::expectMatchesReference(**module, {"y"}, options);
    }
}

TEST(ElementwiseKernels, IntegerDivisionByZeroIsAnError) {
  ir::ModuleBuilder b("div_zero");
  ir::Value *x = b.input("x", TensorType(DType::I32, {2}));
  ir::Value *d = b.input("d", TensorType(DType::I32, {2}));
  b.op("div", {x, d}, {}, "y");
  auto module = b.finish();
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  runtime::ExecutorOptions options;
  options.outputs = {"y"};
  auto exec =
      runtime::Executor::create(**module, std::make_shared<runtime::VariableStore>(), options);
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  runtime::Tensor numerator(DType::I32, {2}), divisor(DType::I32, {2});
  numerator.data<int32_t>()[0] = 7;
  numerator.data<int32_t>()[1] = 8;
  divisor.data<int32_t>()[0] = 2;
  divisor.data<int32_t>()[1] = 0;
  llvm::Error err = (*exec)->step({{"x", numerator}, {"d", divisor}});
  ASSERT_TRUE(bool(err));
  std::string message = llvm::toString(std::move(err));
  EXPECT_NE(message.find("division by zero"), std::string::npos) << message;
}

TEST(ElementwiseKernels, UnaryMath) {
  struct Case {
    const char *op;
    double low, high;
  };
  for (const Case &c :
       {Case{"neg", -1, 1}, Case{"exp", -20, 20}, Case{"log", 1e-3, 100}, Case{"sqrt", 1e-3, 100},
        Case{"relu", -1, 1}, Case{"sigmoid", -30, 30}, Case{"tanh", -6, 6}, Case{"tanh", -0.7, 0.7},
        Case{"erf", -4, 4}, Case{"erf", -0.3, 0.3}, Case{"gelu", -6, 6}}) {
    ReferenceCheckOptions options;
    options.low = c.low;
    options.high = c.high;
    options.batch = 7;
    for (DType dtype : {DType::F32, DType::F64})
      for (const std::vector<int64_t> &dims : {std::vector<int64_t>{B, 37}, {B, 3, 4, 5}, {}})
        expectOpMatches(c.op, {TensorType(dtype, dims)}, {}, options);
  }
}

TEST(ElementwiseKernels, NegOnIntegers) {
  for (DType dtype : {DType::I32, DType::I64})
    expectOpMatches("neg", {TensorType(dtype, {B, 9})});
}

TEST(ElementwiseKernels, ActivationGradients) {
  for (const char *op : {"relu_grad", "sigmoid_grad", "tanh_grad", "erf_grad", "gelu_grad"})
    for (DType dtype : {DType::F32, DType::F64})
      for (const std::vector<int64_t> &dims : {std::vector<int64_t>{B, 33}, {B, 2, 3, 4}})
        expectOpMatches(op, {TensorType(dtype, dims), TensorType(dtype, dims)});
}

TEST(ElementwiseKernels, BiasAdd) {
  for (DType dtype : {DType::F32, DType::F64}) {
    expectOpMatches("bias_add", {TensorType(dtype, {B, 7}), TensorType(dtype, {7})});
    expectOpMatches("bias_add", {TensorType(dtype, {B, 3, 4, 5}), TensorType(dtype, {5})});
    expectOpMatches("bias_add", {TensorType(dtype, {6}), TensorType(dtype, {6})});
  }
}

// Large enough that every kernel splits its work over both threads.
TEST(ElementwiseKernels, TwoThreadsOnLargeTensors) {
  ReferenceCheckOptions options;
  options.threads = 2;
  options.batch = 96;
  expectOpMatches("add", {f32({B, 1000}), f32({1000})}, {}, options);
  expectOpMatches("mul", {f32({B, 1000}), f32({B, 1000})}, {}, options);
  expectOpMatches("sub", {f32({B, 1, 1000}), f32({4, 1})}, {}, options);
  expectOpMatches("div", {f32({B, 1000}), f32({})}, {}, options);
  expectOpMatches("bias_add", {f32({B, 1000}), f32({1000})}, {}, options);
  expectOpMatches("relu_grad", {f32({B, 1000}), f32({B, 1000})}, {}, options);
  expectOpMatches("maximum", {f32({B, 1000}), f32({1000})}, {}, options);
  expectOpMatches("maximum_grad", {f32({B, 1000}), f32({B, 1000}), f32({1000})}, {}, options);
  ReferenceCheckOptions conditions = options;
  conditions.intBound["x0"] = 2;
  expectOpMatches("where", {TensorType(DType::I32, {B, 1000}), f32({B, 1000}), f32({})}, {},
                  conditions);
  for (const char *op : {"exp", "tanh", "sigmoid", "relu", "neg", "sqrt"}) {
    ReferenceCheckOptions positive = options;
    positive.low = 0.01;
    expectOpMatches(op, {f32({B, 1000})}, {}, positive);
  }
  options.batch = 8;
  expectOpMatches("add", {f32({B, 16, 32, 33}), f32({16, 1, 33})}, {}, options);
}

// Output buffers are reused memory: a chain of ops over two steps leaves stale values behind
// that a kernel which skipped elements would expose.
TEST(ElementwiseKernels, EveryOutputElementIsWrittenEachStep) {
  ir::ModuleBuilder b("chain");
  ir::Value *x = b.input("x", f32({B, 64}));
  ir::Value *c = b.input("c", f32({64}));
  ir::Value *h = b.op("tanh", {b.op("mul", {x, c})});
  h = b.op("sigmoid", {b.op("add", {h, c})});
  h = b.op("sub", {b.op("exp", {h}), b.op("relu", {x})});
  b.op("bias_add", {b.op("neg", {h}), c}, {}, "y");
  auto module = b.finish();
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  ReferenceCheckOptions options;
  options.steps = 3;
  options.batch = 5;
  prism::testing::expectMatchesReference(**module, {"y"}, options);
}

TEST(ElementwiseKernels, EveryElementwiseOpHasACpuKernel) {
  const std::set<std::string> family = {
      "add",      "sub",       "mul",          "div",       "neg",          "exp",
      "log",      "sqrt",      "relu",         "sigmoid",   "tanh",         "erf",
      "gelu",     "relu_grad", "sigmoid_grad", "tanh_grad", "erf_grad",     "gelu_grad",
      "bias_add", "maximum",   "minimum",      "where",     "maximum_grad", "minimum_grad"};
  size_t found = 0;
  for (const ir::OpDef *def : ir::allOps()) {
    if (!family.count(def->name))
      continue;
    ++found;
    EXPECT_NE(runtime::findKernel(def->name, ir::DeviceKind::Cpu), nullptr)
        << "no CPU kernel for " << def->name;
  }
  EXPECT_EQ(found, family.size());
}

} // namespace
