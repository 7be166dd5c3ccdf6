// The reference interpreter against hand-computed values: one case or more per op family,
// step semantics, initializers and errors.
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "ir/OpTable.h"
#include "runtime/reference/Initializers.h"
#include "runtime/reference/Kernels.h"
#include "runtime/reference/ReferenceInterpreter.h"

using namespace prism;
using namespace prism::runtime::reference;
using ir::Attr;
using ir::DType;
using ir::TensorType;

namespace {

Tensor f32(llvm::ArrayRef<int64_t> shape, std::vector<double> data) {
  return Tensor(DType::F32, shape, std::move(data));
}

Tensor i32(llvm::ArrayRef<int64_t> shape, std::vector<double> data) {
  return Tensor(DType::I32, shape, std::move(data));
}

std::vector<int64_t> dims(llvm::ArrayRef<int64_t> shape) {
  return shape.vec();
}

TensorType typeOf(const Tensor &t) {
  return TensorType(t.dtype(), t.shape());
}

void expectTensor(const Tensor *actual, llvm::ArrayRef<int64_t> shape,
                  const std::vector<double> &data, double tolerance = 1e-12) {
  ASSERT_NE(actual, nullptr);
  ASSERT_FALSE(actual->isSparse());
  ASSERT_EQ(dims(actual->shape()), dims(shape));
  ASSERT_EQ(actual->data().size(), data.size());
  for (size_t i = 0; i < data.size(); ++i)
    EXPECT_NEAR(actual->data()[i], data[i], tolerance) << "element " << i;
}

std::unique_ptr<ir::Module> finish(ir::ModuleBuilder &b) {
  auto m = b.finish();
  EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
  return m ? std::move(*m) : nullptr;
}

// Runs `y = op(x0, x1, ...)` on the given operands (fed as inputs of their own types).
struct SingleOp {
  std::unique_ptr<ir::Module> module;
  std::unique_ptr<ReferenceInterpreter> interpreter;
  const Tensor *y = nullptr;
};

SingleOp runSingleOp(llvm::StringRef opName, const std::vector<Tensor> &operands,
                     ir::AttrMap attrs = {}) {
  ir::ModuleBuilder b("single");
  std::vector<ir::Value *> values;
  Feeds feeds;
  for (size_t i = 0; i < operands.size(); ++i) {
    std::string name = "x" + std::to_string(i);
    values.push_back(b.input(name, typeOf(operands[i])));
    feeds[name] = operands[i];
  }
  b.op(opName, values, std::move(attrs), "y");
  SingleOp run;
  run.module = finish(b);
  if (!run.module)
    return run;
  run.interpreter = std::make_unique<ReferenceInterpreter>(*run.module);
  auto result = run.interpreter->step(feeds);
  EXPECT_TRUE(bool(result)) << llvm::toString(result.takeError());
  run.y = run.interpreter->value("y");
  return run;
}

std::string errorOf(llvm::Error e) {
  return e ? llvm::toString(std::move(e)) : "";
}
template <typename T> std::string errorOf(llvm::Expected<T> e) {
  return e ? "" : llvm::toString(e.takeError());
}

TEST(ReferenceInterpreterTest, EveryOpHasAKernel) {
  for (const ir::OpDef *def : ir::allOps()) {
    // Communication runs in the distributed runtime, not in the single-process oracle; a call
    // never runs (inline expands it first).
    if (def->has(ir::kCommunication) || def->has(ir::kCall))
      continue;
    const Kernel *kernel = lookupKernel(def->name);
    EXPECT_TRUE(kernel && kernel->run) << "no reference kernel for '" << def->name << "'";
  }
  EXPECT_EQ(lookupKernel("no_such_op"), nullptr);
}

TEST(ReferenceInterpreterTest, MatmulWithEveryTranspose) {
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor aT = f32({3, 2}, {1, 4, 2, 5, 3, 6});
  Tensor b = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  Tensor bT = f32({2, 3}, {7, 9, 11, 8, 10, 12});
  const std::vector<double> product = {58, 64, 139, 154};
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      SCOPED_TRACE("transpose_a = " + std::to_string(ta) + ", transpose_b = " + std::to_string(tb));
      auto run = runSingleOp(
          "matmul", {ta ? aT : a, tb ? bT : b},
          ir::attrs({{"transpose_a", Attr::boolean(ta)}, {"transpose_b", Attr::boolean(tb)}}));
      expectTensor(run.y, {2, 2}, product);
    }
}

TEST(ReferenceInterpreterTest, BroadcastingArithmetic) {
  auto rowPlusVector =
      runSingleOp("add", {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3}, {10, 20, 30})});
  expectTensor(rowPlusVector.y, {2, 3}, {11, 22, 33, 14, 25, 36});
  auto outer = runSingleOp("sub", {f32({2, 1}, {1, 2}), f32({1, 3}, {10, 20, 30})});
  expectTensor(outer.y, {2, 3}, {-9, -19, -29, -8, -18, -28});
  auto scalarDiv = runSingleOp("div", {f32({2}, {3, -6}), f32({}, {2})});
  expectTensor(scalarDiv.y, {2}, {1.5, -3});
  auto intDiv = runSingleOp("div", {i32({2}, {7, -7}), i32({}, {2})});
  expectTensor(intDiv.y, {2}, {3, -3});
}

// Two batch entries, [2, 2, 3] x [2, 3, 1]; then the same a times one shared [3, 2] matrix,
// and a shared a (transposed) times a batch.
TEST(ReferenceInterpreterTest, BatchMatmulPerEntryAndShared) {
  Tensor a = f32({2, 2, 3}, {1, 2, 3, 4, 5, 6, -1, 0, 1, 2, 2, 2});
  auto perEntry = runSingleOp("batch_matmul", {a, f32({2, 3, 1}, {1, 1, 1, 3, 2, 1})});
  expectTensor(perEntry.y, {2, 2, 1}, {6, 15, -2, 12});
  auto shared = runSingleOp("batch_matmul", {a, f32({3, 2}, {7, 8, 9, 10, 11, 12})});
  expectTensor(shared.y, {2, 2, 2}, {58, 64, 139, 154, 4, 4, 54, 60});
  auto sharedA = runSingleOp(
      "batch_matmul", {f32({3, 2}, {1, 4, 2, 5, 3, 6}), a},
      ir::attrs({{"transpose_a", Attr::boolean(true)}, {"transpose_b", Attr::boolean(true)}}));
  expectTensor(sharedA.y, {2, 2, 2}, {14, 32, 32, 77, 2, 12, 2, 30});
}

