// The CPU shape kernels against the reference interpreter: reshape, transposes of rank 2 to 4,
// concat, slice and slice_grad on every axis, pad, reductions over every axis set with and without
// keepdims, global_avg_pool, sum_like, expand_like, constant and cast, on several dtypes and on
// two threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <string>

#include "ir/Builder.h"
#include "ir/OpTable.h"
#include "runtime/cpu/Kernel.h"
#include "tests/cpu/ReferenceCheck.h"

namespace {

using namespace prism;
using ir::Attr;
using ir::DType;
using ir::TensorType;
using prism::testing::ReferenceCheckOptions;

constexpr int64_t B = ir::kBatchDim;

std::string describe(llvm::StringRef op, const std::vector<TensorType> &inputs,
                     const ir::AttrMap &attrs) {
  std::string s = op.str() + "(";
  for (size_t i = 0; i < inputs.size(); ++i)
    s += (i ? ", " : "") + inputs[i].str();
  for (const auto &entry : attrs)
    s += ", " + entry.first + " = " + entry.second.str();
  return s + ")";
}

// y = op(x0, x1, ...) over inputs of the given types, compared with the reference. Bool inputs
// draw 0 or 1.
void expectOpMatches(llvm::StringRef op, const std::vector<TensorType> &inputs,
                     ir::AttrMap attrs = {}, ReferenceCheckOptions options = {}) {
  SCOPED_TRACE(describe(op, inputs, attrs));
  ir::ModuleBuilder b("single_op");
  std::vector<ir::Value *> operands;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string name = "x" + std::to_string(i);
    operands.push_back(b.input(name, inputs[i]));
    if (inputs[i].dtype == DType::Bool && !options.intBound.count(name))
      options.intBound[name] = 2;
  }
  b.op(op, operands, std::move(attrs), "y");
  auto module = b.finish();
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  prism::testing::expectMatchesReference(**module, {"y"}, options);
}

TensorType f32(llvm::ArrayRef<int64_t> dims) {
  return TensorType(DType::F32, dims);
}

ir::AttrMap ints(const char *name, llvm::ArrayRef<int64_t> values) {
  return ir::attrs({{name, Attr::ints(values)}});
}

ReferenceCheckOptions twoThreads(int64_t batch) {
  ReferenceCheckOptions options;
  options.threads = 2;
  options.batch = batch;
  return options;
}

TEST(ShapeKernels, ReshapeAndReshapeLike) {
  for (DType dtype : {DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool}) {
    expectOpMatches("reshape", {TensorType(dtype, {B, 12})}, ints("shape", {B, 3, 4}));
    expectOpMatches("reshape", {TensorType(dtype, {2, 3, 4})}, ints("shape", {4, 6}));
  }
  expectOpMatches("reshape_like", {f32({B, 3, 4}), f32({B, 12})});
  expectOpMatches("reshape", {f32({B, 4096})}, ints("shape", {B, 64, 64}), twoThreads(64));
}

// Every permutation of ranks 2 and 3, and rank-4 ones including the layout changes of
// convolutions and ones that keep the last dimension (row copies) or move it (tiles).
TEST(ShapeKernels, TransposeOfRanks2To4) {
  for (int64_t rank = 2; rank <= 3; ++rank) {
    std::vector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::vector<int64_t> dims =
        rank == 2 ? std::vector<int64_t>{B, 5} : std::vector<int64_t>{B, 4, 6};
    do
      expectOpMatches("transpose", {f32(dims)}, ints("perm", perm));
    while (std::next_permutation(perm.begin(), perm.end()));
  }
  for (const std::vector<int64_t> &perm : std::vector<std::vector<int64_t>>{{0, 2, 3, 1},
                                                                            {0, 3, 1, 2},
                                                                            {3, 2, 1, 0},
                                                                            {1, 0, 2, 3},
                                                                            {2, 0, 3, 1},
                                                                            {0, 1, 3, 2},
                                                                            {1, 3, 0, 2},
                                                                            {0, 1, 2, 3}}) {
    expectOpMatches("transpose", {f32({B, 3, 4, 5})}, ints("perm", perm));
    expectOpMatches("transpose", {f32({B, 1, 4, 1})}, ints("perm", perm));
    expectOpMatches("transpose", {f32({2, 1, 35, 19})}, ints("perm", perm));
  }
}

