// Every op's gradient rule against central finite differences on the reference interpreter:
// for y = op(x...) and an upstream gradient dy, the rule's operand gradients must equal
// d/dx sum(y * dy). Ops come from the op table, so a new differentiable op without a case
// here fails.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "ir/OpTable.h"
#include "ir/Verifier.h"
#include "runtime/reference/ReferenceInterpreter.h"

using namespace prism;
using namespace prism::runtime::reference;
using ir::Attr;
using ir::DType;
using ir::TensorType;

namespace {

constexpr int64_t B = ir::kBatchDim;
constexpr int64_t kBatch = 3;
constexpr double kStep = 1e-5;
constexpr double kTolerance = 1e-6;

// How the float operands of a case are drawn. Values are never 0.
enum class Fill {
  Signed,   // magnitude in [0.5, 1.5], random sign: away from kinks and poles
  Positive, // in [0.5, 2]: for log and sqrt
  Distinct, // a shuffle of distinct values 0.02 apart: no ties for max pooling
  // Positive, except a [2, C] operand: batch_norm moments [mean, mean of squares] with a
  // variance in [0.5, 2] (mean of squares above mean^2)
  Moments,
};

struct GradCase {
  std::string op;
  std::vector<TensorType> operands; // B is bound to kBatch
  ir::AttrMap attrs;
  Fill fill = Fill::Signed;
  int64_t indexBound = 0; // integer operands are drawn from [0, indexBound)
  // Ops that compute differently in evaluation (batch_norm) are checked in both modes.
  runtime::StepMode mode = runtime::StepMode::Training;
};

TensorType f32(llvm::ArrayRef<int64_t> dims) {
  return TensorType(DType::F32, dims);
}
TensorType f64(llvm::ArrayRef<int64_t> dims) {
  return TensorType(DType::F64, dims);
}
TensorType i32(llvm::ArrayRef<int64_t> dims) {
  return TensorType(DType::I32, dims);
}

ir::AttrMap convAttrs(llvm::ArrayRef<int64_t> stride, const char *padding) {
  return ir::attrs({{"stride", Attr::ints(stride)}, {"padding", Attr::string(padding)}});
}

ir::AttrMap poolAttrs(int64_t window, int64_t stride, const char *padding) {
  return ir::attrs({{"window", Attr::ints({window, window})},
                    {"stride", Attr::ints({stride, stride})},
                    {"padding", Attr::string(padding)}});
}

ir::AttrMap reduceAttrs(llvm::ArrayRef<int64_t> axes, bool keepdims) {
  return ir::attrs({{"axes", Attr::ints(axes)}, {"keepdims", Attr::boolean(keepdims)}});
}

std::vector<GradCase> allCases() {
  std::vector<GradCase> cases;
  auto add = [&](std::string op, std::vector<TensorType> operands, ir::AttrMap attrs = {},
                 Fill fill = Fill::Signed, int64_t indexBound = 0) {
    cases.push_back({std::move(op), std::move(operands), std::move(attrs), fill, indexBound});
  };
  for (const char *op : {"add", "sub", "mul", "div"}) {
    add(op, {f32({B, 3}), f32({3})});
    add(op, {f32({B, 1}), f32({1, 4})});
    add(op, {f32({}), f32({2, B})});
    add(op, {f32({B, 2}), f32({B, 2})});
  }
  for (const char *op : {"maximum", "minimum"}) {
    add(op, {f32({B, 3}), f32({3})});
    add(op, {f32({B, 1}), f32({1, 4})});
    add(op, {f32({}), f32({2, B})});
    add(op, {f32({B, 2}), f32({B, 2})});
  }
  // Conditions from {0, 1}, broadcast against a and b in turn.
  add("where", {i32({B, 3}), f32({B, 3}), f32({3})}, {}, Fill::Signed, 2);
  add("where", {i32({B, 1}), f32({1, 4}), f32({B, 4})}, {}, Fill::Signed, 2);
  add("where", {i32({4}), f32({B, 1}), f32({})}, {}, Fill::Signed, 2);
  for (const char *op : {"neg", "exp", "relu", "sigmoid", "tanh", "erf", "gelu"})
    add(op, {f32({B, 4})});
  for (const char *op : {"log", "sqrt"})
    add(op, {f32({B, 4})}, {}, Fill::Positive);
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      add("matmul",
          {f32(ta ? llvm::ArrayRef<int64_t>{4, B} : llvm::ArrayRef<int64_t>{B, 4}),
           f32(tb ? llvm::ArrayRef<int64_t>{5, 4} : llvm::ArrayRef<int64_t>{4, 5})},
          ir::attrs({{"transpose_a", Attr::boolean(ta)}, {"transpose_b", Attr::boolean(tb)}}));
  // batch_matmul: equal batches, and a shared (rank-2) b or a whose gradient sums the entries.
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      ir::AttrMap t =
          ir::attrs({{"transpose_a", Attr::boolean(ta)}, {"transpose_b", Attr::boolean(tb)}});
      auto stored = [](ir::Dims batch, int64_t rows, int64_t cols, bool transposed) {
        batch.push_back(transposed ? cols : rows);
        batch.push_back(transposed ? rows : cols);
        return batch;
      };
      add("batch_matmul", {f32(stored({B, 2}, 3, 4, ta)), f32(stored({B, 2}, 4, 2, tb))}, t);
      add("batch_matmul", {f32(stored({B}, 3, 4, ta)), f32(stored({}, 4, 2, tb))}, t);
      add("batch_matmul", {f32(stored({}, 2, 3, ta)), f32(stored({2, B}, 3, 2, tb))}, t);
    }
  add("bias_add", {f32({B, 4}), f32({4})});
  add("bias_add", {f32({B, 2, 2, 3}), f32({3})});
  for (const char *op : {"softmax", "log_softmax"}) {
    add(op, {f32({B, 5})});
    add(op, {f32({2, B, 4})});
  }
  add("softmax_cross_entropy", {f32({B, 5}), i32({B})}, {}, Fill::Signed, 5);
  add("softmax_cross_entropy", {f32({B, 3, 5}), i32({B, 3})}, {}, Fill::Signed, 5);
  // Labels drawn from [0, 5): the positions labelled 2 count for nothing.
  add("softmax_cross_entropy", {f32({B, 4, 5}), i32({B, 4})},
      ir::attrs({{"ignore_index", Attr::integer(2)}}), Fill::Signed, 5);
  add("sigmoid_cross_entropy", {f32({B, 4}), f32({B, 4})});
  add("sigmoid_cross_entropy", {f32({2, B, 3}), f32({2, B, 3})});
  add("layer_norm", {f32({B, 5}), f32({5}), f32({5})});
  add("layer_norm", {f32({2, B, 4}), f32({4}), f32({4})},
      ir::attrs({{"epsilon", Attr::real(0.1)}}));
  // Filters [KH, KW, C, O] over x [B, 5, 5, 2]: both paddings, strides 1 and 2, odd and even
  // windows (an even window with `same` pads unevenly).
  struct ConvVariant {
    int64_t kh, kw;
    llvm::SmallVector<int64_t, 2> stride;
    const char *padding;
  };
  for (const ConvVariant &v :
       {ConvVariant{3, 3, {1, 1}, "same"}, ConvVariant{3, 3, {2, 2}, "same"},
        ConvVariant{3, 3, {2, 2}, "valid"}, ConvVariant{2, 2, {2, 2}, "same"},
        ConvVariant{2, 2, {1, 1}, "valid"}, ConvVariant{3, 2, {2, 1}, "same"}})
    add("conv2d", {f32({B, 5, 5, 2}), f32({v.kh, v.kw, 2, 3})}, convAttrs(v.stride, v.padding));
  for (const char *op : {"max_pool2d", "avg_pool2d"}) {
    add(op, {f32({B, 5, 5, 2})}, poolAttrs(2, 2, "valid"), Fill::Distinct);
    add(op, {f32({B, 5, 5, 2})}, poolAttrs(2, 1, "valid"), Fill::Distinct);
    add(op, {f32({B, 5, 5, 2})}, poolAttrs(3, 2, "same"), Fill::Distinct);
    add(op, {f32({B, 5, 5, 2})}, poolAttrs(3, 1, "same"), Fill::Distinct);
    add(op, {f32({B, 4, 4, 1})}, poolAttrs(2, 2, "same"), Fill::Distinct);
  }
  add("reshape", {f32({B, 6})}, ir::attrs({{"shape", Attr::ints({B, 2, 3})}}));
  add("reshape", {f32({2, 3, 4})}, ir::attrs({{"shape", Attr::ints({4, 6})}}));
  add("transpose", {f32({B, 2, 3})}, ir::attrs({{"perm", Attr::ints({2, 0, 1})}}));
  add("transpose", {f32({2, B})}, ir::attrs({{"perm", Attr::ints({1, 0})}}));
  add("concat", {f32({B, 2}), f32({B, 3}), f32({B, 1})}, ir::attrs({{"axis", Attr::integer(-1)}}));
  add("concat", {f32({2, 3}), f32({1, 3})}, ir::attrs({{"axis", Attr::integer(0)}}));
  add("slice", {f32({B, 5})},
      ir::attrs(
          {{"axis", Attr::integer(1)}, {"begin", Attr::integer(1)}, {"end", Attr::integer(4)}}));
  add("slice", {f32({4, B, 2})},
      ir::attrs(
          {{"axis", Attr::integer(0)}, {"begin", Attr::integer(0)}, {"end", Attr::integer(2)}}));
  add("pad", {f32({B, 2, 3, 2})},
      ir::attrs({{"pads", Attr::ints({0, 1, 0, 2, 0, 2, 1, 0})}, {"value", Attr::real(0.5)}}));
  add("pad", {f32({3, B})}, ir::attrs({{"pads", Attr::ints({1, 0, 2, 0})}}));
  add("global_avg_pool", {f32({B, 3, 2, 4})});
  add("global_avg_pool", {f32({B, 1, 1, 3})});
  for (const char *op : {"reduce_sum", "reduce_mean"}) {
    add(op, {f32({B, 3, 4})}, reduceAttrs({}, false));
    add(op, {f32({B, 3, 4})}, reduceAttrs({}, true));
    add(op, {f32({B, 3, 4})}, reduceAttrs({1}, false));
    add(op, {f32({B, 3, 4})}, reduceAttrs({0, 2}, true));
    add(op, {f32({B, 3, 4})}, reduceAttrs({-1}, true));
  }
  add("cast", {f32({B, 3})}, ir::attrs({{"dtype", Attr::string("f64")}}));
  add("cast", {f64({B, 3})}, ir::attrs({{"dtype", Attr::string("f32")}}));
  // Six indices drawn from [0, 3) must repeat, and rows 3..5 of the table get no gradient.
  add("gather", {f32({6, 3}), i32({B, 2})}, {}, Fill::Signed, 3);
  add("gather", {f32({4}), i32({B})}, {}, Fill::Signed, 4);
  add("dropout", {f32({B, 4})}, ir::attrs({{"rate", Attr::real(0.5)}}));
  add("dropout", {f32({2, 3, 2})}, ir::attrs({{"rate", Attr::real(0.25)}}));
  // x, scale, bias, running_mean, running_var (positive): the batch's statistics in training,
  // the running ones in evaluation.
  for (runtime::StepMode mode : {runtime::StepMode::Training, runtime::StepMode::Evaluation}) {
    add("batch_norm", {f32({B, 4}), f32({4}), f32({4}), f32({4}), f32({4})}, {}, Fill::Positive);
    cases.back().mode = mode;
    add("batch_norm", {f32({B, 2, 2, 3}), f32({3}), f32({3}), f32({3}), f32({3})},
        ir::attrs({{"epsilon", Attr::real(0.01)}}), Fill::Positive);
    cases.back().mode = mode;
  }
  // What sync = true expands to: x, scale, bias, running_mean, running_var, moments. In
  // training (in evaluation moments are not read: nothing to differentiate; the CPU kernel
  // tests check that mode against the reference).
  add("batch_norm_apply", {f32({B, 4}), f32({4}), f32({4}), f32({4}), f32({4}), f64({2, 4})}, {},
      Fill::Moments);
  add("batch_norm_apply", {f32({B, 2, 2, 3}), f32({3}), f32({3}), f32({3}), f32({3}), f64({2, 3})},
      ir::attrs({{"epsilon", Attr::real(0.01)}}), Fill::Moments);
  add("batch_norm_moments", {f32({B, 4})});
  add("batch_norm_moments", {f32({B, 2, 2, 3})});
  add("replica_mean", {f32({2, 3})});
  return cases;
}

