// Reference kernels of variable updates and gradient clipping. Update kernels return the new
// values of their written operands; the interpreter stores them at the end of the step. A
// sparse gradient first has its duplicate indices summed, then touches only its rows of the
// variable and of the optimizer state (lazy updates).
#include <algorithm>
#include <cmath>

#include "ir/Attribute.h"
#include "ir/LearningRateSchedule.h"
#include "runtime/reference/KernelSupport.h"

namespace prism::runtime::reference::kernels {
namespace {

// Calls update(offset, g) for every element of the variable that the gradient touches.
template <typename F> void forEachGradElement(const Tensor &g, F update) {
  if (!g.isSparse()) {
    for (size_t i = 0; i < g.data().size(); ++i)
      update(static_cast<int64_t>(i), g.data()[i]);
    return;
  }
  Tensor c = g.coalesced();
  int64_t d = c.rowSize();
  for (int64_t r = 0; r < c.numRows(); ++r)
    for (int64_t j = 0; j < d; ++j)
      update(c.indices()[r] * d + j, c.data()[r * d + j]);
}

// This step's rate: lr, times the schedule's factor when the update has the operand.
double learningRate(const KernelArgs &args, unsigned factorOperand) {
  double lr = args.attrs.getFloat("lr");
  return args.numOperands() > factorOperand ? lr * args.operand(factorOperand).data()[0] : lr;
}

// Whether the update runs: without the `finite` operand (after lr_factor) always, else only
// when it is 1 (loss scaling found this step's gradients finite).
bool skipped(const KernelArgs &args, unsigned factorOperand) {
  return args.numOperands() > factorOperand + 1 && args.operand(factorOperand + 1).data()[0] == 0;
}

// The written operands as they are: a skipped update.
KernelResults unchanged(const KernelArgs &args, unsigned written) {
  KernelResults r;
  for (unsigned i = 0; i < written; ++i)
    r.push_back(args.operand(i));
  return r;
}

// (w, g[, lr_factor, finite]): w -= lr * g
llvm::Expected<KernelResults> applySgdKernel(const KernelArgs &args) {
  if (skipped(args, 2))
    return unchanged(args, 1);
  Tensor w = args.operand(0);
  double lr = learningRate(args, 2);
  forEachGradElement(args.operand(1), [&](int64_t i, double g) { w.data()[i] -= lr * g; });
  return single(std::move(w));
}

// (w, a, g[, lr_factor, finite]): a = momentum * a + g;
// w -= lr * (nesterov ? g + momentum * a : a)
llvm::Expected<KernelResults> applyMomentumKernel(const KernelArgs &args) {
  if (skipped(args, 3))
    return unchanged(args, 2);
  Tensor w = args.operand(0), a = args.operand(1);
  double lr = learningRate(args, 3), momentum = args.attrs.getFloat("momentum");
  bool nesterov = args.attrs.getBool("nesterov");
  forEachGradElement(args.operand(2), [&](int64_t i, double g) {
    double &acc = a.data()[i];
    acc = momentum * acc + g;
    w.data()[i] -= lr * (nesterov ? g + momentum * acc : acc);
  });
  KernelResults r;
  r.push_back(std::move(w));
  r.push_back(std::move(a));
  return r;
}

// (w, m, v, g, t[, lr_factor, finite]), t the step count already incremented:
// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + epsilon)
llvm::Expected<KernelResults> applyAdamKernel(const KernelArgs &args) {
  if (skipped(args, 5))
    return unchanged(args, 3);
  Tensor w = args.operand(0), m = args.operand(1), v = args.operand(2);
  double t = args.operand(4).data()[0];
  double lr = learningRate(args, 5), b1 = args.attrs.getFloat("beta1"),
         b2 = args.attrs.getFloat("beta2"), eps = args.attrs.getFloat("epsilon");
  double c1 = 1 - std::pow(b1, t), c2 = 1 - std::pow(b2, t);
  if (c1 == 0 || c2 == 0)
    return kernelError("apply_adam needs a step count t >= 1, got " + ir::formatDouble(t));
  forEachGradElement(args.operand(3), [&](int64_t i, double g) {
    double &mi = m.data()[i], &vi = v.data()[i];
    mi = b1 * mi + (1 - b1) * g;
    vi = b2 * vi + (1 - b2) * g * g;
    w.data()[i] -= lr * (mi / c1) / (std::sqrt(vi / c2) + eps);
  });
  KernelResults r;
  r.push_back(std::move(w));
  r.push_back(std::move(m));
  r.push_back(std::move(v));
  return r;
}

// (var, value): the variable's new value.
llvm::Expected<KernelResults> assignKernel(const KernelArgs &args) {
  return single(args.operand(1));
}

// (x, s): dense values or sparse rows times the scalar s.
llvm::Expected<KernelResults> scaleKernel(const KernelArgs &args) {
  Tensor out = args.operand(0);
  double s = args.operand(1).data()[0];
  for (double &v : out.data())
    v *= s;
  return single(std::move(out));
}

// sqrt of the sum of squares over all operands; a sparse operand counts as its dense sum.
llvm::Expected<KernelResults> globalNormKernel(const KernelArgs &args) {
  double sum = 0;
  for (const Tensor *g : args.operands) {
    Tensor value = g->isSparse() ? g->coalesced() : *g;
    for (double v : value.data())
      sum += v * v;
  }
  return single(Tensor::scalar(std::sqrt(sum), args.resultDType()));
}

// 1 when every element of every operand is finite, else 0.
llvm::Expected<KernelResults> allFiniteKernel(const KernelArgs &args) {
  bool finite = true;
  for (const Tensor *g : args.operands)
    for (double v : g->data())
      finite = finite && std::isfinite(v);
  return single(Tensor::scalar(finite ? 1.0 : 0.0, args.resultDType()));
}

// x's batch over the bound batch: the reference runs one whole batch, so 1 unless x is a slice.
llvm::Expected<KernelResults> batchShareKernel(const KernelArgs &args) {
  double examples = static_cast<double>(args.operand(0).shape()[0]);
  double share = args.batch > 0 ? examples / static_cast<double>(args.batch) : 1.0;
  return single(Tensor::scalar(share, args.resultDType()));
}

// (scale, good, skipped, finite): finite: good + 1, and at growth_interval the scale grows and
// good restarts; else the scale backs off, good restarts and skipped counts the step.
llvm::Expected<KernelResults> updateLossScaleKernel(const KernelArgs &args) {
  Tensor scale = args.operand(0), good = args.operand(1), skippedSteps = args.operand(2);
  if (args.operand(3).data()[0] != 0) {
    good.data()[0] += 1;
    if (good.data()[0] >= static_cast<double>(args.attrs.getInt("growth_interval"))) {
      scale.data()[0] *= args.attrs.getFloat("growth_factor");
      good.data()[0] = 0;
    }
  } else {
    scale.data()[0] *= args.attrs.getFloat("backoff_factor");
    good.data()[0] = 0;
    skippedSteps.data()[0] += 1;
  }
  KernelResults r;
  r.push_back(std::move(scale));
  r.push_back(std::move(good));
  r.push_back(std::move(skippedSteps));
  return r;
}

// min(1, clip_norm / norm); 1 when the norm is 0.
llvm::Expected<KernelResults> clipScaleKernel(const KernelArgs &args) {
  double norm = args.operand(0).data()[0];
  double clip = args.attrs.getFloat("clip_norm");
  double factor = norm == 0 ? 1.0 : std::min(1.0, clip / norm);
  return single(Tensor::scalar(factor, args.resultDType()));
}

// (step): the schedule's factor at the step count (docs/ir.md has the formulas).
llvm::Expected<KernelResults> lrScheduleKernel(const KernelArgs &args) {
  auto schedule = ir::scheduleFromAttrs(args.attrs);
  if (!schedule)
    return schedule.takeError();
  auto step = ir::stepNumber(args.operand(0).data()[0]);
  if (!step)
    return step.takeError();
  return single(Tensor::scalar(schedule->factor(*step), args.resultDType()));
}

} // namespace

void registerOptimizerKernels(KernelTable &t) {
  t["apply_sgd"] = {applySgdKernel, 0b10};
  t["apply_momentum"] = {applyMomentumKernel, 0b100};
  t["apply_adam"] = {applyAdamKernel, 0b1000};
  t["assign"] = {assignKernel};
  t["scale"] = {scaleKernel, 0b1};
  t["global_norm"] = {globalNormKernel, ~0u};
  t["clip_scale"] = {clipScaleKernel};
  t["all_finite"] = {allFiniteKernel, ~0u};
  t["update_loss_scale"] = {updateLossScaleKernel};
  t["batch_share"] = {batchShareKernel};
  t["lr_schedule"] = {lrScheduleKernel};
}

} // namespace prism::runtime::reference::kernels
