// The bf16 CPU kernels (matmul, convolutions and their gradients, fused forms) against the
// reference interpreter, which rounds the same operands to bf16 and sums exactly: the kernels
// must agree to f32 accumulation error (1e-5), far below the 4e-3 of bf16 rounding, so a kernel
// that silently computed in f32 fails here.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ir/Builder.h"
#include "ir/OpTable.h"
#include "ir/Precision.h"
#include "passes/PassManager.h"
#include "runtime/cpu/kernels/OneDnnKernel.h"
#include "tests/cpu/ReferenceCheck.h"

using namespace prism;
using ir::Attr;
using ir::AttrMap;
using ir::DType;
using ir::kBatchDim;
using ir::TensorType;
using ir::Value;

namespace {

constexpr double kBf16Tolerance = 1e-5;

#define SKIP_WITHOUT_BF16()                                                                        \
  if (!runtime::cpu::onednn::cpuHasBf16())                                                         \
  GTEST_SKIP() << "this CPU has no AVX512_BF16: bf16 kernels refuse to run (tested in lit)"

std::unique_ptr<ir::Module> finish(ir::ModuleBuilder &b) {
  auto m = b.finish();
  EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
  return m ? std::move(*m) : nullptr;
}

AttrMap bf16(AttrMap attrs = {}) {
  attrs.set(ir::kComputeAttr, Attr::string("bf16"));
  return attrs;
}

void expectMatchesRoundedReference(const ir::Module &module, std::vector<int> threads = {1}) {
  for (int t : threads)
    for (int64_t batch : {1, 5}) {
      SCOPED_TRACE("batch " + std::to_string(batch) + ", " + std::to_string(t) + " threads");
      prism::testing::ReferenceCheckOptions options;
      options.batch = batch;
      options.threads = t;
      options.tolerance = kBf16Tolerance;
      prism::testing::expectMatchesReference(module, {"y"}, options);
    }
}

TEST(Bf16Matmul, EveryTransposeCombination) {
  SKIP_WITHOUT_BF16();
  struct Shape {
    int64_t m, k, n;
  };
  for (Shape s : {Shape{kBatchDim, 5, 7}, Shape{33, 65, 17}, Shape{kBatchDim, 300, 70}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        SCOPED_TRACE("m " + std::to_string(s.m) + ", k " + std::to_string(s.k) + ", n " +
                     std::to_string(s.n) + (ta ? ", aᵀ" : "") + (tb ? ", bᵀ" : ""));
        ir::ModuleBuilder b("matmul");
        Value *a =
            b.input("a", TensorType(DType::F32, ta ? ir::Dims{s.k, s.m} : ir::Dims{s.m, s.k}));
        Value *w =
            b.input("b", TensorType(DType::F32, tb ? ir::Dims{s.n, s.k} : ir::Dims{s.k, s.n}));
        b.op("matmul", {a, w},
             bf16(ir::attrs(
                 {{"transpose_a", Attr::boolean(ta)}, {"transpose_b", Attr::boolean(tb)}})),
             "y");
        auto module = finish(b);
        ASSERT_TRUE(module);
        expectMatchesRoundedReference(*module, {1, 2});
      }
}

TEST(Bf16Matmul, FusedWithBiasAndRelu) {
  SKIP_WITHOUT_BF16();
  ir::ModuleBuilder b("fused");
  Value *a = b.input("a", TensorType(DType::F32, {kBatchDim, 40}));
  Value *w = b.input("b", TensorType(DType::F32, {40, 24}));
  Value *bias = b.input("bias", TensorType(DType::F32, {24}));
  b.op("fused_matmul", {a, w, bias}, bf16(ir::attrs({{"activation", Attr::string("relu")}})), "y");
  auto module = finish(b);
  ASSERT_TRUE(module);
  expectMatchesRoundedReference(*module);
}

struct ConvCase {
  int64_t h, w, c, kh, kw, o, s;
  const char *padding;
  AttrMap attrs() const {
    return ir::attrs({{"stride", Attr::ints({s, s})}, {"padding", Attr::string(padding)}});
  }
};

TEST(Bf16Conv2d, ForwardAndBothGradients) {
  SKIP_WITHOUT_BF16();
  for (ConvCase k :
       {ConvCase{7, 9, 3, 3, 3, 4, 1, "same"}, ConvCase{11, 7, 2, 5, 5, 3, 2, "same"},
        ConvCase{9, 10, 3, 3, 3, 2, 2, "valid"}, ConvCase{13, 13, 1, 5, 5, 32, 1, "same"},
        ConvCase{7, 7, 32, 3, 3, 32, 1, "same"}})
    for (const char *op :
         {"conv2d", "conv2d_backprop_input", "conv2d_backprop_filter", "fused_conv2d"}) {
      SCOPED_TRACE(std::string(op) + " " + std::to_string(k.h) + "x" + std::to_string(k.w) + "x" +
                   std::to_string(k.c) + " filter " + std::to_string(k.kh) + " -> " +
                   std::to_string(k.o) + " stride " + std::to_string(k.s) + " " + k.padding);
      ir::ModuleBuilder b("conv");
      Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, k.h, k.w, k.c}));
      Value *w = b.input("w", TensorType(DType::F32, {k.kh, k.kw, k.c, k.o}));
      Value *probe = b.op("conv2d", {x, w}, k.attrs(), "probe");
      ASSERT_TRUE(probe);
      Value *dy = b.input("dy", probe->type());
      std::string name = op;
      if (name == "conv2d") {
        b.op(op, {x, w}, bf16(k.attrs()), "y");
      } else if (name == "conv2d_backprop_input") {
        b.op(op, {dy, w, x}, bf16(k.attrs()), "y");
      } else if (name == "conv2d_backprop_filter") {
        b.op(op, {x, dy, w}, bf16(k.attrs()), "y");
      } else {
        Value *bias = b.input("bias", TensorType(DType::F32, {k.o}));
        AttrMap attrs = bf16(k.attrs());
        attrs.set("activation", Attr::string("relu"));
        b.op(op, {x, w, bias}, attrs, "y");
      }
      auto module = finish(b);
      ASSERT_TRUE(module);
      expectMatchesRoundedReference(*module, {1, 2});
    }
}

