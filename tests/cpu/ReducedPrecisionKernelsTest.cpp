// The bf16 and fp16 CPU kernels (matmul, convolutions and their gradients, fused forms) against
// the reference interpreter, which rounds the same operands to bf16 or fp16 and sums exactly: the
// kernels must agree to f32 accumulation error (1e-5), far below the 4e-3 of bf16 rounding and
// the 5e-4 of fp16's, so a kernel that silently computed in f32 fails here. bf16 runs where the
// CPU has AVX512_BF16; fp16 everywhere (operands rounded to fp16, f32 arithmetic).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ir/Builder.h"
#include "ir/OpTable.h"
#include "ir/Precision.h"
#include "passes/PassManager.h"
#include "runtime/cpu/kernels/Fp16Rounding.h"
#include "runtime/cpu/kernels/OneDnnKernel.h"
#include "runtime/exec/Executor.h"
#include "tests/cpu/ReferenceCheck.h"

using namespace prism;
using ir::Attr;
using ir::AttrMap;
using ir::DType;
using ir::kBatchDim;
using ir::TensorType;
using ir::Value;

namespace {

constexpr double kReducedTolerance = 1e-5;

using ir::ComputePrecision;

// The reduced precisions this CPU computes: fp16 always, bf16 with AVX512_BF16 (without it the
// bf16 kernels refuse to run, which a lit test checks).
std::vector<ComputePrecision> precisionsHere() {
  std::vector<ComputePrecision> precisions = {ComputePrecision::FP16};
  if (runtime::cpu::onednn::cpuHasBf16())
    precisions.push_back(ComputePrecision::BF16);
  return precisions;
}

std::unique_ptr<ir::Module> finish(ir::ModuleBuilder &b) {
  auto m = b.finish();
  EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
  return m ? std::move(*m) : nullptr;
}

AttrMap reduced(ComputePrecision precision, AttrMap attrs = {}) {
  attrs.set(ir::kComputeAttr, Attr::string(ir::precisionName(precision).str()));
  return attrs;
}

void expectMatchesRoundedReference(const ir::Module &module, std::vector<int> threads = {1}) {
  for (int t : threads)
    for (int64_t batch : {1, 5}) {
      SCOPED_TRACE("batch " + std::to_string(batch) + ", " + std::to_string(t) + " threads");
      prism::testing::ReferenceCheckOptions options;
      options.batch = batch;
      options.threads = t;
      options.tolerance = kReducedTolerance;
      prism::testing::expectMatchesReference(module, {"y"}, options);
    }
}

TEST(ReducedMatmul, EveryTransposeCombination) {
  struct Shape {
    int64_t m, k, n;
  };
  for (ComputePrecision p : precisionsHere())
    for (Shape s : {Shape{kBatchDim, 5, 7}, Shape{33, 65, 17}, Shape{kBatchDim, 300, 70}})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          SCOPED_TRACE(ir::precisionName(p).str() + " m " + std::to_string(s.m) + ", k " +
                       std::to_string(s.k) + ", n " + std::to_string(s.n) + (ta ? ", aᵀ" : "") +
                       (tb ? ", bᵀ" : ""));
          ir::ModuleBuilder b("matmul");
          Value *a =
              b.input("a", TensorType(DType::F32, ta ? ir::Dims{s.k, s.m} : ir::Dims{s.m, s.k}));
          Value *w =
              b.input("b", TensorType(DType::F32, tb ? ir::Dims{s.n, s.k} : ir::Dims{s.k, s.n}));
          b.op("matmul", {a, w},
               reduced(p, ir::attrs({{"transpose_a", Attr::boolean(ta)},
                                     {"transpose_b", Attr::boolean(tb)}})),
               "y");
          auto module = finish(b);
          ASSERT_TRUE(module);
          expectMatchesRoundedReference(*module, {1, 2});
        }
}

