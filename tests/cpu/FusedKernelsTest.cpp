// The fused CPU kernels (fused_matmul, fused_conv2d: oneDNN with bias and relu post-ops)
// against the float64 reference interpreter, with and without the activation, over transposes,
// both paddings, strides of 1 and 2, batch sizes 1 and 3, and two threads.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/Builder.h"
#include "tests/cpu/ReferenceCheck.h"

using namespace prism;
using ir::Attr;
using ir::DType;
using ir::kBatchDim;
using ir::TensorType;
using ir::Value;

namespace {

std::unique_ptr<ir::Module> finish(ir::ModuleBuilder &b) {
  auto m = b.finish();
  EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
  return m ? std::move(*m) : nullptr;
}

void expectMatchesAtBatches(const ir::Module &module, int threads = 1, double tolerance = 1e-4) {
  for (int64_t batch : {1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(batch) + ", " + std::to_string(threads) + " threads");
    prism::testing::ReferenceCheckOptions options;
    options.batch = batch;
    options.threads = threads;
    options.tolerance = tolerance;
    prism::testing::expectMatchesReference(module, {"y"}, options);
  }
}

const char *const kActivations[] = {"none", "relu"};

// y = fused_matmul(a, b, bias) for op(a) [m, k] and op(b) [k, n]; m may be B.
std::unique_ptr<ir::Module> fusedMatmulModule(int64_t m, int64_t k, int64_t n, bool ta, bool tb,
                                              const char *activation, DType dtype = DType::F32) {
  ir::ModuleBuilder b("fused_matmul");
  Value *a = b.input("a", TensorType(dtype, ta ? ir::Dims{k, m} : ir::Dims{m, k}));
  Value *w = b.input("b", TensorType(dtype, tb ? ir::Dims{n, k} : ir::Dims{k, n}));
  Value *bias = b.input("bias", TensorType(dtype, {n}));
  b.op("fused_matmul", {a, w, bias},
       ir::attrs({{"transpose_a", Attr::boolean(ta)},
                  {"transpose_b", Attr::boolean(tb)},
                  {"activation", Attr::string(activation)}}),
       "y");
  return finish(b);
}

TEST(FusedMatmul, EveryTransposeAndActivation) {
  struct Shape {
    int64_t m, k, n;
  };
  for (Shape s : {Shape{kBatchDim, 5, 7}, Shape{4, 9, 2}, Shape{33, 65, 17}, Shape{1, 1, 1},
                  Shape{kBatchDim, 100, 50}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (const char *activation : kActivations) {
          SCOPED_TRACE("m " + std::to_string(s.m) + ", k " + std::to_string(s.k) + ", n " +
                       std::to_string(s.n) + (ta ? ", aᵀ" : "") + (tb ? ", bᵀ" : "") + ", " +
                       activation);
          auto module = fusedMatmulModule(s.m, s.k, s.n, ta, tb, activation);
          ASSERT_TRUE(module);
          expectMatchesAtBatches(*module);
        }
}

TEST(FusedMatmul, TwoThreads) {
  for (const char *activation : kActivations) {
    auto module = fusedMatmulModule(kBatchDim, 300, 70, false, true, activation);
    ASSERT_TRUE(module);
    expectMatchesAtBatches(*module, 2);
  }
}

TEST(FusedMatmul, F64UsesLoops) {
  for (bool ta : {false, true})
    for (const char *activation : kActivations) {
      auto module = fusedMatmulModule(kBatchDim, 6, 5, ta, !ta, activation, DType::F64);
      ASSERT_TRUE(module);
      expectMatchesAtBatches(*module, 1, 1e-12);
    }
}

struct ConvCase {
  int64_t h, w, c, kh, kw, o, sh, sw;
  const char *padding;

  std::string str() const {
    return std::to_string(h) + "x" + std::to_string(w) + "x" + std::to_string(c) + " filter " +
           std::to_string(kh) + "x" + std::to_string(kw) + "->" + std::to_string(o) + " stride " +
           std::to_string(sh) + "," + std::to_string(sw) + " " + padding;
  }
};

TEST(FusedConv2d, PaddingsStridesAndActivations) {
  const ConvCase cases[] = {
      {7, 9, 3, 3, 3, 4, 1, 1, "same"},   {7, 9, 3, 3, 3, 4, 1, 1, "valid"},
      {11, 7, 2, 5, 5, 3, 2, 2, "same"},  {8, 5, 2, 5, 5, 3, 2, 2, "valid"},
      {9, 8, 17, 3, 1, 19, 1, 2, "same"}, {13, 13, 1, 5, 5, 32, 1, 1, "same"},
  };
  for (const ConvCase &k : cases)
    for (const char *activation : kActivations)
      for (int threads : {1, 2}) {
        SCOPED_TRACE(k.str() + ", " + activation);
        ir::ModuleBuilder b("fused_conv2d");
        Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, k.h, k.w, k.c}));
        Value *w = b.input("w", TensorType(DType::F32, {k.kh, k.kw, k.c, k.o}));
        Value *bias = b.input("bias", TensorType(DType::F32, {k.o}));
        b.op("fused_conv2d", {x, w, bias},
             ir::attrs({{"stride", Attr::ints({k.sh, k.sw})},
                        {"padding", Attr::string(k.padding)},
                        {"activation", Attr::string(activation)}}),
             "y");
        auto module = finish(b);
        ASSERT_TRUE(module);
        expectMatchesAtBatches(*module, threads);
      }
}

} // namespace