// Ties go to a in maximum, minimum and their gradients; where takes any non-zero as true.
TEST(ReferenceInterpreterTest, MaximumMinimumAndWhere) {
  Tensor a = f32({4}, {1, -2, 3, 0.5}), b = f32({}, {0.5});
  expectTensor(runSingleOp("maximum", {a, b}).y, {4}, {1, 0.5, 3, 0.5});
  expectTensor(runSingleOp("minimum", {a, b}).y, {4}, {0.5, -2, 0.5, 0.5});
  Tensor dy = f32({4}, {10, 20, 30, 40});
  expectTensor(runSingleOp("maximum_grad", {dy, a, b}).y, {4}, {10, 0, 30, 40});
  expectTensor(runSingleOp("minimum_grad", {dy, a, b}).y, {4}, {0, 20, 0, 40});
  auto picked = runSingleOp("where", {f32({2, 1}, {0, -0.5}), f32({3}, {1, 2, 3}), f32({}, {9})});
  expectTensor(picked.y, {2, 3}, {9, 9, 9, 1, 2, 3});
  auto byInt =
      runSingleOp("where", {i32({3}, {2, 0, 1}), f32({3}, {1, 2, 3}), f32({3}, {4, 5, 6})});
  expectTensor(byInt.y, {3}, {1, 5, 3});
}

// pads [begin..., end...]: one row before and after along dimension 0, two columns after.
TEST(ReferenceInterpreterTest, PadAndGlobalAvgPool) {
  auto padded =
      runSingleOp("pad", {f32({1, 2}, {1, 2})},
                  ir::attrs({{"pads", Attr::ints({1, 0, 1, 2})}, {"value", Attr::real(-1)}}));
  expectTensor(padded.y, {3, 4}, {-1, -1, -1, -1, 1, 2, -1, -1, -1, -1, -1, -1});
  // x[0, h, w, c] = 4 h + 2 w + c over a 2x2 image of two channels.
  auto pooled = runSingleOp("global_avg_pool", {f32({1, 2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7})});
  expectTensor(pooled.y, {1, 2}, {3, 4});
}

TEST(ReferenceInterpreterTest, BatchDimensionIsBoundFromTheFeeds) {
  ir::ModuleBuilder b("batch");
  ir::Value *x = b.input("x", TensorType(DType::F32, {ir::kBatchDim, 3}));
  ir::Value *bias = b.variable("bias", TensorType(DType::F32, {3}),
                               {"constant", ir::attrs({{"value", Attr::real(0.5)}})});
  b.op("mul", {b.add(x, bias), x}, {}, "y");
  auto m = finish(b);
  ASSERT_TRUE(m);
  ReferenceInterpreter interp(*m);
  ASSERT_FALSE(interp.initializeVariables(1));
  for (int64_t batch : {1, 4}) {
    std::vector<double> data;
    for (int64_t i = 0; i < batch * 3; ++i)
      data.push_back(static_cast<double>(i));
    auto r = interp.step({{"x", f32({batch, 3}, data)}});
    ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
    EXPECT_EQ(r->batch, batch);
    std::vector<double> expected;
    for (double v : data)
      expected.push_back((v + 0.5) * v);
    expectTensor(interp.value("y"), {batch, 3}, expected);
  }
}

TEST(ReferenceInterpreterTest, UnaryOpsAndActivations) {
  Tensor x = f32({4}, {-2, -0.5, 0.5, 2});
  expectTensor(runSingleOp("relu", {x}).y, {4}, {0, 0, 0.5, 2});
  expectTensor(runSingleOp("neg", {x}).y, {4}, {2, 0.5, -0.5, -2});
  expectTensor(runSingleOp("tanh", {x}).y, {4},
               {std::tanh(-2.0), std::tanh(-0.5), std::tanh(0.5), std::tanh(2.0)});
  expectTensor(runSingleOp("sigmoid", {x}).y, {4},
               {1 / (1 + std::exp(2.0)), 1 / (1 + std::exp(0.5)), 1 / (1 + std::exp(-0.5)),
                1 / (1 + std::exp(-2.0))});
  Tensor p = f32({2}, {1, 4});
  expectTensor(runSingleOp("sqrt", {p}).y, {2}, {1, 2});
  expectTensor(runSingleOp("log", {p}).y, {2}, {0, std::log(4.0)});
  expectTensor(runSingleOp("exp", {p}).y, {2}, {std::exp(1.0), std::exp(4.0)}, 1e-9);
  expectTensor(runSingleOp("relu_grad", {f32({2}, {3, 5}), f32({2}, {-1, 1})}).y, {2}, {0, 5});
  expectTensor(runSingleOp("sigmoid_grad", {f32({1}, {2}), f32({1}, {0.25})}).y, {1},
               {2 * 0.25 * 0.75});
  expectTensor(runSingleOp("tanh_grad", {f32({1}, {2}), f32({1}, {0.5})}).y, {1}, {2 * 0.75});
  // Tabulated values: erf(0.5); gelu(1) = Phi(1); gelu(-2) = -2 Phi(-2).
  expectTensor(runSingleOp("erf", {f32({1}, {0.5})}).y, {1}, {0.5204998778130465});
  expectTensor(runSingleOp("gelu", {f32({2}, {1, -2})}).y, {2},
               {0.8413447460685429, -0.04550026389635842});
  expectTensor(runSingleOp("erf_grad", {f32({1}, {2}), f32({1}, {0.5})}).y, {1},
               {1.7575651578708895});
  expectTensor(runSingleOp("gelu_grad", {f32({1}, {3}), f32({1}, {1.5})}).y, {1},
               {3.3824075766899386});
}

// x[0, i, j, 0] = 4 i + j + 1 on a 4x4 image.
Tensor image4x4() {
  std::vector<double> data;
  for (int i = 1; i <= 16; ++i)
    data.push_back(i);
  return f32({1, 4, 4, 1}, data);
}

ir::AttrMap convAttrs(int64_t stride, const char *padding) {
  return ir::attrs({{"stride", Attr::ints({stride, stride})}, {"padding", Attr::string(padding)}});
}

TEST(ReferenceInterpreterTest, Conv2dValidAndSameWithStrides) {
  // out[i, j] = x[i, j] + 2 x[i, j + 1] + 3 x[i + 1, j] + 4 x[i + 1, j + 1] = 40 i + 10 j + 44
  Tensor w = f32({2, 2, 1, 1}, {1, 2, 3, 4});
  expectTensor(runSingleOp("conv2d", {image4x4(), w}, convAttrs(1, "valid")).y, {1, 3, 3, 1},
               {44, 54, 64, 84, 94, 104, 124, 134, 144});
  expectTensor(runSingleOp("conv2d", {image4x4(), w}, convAttrs(2, "valid")).y, {1, 2, 2, 1},
               {44, 64, 124, 144});
  // A 3x3 window of ones sums its cells. Stride 2, same: out = 2, pad_total = 1, pad_before =
  // 0, so the windows cover rows/columns {0, 1, 2} and {2, 3}.
  Tensor ones = Tensor::filled(DType::F32, {3, 3, 1, 1}, 1);
  expectTensor(runSingleOp("conv2d", {image4x4(), ones}, convAttrs(2, "same")).y, {1, 2, 2, 1},
               {54, 45, 72, 54});
  // Stride 1, same: pad_before = 1; the corner window covers rows/columns {0, 1}.
  auto same1 = runSingleOp("conv2d", {image4x4(), ones}, convAttrs(1, "same"));
  ASSERT_NE(same1.y, nullptr);
  EXPECT_EQ(dims(same1.y->shape()), std::vector<int64_t>({1, 4, 4, 1}));
  EXPECT_DOUBLE_EQ(same1.y->at({0, 0, 0, 0}), 1 + 2 + 5 + 6);
  EXPECT_DOUBLE_EQ(same1.y->at({0, 1, 1, 0}), 54);
  EXPECT_DOUBLE_EQ(same1.y->at({0, 3, 3, 0}), 11 + 12 + 15 + 16);
}