// batch_matmul's factors are rounded (and, in bf16, copied) like matmul's: per-entry batches and
// a shared matrix on either side.
TEST(ReducedMatmul, BatchedAndShared) {
  struct Case {
    ir::Dims a, b;
    bool ta, tb;
  };
  for (ComputePrecision p : precisionsHere())
    for (const Case &c : {Case{{kBatchDim, 3, 5, 8}, {kBatchDim, 3, 8, 4}, false, false},
                          Case{{kBatchDim, 3, 8, 5}, {kBatchDim, 3, 4, 8}, true, true},
                          Case{{kBatchDim, 6, 40}, {40, 24}, false, false},
                          Case{{24, 40}, {kBatchDim, 6, 40}, false, true}}) {
      SCOPED_TRACE(ir::precisionName(p).str() + " " + TensorType(DType::F32, c.a).str() +
                   (c.ta ? "ᵀ" : "") + " times " + TensorType(DType::F32, c.b).str() +
                   (c.tb ? "ᵀ" : ""));
      ir::ModuleBuilder b("batch_matmul");
      Value *a = b.input("a", TensorType(DType::F32, c.a));
      Value *w = b.input("b", TensorType(DType::F32, c.b));
      b.op("batch_matmul", {a, w},
           reduced(p, ir::attrs({{"transpose_a", Attr::boolean(c.ta)},
                                 {"transpose_b", Attr::boolean(c.tb)}})),
           "y");
      auto module = finish(b);
      ASSERT_TRUE(module);
      expectMatchesRoundedReference(*module, {1, 2});
    }
}

TEST(ReducedMatmul, FusedWithBiasAndRelu) {
  for (ComputePrecision p : precisionsHere()) {
    SCOPED_TRACE(ir::precisionName(p).str());
    ir::ModuleBuilder b("fused");
    Value *a = b.input("a", TensorType(DType::F32, {kBatchDim, 40}));
    Value *w = b.input("b", TensorType(DType::F32, {40, 24}));
    Value *bias = b.input("bias", TensorType(DType::F32, {24}));
    b.op("fused_matmul", {a, w, bias},
         reduced(p, ir::attrs({{"activation", Attr::string("relu")}})), "y");
    auto module = finish(b);
    ASSERT_TRUE(module);
    expectMatchesRoundedReference(*module);
  }
}

struct ConvCase {
  int64_t h, w, c, kh, kw, o, s;
  const char *padding;
  AttrMap attrs() const {
    return ir::attrs({{"stride", Attr::ints({s, s})}, {"padding", Attr::string(padding)}});
  }
};

TEST(ReducedConv2d, ForwardAndBothGradients) {
  for (ComputePrecision p : precisionsHere())
    for (ConvCase k :
         {ConvCase{7, 9, 3, 3, 3, 4, 1, "same"}, ConvCase{11, 7, 2, 5, 5, 3, 2, "same"},
          ConvCase{9, 10, 3, 3, 3, 2, 2, "valid"}, ConvCase{13, 13, 1, 5, 5, 32, 1, "same"},
          ConvCase{7, 7, 32, 3, 3, 32, 1, "same"}})
      for (const char *op :
           {"conv2d", "conv2d_backprop_input", "conv2d_backprop_filter", "fused_conv2d"}) {
        SCOPED_TRACE(ir::precisionName(p).str() + " " + op + " " + std::to_string(k.h) + "x" +
                     std::to_string(k.w) + "x" + std::to_string(k.c) + " filter " +
                     std::to_string(k.kh) + " -> " + std::to_string(k.o) + " stride " +
                     std::to_string(k.s) + " " + k.padding);
        ir::ModuleBuilder b("conv");
        Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, k.h, k.w, k.c}));
        Value *w = b.input("w", TensorType(DType::F32, {k.kh, k.kw, k.c, k.o}));
        Value *probe = b.op("conv2d", {x, w}, k.attrs(), "probe");
        ASSERT_TRUE(probe);
        Value *dy = b.input("dy", probe->type());
        std::string name = op;
        if (name == "conv2d") {
          b.op(op, {x, w}, reduced(p, k.attrs()), "y");
        } else if (name == "conv2d_backprop_input") {
          b.op(op, {dy, w, x}, reduced(p, k.attrs()), "y");
        } else if (name == "conv2d_backprop_filter") {
          b.op(op, {x, dy, w}, reduced(p, k.attrs()), "y");
        } else {
          Value *bias = b.input("bias", TensorType(DType::F32, {k.o}));
          AttrMap attrs = reduced(p, k.attrs());
          attrs.set("activation", Attr::string("relu"));
          b.op(op, {x, w, bias}, attrs, "y");
        }
        auto module = finish(b);
        ASSERT_TRUE(module);
        expectMatchesRoundedReference(*module, {1, 2});
      }
}

