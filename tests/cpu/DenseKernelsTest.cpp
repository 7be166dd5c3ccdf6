// The dense CPU kernels (matmul, batch_matmul, convolutions, pooling and their gradients) against
// the float64 reference interpreter, over shapes that exercise transposes, strides, both paddings,
// odd extents and batch sizes, and two threads.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "ir/Builder.h"
#include "passes/PassManager.h"
#include "runtime/exec/Executor.h"
#include "runtime/reference/ReferenceInterpreter.h"
#include "tests/cpu/ReferenceCheck.h"

using namespace prism;
using ir::Attr;
using ir::AttrMap;
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

// Checks `y` at batch sizes 1 and 3, on one thread and on two.
void expectMatchesAtBatches(const ir::Module &module, std::vector<int> threads = {1}) {
  for (int t : threads)
    for (int64_t batch : {1, 3}) {
      SCOPED_TRACE("batch " + std::to_string(batch) + ", " + std::to_string(t) + " threads");
      prism::testing::ReferenceCheckOptions options;
      options.batch = batch;
      options.threads = t;
      prism::testing::expectMatchesReference(module, {"y"}, options);
    }
}

// ---- matmul ---------------------------------------------------------------------------------

// y = matmul(a, b) for op(a) [m, k] and op(b) [k, n] stored as the transposes say; m may be B.
std::unique_ptr<ir::Module> matmulModule(int64_t m, int64_t k, int64_t n, bool ta, bool tb,
                                         DType dtype = DType::F32) {
  ir::ModuleBuilder b("matmul");
  Value *a = b.input("a", TensorType(dtype, ta ? ir::Dims{k, m} : ir::Dims{m, k}));
  Value *w = b.input("b", TensorType(dtype, tb ? ir::Dims{n, k} : ir::Dims{k, n}));
  b.op("matmul", {a, w},
       ir::attrs({{"transpose_a", Attr::boolean(ta)}, {"transpose_b", Attr::boolean(tb)}}), "y");
  return finish(b);
}

TEST(DenseMatmul, EveryTransposeCombination) {
  struct Shape {
    int64_t m, k, n;
  };
  for (Shape s : {Shape{kBatchDim, 5, 7}, Shape{4, 9, 2}, Shape{33, 65, 17}, Shape{1, 1, 1},
                  Shape{kBatchDim, 100, 50}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        SCOPED_TRACE("m " + std::to_string(s.m) + ", k " + std::to_string(s.k) + ", n " +
                     std::to_string(s.n) + (ta ? ", aᵀ" : "") + (tb ? ", bᵀ" : ""));
        auto module = matmulModule(s.m, s.k, s.n, ta, tb);
        ASSERT_TRUE(module);
        expectMatchesAtBatches(*module);
      }
}

TEST(DenseMatmul, TwoThreads) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      auto module = matmulModule(kBatchDim, 300, 70, ta, tb);
      ASSERT_TRUE(module);
      expectMatchesAtBatches(*module, {2});
    }
}

TEST(DenseMatmul, F64UsesLoops) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      auto module = matmulModule(kBatchDim, 6, 5, ta, tb, DType::F64);
      ASSERT_TRUE(module);
      prism::testing::ReferenceCheckOptions options;
      options.tolerance = 1e-12;
      prism::testing::expectMatchesReference(*module, {"y"}, options);
    }
}

// ---- batch_matmul ---------------------------------------------------------------------------

// y = batch_matmul(a, b) for stored shapes `a` and `b` (transposes applied by the op).
std::unique_ptr<ir::Module> batchMatmulModule(const ir::Dims &a, const ir::Dims &b, bool ta,
                                              bool tb, DType dtype = DType::F32) {
  ir::ModuleBuilder builder("batch_matmul");
  Value *x = builder.input("a", TensorType(dtype, a));
  Value *w = builder.input("b", TensorType(dtype, b));
  builder.op("batch_matmul", {x, w},
             ir::attrs({{"transpose_a", Attr::boolean(ta)}, {"transpose_b", Attr::boolean(tb)}}),
             "y");
  return finish(builder);
}

