// CPU kernels of variable updates (apply_sgd, apply_momentum, apply_adam, assign), gradient
// clipping (scale, global_norm, clip_scale), the learning-rate schedule (lr_schedule) and dynamic
// loss scaling (all_finite, update_loss_scale). Updates
// write the variables in place; a sparse gradient has its repeated indices summed first and then
// touches only its rows of the variable and of the optimizer state (lazy updates).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "ir/Attribute.h"
#include "ir/Diagnostic.h"
#include "ir/LearningRateSchedule.h"
#include "ir/OpTable.h"
#include "runtime/cpu/Kernel.h"
#include "runtime/cpu/kernels/ElementwiseMath.h"
#include "runtime/cpu/kernels/Parallel.h"
#include "runtime/cpu/kernels/SparseRowCoalescer.h"
#include "runtime/cpu/kernels/TargetClones.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"

namespace prism::runtime::cpu {
namespace {

// Elements per thread below which an update or a norm runs on fewer threads: two threads
// start at 65536 elements.
constexpr int64_t kParallelGrain = int64_t(1) << 15;

llvm::Error kernelError(const llvm::Twine &message) {
  return ir::makeError(message);
}

// A writable alias of a variable the executor passes as an input (it aliases the store).
float *variableData(const RuntimeValue *value) {
  Tensor alias = value->dense;
  return alias.data<float>();
}

double scalarValue(const Tensor &t) {
  return t.dtype() == ir::DType::F64 ? *t.data<double>() : *t.data<float>();
}

void storeScalar(Tensor &t, double value) {
  if (t.dtype() == ir::DType::F64)
    *t.data<double>() = value;
  else
    *t.data<float>() = static_cast<float>(value);
}

// Σ x² in double, with float partial sums over short blocks so that the loop vectorizes.
PRISM_TARGET_CLONES double sumOfSquares(const float *x, int64_t n) {
  constexpr int64_t kLanes = 16, kBlock = 1024;
  double total = 0;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = std::min(n, start + kBlock);
    float lanes[kLanes] = {};
    int64_t i = start;
    for (; i + kLanes <= end; i += kLanes)
      for (int64_t j = 0; j < kLanes; ++j)
        lanes[j] += x[i + j] * x[i + j];
    for (; i < end; ++i)
      lanes[0] += x[i] * x[i];
    for (float lane : lanes)
      total += lane;
  }
  return total;
}

// The blocks' sums are added in block order, so the result does not depend on timing.
double parallelSumOfSquares(const float *x, int64_t n, int threads) {
  const int blocks = parallelBlocks(n, threads, kParallelGrain);
  llvm::SmallVector<double, 16> sums(static_cast<size_t>(blocks));
  forEachBlock(n, blocks, [&](int block, int64_t begin, int64_t end) {
    sums[static_cast<size_t>(block)] = sumOfSquares(x + begin, end - begin);
  });
  double total = 0;
  for (double sum : sums)
    total += sum;
  return total;
}

// Asks for the cache lines of a table row that is about to be updated. Rows of a sparse update
// are scattered over tables much larger than the caches, so without this every row waits for
// memory in turn.
inline void prefetchRow(const float *row, int64_t n) {
  constexpr int64_t kFloatsPerLine = 16, kMostLines = 16;
  const int64_t lines = std::min(kMostLines, (n + kFloatsPerLine - 1) / kFloatsPerLine);
  for (int64_t line = 0; line < lines; ++line)
    __builtin_prefetch(row + line * kFloatsPerLine, /*write=*/1, /*keep=*/3);
}

// The gradient operand of an update: dense, or sparse and coalesced into distinct rows.
class GradientRows {
public:
  explicit GradientRows(const ir::TensorType &type) : sparse_(type.sparse), rowSize_(1) {
    for (size_t i = 1; i < type.dims.size(); ++i)
      rowSize_ *= type.dims[i];
    if (sparse_)
      coalescer_.emplace(type.dims[0], rowSize_);
  }
  bool sparse() const { return sparse_; }
  int64_t rowSize() const { return rowSize_; }
  SparseRowCoalescer &coalescer() { return *coalescer_; }

