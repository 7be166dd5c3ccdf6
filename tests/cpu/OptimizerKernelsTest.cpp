// The CPU kernels of variable updates, gradient clipping and dynamic loss scaling against the
// reference interpreter: dense and sparse gradients over several training steps, lazy sparse
// updates, clipping values, skipped updates and the loss scale's growth and backoff.
#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "runtime/exec/Executor.h"
#include "tests/cpu/ReferenceCheck.h"

using namespace prism;
using ir::Attr;
using ir::DType;
using ir::TensorType;
using ir::Value;
using runtime::Executor;
using runtime::Tensor;
using runtime::VariableStore;

namespace {

constexpr int64_t B = ir::kBatchDim;

std::unique_ptr<ir::Module> finish(ir::ModuleBuilder &b) {
  auto m = b.finish();
  EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
  return m ? std::move(*m) : nullptr;
}

ir::AttrMap state() {
  return ir::attrs({{"trainable", Attr::boolean(false)}});
}

ir::Initializer normal() {
  return {"normal", ir::attrs({{"stddev", Attr::real(0.5)}})};
}

// The gradient of a table [rows, cols]: dense (an input of the table's type) or sparse (the
// gather_grad of a batch of 4 ids per example, which repeat when rows is small).
Value *gradient(ir::ModuleBuilder &b, bool sparse, int64_t rows, int64_t cols) {
  if (!sparse)
    return b.input("g", TensorType(DType::F32, {rows, cols}));
  Value *dy = b.input("dy", TensorType(DType::F32, {B, 4, cols}));
  Value *ids = b.input("ids", TensorType(DType::I32, {B, 4}));
  return b.op("gather_grad", {dy, ids}, ir::attrs({{"num_rows", Attr::integer(rows)}}), "g");
}

// %t = add(step, one); assign(step, %t): the step count, already incremented, as the
// optimizer lowering emits it.
Value *incrementedStep(ir::ModuleBuilder &b) {
  Value *step = b.variable("step", TensorType(DType::F32, {}), {"zeros", {}}, state());
  Value *one = b.op("constant", {}, ir::attrs({{"value", Attr::real(1)}}), "one");
  Value *t = b.add(step, one, "t");
  b.op("assign", {step, t});
  return t;
}

prism::testing::ReferenceCheckOptions trainingOptions(int64_t rows, int threads = 1) {
  prism::testing::ReferenceCheckOptions options;
  options.steps = 3;
  options.intBound["ids"] = rows;
  options.threads = threads;
  return options;
}

struct UpdateCase {
  const char *name;
  bool sparse;
  int64_t rows, cols;
  int threads;
};

// Small tables (ids repeat), and one large enough for the parallel loops, with a column count
// that leaves a remainder after every vector width and block.
const UpdateCase kCases[] = {
    {"dense", false, 6, 5, 1},
    {"sparse", true, 6, 5, 1},
    {"dense_threads", false, 300, 257, 2},
    {"sparse_threads", true, 70000, 7, 2},
};

void expectSgdMatches(const UpdateCase &c) {
  SCOPED_TRACE(c.name);
  ir::ModuleBuilder b("sgd");
  Value *w = b.variable("w", TensorType(DType::F32, {c.rows, c.cols}), normal());
  Value *g = gradient(b, c.sparse, c.rows, c.cols);
  b.op("apply_sgd", {w, g}, ir::attrs({{"lr", Attr::real(0.1)}}));
  auto module = finish(b);
  ASSERT_TRUE(module);
  prism::testing::ReferenceCheckOptions options = trainingOptions(c.rows, c.threads);
  if (c.rows > 1000)
    options.batch = 5000; // 20000 ids: enough rows for the parallel sparse loop
  prism::testing::expectMatchesReference(*module, {}, options);
}

void expectMomentumMatches(const UpdateCase &c, bool nesterov) {
  SCOPED_TRACE(std::string(c.name) + (nesterov ? " nesterov" : ""));
  ir::ModuleBuilder b("momentum");
  TensorType type(DType::F32, {c.rows, c.cols});
  Value *w = b.variable("w", type, normal());
  Value *a = b.variable("accum", type, {"zeros", {}}, state());
  Value *g = gradient(b, c.sparse, c.rows, c.cols);
  b.op("apply_momentum", {w, a, g},
       ir::attrs({{"lr", Attr::real(0.1)},
                  {"momentum", Attr::real(0.8)},
                  {"nesterov", Attr::boolean(nesterov)}}));
  auto module = finish(b);
  ASSERT_TRUE(module);
  prism::testing::ReferenceCheckOptions options = trainingOptions(c.rows, c.threads);
  if (c.rows > 1000)
    options.batch = 5000;
  prism::testing::expectMatchesReference(*module, {}, options);
}

void expectAdamMatches(const UpdateCase &c) {
  SCOPED_TRACE(c.name);
  ir::ModuleBuilder b("adam");
  TensorType type(DType::F32, {c.rows, c.cols});
  Value *w = b.variable("w", type, normal());
  Value *m = b.variable("m", type, {"zeros", {}}, state());
  Value *v = b.variable("v", type, {"zeros", {}}, state());
  Value *g = gradient(b, c.sparse, c.rows, c.cols);
  Value *t = incrementedStep(b);
  b.op("apply_adam", {w, m, v, g, t}, ir::attrs({{"lr", Attr::real(0.01)}}));
  auto module = finish(b);
  ASSERT_TRUE(module);
  prism::testing::ReferenceCheckOptions options = trainingOptions(c.rows, c.threads);
  if (c.rows > 1000)
    options.batch = 5000;
  prism::testing::expectMatchesReference(*module, {}, options);
}

TEST(OptimizerKernels, ApplySgdMatchesReference) {
  for (const UpdateCase &c : kCases)
    expectSgdMatches(c);
}

TEST(OptimizerKernels, ApplyMomentumMatchesReference) {
  for (const UpdateCase &c : kCases)
    expectMomentumMatches(c, /*nesterov=*/false);
}

TEST(OptimizerKernels, ApplyNesterovMomentumMatchesReference) {
  for (const UpdateCase &c : kCases)
    expectMomentumMatches(c, /*nesterov=*/true);
}

TEST(OptimizerKernels, ApplyAdamMatchesReference) {
  for (const UpdateCase &c : kCases)
    expectAdamMatches(c);
}

// %f = lr_schedule(lr.step, ...); assign(lr.step, lr.step + 1): the factor lower-optimizer
// emits for a schedule, here a warmup over 2 steps and then a decay.
Value *scheduleFactor(ir::ModuleBuilder &b, ir::AttrMap decay) {
  Value *step = b.variable("lr.step", TensorType(DType::F32, {}), {"zeros", {}}, state());
  Value *one = b.op("constant", {}, ir::attrs({{"value", Attr::real(1)}}), "lr.one");
  b.op("assign", {step, b.add(step, one, "lr.t")});
  ir::AttrMap attrs = ir::attrs({{"warmup_steps", Attr::integer(2)}});
  for (const auto &[name, value] : decay)
    attrs.set(name, value);
  return b.op("lr_schedule", {step}, attrs, "lr.factor");
}

const ir::AttrMap kDecays[] = {
    ir::attrs({{"decay", Attr::string("constant")}}),
    ir::attrs({{"decay", Attr::string("step_decay")},
               {"every", Attr::integer(2)},
               {"gamma", Attr::real(0.5)}}),
    ir::attrs({{"decay", Attr::string("exponential")}, {"gamma", Attr::real(0.8)}}),
    ir::attrs({{"decay", Attr::string("cosine")},
               {"total", Attr::integer(3)},
               {"final", Attr::real(0.1)}}),
};

// Every update with a schedule's factor as its last operand, over the warmup and the decay.
TEST(OptimizerKernels, ScheduledUpdatesMatchReference) {
  for (const ir::AttrMap &decay : kDecays)
    for (const char *update : {"apply_sgd", "apply_momentum", "apply_adam"})
      for (bool sparse : {false, true}) {
        SCOPED_TRACE(std::string(update) + " " + decay.getString("decay") +
                     (sparse ? " sparse" : " dense"));
        ir::ModuleBuilder b("scheduled");
        TensorType type(DType::F32, {6, 5});
        std::vector<Value *> operands = {b.variable("w", type, normal())};
        if (llvm::StringRef(update) == "apply_momentum")
          operands.push_back(b.variable("accum", type, {"zeros", {}}, state()));
        if (llvm::StringRef(update) == "apply_adam") {
          operands.push_back(b.variable("m", type, {"zeros", {}}, state()));
          operands.push_back(b.variable("v", type, {"zeros", {}}, state()));
        }
        operands.push_back(gradient(b, sparse, 6, 5));
        if (llvm::StringRef(update) == "apply_adam")
          operands.push_back(incrementedStep(b));
        operands.push_back(scheduleFactor(b, decay));
        b.op(update, operands, ir::attrs({{"lr", Attr::real(0.1)}}));
        auto module = finish(b);
        ASSERT_TRUE(module);
        prism::testing::ReferenceCheckOptions options = trainingOptions(6);
        options.steps = 6;
        prism::testing::expectMatchesReference(*module, {}, options);
      }
}

// sgd with lr 1 on a constant gradient 1: w moves by exactly the factor of each step.
TEST(OptimizerKernels, ScheduledSgdMovesByTheFactor) {
  ir::ModuleBuilder b("factor");
  Value *w = b.variable("w", TensorType(DType::F32, {1}), {"zeros", {}});
  Value *g =
      b.op("constant", {}, ir::attrs({{"value", Attr::real(1)}, {"shape", Attr::ints({1})}}), "g");
  Value *f = scheduleFactor(b, ir::attrs({{"decay", Attr::string("step_decay")},
                                          {"every", Attr::integer(2)},
                                          {"gamma", Attr::real(0.5)}}));
  b.op("apply_sgd", {w, g, f}, ir::attrs({{"lr", Attr::real(1)}}));
  auto module = finish(b);
  ASSERT_TRUE(module);
  auto store = std::make_shared<VariableStore>();
  ASSERT_FALSE(bool(store->initialize(*module, 0)));
  auto exec = Executor::create(*module, store);
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  // Factors: warmup 0, 0.5; then 1, 1, 0.5, 0.5.
  const double expected[] = {0, -0.5, -1.5, -2.5, -3, -3.5};
  for (double w : expected) {
    ASSERT_FALSE(bool((*exec)->step({})));
    EXPECT_FLOAT_EQ(store->find("w")->data<float>()[0], static_cast<float>(w));
  }
}

TEST(OptimizerKernels, AssignMatchesReference) {
  ir::ModuleBuilder b("assign");
  Value *w = b.variable("w", TensorType(DType::F32, {3, 4}), normal());
  Value *x = b.input("x", TensorType(DType::F32, {3, 4}));
  b.op("assign", {w, x});
  auto module = finish(b);
  ASSERT_TRUE(module);
  prism::testing::ReferenceCheckOptions options;
  options.steps = 2;
  options.tolerance = 1e-7;
  prism::testing::expectMatchesReference(*module, {}, options);
}

// w, m, v [10, 3] with the sparse gradient of ids {1, 3, 3}: rows 1 and 3 move (row 3 by the
// sum of its two gradient rows), every other row of w, m and v keeps its exact value.
TEST(OptimizerKernels, SparseAdamIsLazy) {
  const double lr = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8, t = 2;
  ir::ModuleBuilder b("lazy_adam");
  TensorType type(DType::F32, {10, 3});
  Value *w = b.variable("w", type, normal());
  Value *m = b.variable("m", type, {"constant", ir::attrs({{"value", Attr::real(0.5)}})}, state());
  Value *v = b.variable("v", type, {"constant", ir::attrs({{"value", Attr::real(0.25)}})}, state());
  Value *step = b.variable("t", TensorType(DType::F32, {}),
                           {"constant", ir::attrs({{"value", Attr::real(t)}})}, state());
  Value *dy = b.input("dy", TensorType(DType::F32, {3, 3}));
  Value *ids = b.input("ids", TensorType(DType::I64, {3}));
  Value *g = b.op("gather_grad", {dy, ids}, ir::attrs({{"num_rows", Attr::integer(10)}}), "g");
  b.op("apply_adam", {w, m, v, g, step}, ir::attrs({{"lr", Attr::real(lr)}}));
  auto module = finish(b);
  ASSERT_TRUE(module);

  auto store = std::make_shared<VariableStore>();
  ASSERT_FALSE(bool(store->initialize(*module, 5)));
  Tensor w0 = store->find("w")->clone();
  auto exec = Executor::create(*module, store);
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  Tensor dyValue(DType::F32, {3, 3}), idsValue(DType::I64, {3});
  const float dyData[9] = {1, -2, 0.5f, 4, 0.25f, -1, 3, 1, 2};
  std::copy(dyData, dyData + 9, dyValue.data<float>());
  const int64_t idsData[3] = {1, 3, 3};
  std::copy(idsData, idsData + 3, idsValue.data<int64_t>());
  ASSERT_FALSE(bool((*exec)->step({{"dy", dyValue}, {"ids", idsValue}})));

  const float *wNow = store->find("w")->data<float>();
  const float *mNow = store->find("m")->data<float>();
  const float *vNow = store->find("v")->data<float>();
  for (int64_t row = 0; row < 10; ++row) {
    for (int64_t j = 0; j < 3; ++j) {
      int64_t k = row * 3 + j;
      if (row != 1 && row != 3) {
        EXPECT_EQ(wNow[k], w0.data<float>()[k]) << "w[" << row << ", " << j << "]";
        EXPECT_EQ(mNow[k], 0.5f) << "m[" << row << ", " << j << "]";
        EXPECT_EQ(vNow[k], 0.25f) << "v[" << row << ", " << j << "]";
        continue;
      }
      double grad = row == 1 ? dyData[j] : dyData[3 + j] + dyData[6 + j];
      double mi = b1 * 0.5 + (1 - b1) * grad;
      double vi = b2 * 0.25 + (1 - b2) * grad * grad;
      double wi = w0.data<float>()[k] -
                  lr * (mi / (1 - std::pow(b1, t))) / (std::sqrt(vi / (1 - std::pow(b2, t))) + eps);
      EXPECT_NEAR(mNow[k], mi, 1e-6) << "m[" << row << ", " << j << "]";
      EXPECT_NEAR(vNow[k], vi, 1e-6) << "v[" << row << ", " << j << "]";
      EXPECT_NEAR(wNow[k], wi, 1e-6) << "w[" << row << ", " << j << "]";
    }
  }
}

// The step count must be at least 1: t = 0 would divide by zero in the bias correction.
TEST(OptimizerKernels, AdamRejectsStepZero) {
  ir::ModuleBuilder b("adam_t0");
  TensorType type(DType::F32, {2});
  Value *w = b.variable("w", type);
  Value *m = b.variable("m", type, {"zeros", {}}, state());
  Value *v = b.variable("v", type, {"zeros", {}}, state());
  Value *t = b.variable("t", TensorType(DType::F32, {}), {"zeros", {}}, state());
  Value *g = b.input("g", type);
  b.op("apply_adam", {w, m, v, g, t}, ir::attrs({{"lr", Attr::real(0.1)}}));
  auto module = finish(b);
  ASSERT_TRUE(module);
  auto store = std::make_shared<VariableStore>();
  ASSERT_FALSE(bool(store->initialize(*module, 1)));
  auto exec = Executor::create(*module, store);
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  Tensor gValue(DType::F32, {2});
  gValue.fillZero();
  llvm::Error err = (*exec)->step({{"g", gValue}});
  ASSERT_TRUE(bool(err));
  std::string message = llvm::toString(std::move(err));
  EXPECT_NE(message.find("t >= 1"), std::string::npos) << message;
}

// norm = global_norm(x, sparse g with repeated ids, w); c = clip_scale(norm); x and g scaled.
TEST(OptimizerKernels, ClippingMatchesReference) {
  for (double clipNorm : {0.5, 1000.0}) {
    SCOPED_TRACE("clip_norm " + std::to_string(clipNorm));
    ir::ModuleBuilder b("clipping");
    Value *x = b.input("x", TensorType(DType::F32, {B, 70}));
    Value *w = b.variable("w", TensorType(DType::F32, {300, 257}), normal());
    Value *g = gradient(b, /*sparse=*/true, 5, 3);
    Value *norm = b.op("global_norm", {x, g, w}, {}, "norm");
    Value *c = b.op("clip_scale", {norm}, ir::attrs({{"clip_norm", Attr::real(clipNorm)}}), "c");
    b.op("scale", {x, c}, {}, "x_scaled");
    b.op("scale", {g, c}, {}, "g_scaled");
    auto module = finish(b);
    ASSERT_TRUE(module);
    prism::testing::ReferenceCheckOptions options;
    options.intBound["ids"] = 5;
    options.steps = 2;
    prism::testing::expectMatchesReference(*module, {"norm", "c", "x_scaled", "g_scaled"}, options);
    options.threads = 2;
    prism::testing::expectMatchesReference(*module, {"norm", "c", "x_scaled", "g_scaled"}, options);
  }
}

// A zero gradient has norm 0, and clipping it scales by 1.
TEST(OptimizerKernels, ClipScaleOfZeroNormIsOne) {
  ir::ModuleBuilder b("zero_norm");
  Value *z = b.variable("z", TensorType(DType::F32, {4}));
  Value *norm = b.op("global_norm", {z}, {}, "norm");
  b.op("clip_scale", {norm}, ir::attrs({{"clip_norm", Attr::real(1)}}), "c");
  auto module = finish(b);
  ASSERT_TRUE(module);
  prism::testing::expectMatchesReference(*module, {"norm", "c"});
  runtime::ExecutorOptions options;
  options.outputs = {"c"};
  auto store = std::make_shared<VariableStore>();
  ASSERT_FALSE(bool(store->initialize(*module, 1)));
  auto exec = Executor::create(*module, store, options);
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  ASSERT_FALSE(bool((*exec)->step({})));
  EXPECT_EQ(*(*exec)->output("c")->dense.data<float>(), 1.0f);
}

// ---- dynamic loss scaling -------------------------------------------------------------------

// x / 0: ±inf everywhere (the random feeds are never zero).
Value *overZero(ir::ModuleBuilder &b, Value *x) {
  Value *zero = b.op("constant", {}, ir::attrs({{"value", Attr::real(0)}}), "zero");
  return b.op("div", {x, zero}, {}, "x_over_zero");
}

// all_finite over a dense input, a sparse gradient and a variable: 1 for finite values, and 0
// as soon as one operand holds an infinity (here x / 0), on one thread and two.
TEST(OptimizerKernels, AllFiniteMatchesReference) {
  for (bool overflow : {false, true}) {
    SCOPED_TRACE(overflow ? "with x / 0" : "finite");
    ir::ModuleBuilder b("finite");
    Value *x = b.input("x", TensorType(DType::F32, {B, 70000}));
    if (overflow)
      x = overZero(b, x);
    Value *w = b.variable("w", TensorType(DType::F32, {300, 257}), normal());
    Value *g = gradient(b, /*sparse=*/true, 5, 3);
    b.op("all_finite", {g, w, x}, {}, "finite");
    auto module = finish(b);
    ASSERT_TRUE(module);
    for (int threads : {1, 2}) {
      prism::testing::ReferenceCheckOptions options;
      options.intBound["ids"] = 5;
      options.threads = threads;
      options.tolerance = 1e-9;
      prism::testing::expectMatchesReference(*module, {"finite"}, options);
    }
  }
}

// One non-finite element anywhere in a large operand (each block of the parallel loop) or in a
// sparse operand's rows makes all_finite 0; NaN counts as well as ±inf.
TEST(OptimizerKernels, AllFiniteFindsEveryNonFiniteElement) {
  ir::ModuleBuilder b("finite_positions");
  b.op("all_finite", {b.input("x", TensorType(DType::F32, {200000}))}, {}, "finite");
  auto module = finish(b);
  ASSERT_TRUE(module);
  runtime::ExecutorOptions options;
  options.outputs = {"finite"};
  options.threads = 2;
  auto store = std::make_shared<VariableStore>();
  ASSERT_FALSE(bool(store->initialize(*module, 1)));
  auto exec = Executor::create(*module, store, options);
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  Tensor x(DType::F32, {200000});
  x.fillZero();
  auto finiteOf = [&]() {
    EXPECT_FALSE(bool((*exec)->step({{"x", x}})));
    return *(*exec)->output("finite")->dense.data<float>();
  };
  EXPECT_EQ(finiteOf(), 1.0f);
  for (int64_t at : {int64_t(0), int64_t(99999), int64_t(199999)})
    for (float bad : {INFINITY, -INFINITY, NAN}) {
      x.data<float>()[at] = bad;
      EXPECT_EQ(finiteOf(), 0.0f) << "x[" << at << "] = " << bad;
      x.data<float>()[at] = 3e38f; // large but finite
      EXPECT_EQ(finiteOf(), 1.0f);
      x.data<float>()[at] = 0;
    }
}

// The operands of an update with loss scaling: the factor, then `finite`.
std::vector<Value *> updateOperands(ir::ModuleBuilder &b, llvm::StringRef update, bool sparse,
                                    Value *finite) {
  TensorType type(DType::F32, {6, 5});
  std::vector<Value *> operands = {b.variable("w", type, normal())};
  if (update == "apply_momentum")
    operands.push_back(b.variable("accum", type, normal(), state()));
  if (update == "apply_adam") {
    operands.push_back(b.variable("m", type, normal(), state()));
    operands.push_back(b.variable("v", type, {"ones", {}}, state()));
  }
  operands.push_back(gradient(b, sparse, 6, 5));
  if (update == "apply_adam")
    operands.push_back(incrementedStep(b));
  operands.push_back(b.op("constant", {}, ir::attrs({{"value", Attr::real(0.5)}}), "factor"));
  operands.push_back(finite);
  return operands;
}

// finite = 1: the update as without the flag; finite = 0: the variable and its state stay as
// they are (on the CPU and in the reference).
TEST(OptimizerKernels, UpdatesSkipWhenNotFinite) {
  for (double finite : {1.0, 0.0})
    for (const char *update : {"apply_sgd", "apply_momentum", "apply_adam"})
      for (bool sparse : {false, true}) {
        SCOPED_TRACE(std::string(update) + (sparse ? " sparse" : " dense") + " finite " +
                     std::to_string(finite));
        ir::ModuleBuilder b("skipped");
        Value *flag = b.op("constant", {}, ir::attrs({{"value", Attr::real(finite)}}), "finite");
        b.op(update, updateOperands(b, update, sparse, flag), ir::attrs({{"lr", Attr::real(0.1)}}));
        auto module = finish(b);
        ASSERT_TRUE(module);
        prism::testing::ReferenceCheckOptions options = trainingOptions(6);
        prism::testing::expectMatchesReference(*module, {}, options);

        auto store = std::make_shared<VariableStore>();
        ASSERT_FALSE(bool(store->initialize(*module, 3)));
        const Tensor &w0 = *store->find("w");
        std::vector<float> before(w0.data<float>(), w0.data<float>() + w0.numElements());
        auto exec = Executor::create(*module, store);
        ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
        Tensor g(DType::F32, {6, 5}), dy(DType::F32, {2, 4, 5}), ids(DType::I32, {2, 4});
        for (int64_t i = 0; i < g.numElements(); ++i)
          g.data<float>()[i] = 0.25f;
        for (int64_t i = 0; i < dy.numElements(); ++i)
          dy.data<float>()[i] = 0.25f;
        for (int64_t i = 0; i < ids.numElements(); ++i)
          ids.data<int32_t>()[i] = static_cast<int32_t>(i % 6);
        runtime::Feeds feeds;
        if (sparse) {
          feeds["dy"] = dy;
          feeds["ids"] = ids;
        } else {
          feeds["g"] = g;
        }
        ASSERT_FALSE(bool((*exec)->step(feeds)));
        const float *w = store->find("w")->data<float>();
        bool unchanged = std::equal(before.begin(), before.end(), w);
        EXPECT_EQ(unchanged, finite == 0.0);
      }
}

// scale, good and skipped after update_loss_scale, on the CPU and in the reference: growth
// every 2 finite steps (x finite), backoff on every step (x / 0 is infinite).
TEST(OptimizerKernels, UpdateLossScaleMatchesReference) {
  for (bool overflow : {false, true}) {
    SCOPED_TRACE(overflow ? "overflowing" : "finite");
    ir::ModuleBuilder b("loss_scale");
    TensorType scalar(DType::F32, {});
    Value *scale = b.variable("scale", scalar,
                              {"constant", ir::attrs({{"value", Attr::real(1024)}})}, state());
    Value *good = b.variable("good", scalar, {"zeros", {}}, state());
    Value *skipped = b.variable("skipped", scalar, {"zeros", {}}, state());
    Value *x = b.input("x", TensorType(DType::F32, {B, 3}));
    if (overflow)
      x = overZero(b, x);
    Value *finite = b.op("all_finite", {x}, {}, "finite");
    b.op("update_loss_scale", {scale, good, skipped, finite},
         ir::attrs({{"growth_interval", Attr::integer(2)}}));
    auto module = finish(b);
    ASSERT_TRUE(module);
    prism::testing::ReferenceCheckOptions options;
    options.steps = 5;
    options.tolerance = 1e-9;
    prism::testing::expectMatchesReference(*module, {}, options);

    auto store = std::make_shared<VariableStore>();
    ASSERT_FALSE(bool(store->initialize(*module, 1)));
    auto exec = Executor::create(*module, store);
    ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
    Tensor xValue(DType::F32, {1, 3});
    for (int64_t i = 0; i < 3; ++i)
      xValue.data<float>()[i] = 1.0f;
    for (int step = 0; step < 5; ++step)
      ASSERT_FALSE(bool((*exec)->step({{"x", xValue}})));
    // Finite: 1024 doubles after steps 2 and 4, one good step left. Overflowing: halved 5 times.
    EXPECT_EQ(*store->find("scale")->data<float>(), overflow ? 32.0f : 4096.0f);
    EXPECT_EQ(*store->find("good")->data<float>(), overflow ? 0.0f : 1.0f);
    EXPECT_EQ(*store->find("skipped")->data<float>(), overflow ? 5.0f : 0.0f);
  }
}

// batch_share: the step's examples over the global batch the executor is told (a worker's
// share), 1 when it is told none; the reference gives 1 for a whole batch.
TEST(OptimizerKernels, BatchShareIsTheShareOfTheGlobalBatch) {
  ir::ModuleBuilder b("share");
  b.op("batch_share", {b.input("x", TensorType(DType::F32, {B, 3}))}, {}, "share");
  auto module = finish(b);
  ASSERT_TRUE(module);
  prism::testing::ReferenceCheckOptions check;
  check.tolerance = 1e-9;
  prism::testing::expectMatchesReference(*module, {"share"}, check);

  runtime::ExecutorOptions options;
  options.outputs = {"share"};
  auto store = std::make_shared<VariableStore>();
  ASSERT_FALSE(bool(store->initialize(*module, 1)));
  auto exec = Executor::create(*module, store, options);
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  Tensor x(DType::F32, {4, 3});
  x.fillZero();
  auto shareOf = [&](int64_t global) {
    (*exec)->setGlobalBatch(global);
    EXPECT_FALSE(bool((*exec)->step({{"x", x}})));
    return *(*exec)->output("share")->dense.data<float>();
  };
  EXPECT_EQ(shareOf(0), 1.0f);
  EXPECT_EQ(shareOf(16), 0.25f);
  EXPECT_EQ(shareOf(12), 1.0f / 3.0f);
  EXPECT_EQ(shareOf(0), 1.0f);
}

} // namespace