// Stored shapes of op(a) [.., m, k] and op(b) [.., k, n] with the batch `batch` on a (b) or,
// when `aShared` (`bShared`), none.
ir::Dims storedShape(ir::Dims batch, int64_t rows, int64_t cols, bool transposed, bool shared) {
  ir::Dims dims = shared ? ir::Dims{} : batch;
  dims.push_back(transposed ? cols : rows);
  dims.push_back(transposed ? rows : cols);
  return dims;
}

TEST(DenseBatchMatmul, EveryTransposeAndSharedOperand) {
  struct Case {
    ir::Dims batch;
    int64_t m, k, n;
    bool aShared, bShared;
  };
  for (const Case &c :
       {Case{{kBatchDim, 2}, 5, 4, 3, false, false}, Case{{kBatchDim}, 7, 6, 5, false, true},
        Case{{kBatchDim, 3}, 4, 9, 2, true, false}, Case{{2, 3, 2}, 17, 33, 9, false, false},
        Case{{}, 6, 5, 4, false, false}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (DType dtype : {DType::F32, DType::F64}) {
          ir::Dims a = storedShape(c.batch, c.m, c.k, ta, c.aShared);
          ir::Dims b = storedShape(c.batch, c.k, c.n, tb, c.bShared);
          SCOPED_TRACE(TensorType(dtype, a).str() + (ta ? "ᵀ" : "") + " times " +
                       TensorType(dtype, b).str() + (tb ? "ᵀ" : ""));
          auto module = batchMatmulModule(a, b, ta, tb, dtype);
          ASSERT_TRUE(module);
          if (dtype == DType::F32) {
            expectMatchesAtBatches(*module, {1, 2});
            continue;
          }
          prism::testing::ReferenceCheckOptions options;
          options.tolerance = 1e-12;
          options.threads = 2;
          prism::testing::expectMatchesReference(*module, {"y"}, options);
        }
}

// ---- convolution ----------------------------------------------------------------------------

struct ConvCase {
  int64_t h, w, c, kh, kw, o, sh, sw;
  const char *padding;

  std::string str() const {
    return std::to_string(h) + "x" + std::to_string(w) + "x" + std::to_string(c) + " filter " +
           std::to_string(kh) + "x" + std::to_string(kw) + "->" + std::to_string(o) + " stride " +
           std::to_string(sh) + "," + std::to_string(sw) + " " + padding;
  }
  AttrMap attrs() const {
    return ir::attrs({{"stride", Attr::ints({sh, sw})}, {"padding", Attr::string(padding)}});
  }
};

const std::vector<ConvCase> &convCases() {
  static const std::vector<ConvCase> cases = {
      {7, 9, 3, 3, 3, 4, 1, 1, "same"},    {7, 9, 3, 3, 3, 4, 1, 1, "valid"},
      {8, 5, 2, 5, 5, 3, 2, 2, "valid"},   {11, 7, 2, 5, 5, 3, 2, 2, "same"},
      {6, 6, 5, 1, 1, 7, 1, 1, "same"},    {9, 7, 5, 1, 1, 7, 2, 2, "valid"},
      {9, 10, 3, 3, 3, 2, 2, 2, "valid"},  {10, 9, 3, 3, 3, 2, 2, 2, "same"},
      {13, 13, 1, 5, 5, 32, 1, 1, "same"}, {7, 7, 32, 3, 3, 32, 1, 1, "same"},
      {9, 8, 17, 3, 1, 19, 1, 2, "same"},  {8, 9, 17, 2, 4, 19, 2, 1, "valid"},
  };
  return cases;
}

// The NHWC input and filter of a case, and the output type conv2d gives them.
struct ConvOperands {
  Value *x, *w;
  TensorType y;
};

ConvOperands convOperands(ir::ModuleBuilder &b, const ConvCase &k) {
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, k.h, k.w, k.c}));
  Value *w = b.input("w", TensorType(DType::F32, {k.kh, k.kw, k.c, k.o}));
  // Built only for its type: evaluation runs what `y` needs.
  Value *probe = b.op("conv2d", {x, w}, k.attrs(), "probe");
  return {x, w, probe ? probe->type() : TensorType()};
}