  // Dense: body(offset, g, n) over the whole tensor, in chunks on several threads.
  // Sparse: body(index * rowSize, row, rowSize) for each distinct row, rows split over threads;
  // `state` are the arrays the body updates at those offsets (prefetched a few rows ahead).
  template <typename Body>
  llvm::Error forEachSpan(const RuntimeValue &g, int64_t denseElements, int threads,
                          std::initializer_list<const float *> state, Body body) {
    if (!sparse_) {
      const float *data = g.dense.data<float>();
      parallelFor(denseElements, threads, kParallelGrain,
                  [&](int64_t begin, int64_t end) { body(begin, data + begin, end - begin); });
      return llvm::Error::success();
    }
    if (auto err = coalescer_->coalesce(g))
      return err;
    const int64_t rows = coalescer_->numRows(), d = rowSize_;
    const int64_t *indices = coalescer_->indices().data();
    auto rowsBody = [&](int64_t begin, int64_t end) {
      constexpr int64_t kRowsAhead = 8;
      for (int64_t r = begin; r < end; ++r) {
        if (r + kRowsAhead < end)
          for (const float *array : state)
            prefetchRow(array + indices[r + kRowsAhead] * d, d);
        body(indices[r] * d, coalescer_->row(r), d);
      }
    };
    // Distinct rows never share elements, so they can be updated on different threads.
    parallelFor(rows, threads, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(d, 1)),
                rowsBody);
    return llvm::Error::success();
  }

private:
  bool sparse_;
  int64_t rowSize_;
  std::optional<SparseRowCoalescer> coalescer_;
};

// The update rules over one contiguous span. Separate functions with restrict parameters, so
// that the compiler knows the arrays do not overlap and vectorizes the loops, compiled for each
// x86-64 level (TargetClones.h).

PRISM_TARGET_CLONES void sgdSpan(float *__restrict w, const float *__restrict g, int64_t n,
                                 float lr) {
  for (int64_t i = 0; i < n; ++i)
    w[i] -= lr * g[i];
}

PRISM_TARGET_CLONES void momentumSpan(float *__restrict w, float *__restrict a,
                                      const float *__restrict g, int64_t n, float lr,
                                      float momentum) {
  for (int64_t i = 0; i < n; ++i) {
    a[i] = momentum * a[i] + g[i];
    w[i] -= lr * a[i];
  }
}

PRISM_TARGET_CLONES void nesterovSpan(float *__restrict w, float *__restrict a,
                                      const float *__restrict g, int64_t n, float lr,
                                      float momentum) {
  for (int64_t i = 0; i < n; ++i) {
    a[i] = momentum * a[i] + g[i];
    w[i] -= lr * (g[i] + momentum * a[i]);
  }
}

// Adam's constants for one step: the bias corrections folded in, computed in double once:
// lr * (m / c1) / (sqrt(v / c2) + eps) = stepSize * m / (sqrt(v) * invSqrtC2 + eps).
struct AdamStep {
  float beta1, beta2, oneMinusBeta1, oneMinusBeta2, stepSize, invSqrtC2, epsilon;
};

// std::sqrt vectorizes: prism_cpu is built with -fno-math-errno.
PRISM_TARGET_CLONES void adamSpan(float *__restrict w, float *__restrict m, float *__restrict v,
                                  const float *__restrict g, int64_t n, AdamStep k) {
  for (int64_t i = 0; i < n; ++i) {
    m[i] = k.beta1 * m[i] + k.oneMinusBeta1 * g[i];
    v[i] = k.beta2 * v[i] + k.oneMinusBeta2 * g[i] * g[i];
    w[i] -= k.stepSize * m[i] / (std::sqrt(v[i]) * k.invSqrtC2 + k.epsilon);
  }
}

// Base of the update kernels: the dense element count, the gradient operand, and the learning
// rate, times the schedule's factor (the optional operand `factorOperand`) when given; with the
// optional `finite` operand after it (loss scaling), a 0 there skips the update.
class UpdateKernel : public Kernel {
public:
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) final {
    if (finiteOperand_ && scalarValue(inputs[finiteOperand_]->dense) == 0)
      return llvm::Error::success();
    return update(inputs, outputs);
  }

