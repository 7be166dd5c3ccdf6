// lower-optimizer: state variables, update ops, step counter, clipping, sparse gradients.
#include <gtest/gtest.h>

#include "frontends/text/Parser.h"
#include "ir/Builder.h"
#include "ir/OpTable.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"
#include "runtime/reference/ReferenceInterpreter.h"

using namespace prism;
using namespace prism::ir;

namespace {

// Weights w : f32[4, 3] and b : f32[3], an embedding table emb : f32[10, 3] read by a gather,
// the loss, and hand-written gradients %g.w, %g.b, %g.emb (sparse), as autodiff would leave
// them.
struct Model {
  std::unique_ptr<Module> module;
  Value *gw, *gb, *gemb;
};

Model model(llvm::StringRef optimizer, AttrMap params, AttrMap embAttrs = {}) {
  ModuleBuilder b("m");
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 4}));
  Value *ids = b.input("ids", TensorType(DType::I64, {kBatchDim}));
  Value *w = b.variable("w", TensorType(DType::F32, {4, 3}));
  Value *bias = b.variable("b", TensorType(DType::F32, {3}));
  Value *emb = b.variable("emb", TensorType(DType::F32, {10, 3}), {"zeros", {}}, embAttrs);
  Value *h = b.add(b.add(b.matmul(x, w), bias), b.op("gather", {emb, ids}), "h");
  Value *loss = b.op("reduce_sum", {h}, {}, "loss");
  b.minimize(loss, optimizer, std::move(params));
  Model out;
  out.gw = b.op("mul", {w, w}, {}, "g.w");
  out.gb = b.op("mul", {bias, bias}, {}, "g.b");
  out.gemb = b.op("gather_grad", {h, ids}, attrs({{"num_rows", Attr::integer(10)}}), "g.emb");
  auto built = b.finish();
  EXPECT_TRUE(bool(built)) << llvm::toString(built.takeError());
  out.module = std::move(*built);
  Module &m = *out.module;
  for (auto [var, grad] : {std::pair{"w", out.gw}, {"b", out.gb}, {"emb", out.gemb}}) {
    Gradient g;
    g.variable = m.findVariable(var);
    g.value = grad;
    m.gradients.push_back(g);
  }
  return out;
}

int64_t statistic(const passes::Pass &pass, llvm::StringRef name) {
  for (const auto &[stat, value] : pass.statistics())
    if (stat == name)
      return value;
  ADD_FAILURE() << "no statistic '" << name.str() << "'";
  return -1;
}

std::unique_ptr<passes::Pass> lower(Module &m) {
  auto pass = passes::createPass("lower-optimizer");
  auto changed = pass->run(m, {});
  EXPECT_TRUE(bool(changed)) << llvm::toString(changed.takeError());
  llvm::Error valid = verify(m);
  EXPECT_FALSE(bool(valid)) << llvm::toString(std::move(valid));
  return pass;
}

std::vector<Op *> opsNamed(const Module &m, llvm::StringRef name) {
  std::vector<Op *> found;
  for (const auto &op : m.ops())
    if (op->name() == name)
      found.push_back(op.get());
  return found;
}

std::string lowerError(Module &m) {
  auto changed = passes::createPass("lower-optimizer")->run(m, {});
  if (changed)
    return "";
  return llvm::toString(changed.takeError());
}

} // namespace