// A CNN's whole training step after the mixed-precision pass: every trained variable after two
// sgd steps matches the reference, which follows the same bf16 rules op by op.
TEST(Bf16Training, CnnStepsMatchReference) {
  SKIP_WITHOUT_BF16();
  ir::ModuleBuilder b("cnn");
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 9, 9, 2}));
  Value *labels = b.input("labels", TensorType(DType::I32, {kBatchDim}));
  ir::Initializer glorot{"glorot_uniform", {}};
  Value *w1 = b.variable("w1", TensorType(DType::F32, {3, 3, 2, 8}), glorot);
  Value *w2 = b.variable("w2", TensorType(DType::F32, {8 * 81, 5}), glorot);
  AttrMap same = ir::attrs({{"stride", Attr::ints({1, 1})}, {"padding", Attr::string("same")}});
  Value *h = b.relu(b.op("conv2d", {x, w1}, same));
  h = b.op("reshape", {h}, ir::attrs({{"shape", Attr::ints({kBatchDim, 8 * 81})}}));
  Value *loss = b.op("softmax_cross_entropy", {b.matmul(h, w2), labels}, {}, "loss");
  b.minimize(loss, "sgd", ir::attrs({{"lr", Attr::real(0.5)}}));
  auto module = finish(b);
  ASSERT_TRUE(module);
  auto pipeline = passes::PassManager::fromPipeline(
      "infer-shapes,autodiff,lower-optimizer,fuse-bias-activation,mixed-precision");
  ASSERT_TRUE(bool(pipeline)) << llvm::toString(pipeline.takeError());
  passes::PassOptions options;
  options.set("precision", "bf16");
  auto changed = pipeline->run(*module, options);
  ASSERT_TRUE(bool(changed)) << llvm::toString(changed.takeError());
  int reduced = 0;
  for (const auto &op : module->ops())
    reduced += ir::computePrecision(*op) == ir::ComputePrecision::BF16;
  EXPECT_EQ(reduced, 5); // conv2d, its filter gradient, the matmul and its two gradients

  prism::testing::ReferenceCheckOptions check;
  check.intBound["labels"] = 5;
  check.steps = 2;
  check.batch = 4;
  check.tolerance = 1e-4;
  prism::testing::expectMatchesReference(*module, {}, check);
}

TEST(Bf16Rounding, NearestEvenAndSpecialValues) {
  using ir::ComputePrecision;
  auto bf = [](float v) { return ir::roundToPrecision(v, ComputePrecision::BF16); };
  EXPECT_EQ(bf(1.0f), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even 1.
  EXPECT_EQ(bf(1.0f + 0x1p-8f), 1.0f);
  EXPECT_EQ(bf(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);
  EXPECT_EQ(bf(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f); // halfway, up to even
  EXPECT_EQ(bf(-3.14159f), -3.140625f);
  EXPECT_TRUE(std::isnan(bf(NAN)));
  EXPECT_EQ(bf(INFINITY), INFINITY);
  EXPECT_EQ(bf(3.4e38f), INFINITY); // past bf16's largest finite value
  auto fp = [](float v) { return ir::roundToPrecision(v, ComputePrecision::FP16); };
  EXPECT_EQ(fp(1.0f + 0x1p-11f), 1.0f); // tie to even
  EXPECT_EQ(fp(1.0f + 0x1p-10f), 1.0f + 0x1p-10f);
  EXPECT_EQ(fp(65504.0f), 65504.0f);
  EXPECT_EQ(fp(65520.0f), INFINITY);
  EXPECT_EQ(fp(0x1p-25f), 0.0f); // half the smallest subnormal: to even, zero
  EXPECT_EQ(fp(0x1p-24f * 3), 0x1p-24f * 3);
}

} // namespace