protected:
  UpdateKernel(const KernelSpec &spec, unsigned gradOperand, unsigned factorOperand)
      : elements_(spec.inputTypes[0].numElements()), threads_(spec.threads),
        gradient_(spec.inputTypes[gradOperand]), lr_(spec.attrs.getFloat("lr")),
        factorOperand_(spec.inputTypes.size() > factorOperand ? factorOperand : 0),
        finiteOperand_(spec.inputTypes.size() > factorOperand + 1 ? factorOperand + 1 : 0) {}

  virtual llvm::Error update(llvm::ArrayRef<const RuntimeValue *> inputs,
                             llvm::ArrayRef<RuntimeValue *> outputs) = 0;

  // This step's rate, in double.
  double learningRate(llvm::ArrayRef<const RuntimeValue *> inputs) const {
    return factorOperand_ ? lr_ * scalarValue(inputs[factorOperand_]->dense) : lr_;
  }

  int64_t elements_;
  int threads_;
  GradientRows gradient_;
  double lr_;
  unsigned factorOperand_; // 0: no schedule
  unsigned finiteOperand_; // 0: no loss scaling
};

// (w, g[, lr_factor, finite]): w -= lr * g
class ApplySgdKernel final : public UpdateKernel {
public:
  explicit ApplySgdKernel(const KernelSpec &spec) : UpdateKernel(spec, 1, 2) {}

  llvm::Error update(llvm::ArrayRef<const RuntimeValue *> inputs,
                     llvm::ArrayRef<RuntimeValue *>) override {
    float *w = variableData(inputs[0]);
    const float lr = static_cast<float>(learningRate(inputs));
    return gradient_.forEachSpan(
        *inputs[1], elements_, threads_, {w},
        [=](int64_t offset, const float *g, int64_t n) { sgdSpan(w + offset, g, n, lr); });
  }
};

// (w, a, g[, lr_factor, finite]): a = momentum * a + g; w -= lr * (nesterov ? g + momentum * a : a)
class ApplyMomentumKernel final : public UpdateKernel {
public:
  explicit ApplyMomentumKernel(const KernelSpec &spec)
      : UpdateKernel(spec, 2, 3), momentum_(static_cast<float>(spec.attrs.getFloat("momentum"))),
        nesterov_(spec.attrs.getBool("nesterov")) {}

  llvm::Error update(llvm::ArrayRef<const RuntimeValue *> inputs,
                     llvm::ArrayRef<RuntimeValue *>) override {
    float *w = variableData(inputs[0]);
    float *a = variableData(inputs[1]);
    const float lr = static_cast<float>(learningRate(inputs)), momentum = momentum_;
    if (nesterov_)
      return gradient_.forEachSpan(*inputs[2], elements_, threads_, {w, a},
                                   [=](int64_t offset, const float *g, int64_t n) {
                                     nesterovSpan(w + offset, a + offset, g, n, lr, momentum);
                                   });
    return gradient_.forEachSpan(*inputs[2], elements_, threads_, {w, a},
                                 [=](int64_t offset, const float *g, int64_t n) {
                                   momentumSpan(w + offset, a + offset, g, n, lr, momentum);
                                 });
  }

private:
  float momentum_;
  bool nesterov_;
};

// (w, m, v, g, t[, lr_factor, finite]), t the step count already incremented:
// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + epsilon)
class ApplyAdamKernel final : public UpdateKernel {
public:
  explicit ApplyAdamKernel(const KernelSpec &spec)
      : UpdateKernel(spec, 3, 5), beta1_(spec.attrs.getFloat("beta1")),
        beta2_(spec.attrs.getFloat("beta2")), epsilon_(spec.attrs.getFloat("epsilon")) {}

  llvm::Error update(llvm::ArrayRef<const RuntimeValue *> inputs,
                     llvm::ArrayRef<RuntimeValue *>) override {
    float *w = variableData(inputs[0]);
    float *m = variableData(inputs[1]);
    float *v = variableData(inputs[2]);
    const double t = scalarValue(inputs[4]->dense);
    const double c1 = 1 - std::pow(beta1_, t), c2 = 1 - std::pow(beta2_, t);
    if (c1 == 0 || c2 == 0)
      return kernelError("apply_adam needs a step count t >= 1, got " + ir::formatDouble(t));
    AdamStep k;
    k.beta1 = static_cast<float>(beta1_);
    k.beta2 = static_cast<float>(beta2_);
    k.oneMinusBeta1 = static_cast<float>(1 - beta1_);
    k.oneMinusBeta2 = static_cast<float>(1 - beta2_);
    k.stepSize = static_cast<float>(learningRate(inputs) / c1);
    k.invSqrtC2 = static_cast<float>(1 / std::sqrt(c2));
    k.epsilon = static_cast<float>(epsilon_);
    return gradient_.forEachSpan(*inputs[3], elements_, threads_, {w, m, v},
                                 [=](int64_t offset, const float *g, int64_t n) {
                                   adamSpan(w + offset, m + offset, v + offset, g, n, k);
                                 });
  }

private:
  double beta1_, beta2_, epsilon_;
};