// A CNN's whole training step after the mixed-precision pass: every trained variable after two
// sgd steps matches the reference, which follows the same bf16 or fp16 rules op by op (fp16 with
// the dynamic loss scaling lower-optimizer adds for it).
TEST(ReducedTraining, CnnStepsMatchReference) {
  for (ComputePrecision p : precisionsHere()) {
    SCOPED_TRACE(ir::precisionName(p).str());
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
    options.set("precision", ir::precisionName(p).str());
    if (p == ComputePrecision::FP16)
      options.set("loss-scale", "dynamic");
    auto changed = pipeline->run(*module, options);
    ASSERT_TRUE(bool(changed)) << llvm::toString(changed.takeError());
    int marked = 0;
    for (const auto &op : module->ops())
      marked += ir::computePrecision(*op) == p;
    EXPECT_EQ(marked, 5); // conv2d, its filter gradient, the matmul and its two gradients

    prism::testing::ReferenceCheckOptions check;
    check.intBound["labels"] = 5;
    check.steps = 2;
    check.batch = 4;
    // Where the kernel's and the reference's f32 sums (in different orders) fall on either side
    // of a rounding boundary of the compute format, an operand differs by one of its units in
    // the last place, and two steps at lr 0.5 carry that into the variables: up to 4.6e-4 with
    // fp16 and 1.3e-4 with bf16 over 600 random seeds (1e-4 failed about one run in 60). The
    // bound is the format's unit at 1: 2^-10 (fp16), 2^-7 (bf16).
    check.tolerance = p == ComputePrecision::FP16 ? 0x1p-10 : 0x1p-7;
    prism::testing::expectMatchesReference(*module, {}, check);
  }
}

// fp16's range is what loss scaling guards: an operand past 65504 becomes infinite in an fp16
// matmul (and so does its product), one below 2^-25 becomes zero; f32 keeps both.
TEST(ReducedMatmul, Fp16OverflowsAndUnderflowsWhereF32DoesNot) {
  for (ComputePrecision p : {ComputePrecision::F32, ComputePrecision::FP16}) {
    SCOPED_TRACE(ir::precisionName(p).str());
    ir::ModuleBuilder b("range");
    Value *a = b.input("a", TensorType(DType::F32, {2, 1}));
    Value *w = b.input("b", TensorType(DType::F32, {1, 1}));
    b.op("matmul", {a, w}, p == ComputePrecision::F32 ? AttrMap() : reduced(p), "y");
    auto module = finish(b);
    ASSERT_TRUE(module);
    runtime::ExecutorOptions options;
    options.outputs = {"y"};
    auto store = std::make_shared<runtime::VariableStore>();
    ASSERT_FALSE(bool(store->initialize(*module, 1)));
    auto exec = runtime::Executor::create(*module, store, options);
    ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
    runtime::Tensor aValue(DType::F32, {2, 1}), bValue(DType::F32, {1, 1});
    aValue.data<float>()[0] = 70000.0f;
    aValue.data<float>()[1] = 1e-8f;
    bValue.data<float>()[0] = 1.0f; // y = a
    ASSERT_FALSE(bool((*exec)->step({{"a", aValue}, {"b", bValue}})));
    const float *y = (*exec)->output("y")->dense.data<float>();
    if (p == ComputePrecision::FP16) {
      EXPECT_EQ(y[0], INFINITY);
      EXPECT_EQ(y[1], 0.0f);
    } else {
      EXPECT_FLOAT_EQ(y[0], 70000.0f);
      EXPECT_FLOAT_EQ(y[1], 1e-8f);
    }
  }
}

// The fp16 kernels' rounding (F16C, eight values an instruction, on threads) is the IR's rule
// bit for bit: ties, the largest values, subnormals, zero, infinities and NaN, and a tail that
// is not a multiple of eight.
TEST(ReducedRounding, KernelFp16RoundingIsTheIrRule) {
  std::vector<float> values = {
      1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f, 65519.0f, 65520.0f, -70000.0f, 0x1p-24f,
      0x1p-25f,        0x1p-25f * 3,        6.1e-5f,  -0.0f,    INFINITY, -INFINITY, 3.14159265f};
  for (int i = 0; values.size() < 200003; ++i)
    values.push_back(std::ldexp(std::sin(0.37f * static_cast<float>(i)), i % 40 - 28));
  for (int threads : {1, 2}) {
    std::vector<float> rounded(values.size());
    runtime::cpu::roundToFp16(values.data(), rounded.data(), static_cast<int64_t>(values.size()),
                              threads);
    for (size_t i = 0; i < values.size(); ++i) {
      float want = ir::roundToPrecision(values[i], ComputePrecision::FP16);
      ASSERT_EQ(std::memcmp(&want, &rounded[i], sizeof want), 0)
          << values[i] << " -> " << rounded[i] << ", want " << want;
    }
  }
  float nan = NAN, out = 0;
  runtime::cpu::roundToFp16(&nan, &out, 1, 1);
  EXPECT_TRUE(std::isnan(out));
}

TEST(ReducedRounding, NearestEvenAndSpecialValues) {
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