TEST(ReferenceInterpreterTest, Conv2dMixesChannels) {
  // y[o] = sum over c of x[c] * w[0, 0, c, o]
  auto run = runSingleOp("conv2d", {f32({1, 1, 1, 2}, {1, 2}), f32({1, 1, 2, 2}, {1, 2, 3, 4})},
                         convAttrs(1, "valid"));
  expectTensor(run.y, {1, 1, 1, 2}, {1 * 1 + 2 * 3, 1 * 2 + 2 * 4});
}

ir::AttrMap poolAttrs(int64_t window, int64_t stride, const char *padding) {
  return ir::attrs({{"window", Attr::ints({window, window})},
                    {"stride", Attr::ints({stride, stride})},
                    {"padding", Attr::string(padding)}});
}

TEST(ReferenceInterpreterTest, Pools) {
  expectTensor(runSingleOp("max_pool2d", {image4x4()}, poolAttrs(2, 2, "valid")).y, {1, 2, 2, 1},
               {6, 8, 14, 16});
  expectTensor(runSingleOp("avg_pool2d", {image4x4()}, poolAttrs(2, 2, "valid")).y, {1, 2, 2, 1},
               {3.5, 5.5, 11.5, 13.5});
  // Window 3, stride 2, same: windows {0, 1, 2} and {2, 3}; padded cells are not counted.
  expectTensor(runSingleOp("max_pool2d", {image4x4()}, poolAttrs(3, 2, "same")).y, {1, 2, 2, 1},
               {11, 12, 15, 16});
  expectTensor(runSingleOp("avg_pool2d", {image4x4()}, poolAttrs(3, 2, "same")).y, {1, 2, 2, 1},
               {54.0 / 9, 45.0 / 6, 72.0 / 6, 54.0 / 4});
}

TEST(ReferenceInterpreterTest, PoolGradients) {
  // All four cells tie: the gradient goes to the first one.
  Tensor flat = Tensor::filled(DType::F32, {1, 2, 2, 1}, 1);
  expectTensor(
      runSingleOp("max_pool2d_grad", {f32({1, 1, 1, 1}, {5}), flat}, poolAttrs(2, 2, "valid")).y,
      {1, 2, 2, 1}, {5, 0, 0, 0});
  Tensor x = f32({1, 2, 2, 1}, {1, 7, 3, 2});
  expectTensor(
      runSingleOp("max_pool2d_grad", {f32({1, 1, 1, 1}, {5}), x}, poolAttrs(2, 2, "valid")).y,
      {1, 2, 2, 1}, {0, 5, 0, 0});
  expectTensor(
      runSingleOp("avg_pool2d_grad", {f32({1, 1, 1, 1}, {4}), x}, poolAttrs(2, 2, "valid")).y,
      {1, 2, 2, 1}, {1, 1, 1, 1});
}

TEST(ReferenceInterpreterTest, SoftmaxAndCrossEntropy) {
  Tensor logits = f32({2, 3}, {0, 0, 0, 1, 2, 3});
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  expectTensor(
      runSingleOp("softmax", {logits}).y, {2, 3},
      {1.0 / 3, 1.0 / 3, 1.0 / 3, std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z});
  expectTensor(runSingleOp("log_softmax", {logits}).y, {2, 3},
               {-std::log(3.0), -std::log(3.0), -std::log(3.0), 1 - std::log(z), 2 - std::log(z),
                3 - std::log(z)});
  Tensor labels = i32({2}, {0, 2});
  double loss = (std::log(3.0) + (std::log(z) - 3)) / 2;
  expectTensor(runSingleOp("softmax_cross_entropy", {logits, labels}).y, {}, {loss});
  // dloss * (softmax - onehot) / rows
  expectTensor(runSingleOp("softmax_cross_entropy_grad", {f32({}, {2}), logits, labels}).y, {2, 3},
               {(1.0 / 3 - 1), 1.0 / 3, 1.0 / 3, std::exp(1.0) / z, std::exp(2.0) / z,
                std::exp(3.0) / z - 1});
}

// Logits [B, T, C]: every position is an example; ignored positions count for nothing.
TEST(ReferenceInterpreterTest, CrossEntropyOverPositions) {
  Tensor logits = f32({1, 2, 3}, {0, 0, 0, 1, 2, 3});
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  Tensor labels = i32({1, 2}, {0, 2});
  expectTensor(runSingleOp("softmax_cross_entropy", {logits, labels}).y, {},
               {(std::log(3.0) + (std::log(z) - 3)) / 2});
  ir::AttrMap ignoreZero = ir::attrs({{"ignore_index", Attr::integer(0)}});
  expectTensor(runSingleOp("softmax_cross_entropy", {logits, labels}, ignoreZero).y, {},
               {std::log(z) - 3});
  // Position 0 is ignored: zeros there, and the mean is over one position.
  expectTensor(
      runSingleOp("softmax_cross_entropy_grad", {f32({}, {2}), logits, labels}, ignoreZero).y,
      {1, 2, 3},
      {0, 0, 0, 2 * std::exp(1.0) / z, 2 * std::exp(2.0) / z, 2 * (std::exp(3.0) / z - 1)});
  // Every position ignored (-100 is out of range otherwise): loss and gradient are 0.
  Tensor none = i32({1, 2}, {-100, -100});
  ir::AttrMap ignoreDefault = ir::attrs({{"ignore_index", Attr::integer(-100)}});
  expectTensor(runSingleOp("softmax_cross_entropy", {logits, none}, ignoreDefault).y, {}, {0});
  expectTensor(
      runSingleOp("softmax_cross_entropy_grad", {f32({}, {1}), logits, none}, ignoreDefault).y,
      {1, 2, 3}, std::vector<double>(6, 0));
}

TEST(ReferenceInterpreterTest, SigmoidCrossEntropy) {
  Tensor x = f32({3}, {0, 2, -3}), z = f32({3}, {1, 0, 0.5});
  double loss =
      (std::log(2.0) + (2 + std::log1p(std::exp(-2.0))) + (1.5 + std::log1p(std::exp(-3.0)))) / 3;
  expectTensor(runSingleOp("sigmoid_cross_entropy", {x, z}).y, {}, {loss});
  auto sigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
  // dloss * (sigmoid(x) - z) / 3 with dloss = 3.
  expectTensor(runSingleOp("sigmoid_cross_entropy_grad", {f32({}, {3}), x, z}).y, {3},
               {0.5 - 1, sigmoid(2), sigmoid(-3) - 0.5});
}