// (var, value): the variable takes the value.
class AssignKernel final : public Kernel {
public:
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *>) override {
    Tensor var = inputs[0]->dense;
    const Tensor &value = inputs[1]->dense;
    if (var.raw() != value.raw() && value.numBytes())
      std::memcpy(var.raw(), value.raw(), static_cast<size_t>(value.numBytes()));
    return llvm::Error::success();
  }
};

// (x, s): x * s for a scalar s; a sparse x keeps its indices and has its rows scaled.
class ScaleKernel final : public Kernel {
public:
  ScaleKernel(bool sparse, int threads) : sparse_(sparse), threads_(threads) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const RuntimeValue &x = *inputs[0];
    RuntimeValue &out = *outputs[0];
    if (sparse_) {
      out.sparse = true;
      out.indices = x.indices; // shared: the indices do not change
      const Tensor &rows = x.rows();
      if (out.rows().empty() || out.rows().numElements() != rows.numElements() ||
          out.rows().raw() == rows.raw())
        out.rows() = Tensor(rows.dtype(), rows.shape());
      else
        out.rows() = out.rows().reshaped(rows.shape());
    }
    const float s = static_cast<float>(scalarValue(inputs[1]->dense));
    const float *from = x.dense.data<float>();
    float *to = out.dense.data<float>();
    parallelFor(x.dense.numElements(), threads_, kParallelGrain, [&](int64_t begin, int64_t end) {
      elementwise::binaryLoop<elementwise::Mul>(to + begin, from + begin, true, &s, false,
                                                end - begin);
    });
    return llvm::Error::success();
  }

private:
  bool sparse_;
  int threads_;
};

// sqrt(Σ ‖g‖²) over all operands; a sparse operand counts as its dense sum (duplicates summed
// before squaring).
class GlobalNormKernel final : public Kernel {
public:
  explicit GlobalNormKernel(const KernelSpec &spec) : threads_(spec.threads) {
    for (const ir::TensorType &type : spec.inputTypes)
      operands_.emplace_back(type);
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    double sum = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      GradientRows &operand = operands_[i];
      if (!operand.sparse()) {
        sum += parallelSumOfSquares(inputs[i]->dense.data<float>(), inputs[i]->dense.numElements(),
                                    threads_);
        continue;
      }
      SparseRowCoalescer &coalescer = operand.coalescer();
      if (auto err = coalescer.coalesce(*inputs[i]))
        return err;
      // A sparse gradient holds a few thousand rows: not worth threads.
      for (int64_t r = 0; r < coalescer.numRows(); ++r)
        sum += sumOfSquares(coalescer.row(r), coalescer.rowSize());
    }
    storeScalar(outputs[0]->dense, std::sqrt(sum));
    return llvm::Error::success();
  }

private:
  int threads_;
  std::vector<GradientRows> operands_;
};

PRISM_TARGET_CLONES bool allFinite(const float *x, int64_t n) {
  // x - x is 0 for a finite x and NaN for ±inf and NaN; the sum stays 0 only if all are finite.
  float sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += x[i] - x[i];
  return sum == 0;
}

// 1 when every element of every operand (dense values, or a sparse operand's rows) is finite.
class AllFiniteKernel final : public Kernel {
public:
  explicit AllFiniteKernel(int threads) : threads_(threads) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    bool finite = true;
    for (const RuntimeValue *g : inputs) {
      const float *x = g->dense.data<float>();
      const int64_t n = g->dense.numElements();
      const int blocks = parallelBlocks(n, threads_, kParallelGrain);
      llvm::SmallVector<char, 16> ok(static_cast<size_t>(blocks), 1);
      forEachBlock(n, blocks, [&](int block, int64_t begin, int64_t end) {
        ok[static_cast<size_t>(block)] = allFinite(x + begin, end - begin);
      });
      finite = finite && std::all_of(ok.begin(), ok.end(), [](char b) { return b != 0; });
    }
    storeScalar(outputs[0]->dense, finite ? 1.0 : 0.0);
    return llvm::Error::success();
  }