TEST(ShapeKernels, TransposeOfEveryElementWidth) {
  for (DType dtype : {DType::F64, DType::I32, DType::I64, DType::Bool}) {
    expectOpMatches("transpose", {TensorType(dtype, {B, 37})}, ints("perm", {1, 0}));
    expectOpMatches("transpose", {TensorType(dtype, {B, 3, 4, 5})}, ints("perm", {0, 2, 3, 1}));
    expectOpMatches("transpose", {TensorType(dtype, {B, 3, 4, 5})}, ints("perm", {1, 0, 2, 3}));
  }
}

TEST(ShapeKernels, TransposeOnTwoThreads) {
  expectOpMatches("transpose", {f32({B, 64, 257})}, ints("perm", {0, 2, 1}), twoThreads(8));
  expectOpMatches("transpose", {f32({B, 300})}, ints("perm", {1, 0}), twoThreads(257));
  expectOpMatches("transpose", {f32({B, 64, 33, 8})}, ints("perm", {2, 0, 1, 3}), twoThreads(16));
}

TEST(ShapeKernels, ConcatOfThreeOperands) {
  auto axis = [](int64_t a) { return ir::attrs({{"axis", Attr::integer(a)}}); };
  expectOpMatches("concat", {f32({2, 3}), f32({4, 3}), f32({1, 3})}, axis(0));
  expectOpMatches("concat", {f32({B, 2}), f32({B, 3}), f32({B, 1})}, axis(1));
  expectOpMatches("concat", {f32({B, 2, 3}), f32({B, 4, 3}), f32({B, 1, 3})}, axis(1));
  expectOpMatches("concat", {f32({B, 2, 3}), f32({B, 2, 5}), f32({B, 2, 1})}, axis(-1));
  expectOpMatches("concat", {f32({B, 2, 3, 4}), f32({B, 2, 1, 4}), f32({B, 2, 2, 4})}, axis(2));
  for (DType dtype : {DType::F64, DType::I32, DType::I64, DType::Bool})
    expectOpMatches(
        "concat",
        {TensorType(dtype, {B, 2}), TensorType(dtype, {B, 70}), TensorType(dtype, {B, 1})},
        axis(1));
  expectOpMatches("concat", {f32({B, 300}), f32({B, 200}), f32({B, 100})}, axis(1),
                  twoThreads(128));
  expectOpMatches("concat", {f32({20000, 3}), f32({30000, 3}), f32({1000, 3})}, axis(0),
                  twoThreads(1));
}

ir::AttrMap sliceAttrs(int64_t axis, int64_t begin, int64_t end) {
  return ir::attrs({{"axis", Attr::integer(axis)},
                    {"begin", Attr::integer(begin)},
                    {"end", Attr::integer(end)}});
}

TEST(ShapeKernels, SliceOnInnerAxes) {
  expectOpMatches("slice", {f32({B, 10})}, sliceAttrs(1, 2, 7));
  expectOpMatches("slice", {f32({B, 10})}, sliceAttrs(-1, 0, 1));
  expectOpMatches("slice", {f32({B, 4, 6})}, sliceAttrs(1, 1, 3));
  expectOpMatches("slice", {f32({B, 4, 6})}, sliceAttrs(2, 0, 5));
  expectOpMatches("slice", {f32({B, 3, 4, 5})}, sliceAttrs(2, 1, 4));
  expectOpMatches("slice", {f32({6, 5})}, sliceAttrs(0, 2, 6));
  for (DType dtype : {DType::F64, DType::I32, DType::I64, DType::Bool})
    expectOpMatches("slice", {TensorType(dtype, {B, 4, 100})}, sliceAttrs(2, 3, 90));
  expectOpMatches("slice", {f32({B, 1000})}, sliceAttrs(1, 100, 900), twoThreads(128));
}