TEST(DenseConv2d, Forward) {
  for (const ConvCase &k : convCases()) {
    SCOPED_TRACE(k.str());
    ir::ModuleBuilder b("conv");
    ConvOperands in = convOperands(b, k);
    b.op("conv2d", {in.x, in.w}, k.attrs(), "y");
    auto module = finish(b);
    ASSERT_TRUE(module);
    expectMatchesAtBatches(*module);
  }
}

TEST(DenseConv2d, BackpropInput) {
  for (const ConvCase &k : convCases()) {
    SCOPED_TRACE(k.str());
    ir::ModuleBuilder b("conv_dx");
    ConvOperands in = convOperands(b, k);
    Value *dy = b.input("dy", in.y);
    b.op("conv2d_backprop_input", {dy, in.w, in.x}, k.attrs(), "y");
    auto module = finish(b);
    ASSERT_TRUE(module);
    expectMatchesAtBatches(*module);
  }
}

TEST(DenseConv2d, BackpropFilter) {
  for (const ConvCase &k : convCases()) {
    SCOPED_TRACE(k.str());
    ir::ModuleBuilder b("conv_dw");
    ConvOperands in = convOperands(b, k);
    Value *dy = b.input("dy", in.y);
    b.op("conv2d_backprop_filter", {in.x, dy, in.w}, k.attrs(), "y");
    auto module = finish(b);
    ASSERT_TRUE(module);
    expectMatchesAtBatches(*module);
  }
}

TEST(DenseConv2d, TwoThreads) {
  ConvCase k{14, 14, 32, 3, 3, 32, 1, 1, "same"};
  for (const char *op : {"conv2d", "conv2d_backprop_input", "conv2d_backprop_filter"}) {
    SCOPED_TRACE(op);
    ir::ModuleBuilder b("conv_threads");
    ConvOperands in = convOperands(b, k);
    Value *dy = b.input("dy", in.y);
    std::string name = op;
    if (name == "conv2d")
      b.op(op, {in.x, in.w}, k.attrs(), "y");
    else if (name == "conv2d_backprop_input")
      b.op(op, {dy, in.w, in.x}, k.attrs(), "y");
    else
      b.op(op, {in.x, dy, in.w}, k.attrs(), "y");
    auto module = finish(b);
    ASSERT_TRUE(module);
    expectMatchesAtBatches(*module, {2});
  }
}

TEST(DenseConv2d, F64IsRejectedWithItsReason) {
  ir::ModuleBuilder b("conv_f64");
  Value *x = b.input("x", TensorType(DType::F64, {1, 4, 4, 1}));
  Value *w = b.input("w", TensorType(DType::F64, {3, 3, 1, 1}));
  b.op("conv2d", {x, w}, {}, "y");
  auto module = finish(b);
  ASSERT_TRUE(module);
  auto store = std::make_shared<runtime::VariableStore>();
  runtime::ExecutorOptions options;
  options.outputs = {"y"};
  auto exec = runtime::Executor::create(*module, store, options);
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  runtime::Tensor xs(DType::F64, {1, 4, 4, 1}), ws(DType::F64, {3, 3, 1, 1});
  xs.fillZero();
  ws.fillZero();
  llvm::Error err = (*exec)->step({{"x", xs}, {"w", ws}});
  ASSERT_TRUE(bool(err));
  EXPECT_NE(llvm::toString(std::move(err))
                .find("f64 is not supported by the CPU kernel of "
                      "'conv2d'"),
            std::string::npos);
}

// ---- pooling --------------------------------------------------------------------------------

struct PoolCase {
  int64_t h, w, c, kh, kw, sh, sw;
  const char *padding;

  std::string str() const {
    return std::to_string(h) + "x" + std::to_string(w) + "x" + std::to_string(c) + " window " +
           std::to_string(kh) + "x" + std::to_string(kw) + " stride " + std::to_string(sh) + "," +
           std::to_string(sw) + " " + padding;
  }
  AttrMap attrs() const {
    return ir::attrs({{"window", Attr::ints({kh, kw})},
                      {"stride", Attr::ints({sh, sw})},
                      {"padding", Attr::string(padding)}});
  }
};