private:
  int threads_;
};

// x's examples over the step's global batch (KernelSpec::globalBatch).
class BatchShareKernel final : public Kernel {
public:
  explicit BatchShareKernel(const KernelSpec &spec)
      : globalBatch_(spec.globalBatch), batch_(spec.batch) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const int64_t global = globalBatch_ && *globalBatch_ > 0 ? *globalBatch_ : batch_;
    if (global <= 0)
      return kernelError("batch_share: the step has no examples");
    storeScalar(outputs[0]->dense,
                static_cast<double>(inputs[0]->dense.dim(0)) / static_cast<double>(global));
    return llvm::Error::success();
  }

private:
  const int64_t *globalBatch_;
  int64_t batch_;
};

// (scale, good, skipped, finite), every one a scalar variable written in place; the rule is the
// reference kernel's (docs/ops.md).
class UpdateLossScaleKernel final : public Kernel {
public:
  explicit UpdateLossScaleKernel(const ir::AttrMap &attrs)
      : interval_(static_cast<double>(attrs.getInt("growth_interval"))),
        growth_(attrs.getFloat("growth_factor")), backoff_(attrs.getFloat("backoff_factor")) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *>) override {
    Tensor scale = inputs[0]->dense, good = inputs[1]->dense, skipped = inputs[2]->dense;
    double s = scalarValue(scale), g = scalarValue(good);
    if (scalarValue(inputs[3]->dense) != 0) {
      g += 1;
      if (g >= interval_) {
        s *= growth_;
        g = 0;
      }
    } else {
      s *= backoff_;
      g = 0;
      storeScalar(skipped, scalarValue(skipped) + 1);
    }
    storeScalar(scale, s);
    storeScalar(good, g);
    return llvm::Error::success();
  }

private:
  double interval_, growth_, backoff_;
};

// min(1, clip_norm / norm); 1 when the norm is 0.
class ClipScaleKernel final : public Kernel {
public:
  explicit ClipScaleKernel(double clipNorm) : clipNorm_(clipNorm) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    double norm = scalarValue(inputs[0]->dense);
    storeScalar(outputs[0]->dense, norm == 0 ? 1.0 : std::min(1.0, clipNorm_ / norm));
    return llvm::Error::success();
  }

private:
  double clipNorm_;
};

// (step): the schedule's factor at the step count, computed in double.
class LrScheduleKernel final : public Kernel {
public:
  explicit LrScheduleKernel(ir::LearningRateSchedule schedule) : schedule_(schedule) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    auto step = ir::stepNumber(scalarValue(inputs[0]->dense));
    if (!step)
      return step.takeError();
    storeScalar(outputs[0]->dense, schedule_.factor(*step));
    return llvm::Error::success();
  }

private:
  ir::LearningRateSchedule schedule_;
};

llvm::Error expectF32(const ir::TensorType &type, llvm::StringRef what) {
  if (type.dtype != ir::DType::F32)
    return kernelError(llvm::Twine(what) + " must be f32 on the CPU, got " + type.str());
  return llvm::Error::success();
}

llvm::Error expectScalar(const ir::TensorType &type, llvm::StringRef what) {
  if (!ir::isFloat(type.dtype) || type.rank() != 0 || type.sparse)
    return kernelError(llvm::Twine(what) + " must be an f32 or f64 scalar, got " + type.str());
  return llvm::Error::success();
}

// Checks that the first `count` operands (variables, state, gradient) are f32.
llvm::Error expectF32Operands(const KernelSpec &spec, unsigned count) {
  for (unsigned i = 0; i < count; ++i)
    if (auto err = expectF32(spec.inputTypes[i], spec.op->def().operands[i]))
      return err;
  return llvm::Error::success();
}

