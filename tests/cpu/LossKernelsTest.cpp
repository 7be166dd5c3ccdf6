// The CPU softmax, layer-norm and cross-entropy kernels against the reference interpreter:
// row-wise ops of several ranks and dtypes, labels of both integer dtypes, ignored labels, large
// logits, out-of-range labels, and the parallel paths.
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
                     const ReferenceCheckOptions &options = {}, ir::AttrMap attrs = {}) {
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

// Labels are operand x1 of softmax_cross_entropy and x2 of its gradient.
ReferenceCheckOptions withClasses(const char *labelInput, int64_t classes) {
  ReferenceCheckOptions options;
  options.intBound[labelInput] = classes;
  return options;
}

TEST(LossKernels, SoftmaxAndLogSoftmax) {
  for (const char *op : {"softmax", "log_softmax"})
    for (DType dtype : {DType::F32, DType::F64})
      for (const std::vector<int64_t> &dims :
           {std::vector<int64_t>{B, 10}, {B, 3, 7}, {5}, {B, 1}, {2, 3, 4, 129}})
        expectOpMatches(op, {TensorType(dtype, dims)});
}

// Logits far apart: the shift by the row maximum keeps exp from overflowing.
TEST(LossKernels, LargeLogitsStayFinite) {
  ReferenceCheckOptions options = withClasses("x1", 10);
  options.low = -80;
  options.high = 80;
  expectOpMatches("softmax", {TensorType(DType::F32, {B, 10})}, options);
  expectOpMatches("log_softmax", {TensorType(DType::F32, {B, 10})}, options);
  expectOpMatches("softmax_cross_entropy",
                  {TensorType(DType::F32, {B, 10}), TensorType(DType::I32, {B})}, options);
}

TEST(LossKernels, SoftmaxGradients) {
  for (const char *op : {"softmax_grad", "log_softmax_grad"})
    for (DType dtype : {DType::F32, DType::F64})
      for (const std::vector<int64_t> &dims : {std::vector<int64_t>{B, 10}, {B, 3, 7}})
        expectOpMatches(op, {TensorType(dtype, dims), TensorType(dtype, dims)});
}

TEST(LossKernels, CrossEntropyWithEveryLabelDtype) {
  for (DType dtype : {DType::F32, DType::F64})
    for (DType labels : {DType::I32, DType::I64})
      for (int64_t classes : {1, 10, 37}) {
        expectOpMatches("softmax_cross_entropy",
                        {TensorType(dtype, {B, classes}), TensorType(labels, {B})},
                        withClasses("x1", classes));
        expectOpMatches(
            "softmax_cross_entropy_grad",
            {TensorType(dtype, {}), TensorType(dtype, {B, classes}), TensorType(labels, {B})},
            withClasses("x2", classes));
      }
}

// The loss and its gradient through a module: the gradient seed is the loss's own value.
TEST(LossKernels, CrossEntropyChain) {
  ir::ModuleBuilder b("xent");
  ir::Value *logits = b.input("logits", TensorType(DType::F32, {B, 12}));
  ir::Value *labels = b.input("labels", TensorType(DType::I64, {B}));
  ir::Value *probs = b.op("softmax", {logits});
  ir::Value *loss = b.op("softmax_cross_entropy", {b.op("log_softmax", {probs}), labels});
  b.op("softmax_cross_entropy_grad", {loss, logits, labels}, {}, "y");
  auto module = b.finish();
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  ReferenceCheckOptions options;
  options.intBound["labels"] = 12;
  options.batch = 9;
  options.steps = 2;
  prism::testing::expectMatchesReference(**module, {"y"}, options);
}

TEST(LossKernels, TwoThreadsOnLargeTensors) {
  ReferenceCheckOptions options = withClasses("x1", 1000);
  options.threads = 2;
  options.batch = 64;
  expectOpMatches("softmax", {TensorType(DType::F32, {B, 1000})}, options);
  expectOpMatches("log_softmax", {TensorType(DType::F32, {B, 1000})}, options);
  expectOpMatches("softmax_grad",
                  {TensorType(DType::F32, {B, 1000}), TensorType(DType::F32, {B, 1000})}, options);
  expectOpMatches("log_softmax_grad",
                  {TensorType(DType::F32, {B, 1000}), TensorType(DType::F32, {B, 1000})}, options);
  expectOpMatches("softmax_cross_entropy",
                  {TensorType(DType::F32, {B, 1000}), TensorType(DType::I32, {B})}, options);
  options.intBound["x2"] = 1000;
  expectOpMatches(
      "softmax_cross_entropy_grad",
      {TensorType(DType::F32, {}), TensorType(DType::F32, {B, 1000}), TensorType(DType::I32, {B})},
      options);
}

// Logits [B, T, C]: every position is an example, and positions labelled ignore_index count for
// nothing (labels drawn from [0, 7), so about one in seven).
TEST(LossKernels, CrossEntropyOverPositionsAndIgnoredLabels) {
  ir::AttrMap ignore = ir::attrs({{"ignore_index", ir::Attr::integer(3)}});
  for (DType dtype : {DType::F32, DType::F64})
    for (DType labels : {DType::I32, DType::I64})
      for (const ir::AttrMap &attrs : {ir::AttrMap(), ignore}) {
        ReferenceCheckOptions loss = withClasses("x1", 7), grad = withClasses("x2", 7);
        loss.batch = grad.batch = 5;
        expectOpMatches("softmax_cross_entropy",
                        {TensorType(dtype, {B, 4, 7}), TensorType(labels, {B, 4})}, loss, attrs);
        expectOpMatches(
            "softmax_cross_entropy_grad",
            {TensorType(dtype, {}), TensorType(dtype, {B, 4, 7}), TensorType(labels, {B, 4})}, grad,
            attrs);
      }
}

TEST(LossKernels, SigmoidCrossEntropy) {
  struct Range {
    double low, high;
  };
  // Labels share the logits' range: [0, 1) is the usual one; the formula holds for any.
  for (Range range : {Range{0, 1}, Range{-1, 1}, Range{-40, 40}})
    for (DType dtype : {DType::F32, DType::F64})
      for (const std::vector<int64_t> &dims : {std::vector<int64_t>{B, 33}, {B, 2, 3}, {7}}) {
        ReferenceCheckOptions options;
        options.low = range.low;
        options.high = range.high;
        expectOpMatches("sigmoid_cross_entropy", {TensorType(dtype, dims), TensorType(dtype, dims)},
                        options);
        expectOpMatches("sigmoid_cross_entropy_grad",
                        {TensorType(dtype, {}), TensorType(dtype, dims), TensorType(dtype, dims)},
                        options);
      }
}

// (Rows of 1 or 2 elements normalize to constants, so their dx is rounding noise around 0.)
TEST(LossKernels, LayerNorm) {
  ir::AttrMap wide = ir::attrs({{"epsilon", ir::Attr::real(0.5)}});
  for (DType dtype : {DType::F32, DType::F64})
    for (const std::vector<int64_t> &dims : {std::vector<int64_t>{B, 33}, {B, 3, 8}, {4}})
      for (const ir::AttrMap &attrs : {ir::AttrMap(), wide}) {
        TensorType x(dtype, dims), d(dtype, {dims.back()});
        expectOpMatches("layer_norm", {x, d, d}, {}, attrs);
        expectOpMatches("layer_norm_grad", {x, x, d}, {}, attrs);
        expectOpMatches("layer_norm_gamma_grad", {x, x}, {}, attrs);
      }
}

// Values far from 0 with a small spread: the variance is taken around the mean, so the
// cancellation of E[x^2] - E[x]^2 cannot hurt it.
TEST(LossKernels, LayerNormOfOffsetRows) {
  ReferenceCheckOptions options;
  options.low = 1000;
  options.high = 1001;
  TensorType x(DType::F32, {B, 16}), d(DType::F32, {16});
  expectOpMatches("layer_norm", {x, d, d}, options);
  expectOpMatches("layer_norm_gamma_grad", {x, x}, options);
}

TEST(LossKernels, NormAndSigmoidLossOnTwoThreads) {
  ReferenceCheckOptions options;
  options.threads = 2;
  options.batch = 256;
  TensorType x(DType::F32, {B, 64}), d(DType::F32, {64});
  expectOpMatches("layer_norm", {x, d, d}, options);
  expectOpMatches("layer_norm_grad", {x, x, d}, options);
  expectOpMatches("layer_norm_gamma_grad", {x, x}, options);
  expectOpMatches("sigmoid_cross_entropy", {x, x}, options);
  expectOpMatches("sigmoid_cross_entropy_grad", {TensorType(DType::F32, {}), x, x}, options);
  options.intBound["x1"] = 64;
  options.intBound["x2"] = 64;
  ir::AttrMap ignore = ir::attrs({{"ignore_index", ir::Attr::integer(5)}});
  expectOpMatches("softmax_cross_entropy", {x, TensorType(DType::I32, {B})}, options, ignore);
  expectOpMatches("softmax_cross_entropy_grad",
                  {TensorType(DType::F32, {}), x, TensorType(DType::I32, {B})}, options, ignore);
}

// Runs y = op(logits, labels) (or op(1, logits, labels) for the gradient) with the given
// labels and returns the error message ("" when the step succeeded).
std::string errorWithLabels(const char *op, const std::vector<int32_t> &labelValues,
                            ir::AttrMap attrs = {}) {
  bool gradient = llvm::StringRef(op).endswith("_grad");
  int64_t rows = static_cast<int64_t>(labelValues.size());
  ir::ModuleBuilder b("labels");
  std::vector<ir::Value *> operands;
  if (gradient)
    operands.push_back(b.input("dloss", TensorType(DType::F32, {})));
  operands.push_back(b.input("logits", TensorType(DType::F32, {B, 10})));
  operands.push_back(b.input("labels", TensorType(DType::I32, {B})));
  b.op(op, operands, std::move(attrs), "y");
  auto module = b.finish();
  if (!module)
    return llvm::toString(module.takeError());
  runtime::ExecutorOptions options;
  options.outputs = {"y"};
  auto exec =
      runtime::Executor::create(**module, std::make_shared<runtime::VariableStore>(), options);
  if (!exec)
    return llvm::toString(exec.takeError());
  runtime::Tensor logits(DType::F32, {rows, 10}), labels(DType::I32, {rows}), dloss(DType::F32, {});
  for (int64_t i = 0; i < logits.numElements(); ++i)
    logits.data<float>()[i] = 0.1f * static_cast<float>(i % 7);
  for (int64_t r = 0; r < rows; ++r)
    labels.data<int32_t>()[r] = labelValues[r];
  *dloss.data<float>() = 1.0f;
  runtime::Feeds feeds = {{"logits", logits}, {"labels", labels}};
  if (gradient)
    feeds["dloss"] = dloss;
  llvm::Error err = (*exec)->step(feeds);
  return err ? llvm::toString(std::move(err)) : "";
}

TEST(LossKernels, LabelsOutsideTheClassesAreErrors) {
  for (const char *op : {"softmax_cross_entropy", "softmax_cross_entropy_grad"}) {
    SCOPED_TRACE(op);
    EXPECT_EQ(errorWithLabels(op, {3, 9, 0}), "");
    std::string tooLarge = errorWithLabels(op, {3, 12, 0});
    EXPECT_NE(tooLarge.find("label 12 of row 1 is outside [0, 10)"), std::string::npos) << tooLarge;
    std::string negative = errorWithLabels(op, {3, 4, -1});
    EXPECT_NE(negative.find("label -1 of row 2 is outside [0, 10)"), std::string::npos) << negative;
  }
}

// The ignored label may lie outside the classes (PyTorch's -100); other labels are still checked.
TEST(LossKernels, IgnoredLabelsAreNotErrors) {
  ir::AttrMap ignore = ir::attrs({{"ignore_index", ir::Attr::integer(-100)}});
  for (const char *op : {"softmax_cross_entropy", "softmax_cross_entropy_grad"}) {
    SCOPED_TRACE(op);
    EXPECT_EQ(errorWithLabels(op, {3, -100, 0}, ignore), "");
    EXPECT_EQ(errorWithLabels(op, {-100, -100, -100}, ignore), "");
    std::string negative = errorWithLabels(op, {-100, 4, -1}, ignore);
    EXPECT_NE(negative.find("label -1 of row 2 is outside [0, 10)"), std::string::npos) << negative;
    std::string unignored = errorWithLabels(op, {3, -100, 0});
    EXPECT_NE(unignored.find("label -100 of row 1"), std::string::npos) << unignored;
  }
}

TEST(LossKernels, EveryLossOpHasACpuKernel) {
  const std::set<std::string> family = {"softmax",
                                        "log_softmax",
                                        "softmax_cross_entropy",
                                        "softmax_grad",
                                        "log_softmax_grad",
                                        "softmax_cross_entropy_grad",
                                        "layer_norm",
                                        "layer_norm_grad",
                                        "layer_norm_gamma_grad",
                                        "sigmoid_cross_entropy",
                                        "sigmoid_cross_entropy_grad"};
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