std::string describe(const GradCase &c) {
  std::string s = (c.mode == runtime::StepMode::Evaluation ? "evaluation: " : "") + c.op + "(";
  for (size_t i = 0; i < c.operands.size(); ++i)
    s += (i ? ", " : "") + c.operands[i].str();
  for (const auto &[name, value] : c.attrs)
    s += ", " + name + " = " + value.str();
  return s + ")";
}

Shape bound(const TensorType &type) {
  Shape dims;
  for (int64_t d : type.dims)
    dims.push_back(d == B ? kBatch : d);
  return dims;
}

Tensor randomTensor(const TensorType &type, Fill fill, int64_t indexBound, std::mt19937_64 &gen) {
  Tensor t(type.dtype, bound(type));
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  if (ir::isInteger(type.dtype)) {
    for (double &v : t.data())
      v = static_cast<double>(gen() % static_cast<uint64_t>(indexBound));
    return t;
  }
  if (fill == Fill::Distinct) {
    for (size_t i = 0; i < t.data().size(); ++i)
      t.data()[i] = 0.02 * static_cast<double>(i) - 1.49;
    std::shuffle(t.data().begin(), t.data().end(), gen);
    return t;
  }
  if (fill == Fill::Moments && type.rank() == 2 && type.dims[0] == 2) {
    const int64_t channels = type.dims[1];
    for (int64_t c = 0; c < channels; ++c) {
      double mean = (unit(gen) < 0.5 ? -1 : 1) * (0.5 + unit(gen));
      t.data()[c] = mean;
      t.data()[channels + c] = mean * mean + 0.5 + 1.5 * unit(gen);
    }
    return t;
  }
  for (double &v : t.data()) {
    if (fill == Fill::Positive || fill == Fill::Moments)
      v = 0.5 + 1.5 * unit(gen);
    else
      v = (unit(gen) < 0.5 ? -1 : 1) * (0.5 + unit(gen));
  }
  return t;
}