// The optional schedule factor of an update, operand `index`, and the `finite` flag after it.
llvm::Error expectLrFactor(const KernelSpec &spec, unsigned index) {
  if (spec.inputTypes.size() > index)
    if (auto err = expectScalar(spec.inputTypes[index], "the learning-rate factor"))
      return err;
  if (spec.inputTypes.size() > index + 1)
    return expectScalar(spec.inputTypes[index + 1], "the finite flag");
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Kernel>> makeApplySgd(const KernelSpec &spec) {
  if (auto err = expectF32Operands(spec, 2))
    return std::move(err);
  if (auto err = expectLrFactor(spec, 2))
    return std::move(err);
  return std::make_unique<ApplySgdKernel>(spec);
}

llvm::Expected<std::unique_ptr<Kernel>> makeApplyMomentum(const KernelSpec &spec) {
  if (auto err = expectF32Operands(spec, 3))
    return std::move(err);
  if (auto err = expectLrFactor(spec, 3))
    return std::move(err);
  return std::make_unique<ApplyMomentumKernel>(spec);
}

llvm::Expected<std::unique_ptr<Kernel>> makeApplyAdam(const KernelSpec &spec) {
  if (auto err = expectF32Operands(spec, 4))
    return std::move(err);
  if (auto err = expectScalar(spec.inputTypes[4], "the step count t"))
    return std::move(err);
  if (auto err = expectLrFactor(spec, 5))
    return std::move(err);
  return std::make_unique<ApplyAdamKernel>(spec);
}

llvm::Expected<std::unique_ptr<Kernel>> makeAssign(const KernelSpec &spec) {
  if (spec.inputTypes[1].sparse)
    return kernelError("the assigned value must be dense");
  return std::make_unique<AssignKernel>();
}

llvm::Expected<std::unique_ptr<Kernel>> makeScale(const KernelSpec &spec) {
  if (auto err = expectF32(spec.inputTypes[0], "x"))
    return std::move(err);
  if (auto err = expectScalar(spec.inputTypes[1], "the scale s"))
    return std::move(err);
  return std::make_unique<ScaleKernel>(spec.inputTypes[0].sparse, spec.threads);
}

llvm::Expected<std::unique_ptr<Kernel>> makeGlobalNorm(const KernelSpec &spec) {
  for (const ir::TensorType &type : spec.inputTypes)
    if (auto err = expectF32(type, "every gradient"))
      return std::move(err);
  return std::make_unique<GlobalNormKernel>(spec);
}

llvm::Expected<std::unique_ptr<Kernel>> makeAllFinite(const KernelSpec &spec) {
  for (const ir::TensorType &type : spec.inputTypes)
    if (auto err = expectF32(type, "every gradient"))
      return std::move(err);
  return std::make_unique<AllFiniteKernel>(spec.threads);
}

llvm::Expected<std::unique_ptr<Kernel>> makeUpdateLossScale(const KernelSpec &spec) {
  for (const ir::TensorType &type : spec.inputTypes)
    if (auto err = expectScalar(type, "every operand of update_loss_scale"))
      return std::move(err);
  return std::make_unique<UpdateLossScaleKernel>(spec.attrs);
}

llvm::Expected<std::unique_ptr<Kernel>> makeBatchShare(const KernelSpec &spec) {
  if (spec.inputTypes[0].sparse || spec.inputTypes[0].rank() < 1)
    return kernelError("batch_share needs a dense operand with a batch dimension, got " +
                       spec.inputTypes[0].str());
  return std::make_unique<BatchShareKernel>(spec);
}

llvm::Expected<std::unique_ptr<Kernel>> makeClipScale(const KernelSpec &spec) {
  if (auto err = expectScalar(spec.inputTypes[0], "the norm"))
    return std::move(err);
  return std::make_unique<ClipScaleKernel>(spec.attrs.getFloat("clip_norm"));
}

llvm::Expected<std::unique_ptr<Kernel>> makeLrSchedule(const KernelSpec &spec) {
  if (auto err = expectScalar(spec.inputTypes[0], "the step count"))
    return std::move(err);
  auto schedule = ir::scheduleFromAttrs(spec.attrs);
  if (!schedule)
    return schedule.takeError();
  return std::make_unique<LrScheduleKernel>(*schedule);
}

} // namespace

void registerOptimizerKernels(KernelRegistry &registry) {
  registry.add("apply_sgd", makeApplySgd);
  registry.add("apply_momentum", makeApplyMomentum);
  registry.add("apply_adam", makeApplyAdam);
  registry.add("assign", makeAssign);
  registry.add("scale", makeScale);
  registry.add("global_norm", makeGlobalNorm);
  registry.add("clip_scale", makeClipScale);
  registry.add("all_finite", makeAllFinite);
  registry.add("update_loss_scale", makeUpdateLossScale);
  registry.add("batch_share", makeBatchShare);
  registry.add("lr_schedule", makeLrSchedule);
}

} // namespace prism::runtime::cpu