const std::vector<PoolCase> &poolCases() {
  static const std::vector<PoolCase> cases = {
      {8, 8, 3, 2, 2, 2, 2, "valid"}, {7, 7, 32, 2, 2, 2, 2, "valid"},
      {7, 9, 3, 2, 2, 2, 2, "same"},  {9, 7, 4, 3, 3, 2, 2, "same"},
      {9, 7, 4, 3, 3, 2, 2, "valid"}, {6, 5, 2, 3, 3, 1, 1, "same"},
      {5, 8, 17, 3, 2, 2, 1, "same"}, {5, 8, 17, 1, 3, 1, 3, "valid"},
      {11, 6, 5, 5, 5, 3, 3, "same"},
  };
  return cases;
}

void expectPoolMatches(const char *forwardOp, const char *gradOp, std::vector<int> threads) {
  for (const PoolCase &k : poolCases()) {
    SCOPED_TRACE(k.str());
    {
      ir::ModuleBuilder b("pool");
      Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, k.h, k.w, k.c}));
      b.op(forwardOp, {x}, k.attrs(), "y");
      auto module = finish(b);
      ASSERT_TRUE(module);
      expectMatchesAtBatches(*module, threads);
    }
    {
      ir::ModuleBuilder b("pool_grad");
      Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, k.h, k.w, k.c}));
      Value *probe = b.op(forwardOp, {x}, k.attrs(), "probe");
      ASSERT_NE(probe, nullptr);
      Value *dy = b.input("dy", probe->type());
      b.op(gradOp, {dy, x}, k.attrs(), "y");
      auto module = finish(b);
      ASSERT_TRUE(module);
      expectMatchesAtBatches(*module, threads);
    }
  }
}

TEST(DensePool, MaxAndItsGradient) {
  expectPoolMatches("max_pool2d", "max_pool2d_grad", {1});
}

TEST(DensePool, AverageAndItsGradient) {
  expectPoolMatches("avg_pool2d", "avg_pool2d_grad", {1});
}

TEST(DensePool, TwoThreads) {
  expectPoolMatches("max_pool2d", "max_pool2d_grad", {2});
  expectPoolMatches("avg_pool2d", "avg_pool2d_grad", {2});
}

// Ties (after a relu, whole windows are zero): the gradient goes to the first maximum of each
// window in row-major order, as the reference routes it. Feeds are small integers.
TEST(DensePool, MaxGradientRoutesTiesToTheFirstMaximum) {
  for (const PoolCase &k :
       {PoolCase{6, 6, 3, 2, 2, 2, 2, "valid"}, PoolCase{7, 5, 2, 3, 3, 1, 1, "same"},
        PoolCase{9, 7, 4, 3, 3, 2, 2, "same"}}) {
    SCOPED_TRACE(k.str());
    ir::ModuleBuilder b("pool_ties");
    TensorType xType(DType::F32, {2, k.h, k.w, k.c});
    Value *x = b.input("x", xType);
    Value *probe = b.op("max_pool2d", {x}, k.attrs(), "probe");
    ASSERT_NE(probe, nullptr);
    Value *dy = b.input("dy", probe->type());
    b.op("max_pool2d_grad", {dy, x}, k.attrs(), "y");
    auto module = finish(b);
    ASSERT_TRUE(module);

    runtime::Tensor xs(DType::F32, {2, k.h, k.w, k.c});
    std::vector<int64_t> dyShape(probe->type().dims.begin(), probe->type().dims.end());
    runtime::Tensor dys(DType::F32, dyShape);
    std::vector<double> xValues(xs.numElements()), dyValues(dys.numElements());
    for (int64_t i = 0; i < xs.numElements(); ++i)
      xs.data<float>()[i] = static_cast<float>(xValues[i] = (i * 7919) % 5 < 3 ? 0 : i % 3);
    for (int64_t i = 0; i < dys.numElements(); ++i)
      dys.data<float>()[i] = static_cast<float>(dyValues[i] = 1 + i % 11);

    runtime::reference::ReferenceInterpreter reference(*module);
    auto refStep =
        reference.step({{"x", runtime::reference::Tensor(DType::F32, xs.shape(), xValues)},
                        {"dy", runtime::reference::Tensor(DType::F32, dyShape, dyValues)}});
    ASSERT_TRUE(bool(refStep)) << llvm::toString(refStep.takeError());
    auto store = std::make_shared<runtime::VariableStore>();
    runtime::ExecutorOptions options;
    options.outputs = {"y"};
    auto exec = runtime::Executor::create(*module, store, options);
    ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
    ASSERT_FALSE(bool((*exec)->step({{"x", xs}, {"dy", dys}})));

    const runtime::reference::Tensor *want = reference.value("y");
    const runtime::RuntimeValue *got = (*exec)->output("y");
    ASSERT_NE(want, nullptr);
    ASSERT_NE(got, nullptr);
    ASSERT_EQ(static_cast<int64_t>(want->data().size()), got->dense.numElements());
    for (int64_t i = 0; i < got->dense.numElements(); ++i)
      ASSERT_EQ(want->data()[i], got->dense.data<float>()[i]) << "element " << i;
  }
}