double norm(const std::vector<double> &v) {
  double s = 0;
  for (double x : v)
    s += x * x;
  return std::sqrt(s);
}

// ||a - b|| / max(||a||, ||b||, tiny)
double relativeError(const std::vector<double> &a, const std::vector<double> &b) {
  std::vector<double> diff(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    diff[i] = a[i] - b[i];
  return norm(diff) / std::max({norm(a), norm(b), 1e-300});
}

void checkCase(const GradCase &c, uint64_t seed) {
  SCOPED_TRACE(describe(c));
  ir::ModuleBuilder b("gradient_check");
  std::vector<ir::Value *> operands;
  for (size_t i = 0; i < c.operands.size(); ++i)
    operands.push_back(b.input("x" + std::to_string(i), c.operands[i]));
  ir::Value *y = b.op(c.op, operands, c.attrs, "y");
  ASSERT_NE(y, nullptr);
  ASSERT_TRUE(y->hasType()) << "the shape rule gave no type";
  b.input("dy", y->type());
  auto built = b.finish();
  ASSERT_TRUE(bool(built)) << llvm::toString(built.takeError());
  std::unique_ptr<ir::Module> module = std::move(*built);
  const ir::Op &op = *module->lookup("y")->definingOp();

  ir::GradientContext ctx(*module, op, {module->lookup("dy")});
  op.def().gradient(ctx);
  ASSERT_FALSE(bool(ctx.takeError())) << "the gradient rule emitted an ill-typed op";
  llvm::Error verified = ir::verify(*module);
  ASSERT_FALSE(bool(verified)) << llvm::toString(std::move(verified));

  std::vector<std::string> gradNames(c.operands.size());
  for (size_t i = 0; i < c.operands.size(); ++i) {
    ir::Value *grad = ctx.operandGrads()[i];
    if (!ir::isFloat(c.operands[i].dtype) || !op.def().getsGradient(i)) {
      EXPECT_EQ(grad, nullptr) << "operand " << i << " is not differentiable but got a gradient";
      continue;
    }
    ASSERT_NE(grad, nullptr) << "no gradient for float operand " << i;
    EXPECT_EQ(grad->type().dense(), c.operands[i]) << "gradient type of operand " << i;
    EXPECT_EQ(grad->type().sparse, op.def().sparseGradient(i)) << "operand " << i;
    gradNames[i] = grad->name();
  }

  std::mt19937_64 gen(seed);
  Feeds feeds;
  for (size_t i = 0; i < c.operands.size(); ++i)
    feeds["x" + std::to_string(i)] = randomTensor(c.operands[i], c.fill, c.indexBound, gen);
  Tensor dy = randomTensor(y->type(), Fill::Signed, 0, gen);
  feeds["dy"] = dy;

  // Every step draws as step 0 does: random ops (dropout) keep one mask, so finite
  // differences see a fixed function.
  runtime::StepContext context;
  context.mode = c.mode;
  ReferenceInterpreter interp(*module, context);
  const runtime::StepContext fixed = interp.context();
  auto first = interp.step(feeds);
  ASSERT_TRUE(bool(first)) << llvm::toString(first.takeError());
  std::vector<std::vector<double>> analytic(c.operands.size());
  for (size_t i = 0; i < c.operands.size(); ++i)
    if (!gradNames[i].empty()) {
      const Tensor *g = interp.value(gradNames[i]);
      ASSERT_NE(g, nullptr) << gradNames[i];
      analytic[i] = g->toDense().data();
    }

  // L = sum(y * dy) for the current feeds.
  auto objective = [&]() -> double {
    interp.setContext(fixed);
    auto r = interp.step(feeds);
    EXPECT_TRUE(bool(r)) << llvm::toString(r.takeError());
    const Tensor *yValue = interp.value("y");
    double sum = 0;
    for (size_t k = 0; k < dy.data().size(); ++k)
      sum += yValue->data()[k] * dy.data()[k];
    return sum;
  };
  for (size_t i = 0; i < c.operands.size(); ++i) {
    if (gradNames[i].empty())
      continue;
    std::string name = "x" + std::to_string(i);
    std::vector<double> numeric(feeds[name].data().size());
    ASSERT_EQ(numeric.size(), analytic[i].size()) << "operand " << i;
    for (size_t k = 0; k < numeric.size(); ++k) {
      double saved = feeds[name].data()[k];
      feeds[name].data()[k] = saved + kStep;
      double plus = objective();
      feeds[name].data()[k] = saved - kStep;
      double minus = objective();
      feeds[name].data()[k] = saved;
      numeric[k] = (plus - minus) / (2 * kStep);
    }
    EXPECT_GT(norm(numeric), 0) << "operand " << i << ": the check would be vacuous";
    EXPECT_LT(relativeError(analytic[i], numeric), kTolerance) << "operand " << i;
  }
}

std::vector<std::string> differentiableOps() {
  std::vector<std::string> names;
  for (const ir::OpDef *def : ir::allOps())
    if (def->differentiable())
      names.push_back(def->name);
  return names;
}

class OpGradientTest : public testing::TestWithParam<std::string> {};

TEST_P(OpGradientTest, MatchesFiniteDifferences) {
  const std::string &opName = GetParam();
  uint64_t seed = 1;
  int found = 0;
  for (const GradCase &c : allCases()) {
    ++seed;
    if (c.op != opName)
      continue;
    ++found;
    checkCase(c, seed);
  }
  EXPECT_GT(found, 0) << "'" << opName << "' has a gradient rule but no gradient-check case";
}

INSTANTIATE_TEST_SUITE_P(GradientCheckTest, OpGradientTest, testing::ValuesIn(differentiableOps()),
                         [](const testing::TestParamInfo<std::string> &info) {
                           return info.param;
                         });

TEST(GradientCheckTest, EveryCaseIsOfADifferentiableOp) {
  for (const GradCase &c : allCases()) {
    const ir::OpDef *def = ir::lookupOp(c.op);
    ASSERT_NE(def, nullptr) << c.op;
    EXPECT_TRUE(def->differentiable()) << c.op;
  }
}

} // namespace