ir::AttrMap sliceGradAttrs(int64_t axis, int64_t begin) {
  return ir::attrs({{"axis", Attr::integer(axis)}, {"begin", Attr::integer(begin)}});
}

TEST(ShapeKernels, SliceGradPlacesTheGradientAmongZeros) {
  expectOpMatches("slice_grad", {f32({B, 5}), f32({B, 10})}, sliceGradAttrs(1, 3));
  expectOpMatches("slice_grad", {f32({B, 5}), f32({B, 10})}, sliceGradAttrs(1, 0));
  expectOpMatches("slice_grad", {f32({B, 5}), f32({B, 10})}, sliceGradAttrs(-1, 5));
  expectOpMatches("slice_grad", {f32({B, 2, 6}), f32({B, 4, 6})}, sliceGradAttrs(1, 1));
  expectOpMatches("slice_grad", {f32({B, 3, 2, 5}), f32({B, 3, 4, 5})}, sliceGradAttrs(2, 2));
  expectOpMatches("slice_grad", {TensorType(DType::F64, {B, 4}), TensorType(DType::F64, {B, 9})},
                  sliceGradAttrs(1, 4));
  expectOpMatches("slice_grad", {f32({B, 800}), f32({B, 1000})}, sliceGradAttrs(1, 100),
                  twoThreads(128));
}

// Every subset of the axes of a rank-3 tensor, with and without keepdims, and [] (all axes).
TEST(ShapeKernels, ReductionsOverEveryAxisSet) {
  std::vector<std::vector<int64_t>> axisSets = {{},     {0},    {1},       {2},  {0, 1},
                                                {0, 2}, {1, 2}, {0, 1, 2}, {-1}, {-3, -1}};
  for (const char *op : {"reduce_sum", "reduce_mean"})
    for (const auto &axes : axisSets)
      for (bool keepdims : {false, true})
        expectOpMatches(
            op, {f32({B, 4, 5})},
            ir::attrs({{"axes", Attr::ints(axes)}, {"keepdims", Attr::boolean(keepdims)}}));
}

TEST(ShapeKernels, ReductionsOfRank4AndOtherDtypes) {
  for (const char *op : {"reduce_sum", "reduce_mean"}) {
    for (const std::vector<int64_t> &axes :
         std::vector<std::vector<int64_t>>{{0, 2, 3}, {1, 3}, {0, 3}, {2}, {1, 2}})
      expectOpMatches(op, {f32({B, 3, 4, 5})}, ints("axes", axes));
    expectOpMatches(op, {f32({B, 1, 4, 1})}, ints("axes", {1, 2}));
    for (DType dtype : {DType::F64, DType::I32, DType::I64}) {
      expectOpMatches(op, {TensorType(dtype, {B, 6})}, ints("axes", {0}));
      expectOpMatches(op, {TensorType(dtype, {B, 6})}, ints("axes", {1}));
      expectOpMatches(op, {TensorType(dtype, {B, 6})}, ints("axes", {}));
    }
  }
}

// Each way the reduction kernel splits work: many outputs, one long sum, few long rows.
TEST(ShapeKernels, ReductionsOnTwoThreads) {
  for (const char *op : {"reduce_sum", "reduce_mean"}) {
    expectOpMatches(op, {f32({B, 4096})}, ints("axes", {1}), twoThreads(64));
    expectOpMatches(op, {f32({B, 4096})}, ints("axes", {}), twoThreads(64));
    expectOpMatches(op, {f32({B, 64})}, ints("axes", {0}), twoThreads(4096));
    expectOpMatches(op, {f32({B, 3, 64, 64})}, ints("axes", {0, 2, 3}), twoThreads(16));
    expectOpMatches(op, {f32({B, 3000})}, ints("axes", {0}), twoThreads(64));
  }
}