// Row [1, 2, 3, 4]: mean 2.5, variance 1.25; epsilon 0.75 makes 1 / sqrt(var + eps) = 1 / sqrt(2).
// A constant row normalizes to 0 and gives beta.
TEST(ReferenceInterpreterTest, LayerNorm) {
  Tensor x = f32({2, 4}, {1, 2, 3, 4, -1, -1, -1, -1});
  Tensor gamma = f32({4}, {1, 2, 1, 2}), beta = f32({4}, {0, 0, 1, 1});
  ir::AttrMap eps = ir::attrs({{"epsilon", Attr::real(0.75)}});
  const double r = 1 / std::sqrt(2.0);
  expectTensor(runSingleOp("layer_norm", {x, gamma, beta}, eps).y, {2, 4},
               {-1.5 * r, -0.5 * 2 * r, 1 + 0.5 * r, 1 + 1.5 * 2 * r, 0, 0, 1, 1});
  // dgamma = sum over rows of dy * xhat; dy = 1 everywhere.
  Tensor ones = f32({2, 4}, std::vector<double>(8, 1));
  expectTensor(runSingleOp("layer_norm_gamma_grad", {ones, x}, eps).y, {4},
               {-1.5 * r, -0.5 * r, 0.5 * r, 1.5 * r});
  // dx with dy = e0 on row 0, gamma = 1: r * (g - mean(g) - xhat * mean(g * xhat)).
  Tensor dy = f32({2, 4}, {1, 0, 0, 0, 0, 0, 0, 0});
  Tensor unit = f32({4}, {1, 1, 1, 1});
  double meanGx = -1.5 * r / 4;
  std::vector<double> dx;
  for (double c : {-1.5, -0.5, 0.5, 1.5})
    dx.push_back(r * ((dx.empty() ? 1 : 0) - 0.25 - c * r * meanGx));
  for (int i = 0; i < 4; ++i)
    dx.push_back(0);
  expectTensor(runSingleOp("layer_norm_grad", {dy, x, unit}, eps).y, {2, 4}, dx);
}

TEST(ReferenceInterpreterTest, ShapeOps) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  expectTensor(runSingleOp("reshape", {x}, ir::attrs({{"shape", Attr::ints({3, 2})}})).y, {3, 2},
               {1, 2, 3, 4, 5, 6});
  expectTensor(runSingleOp("transpose", {x}, ir::attrs({{"perm", Attr::ints({1, 0})}})).y, {3, 2},
               {1, 4, 2, 5, 3, 6});
  expectTensor(
      runSingleOp("concat", {x, f32({2, 1}, {7, 8})}, ir::attrs({{"axis", Attr::integer(-1)}})).y,
      {2, 4}, {1, 2, 3, 7, 4, 5, 6, 8});
  auto sliceAttrs = ir::attrs(
      {{"axis", Attr::integer(1)}, {"begin", Attr::integer(1)}, {"end", Attr::integer(3)}});
  expectTensor(runSingleOp("slice", {x}, sliceAttrs).y, {2, 2}, {2, 3, 5, 6});
  expectTensor(runSingleOp("slice_grad", {f32({2, 1}, {9, 8}), x},
                           ir::attrs({{"axis", Attr::integer(1)}, {"begin", Attr::integer(2)}}))
                   .y,
               {2, 3}, {0, 0, 9, 0, 0, 8});
  expectTensor(runSingleOp("reduce_sum", {x}, ir::attrs({{"axes", Attr::ints({1})}})).y, {2},
               {6, 15});
  expectTensor(
      runSingleOp("reduce_sum", {x},
                  ir::attrs({{"axes", Attr::ints({0})}, {"keepdims", Attr::boolean(true)}}))
          .y,
      {1, 3}, {5, 7, 9});
  expectTensor(runSingleOp("reduce_mean", {x}).y, {}, {3.5});
  expectTensor(runSingleOp("expand_like", {f32({2}, {6, 15}), x},
                           ir::attrs({{"axes", Attr::ints({1})}, {"mean", Attr::boolean(true)}}))
                   .y,
               {2, 3}, {2, 2, 2, 5, 5, 5});
  expectTensor(runSingleOp("sum_like", {x, f32({3}, {0, 0, 0})}).y, {3}, {5, 7, 9});
  expectTensor(runSingleOp("sum_like", {x, f32({2, 1}, {0, 0})}).y, {2, 1}, {6, 15});
  expectTensor(runSingleOp("reshape_like", {x, f32({6}, {})}).y, {6}, {1, 2, 3, 4, 5, 6});
  expectTensor(runSingleOp("bias_add", {x, f32({3}, {10, 20, 30})}).y, {2, 3},
               {11, 22, 33, 14, 25, 36});
}

TEST(ReferenceInterpreterTest, ConstantAndCast) {
  auto c = runSingleOp("constant", {},
                       ir::attrs({{"value", Attr::real(2.5)}, {"shape", Attr::ints({2})}}));
  expectTensor(c.y, {2}, {2.5, 2.5});
  EXPECT_EQ(c.y->dtype(), DType::F32);
  auto ci = runSingleOp("constant", {},
                        ir::attrs({{"value", Attr::real(2.5)}, {"dtype", Attr::string("i32")}}));
  expectTensor(ci.y, {}, {2});
  // Float to integer truncates toward zero.
  auto cast = runSingleOp("cast", {f32({4}, {-1.7, -0.2, 2.9, 3})},
                          ir::attrs({{"dtype", Attr::string("i64")}}));
  expectTensor(cast.y, {4}, {-1, 0, 2, 3});
  EXPECT_EQ(cast.y->dtype(), DType::I64);
}