TEST(LowerOptimizer, SgdUpdatesEachVariableInGradientOrder) {
  Model mm = model("sgd", attrs({{"lr", Attr::real(0.1)}}));
  Module &m = *mm.module;
  Value *loss = m.loss->value;
  auto pass = lower(m);
  auto updates = opsNamed(m, "apply_sgd");
  ASSERT_EQ(updates.size(), 3u);
  EXPECT_EQ(updates[0]->operand(0), m.findVariable("w")->value.get());
  EXPECT_EQ(updates[0]->operand(1), mm.gw);
  EXPECT_EQ(updates[1]->operand(1), mm.gb);
  // The sparse gradient goes to the same op; its kernel touches only the gathered rows.
  EXPECT_EQ(updates[2]->operand(0), m.findVariable("emb")->value.get());
  EXPECT_EQ(updates[2]->operand(1), mm.gemb);
  EXPECT_TRUE(mm.gemb->type().sparse);
  EXPECT_EQ(updates[0]->attrs.getFloat("lr"), 0.1);
  EXPECT_FALSE(m.optimizer.has_value());
  ASSERT_TRUE(m.loss.has_value());
  EXPECT_EQ(m.loss->value, loss);
  EXPECT_EQ(m.gradients.size(), 3u);
  EXPECT_EQ(statistic(*pass, "variables updated"), 3);
  EXPECT_EQ(statistic(*pass, "state variables created"), 0);
}

TEST(LowerOptimizer, MomentumCreatesOneAccumulatorPerVariable) {
  Model mm = model("momentum", attrs({{"lr", Attr::real(0.05)}, {"momentum", Attr::real(0.8)}}));
  Module &m = *mm.module;
  auto pass = lower(m);
  Variable *accum = m.findVariable("emb.momentum");
  ASSERT_NE(accum, nullptr);
  EXPECT_EQ(accum->type(), TensorType(DType::F32, {10, 3}));
  EXPECT_EQ(accum->init.kind, "zeros");
  EXPECT_FALSE(accum->trainable());
  auto updates = opsNamed(m, "apply_momentum");
  ASSERT_EQ(updates.size(), 3u);
  EXPECT_EQ(updates[2]->operand(1), accum->value.get());
  EXPECT_EQ(updates[2]->operand(2), mm.gemb);
  EXPECT_EQ(updates[0]->operand(1), m.findVariable("w.momentum")->value.get());
  EXPECT_DOUBLE_EQ(updates[0]->attrs.getFloat("momentum"), 0.8);
  EXPECT_DOUBLE_EQ(updates[0]->attrs.getFloat("lr"), 0.05);
  // Defaults from the op table are written out.
  ASSERT_TRUE(updates[0]->attrs.has("nesterov"));
  EXPECT_FALSE(updates[0]->attrs.getBool("nesterov", true));
  EXPECT_EQ(statistic(*pass, "state variables created"), 3);
}

TEST(LowerOptimizer, AdamSharesOneStepCounter) {
  Model mm = model("adam", attrs({{"lr", Attr::real(0.001)}, {"beta2", Attr::real(0.99)}}));
  Module &m = *mm.module;
  auto pass = lower(m);
  Variable *step = m.findVariable("adam.step");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->type(), TensorType(DType::F32, {}));
  EXPECT_FALSE(step->trainable());
  Value *t = m.lookup("adam.t");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->definingOp()->name(), "add");
  EXPECT_EQ(t->definingOp()->operand(0), step->value.get());
  Op *one = t->definingOp()->operand(1)->definingOp();
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->name(), "constant");
  EXPECT_DOUBLE_EQ(one->attrs.getFloat("value"), 1.0);

  auto updates = opsNamed(m, "apply_adam");
  ASSERT_EQ(updates.size(), 3u);
  Op *w = updates[0];
  EXPECT_EQ(w->operand(1), m.findVariable("w.adam_m")->value.get());
  EXPECT_EQ(w->operand(2), m.findVariable("w.adam_v")->value.get());
  EXPECT_EQ(w->operand(3), mm.gw);
  EXPECT_EQ(w->operand(4), t);
  EXPECT_DOUBLE_EQ(w->attrs.getFloat("beta1"), 0.9);
  EXPECT_DOUBLE_EQ(w->attrs.getFloat("beta2"), 0.99);
  EXPECT_DOUBLE_EQ(w->attrs.getFloat("epsilon"), 1e-8);

  Op *last = m.ops().back().get();
  EXPECT_EQ(last->name(), "assign");
  EXPECT_EQ(last->operand(0), step->value.get());
  EXPECT_EQ(last->operand(1), t);
  EXPECT_EQ(opsNamed(m, "assign").size(), 1u);
  EXPECT_EQ(statistic(*pass, "variables updated"), 3);
  EXPECT_EQ(statistic(*pass, "state variables created"), 7);
}