TEST(ShapeKernels, SumLikeUndoesBroadcasting) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{B, 7}, {7}},    {{B, 7}, {1, 7}},          {{B, 7}, {B, 1}},
      {{B, 4}, {}},     {{B, 3, 4, 5}, {3, 1, 5}}, {{B, 3, 4, 5}, {B, 1, 4, 1}},
      {{4, 5}, {4, 5}}, {{B, 3, 4}, {4}}};
  for (DType dtype : {DType::F32, DType::F64})
    for (const auto &[g, ref] : shapes)
      expectOpMatches("sum_like", {TensorType(dtype, g), TensorType(dtype, ref)});
  expectOpMatches("sum_like", {f32({B, 512}), f32({512})}, {}, twoThreads(256));
}

TEST(ShapeKernels, ExpandLikeUndoesReductions) {
  struct Case {
    std::vector<int64_t> g, ref, axes;
    bool keepdims;
  };
  for (const Case &c :
       {Case{{B}, {B, 5}, {1}, false}, Case{{B, 1}, {B, 5}, {1}, true},
        Case{{5}, {B, 5}, {0}, false}, Case{{}, {B, 3, 4}, {}, false},
        Case{{1, 1, 1}, {B, 3, 4}, {}, true}, Case{{3}, {B, 3, 4, 5}, {0, 2, 3}, false},
        Case{{B, 4}, {B, 3, 4, 5}, {1, 3}, false}})
    for (bool mean : {false, true})
      expectOpMatches("expand_like", {f32(c.g), f32(c.ref)},
                      ir::attrs({{"axes", Attr::ints(c.axes)},
                                 {"keepdims", Attr::boolean(c.keepdims)},
                                 {"mean", Attr::boolean(mean)}}));
  expectOpMatches("expand_like", {TensorType(DType::F64, {B}), TensorType(DType::F64, {B, 6})},
                  ir::attrs({{"axes", Attr::ints({1})}, {"mean", Attr::boolean(true)}}));
  expectOpMatches("expand_like", {f32({B}), f32({B, 1000})},
                  ir::attrs({{"axes", Attr::ints({1})}, {"mean", Attr::boolean(true)}}),
                  twoThreads(128));
}

TEST(ShapeKernels, ConstantOfEveryDtype) {
  for (const char *dtype : {"f32", "f64", "i32", "i64", "bool"})
    for (double value : {2.7, -2.7, 0.0})
      expectOpMatches("constant", {},
                      ir::attrs({{"value", Attr::real(value)},
                                 {"shape", Attr::ints({3, 4})},
                                 {"dtype", Attr::string(dtype)}}));
  expectOpMatches("constant", {}, ir::attrs({{"value", Attr::real(1.5)}}));
}

TEST(ShapeKernels, CastBetweenDtypes) {
  ReferenceCheckOptions wide;
  wide.low = -10;
  wide.high = 10;
  const std::vector<std::pair<DType, DType>> casts = {
      {DType::F32, DType::I32}, {DType::F32, DType::I64},  {DType::F64, DType::I32},
      {DType::I32, DType::F32}, {DType::I64, DType::F64},  {DType::F64, DType::F32},
      {DType::F32, DType::F64}, {DType::F32, DType::Bool}, {DType::Bool, DType::F32},
      {DType::I32, DType::I64}, {DType::I64, DType::Bool}, {DType::F32, DType::F32}};
  for (const auto &[from, to] : casts)
    expectOpMatches("cast", {TensorType(from, {B, 9})},
                    ir::attrs({{"dtype", Attr::string(ir::dtypeName(to).str())}}), wide);
}

ir::AttrMap padAttrs(llvm::ArrayRef<int64_t> pads, double value) {
  return ir::attrs({{"pads", Attr::ints(pads)}, {"value", Attr::real(value)}});
}