// ---- through autodiff ------------------------------------------------------------------------

// A small CNN differentiated by the autodiff pass: every value of the step (activations and
// gradients, which chain the dense kernels with the others) matches the reference.
TEST(DenseKernels, CnnGradientsMatchReference) {
  ir::ModuleBuilder b("cnn");
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 11, 9, 2}));
  Value *labels = b.input("labels", TensorType(DType::I32, {kBatchDim}));
  ir::Initializer glorot{"glorot_uniform", {}};
  Value *w1 = b.variable("w1", TensorType(DType::F32, {3, 3, 2, 8}), glorot);
  Value *w2 = b.variable("w2", TensorType(DType::F32, {5, 5, 8, 6}), glorot);
  Value *w3 = b.variable("w3", TensorType(DType::F32, {24, 5}), glorot);
  auto windowAttrs = [](std::vector<int64_t> sizes, int64_t stride, const char *padding) {
    AttrMap a =
        ir::attrs({{"stride", Attr::ints({stride, stride})}, {"padding", Attr::string(padding)}});
    if (!sizes.empty())
      a.set("window", Attr::ints(sizes));
    return a;
  };
  Value *h = b.relu(b.op("conv2d", {x, w1}, windowAttrs({}, 1, "same"))); // [B, 11, 9, 8]
  h = b.op("max_pool2d", {h}, windowAttrs({3, 3}, 2, "same"));            // [B, 6, 5, 8]
  h = b.relu(b.op("conv2d", {h, w2}, windowAttrs({}, 2, "same")));        // [B, 3, 3, 6]
  h = b.op("avg_pool2d", {h}, windowAttrs({2, 2}, 1, "valid"));           // [B, 2, 2, 6]
  h = b.op("reshape", {h}, ir::attrs({{"shape", Attr::ints({kBatchDim, 24})}}));
  Value *loss = b.op("softmax_cross_entropy", {b.matmul(h, w3), labels}, {}, "loss");
  b.minimize(loss, "sgd", ir::attrs({{"lr", Attr::real(0.1)}}));
  auto module = finish(b);
  ASSERT_TRUE(module);
  auto pipeline = passes::PassManager::fromPipeline("autodiff");
  ASSERT_TRUE(bool(pipeline)) << llvm::toString(pipeline.takeError());
  auto changed = pipeline->run(*module, passes::PassOptions());
  ASSERT_TRUE(bool(changed)) << llvm::toString(changed.takeError());

  std::vector<std::string> everyValue;
  std::set<std::string> opNames;
  for (const auto &op : module->ops())
    for (unsigned r = 0; r < op->numResults(); ++r) {
      everyValue.push_back(op->result(r)->name());
      opNames.insert(op->name().str());
    }
  for (const char *op :
       {"conv2d_backprop_input", "conv2d_backprop_filter", "max_pool2d_grad", "avg_pool2d_grad"})
    EXPECT_TRUE(opNames.count(op)) << "autodiff emitted no " << op;
  prism::testing::ReferenceCheckOptions options;
  options.intBound["labels"] = 5;
  for (int threads : {1, 2}) {
    options.threads = threads;
    prism::testing::expectMatchesReference(*module, everyValue, options);
  }
}

} // namespace