// A schedule: one lr_schedule op reads the step counter before its increment, and its factor is
// every update's last operand; sgd and momentum get a counter of their own.
TEST(LowerOptimizer, ScheduleFeedsEveryUpdateOneFactor) {
  Model mm = model("momentum", attrs({{"lr", Attr::real(0.1)}}));
  Module &m = *mm.module;
  m.optimizer->schedule = {{"warmup_linear", attrs({{"steps", Attr::integer(10)}}), {}},
                           {"cosine", attrs({{"total", Attr::integer(100)}}), {}}};
  auto pass = lower(m);
  Variable *step = m.findVariable("lr.step");
  ASSERT_NE(step, nullptr);
  EXPECT_FALSE(step->trainable());
  auto schedules = opsNamed(m, "lr_schedule");
  ASSERT_EQ(schedules.size(), 1u);
  Op *schedule = schedules[0];
  EXPECT_EQ(schedule->operand(0), step->value.get());
  EXPECT_EQ(schedule->attrs.getInt("warmup_steps"), 10);
  EXPECT_EQ(schedule->attrs.getString("decay"), "cosine");
  EXPECT_EQ(schedule->attrs.getInt("total"), 100);
  auto updates = opsNamed(m, "apply_momentum");
  ASSERT_EQ(updates.size(), 3u);
  for (Op *update : updates) {
    ASSERT_EQ(update->numOperands(), 4u);
    EXPECT_EQ(update->operand(3), schedule->result());
    EXPECT_DOUBLE_EQ(update->attrs.getFloat("lr"), 0.1);
  }
  Op *last = m.ops().back().get();
  EXPECT_EQ(last->name(), "assign");
  EXPECT_EQ(last->operand(0), step->value.get());
  EXPECT_EQ(statistic(*pass, "state variables created"), 4);
  llvm::Error verified = verify(m);
  EXPECT_FALSE(bool(verified)) << llvm::toString(std::move(verified));
}

// The whole path on the reference interpreter: sgd with lr 2 on a gradient of exactly 1 moves w
// by 2 f(s) at step s, with f(s) = 0, 0.5 (warmup over 2 steps), then 0.5^(s - 2); momentum 0.5
// moves it by 2 f(s) a(s), a = 0.5 a + 1.
TEST(LowerOptimizer, ScheduleOnTheReferenceInterpreter) {
  for (auto [optimizer, expected] :
       {std::pair<const char *, std::vector<double>>{"sgd(lr = 2", {0, -1, -3, -4, -4.5}},
        {"momentum(lr = 2, momentum = 0.5", {0, -1.5, -5, -6.875, -7.84375}}}) {
    SCOPED_TRACE(optimizer);
    std::string text = "model m {\n  input x : f32[B, 1]\n  var w : f32[1] = zeros\n"
                       "  %loss = reduce_sum(mul(x, w))\n  minimize %loss with " +
                       std::string(optimizer) +
                       ", schedule = [warmup_linear(steps = 2), exponential(gamma = 0.5)])\n}\n";
    auto module = frontends::parseModule(text, "m.prism");
    ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
    auto pm = passes::PassManager::fromPipeline("infer-shapes,autodiff,lower-optimizer");
    ASSERT_TRUE(bool(pm)) << llvm::toString(pm.takeError());
    auto changed = pm->run(**module, passes::PassOptions());
    ASSERT_TRUE(bool(changed)) << llvm::toString(changed.takeError());
    prism::runtime::reference::ReferenceInterpreter interpreter(**module);
    ASSERT_FALSE(bool(interpreter.initializeVariables(0)));
    prism::runtime::reference::Tensor x(DType::F32, {1, 1});
    x.data()[0] = 1;
    for (double w : expected) {
      auto step = interpreter.step({{"x", x}});
      ASSERT_TRUE(bool(step)) << llvm::toString(step.takeError());
      EXPECT_DOUBLE_EQ(interpreter.variable("w")->data()[0], w);
    }
  }
}