// Padding on inner and outer dimensions, only before, only after, none, and on every dtype.
TEST(ShapeKernels, PadOnEveryDimensionButTheBatch) {
  expectOpMatches("pad", {f32({B, 4, 5, 2})}, padAttrs({0, 1, 2, 0, 0, 1, 2, 0}, 0.0));
  expectOpMatches("pad", {f32({B, 4, 5, 2})}, padAttrs({0, 0, 0, 3, 0, 2, 0, 1}, -1.5));
  expectOpMatches("pad", {f32({B, 3})}, padAttrs({0, 0, 0, 0}, 2.0));
  expectOpMatches("pad", {f32({3, B})}, padAttrs({2, 0, 1, 0}, 0.25));
  expectOpMatches("pad", {f32({7})}, padAttrs({3, 4}, 1.0));
  expectOpMatches("pad", {f32({2, 3, 4})}, padAttrs({1, 0, 2, 0, 3, 1}, 0.5));
  for (DType dtype : {DType::F64, DType::I32, DType::I64})
    expectOpMatches("pad", {TensorType(dtype, {B, 3, 4})}, padAttrs({0, 1, 1, 0, 2, 0}, 3.0));
  expectOpMatches("pad", {f32({B, 30, 30, 8})}, padAttrs({0, 2, 2, 0, 0, 2, 2, 0}, 0.0),
                  twoThreads(16));
}

TEST(ShapeKernels, GlobalAvgPoolIsTheMeanOverHeightAndWidth) {
  for (DType dtype : {DType::F32, DType::F64}) {
    expectOpMatches("global_avg_pool", {TensorType(dtype, {B, 5, 7, 3})});
    expectOpMatches("global_avg_pool", {TensorType(dtype, {B, 1, 1, 4})});
    expectOpMatches("global_avg_pool", {TensorType(dtype, {2, 6, 6, 1})});
  }
  expectOpMatches("global_avg_pool", {f32({B, 14, 14, 64})}, {}, twoThreads(8));
  expectOpMatches("global_avg_pool", {f32({B, 28, 28, 2})}, {}, twoThreads(2));
}

// Output buffers are reused memory: over several steps, a kernel that skipped elements (the
// zeros of slice_grad, say) would show the previous values.
TEST(ShapeKernels, EveryOutputElementIsWrittenEachStep) {
  ir::ModuleBuilder b("chain");
  ir::Value *x = b.input("x", f32({B, 6, 8}));
  ir::Value *t = b.op("transpose", {b.op("neg", {x})}, ints("perm", {0, 2, 1})); // [B, 8, 6]
  ir::Value *part = b.op("slice", {t}, sliceAttrs(1, 2, 5));
  ir::Value *padded = b.op("slice_grad", {part, t}, sliceGradAttrs(1, 2));
  ir::Value *joined = b.op("concat", {padded, t, padded}, ir::attrs({{"axis", Attr::integer(1)}}));
  ir::Value *sums = b.op("reduce_sum", {joined}, ints("axes", {2}));
  ir::Value *spread = b.op("expand_like", {sums, joined}, ir::attrs({{"axes", Attr::ints({2})}}));
  b.op("pad", {spread}, padAttrs({0, 1, 2, 0, 0, 1}, 0.5), "y");
  auto module = b.finish();
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  ReferenceCheckOptions options;
  options.steps = 3;
  options.batch = 4;
  prism::testing::expectMatchesReference(**module, {"y"}, options);
}

TEST(ShapeKernels, EveryShapeOpHasACpuKernel) {
  const std::set<std::string> family = {"reshape",  "reshape_like",   "transpose",  "concat",
                                        "slice",    "slice_grad",     "reduce_sum", "reduce_mean",
                                        "sum_like", "expand_like",    "constant",   "cast",
                                        "pad",      "global_avg_pool"};
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