// y = gather(table, idx); g = gather_grad(dy, idx); d = sparse_to_dense(g)
TEST(ReferenceInterpreterTest, GatherAndSparseGradientsWithDuplicates) {
  ir::ModuleBuilder b("embedding");
  ir::Value *table = b.input("table", TensorType(DType::F32, {4, 2}));
  ir::Value *idx = b.input("idx", TensorType(DType::I32, {ir::kBatchDim}));
  ir::Value *dy = b.input("dy", TensorType(DType::F32, {ir::kBatchDim, 2}));
  b.op("gather", {table, idx}, {}, "y");
  ir::Value *g = b.op("gather_grad", {dy, idx}, ir::attrs({{"num_rows", Attr::integer(4)}}), "g");
  ir::Value *twice = b.op("sparse_add", {g, g}, {}, "twice");
  b.op("sparse_to_dense", {g}, {}, "dense");
  b.op("sparse_to_dense", {twice}, {}, "dense_twice");
  auto m = finish(b);
  ASSERT_TRUE(m);
  ReferenceInterpreter interp(*m);
  auto r = interp.step({{"table", f32({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31})},
                        {"idx", i32({3}, {2, 0, 2})},
                        {"dy", f32({3, 2}, {1, 2, 3, 4, 5, 6})}});
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  expectTensor(interp.value("y"), {3, 2}, {20, 21, 0, 1, 20, 21});
  const Tensor *sparse = interp.value("g");
  ASSERT_NE(sparse, nullptr);
  ASSERT_TRUE(sparse->isSparse());
  EXPECT_EQ(dims(sparse->shape()), std::vector<int64_t>({4, 2}));
  EXPECT_EQ(sparse->indices(), std::vector<int64_t>({2, 0, 2}));
  EXPECT_EQ(sparse->data(), std::vector<double>({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(interp.value("twice")->numRows(), 6);
  expectTensor(interp.value("dense"), {4, 2}, {3, 4, 0, 0, 6, 8, 0, 0});
  expectTensor(interp.value("dense_twice"), {4, 2}, {6, 8, 0, 0, 12, 16, 0, 0});
}

// combine_towers over a batch of 5 bound by `x`: three towers take 2, 2 and 1 examples, so
// weights 0.4, 0.4 and 0.2; sparse rows are kept, each scaled by its tower's weight. Without an
// input of B the weights are unknown: an error.
TEST(ReferenceInterpreterTest, CombineTowersWeighsEachTowerByItsExamples) {
  ir::ModuleBuilder b("towers");
  b.input("x", TensorType(DType::F32, {ir::kBatchDim}));
  ir::Value *p = b.input("p", TensorType(DType::F32, {2}));
  ir::Value *q = b.input("q", TensorType(DType::F32, {2}));
  ir::Value *r = b.input("r", TensorType(DType::F32, {2}));
  ir::Value *idx = b.input("idx", TensorType(DType::I64, {1}));
  ir::Value *dy = b.input("dy", TensorType(DType::F32, {1, 2}));
  b.op("combine_towers", {p, q, r}, {}, "mean");
  ir::Value *g = b.op("gather_grad", {dy, idx}, ir::attrs({{"num_rows", Attr::integer(3)}}), "g");
  b.op("combine_towers", {g, g, g}, {}, "rows");
  auto m = finish(b);
  ASSERT_TRUE(m);
  ReferenceInterpreter interp(*m);
  auto step = interp.step({{"x", f32({5}, {0, 0, 0, 0, 0})},
                           {"p", f32({2}, {10, 1})},
                           {"q", f32({2}, {20, 2})},
                           {"r", f32({2}, {40, 4})},
                           {"idx", Tensor(DType::I64, {1}, {2})},
                           {"dy", f32({1, 2}, {5, -10})}});
  ASSERT_TRUE(bool(step)) << llvm::toString(step.takeError());
  // 0.4·10 + 0.4·20 + 0.2·40 = 20; 0.4·1 + 0.4·2 + 0.2·4 = 2.
  expectTensor(interp.value("mean"), {2}, {20, 2});
  const Tensor *rows = interp.value("rows");
  ASSERT_NE(rows, nullptr);
  ASSERT_TRUE(rows->isSparse());
  EXPECT_EQ(rows->indices(), std::vector<int64_t>({2, 2, 2}));
  std::vector<double> expected = {2, -4, 2, -4, 1, -2};
  ASSERT_EQ(rows->data().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(rows->data()[i], expected[i], 1e-12) << i;

  ir::ModuleBuilder unbound("unbound");
  ir::Value *u = unbound.input("u", TensorType(DType::F32, {2}));
  unbound.op("combine_towers", {u, u}, {}, "mean");
  auto um = finish(unbound);
  ASSERT_TRUE(um);
  ReferenceInterpreter noBatch(*um);
  std::string error = errorOf(noBatch.step({{"u", f32({2}, {1, 2})}}));
  EXPECT_NE(error.find("combines 2 towers' values but the step's batch is not bound"),
            std::string::npos)
      << error;
}

TEST(ReferenceInterpreterTest, GatherWithRank2Indices) {
  auto run = runSingleOp("gather", {f32({3, 1}, {5, 6, 7}), i32({2, 2}, {2, 1, 0, 2})});
  expectTensor(run.y, {2, 2, 1}, {7, 6, 5, 7});
}

// Variables w, m, v [4, 2]; the gradient is sparse with rows 1 (twice) and 3.
TEST(ReferenceInterpreterTest, LazyAdamTouchesOnlyTheGradientRows) {
  const double lr = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8, t = 2;
  ir::ModuleBuilder b("adam");
  TensorType table(DType::F32, {4, 2});
  ir::Value *w = b.variable("w", table, {"constant", ir::attrs({{"value", Attr::real(1)}})});
  ir::Value *m = b.variable("m", table, {"constant", ir::attrs({{"value", Attr::real(0.5)}})});
  ir::Value *v = b.variable("v", table, {"constant", ir::attrs({{"value", Attr::real(0.25)}})});
  ir::Value *idx = b.input("idx", TensorType(DType::I64, {3}));
  ir::Value *dy = b.input("dy", TensorType(DType::F32, {3, 2}));
  ir::Value *step = b.input("t", TensorType(DType::F32, {}));
  ir::Value *g = b.op("gather_grad", {dy, idx}, ir::attrs({{"num_rows", Attr::integer(4)}}), "g");
  b.op("apply_adam", {w, m, v, g, step}, ir::attrs({{"lr", Attr::real(lr)}}));
  auto module = finish(b);
  ASSERT_TRUE(module);
  ReferenceInterpreter interp(*module);
  ASSERT_FALSE(interp.initializeVariables(7));
  auto r = interp.step({{"idx", Tensor(DType::I64, {3}, {1, 3, 1})},
                        {"dy", f32({3, 2}, {1, -2, 4, 0.5, 3, 1})},
                        {"t", f32({}, {t})}});
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  // Duplicates are summed first: row 1 gets (4, -1), row 3 gets (4, 0.5).
  std::vector<double> wExpected(8, 1), mExpected(8, 0.5), vExpected(8, 0.25);
  auto update = [&](int64_t row, double g0, double g1) {
    double gs[2] = {g0, g1};
    for (int j = 0; j < 2; ++j) {
      double mi = b1 * 0.5 + (1 - b1) * gs[j];
      double vi = b2 * 0.25 + (1 - b2) * gs[j] * gs[j];
      size_t k = row * 2 + j;
      mExpected[k] = mi;
      vExpected[k] = vi;
      wExpected[k] =
          1 - lr * (mi / (1 - std::pow(b1, t))) / (std::sqrt(vi / (1 - std::pow(b2, t))) + eps);
    }
  };
  update(1, 4, -1);
  update(3, 4, 0.5);
  expectTensor(interp.variable("w"), {4, 2}, wExpected);
  expectTensor(interp.variable("m"), {4, 2}, mExpected);
  expectTensor(interp.variable("v"), {4, 2}, vExpected);
  // Rows 0 and 2 are exactly untouched.
  for (const char *name : {"w", "m", "v"})
    for (int64_t row : {0, 2})
      for (int64_t j : {0, 1})
        EXPECT_EQ(interp.variable(name)->at({row, j}), interp.value(name)->at({row, j}))
            << name << "[" << row << ", " << j << "]";
  // The step read the values from before the update.
  expectTensor(interp.value("w"), {4, 2}, std::vector<double>(8, 1));
}

struct DenseUpdate {
  std::unique_ptr<ir::Module> module;
  std::unique_ptr<ReferenceInterpreter> interp;
};

// w = [1, 2], accum = [0.1, 0.2], fed gradient g = [0.5, -1].
DenseUpdate runDenseUpdate(llvm::StringRef opName, ir::AttrMap attrs) {
  ir::ModuleBuilder b("update");
  TensorType vec(DType::F32, {2});
  ir::Value *w = b.variable("w", vec);
  ir::Value *a = b.variable("a", vec);
  ir::Value *g = b.input("g", vec);
  if (opName == "apply_sgd")
    b.op(opName, {w, g}, std::move(attrs));
  else
    b.op(opName, {w, a, g}, std::move(attrs));
  DenseUpdate run;
  run.module = finish(b);
  run.interp = std::make_unique<ReferenceInterpreter>(*run.module);
  EXPECT_FALSE(run.interp->setVariable("w", f32({2}, {1, 2})));
  EXPECT_FALSE(run.interp->setVariable("a", f32({2}, {0.1, 0.2})));
  auto r = run.interp->step({{"g", f32({2}, {0.5, -1})}});
  EXPECT_TRUE(bool(r)) << llvm::toString(r.takeError());
  return run;
}

TEST(ReferenceInterpreterTest, SgdAndMomentum) {
  auto sgd = runDenseUpdate("apply_sgd", ir::attrs({{"lr", Attr::real(0.1)}}));
  expectTensor(sgd.interp->variable("w"), {2}, {0.95, 2.1});
  // a = 0.9 a + g = [0.59, -0.82]; w -= 0.1 a
  auto mom = runDenseUpdate("apply_momentum", ir::attrs({{"lr", Attr::real(0.1)}}));
  expectTensor(mom.interp->variable("a"), {2}, {0.59, -0.82});
  expectTensor(mom.interp->variable("w"), {2}, {0.941, 2.082});
  // Nesterov: w -= 0.1 (g + 0.9 a)
  auto nesterov = runDenseUpdate(
      "apply_momentum", ir::attrs({{"lr", Attr::real(0.1)}, {"nesterov", Attr::boolean(true)}}));
  expectTensor(nesterov.interp->variable("a"), {2}, {0.59, -0.82});
  expectTensor(nesterov.interp->variable("w"), {2},
               {1 - 0.1 * (0.5 + 0.9 * 0.59), 2 - 0.1 * (-1 + 0.9 * -0.82)});
}

TEST(ReferenceInterpreterTest, SparseSgdAndMomentumTouchOnlyTheirRows) {
  ir::ModuleBuilder b("sparse_update");
  TensorType table(DType::F32, {3, 1});
  ir::Value *w = b.variable("w", table, {"ones", {}});
  ir::Value *u = b.variable("u", table, {"ones", {}});
  ir::Value *a = b.variable("a", table, {"constant", ir::attrs({{"value", Attr::real(0.5)}})});
  ir::Value *idx = b.input("idx", TensorType(DType::I32, {2}));
  ir::Value *dy = b.input("dy", TensorType(DType::F32, {2, 1}));
  ir::Value *g = b.op("gather_grad", {dy, idx}, ir::attrs({{"num_rows", Attr::integer(3)}}));
  b.op("apply_sgd", {w, g}, ir::attrs({{"lr", Attr::real(0.5)}}));
  b.op("apply_momentum", {u, a, g}, ir::attrs({{"lr", Attr::real(0.5)}}));
  auto m = finish(b);
  ASSERT_TRUE(m);
  ReferenceInterpreter interp(*m);
  ASSERT_FALSE(interp.initializeVariables(0));
  auto r = interp.step({{"idx", i32({2}, {2, 2})}, {"dy", f32({2, 1}, {1, 3})}});
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  expectTensor(interp.variable("w"), {3, 1}, {1, 1, 1 - 0.5 * 4});
  // Row 2: a = 0.9 * 0.5 + 4 = 4.45; rows 0 and 1 keep a = 0.5 (no decay without a gradient).
  expectTensor(interp.variable("a"), {3, 1}, {0.5, 0.5, 4.45});
  expectTensor(interp.variable("u"), {3, 1}, {1, 1, 1 - 0.5 * 4.45});
}

TEST(ReferenceInterpreterTest, ClippingOps) {
  ir::ModuleBuilder b("clip");
  ir::Value *idx = b.input("idx", TensorType(DType::I32, {2}));
  ir::Value *dy = b.input("dy", TensorType(DType::F32, {2, 1}));
  ir::Value *dense = b.input("dense", TensorType(DType::F32, {1}));
  ir::Value *g = b.op("gather_grad", {dy, idx}, ir::attrs({{"num_rows", Attr::integer(3)}}), "g");
  ir::Value *norm = b.op("global_norm", {g, dense}, {}, "norm");
  ir::Value *factor =
      b.op("clip_scale", {norm}, ir::attrs({{"clip_norm", Attr::real(2.5)}}), "factor");
  b.op("scale", {g, factor}, {}, "scaled");
  b.op("scale", {dense, factor}, {}, "scaled_dense");
  ir::Value *zero = b.op("constant", {}, ir::attrs({{"value", Attr::real(0)}}));
  b.op("clip_scale", {zero}, ir::attrs({{"clip_norm", Attr::real(1)}}), "no_clip");
  auto m = finish(b);
  ASSERT_TRUE(m);
  ReferenceInterpreter interp(*m);
  // The sparse value's rows 3 and 1 share index 0: its dense sum is 4, so the norm is 5.
  auto r = interp.step(
      {{"idx", i32({2}, {0, 0})}, {"dy", f32({2, 1}, {3, 1})}, {"dense", f32({1}, {3})}});
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  expectTensor(interp.value("norm"), {}, {5});
  expectTensor(interp.value("factor"), {}, {0.5});
  expectTensor(interp.value("no_clip"), {}, {1});
  expectTensor(interp.value("scaled_dense"), {1}, {1.5});
  const Tensor *scaled = interp.value("scaled");
  ASSERT_TRUE(scaled && scaled->isSparse());
  EXPECT_EQ(scaled->data(), std::vector<double>({1.5, 0.5}));
}

// var c = 1; assign(c, c + 1); an op after the assign still reads the step-start value.
TEST(ReferenceInterpreterTest, AssignIsVisibleOnlyInTheNextStep) {
  ir::ModuleBuilder b("counter");
  ir::Value *c = b.variable("c", TensorType(DType::F32, {}), {"ones", {}});
  ir::Value *one = b.op("constant", {}, ir::attrs({{"value", Attr::real(1)}}));
  b.op("assign", {c, b.add(c, one)});
  b.op("neg", {c}, {}, "seen");
  auto m = finish(b);
  ASSERT_TRUE(m);
  ReferenceInterpreter interp(*m);
  ASSERT_FALSE(interp.initializeVariables(3));
  for (double expected : {1.0, 2.0, 3.0}) {
    auto r = interp.step({});
    ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
    expectTensor(interp.value("seen"), {}, {-expected});
    expectTensor(interp.value("c"), {}, {expected});
    expectTensor(interp.variable("c"), {}, {expected + 1});
  }
}

TEST(ReferenceInterpreterTest, LossAndGradientsAreReadable) {
  ir::ModuleBuilder b("loss");
  ir::Value *x = b.input("x", TensorType(DType::F32, {ir::kBatchDim, 2}));
  ir::Value *y = b.input("y", TensorType(DType::I32, {ir::kBatchDim}));
  ir::Value *w = b.variable("w", TensorType(DType::F32, {2}), {"ones", {}});
  ir::Value *loss = b.op("softmax_cross_entropy", {b.op("mul", {x, w}), y}, {}, "loss");
  b.minimize(loss, "sgd", ir::attrs({{"lr", Attr::real(0.1)}}));
  ir::Value *seed = b.op("constant", {}, ir::attrs({{"value", Attr::real(1)}}));
  ir::Value *dlogits = b.op("softmax_cross_entropy_grad", {seed, x, y});
  ir::Value *dw = b.op("sum_like", {b.op("mul", {dlogits, x}), w}, {}, "dw");
  auto m = finish(b);
  ASSERT_TRUE(m);
  m->gradients.push_back({m->findVariable("w"), dw, {}, {}});
  ReferenceInterpreter interp(*m);
  ASSERT_FALSE(interp.initializeVariables(0));
  // logits = [1, 2], label 1: loss = -log(e^2 / (e + e^2)) = log(1 + 1/e);
  // dlogits = softmax - onehot = [1, -1] / (1 + e); dw = dlogits * x.
  auto r = interp.step({{"x", f32({1, 2}, {1, 2})}, {"y", i32({1}, {1})}});
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  ASSERT_TRUE(r->loss.has_value());
  EXPECT_NEAR(*r->loss, std::log(1 + std::exp(-1.0)), 1e-15);
  ASSERT_EQ(interp.gradient("w"), interp.value("dw"));
  double e = std::exp(1.0);
  expectTensor(interp.gradient("w"), {2}, {1 / (1 + e), -2 / (1 + e)});
  EXPECT_EQ(interp.gradient("x"), nullptr);
}

std::unique_ptr<ir::Module> gatherModule() {
  ir::ModuleBuilder b("lookup");
  ir::Value *w = b.variable("w", TensorType(DType::F32, {4, 2}), {"ones", {}});
  ir::Value *idx = b.input("idx", TensorType(DType::I32, {ir::kBatchDim}));
  ir::Value *x = b.input("x", TensorType(DType::F32, {ir::kBatchDim, 2}));
  ir::Value *g = b.input("g", TensorType(DType::F32, {4, 2}));
  // The update comes first, so a later error must still leave w unchanged.
  b.op("apply_sgd", {w, g}, ir::attrs({{"lr", Attr::real(1)}}));
  b.op("add", {b.op("gather", {w, idx}), x}, {}, "y");
  return finish(b);
}

TEST(ReferenceInterpreterTest, ErrorsAreValues) {
  auto m = gatherModule();
  ASSERT_TRUE(m);
  ReferenceInterpreter interp(*m);
  Tensor x = f32({2, 2}, {});
  Tensor g = Tensor::filled(DType::F32, {4, 2}, 1);
  Feeds good = {{"idx", i32({2}, {0, 3})}, {"x", x}, {"g", g}};
  EXPECT_NE(errorOf(interp.step(good)).find("variable 'w' has no value"), std::string::npos);
  ASSERT_FALSE(interp.initializeVariables(0));

  Feeds outOfRange = good;
  outOfRange["idx"] = i32({2}, {0, 4});
  std::string e = errorOf(interp.step(outOfRange));
  EXPECT_NE(e.find("'gather'"), std::string::npos) << e;
  EXPECT_NE(e.find("index 4"), std::string::npos) << e;
  EXPECT_NE(e.find("outside [0, 4)"), std::string::npos) << e;
  Feeds negative = good;
  negative["idx"] = i32({2}, {-1, 0});
  EXPECT_NE(errorOf(interp.step(negative)).find("index -1"), std::string::npos);
  // A failed step stores no update.
  expectTensor(interp.variable("w"), {4, 2}, std::vector<double>(8, 1));

  Feeds missing = good;
  missing.erase("x");
  EXPECT_NE(errorOf(interp.step(missing)).find("no feed for input 'x'"), std::string::npos);
  Feeds unknown = good;
  unknown["z"] = x;
  EXPECT_NE(errorOf(interp.step(unknown)).find("feed 'z' names no input"), std::string::npos);
  Feeds badShape = good;
  badShape["x"] = f32({2, 3}, {});
  EXPECT_NE(
      errorOf(interp.step(badShape)).find("feed 'x' is f32[2, 3], but the input is f32[B, 2]"),
      std::string::npos);
  Feeds badBatch = good;
  badBatch["x"] = f32({3, 2}, {});
  EXPECT_NE(errorOf(interp.step(badBatch)).find("has B = 3"), std::string::npos);
  Feeds badDType = good;
  badDType["idx"] = f32({2}, {0, 1});
  EXPECT_NE(errorOf(interp.step(badDType)).find("feed 'idx' is f32[2]"), std::string::npos);
  Feeds badData = good;
  badData["x"] = f32({2, 2}, {1, 2, 3});
  EXPECT_NE(errorOf(interp.step(badData)).find("has 3 elements, expected 4"), std::string::npos);
  Feeds fractional = good;
  fractional["idx"] = i32({2}, {0.5, 1});
  EXPECT_NE(errorOf(interp.step(fractional)).find("cannot represent"), std::string::npos);

  ASSERT_TRUE(bool(interp.step(good)));
  expectTensor(interp.variable("w"), {4, 2}, std::vector<double>(8, 0));
  expectTensor(interp.value("y"), {2, 2}, {1, 1, 1, 1});
}

TEST(ReferenceInterpreterTest, LabelOutOfRangeIsAnError) {
  ir::ModuleBuilder b("xent");
  ir::Value *x = b.input("x", TensorType(DType::F32, {ir::kBatchDim, 3}));
  ir::Value *y = b.input("y", TensorType(DType::I32, {ir::kBatchDim}));
  b.op("softmax_cross_entropy", {x, y}, {}, "loss");
  auto m = finish(b);
  ASSERT_TRUE(m);
  ReferenceInterpreter interp(*m);
  std::string e = errorOf(interp.step({{"x", f32({2, 3}, {})}, {"y", i32({2}, {1, 3})}}));
  EXPECT_NE(e.find("label 3 of row 1 is outside [0, 3)"), std::string::npos) << e;
}

TEST(ReferenceInterpreterTest, OpWithoutKernelIsAnError) {
  ir::OpDef unknown;
  unknown.name = "not_a_kernel";
  unknown.summary = "an op no kernel implements";
  unknown.operands = {"x"};
  unknown.shape = [](llvm::ArrayRef<TensorType> in,
                     const ir::AttrMap &) -> llvm::Expected<llvm::SmallVector<TensorType, 1>> {
    return llvm::SmallVector<TensorType, 1>{in[0]};
  };
  ir::Module m("custom");
  ir::Input *x = m.addInput("x", TensorType(DType::F32, {2}));
  m.createOp(unknown, {x->value.get()}, {}, {"y"});
  ReferenceInterpreter interp(m);
  std::string e = errorOf(interp.step({{"x", f32({2}, {})}}));
  EXPECT_NE(e.find("no reference kernel for op 'not_a_kernel'"), std::string::npos) << e;
}

// Kernels only see what the shape rules accept, even in a module no pass has checked.
TEST(ReferenceInterpreterTest, ShapeRulesGuardTheKernels) {
  ir::Module m("unchecked");
  ir::Value *dloss = m.addInput("dloss", TensorType(DType::F32, {}))->value.get();
  ir::Value *logits = m.addInput("logits", TensorType(DType::F32, {3, 4}))->value.get();
  ir::Value *labels = m.addInput("labels", TensorType(DType::I32, {2}))->value.get();
  m.createOp(ir::getOp("softmax_cross_entropy_grad"), {dloss, logits, labels}, {}, {"g"});
  ReferenceInterpreter interp(m);
  Feeds feeds = {{"dloss", f32({}, {1})}, {"logits", f32({3, 4}, {})}, {"labels", i32({2}, {})}};
  std::string e = errorOf(interp.step(feeds));
  EXPECT_NE(e.find("'softmax_cross_entropy_grad' defining %g: labels i32[2] do not match"),
            std::string::npos)
      << e;

  ir::Module declared("declared");
  ir::Value *x = declared.addInput("x", TensorType(DType::F32, {2}))->value.get();
  ir::Op *op = declared.createOp(ir::getOp("relu"), {x}, {}, {"y"});
  op->result()->setType(TensorType(DType::F32, {3}));
  ReferenceInterpreter declaredInterp(declared);
  e = errorOf(declaredInterp.step({{"x", f32({2}, {})}}));
  EXPECT_NE(e.find("result %y is declared f32[3] but the op gives f32[2]"), std::string::npos) << e;
}

TEST(ReferenceInterpreterTest, SetVariableChecksTheType) {
  auto m = gatherModule();
  ASSERT_TRUE(m);
  ReferenceInterpreter interp(*m);
  EXPECT_NE(errorOf(interp.setVariable("w", f32({2, 4}, {}))).find("variable 'w' is f32[4, 2]"),
            std::string::npos);
  EXPECT_NE(errorOf(interp.setVariable("x", f32({2}, {}))).find("not a variable"),
            std::string::npos);
  EXPECT_EQ(errorOf(interp.setVariable("w", f32({4, 2}, {}))), "");
  expectTensor(interp.variable("w"), {4, 2}, std::vector<double>(8, 0));
}

TEST(InitializersTest, SeedRuleIsSplitmixOfSeedXorNameHash) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(splitmix64(0), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(variableSeed(42, "w1"), splitmix64(42 ^ fnv1a64("w1")));
  // The first element of a glorot_uniform [3, 5] variable is the documented first draw.
  auto t = initialValue({"glorot_uniform", {}}, TensorType(DType::F32, {3, 5}), "w1", 42);
  ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError());
  std::mt19937_64 gen(variableSeed(42, "w1"));
  double u = static_cast<double>(gen() >> 11) * std::ldexp(1.0, -53);
  double limit = std::sqrt(6.0 / 8);
  EXPECT_EQ(t->data()[0], -limit + 2 * limit * u);
}

TEST(InitializersTest, ValuesDependOnlyOnSeedAndName) {
  TensorType type(DType::F32, {4, 3});
  ir::Initializer normal{"normal", ir::attrs({{"stddev", Attr::real(0.5)}})};
  auto a = initialValue(normal, type, "emb", 5);
  auto again = initialValue(normal, type, "emb", 5);
  auto otherSeed = initialValue(normal, type, "emb", 6);
  auto otherName = initialValue(normal, type, "emb2", 5);
  ASSERT_TRUE(a && again && otherSeed && otherName);
  EXPECT_EQ(a->data(), again->data());
  EXPECT_NE(a->data(), otherSeed->data());
  EXPECT_NE(a->data(), otherName->data());

  // Declaration order does not matter: each variable has its own generator.
  auto build = [](bool swapped) {
    ir::ModuleBuilder b("order");
    TensorType t(DType::F32, {2, 2});
    if (swapped) {
      b.variable("v", t, {"uniform", {}});
      b.variable("u", t, {"glorot_uniform", {}});
    } else {
      b.variable("u", t, {"glorot_uniform", {}});
      b.variable("v", t, {"uniform", {}});
    }
    return finish(b);
  };
  auto m1 = build(false), m2 = build(true);
  ReferenceInterpreter i1(*m1), i2(*m2);
  ASSERT_FALSE(i1.initializeVariables(9));
  ASSERT_FALSE(i2.initializeVariables(9));
  EXPECT_EQ(i1.variable("u")->data(), i2.variable("u")->data());
  EXPECT_EQ(i1.variable("v")->data(), i2.variable("v")->data());
}

TEST(InitializersTest, KindsAndRanges) {
  auto constant = initialValue({"constant", ir::attrs({{"value", Attr::real(0.25)}})},
                               TensorType(DType::F32, {3}), "c", 0);
  ASSERT_TRUE(bool(constant));
  EXPECT_EQ(constant->data(), std::vector<double>(3, 0.25));
  auto ones = initialValue({"ones", {}}, TensorType(DType::F64, {2}), "o", 0);
  ASSERT_TRUE(bool(ones));
  EXPECT_EQ(ones->data(), std::vector<double>(2, 1));

  // Conv filter [kh, kw, cin, cout]: fan_in = 3*3*4, fan_out = 3*3*8.
  Fans conv = computeFans({3, 3, 4, 8});
  EXPECT_EQ(conv.in, 36);
  EXPECT_EQ(conv.out, 72);
  Fans dense = computeFans({10, 20});
  EXPECT_EQ(dense.in, 10);
  EXPECT_EQ(dense.out, 20);
  EXPECT_EQ(computeFans({7}).in, 7);
  EXPECT_EQ(computeFans({}).out, 1);

  auto glorot = initialValue({"glorot_uniform", {}}, TensorType(DType::F32, {3, 3, 4, 8}), "k", 1);
  ASSERT_TRUE(bool(glorot));
  double limit = std::sqrt(6.0 / (36 + 72)), maxAbs = 0;
  for (double v : glorot->data())
    maxAbs = std::max(maxAbs, std::fabs(v));
  EXPECT_LE(maxAbs, limit);
  EXPECT_GT(maxAbs, 0.8 * limit);

  auto uniform = initialValue({"uniform", {}}, TensorType(DType::F32, {1000}), "u", 2);
  ASSERT_TRUE(bool(uniform));
  double lo = 1, hi = -1;
  for (double v : uniform->data()) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GE(lo, -0.05);
  EXPECT_LT(hi, 0.05);
  EXPECT_LT(lo, -0.045);
  EXPECT_GT(hi, 0.045);

  auto normal = initialValue({"normal", ir::attrs({{"mean", Attr::real(3)}})},
                             TensorType(DType::F32, {20000}), "n", 3);
  ASSERT_TRUE(bool(normal));
  double sum = 0, sumSq = 0;
  for (double v : normal->data()) {
    sum += v;
    sumSq += v * v;
  }
  double mean = sum / 20000, var = sumSq / 20000 - mean * mean;
  EXPECT_NEAR(mean, 3, 0.05);
  EXPECT_NEAR(var, 1, 0.05);

  EXPECT_NE(errorOf(initialValue({"xavier", {}}, TensorType(DType::F32, {2}), "x", 0))
                .find("unknown initializer 'xavier'"),
            std::string::npos);
  EXPECT_NE(errorOf(initialValue({"ones", {}}, TensorType(DType::F32, {ir::kBatchDim}), "b", 0))
                .find("static shape"),
            std::string::npos);
}

} // namespace