TEST(LowerOptimizer, ClipNormScalesEveryGradientByOneFactor) {
  Model mm = model("sgd", attrs({{"lr", Attr::real(0.1)}, {"clip_norm", Attr::real(5.0)}}));
  Module &m = *mm.module;
  lower(m);
  Value *norm = m.lookup("grad.norm");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->definingOp()->name(), "global_norm");
  EXPECT_EQ(norm->definingOp()->operands(), llvm::ArrayRef<Value *>({mm.gw, mm.gb, mm.gemb}));
  Value *clip = m.lookup("grad.clip");
  ASSERT_NE(clip, nullptr);
  EXPECT_EQ(clip->definingOp()->operand(0), norm);
  EXPECT_DOUBLE_EQ(clip->definingOp()->attrs.getFloat("clip_norm"), 5.0);
  auto updates = opsNamed(m, "apply_sgd");
  ASSERT_EQ(updates.size(), 3u);
  Value *gradients[] = {mm.gw, mm.gb, mm.gemb};
  for (unsigned i = 0; i < 3; ++i) {
    Op *scale = updates[i]->operand(1)->definingOp();
    ASSERT_NE(scale, nullptr);
    EXPECT_EQ(scale->name(), "scale");
    EXPECT_EQ(scale->operand(0), gradients[i]);
    EXPECT_EQ(scale->operand(1), clip);
    EXPECT_EQ(scale->result()->type(), gradients[i]->type()) << "a sparse gradient stays sparse";
    EXPECT_FALSE(updates[i]->attrs.has("clip_norm"));
  }
  // The gradients themselves are unchanged: later passes route them before clipping.
  EXPECT_EQ(m.gradients[0].value, mm.gw);
}

TEST(LowerOptimizer, UntrainedVariablesGetNoUpdate) {
  Model mm = model("momentum", attrs({{"lr", Attr::real(0.1)}}),
                   attrs({{"trainable", Attr::boolean(false)}}));
  Module &m = *mm.module;
  auto pass = lower(m);
  auto updates = opsNamed(m, "apply_momentum");
  ASSERT_EQ(updates.size(), 2u);
  for (Op *op : updates)
    EXPECT_NE(op->operand(0), m.findVariable("emb")->value.get());
  EXPECT_EQ(m.findVariable("emb.momentum"), nullptr);
  EXPECT_EQ(statistic(*pass, "variables updated"), 2);
}

TEST(LowerOptimizer, Errors) {
  Model noGradients = model("sgd", attrs({{"lr", Attr::real(0.1)}}));
  noGradients.module->gradients.clear();
  EXPECT_NE(lowerError(*noGradients.module).find("no gradients: run autodiff first"),
            std::string::npos);

  Model noOptimizer = model("sgd", attrs({{"lr", Attr::real(0.1)}}));
  noOptimizer.module->optimizer.reset();
  EXPECT_NE(lowerError(*noOptimizer.module).find("no optimizer to lower"), std::string::npos);

  // The verifier rejects these too; the pass checks for itself so that it never emits an
  // update op with attributes its kernel does not know.
  Model stray = model("sgd", attrs({{"lr", Attr::real(0.1)}}));
  stray.module->optimizer->params.set("momentum", Attr::real(0.9));
  EXPECT_NE(lowerError(*stray.module)
                .find("optimizer 'sgd' has no parameter 'momentum'; accepted: lr, clip_norm, "
                      "loss_scale, loss_scale_interval"),
            std::string::npos);

  Model badKind = model("adam", attrs({{"lr", Attr::real(0.1)}}));
  badKind.module->optimizer->params.set("beta1", Attr::string("x"));
  EXPECT_NE(lowerError(*badKind.module).find("attribute 'beta1' of 'apply_adam' must be"),
            std::string::npos);
}
