// CPU kernels of the ops that compute differently in training and evaluation: dropout and
// dropout_grad, whose masks follow runtime/DropoutMask.h (the reference's rule, draw for draw),
// batch_norm with its gradients and the update of its running averages, and what batch_norm
// with sync = true expands to (batch_norm_apply with its gradients, replica_mean on one task).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ir/OpTable.h"
#include "runtime/DropoutMask.h"
#include "runtime/cpu/kernels/DTypeDispatch.h"
#include "runtime/cpu/kernels/Parallel.h"

namespace prism::runtime::cpu {
namespace {

// x through the mask of the op's stream (training), or x (evaluation). A value whose first
// dimension is B draws per example by its index in the global batch.
template <typename T> class DropoutKernel final : public Kernel {
public:
  explicit DropoutKernel(const KernelSpec &spec)
      : key_(ir::randomStreamKey(*spec.op)), rate_(spec.attrs.getFloat("rate")), step_(spec.step),
        towerOffset_(spec.towerOffset), elements_(spec.outputTypes[0].numElements()),
        threads_(spec.threads),
        layout_(dropoutLayout(spec.op->result(0)->type(), spec.outputTypes[0])) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const T *in = inputs[0]->dense.data<T>();
    T *out = outputs[0]->dense.data<T>();
    const StepContext step = step_ ? *step_ : StepContext{};
    if (!step.training()) {
      if (elements_ > 0 && out != in)
        std::memcpy(out, in, static_cast<size_t>(elements_) * sizeof(T));
      return llvm::Error::success();
    }
    const uint64_t stream = dropoutStepStream(step.seed, key_, step.step);
    const int64_t first = layout_.perExample ? step.exampleOffset + towerOffset_ : 0;
    const T scale = static_cast<T>(dropoutScale(rate_));
    const double rate = rate_;
    const int64_t size = layout_.exampleSize;
    parallelFor(elements_, threads_, kCostlyGrain, [&](int64_t begin, int64_t end) {
      int64_t e = begin / size, i = begin % size;
      uint64_t example = dropoutExampleStream(stream, first + e);
      for (int64_t at = begin; at < end; ++at) {
        out[at] = dropoutKeeps(example, i, rate) ? in[at] * scale : T(0);
        if (++i == size && at + 1 < end) {
          i = 0;
          example = dropoutExampleStream(stream, first + ++e);
        }
      }
    });
    return llvm::Error::success();
  }

private:
  std::string key_;
  double rate_;
  const StepContext *step_;
  int64_t towerOffset_, elements_;
  int threads_;
  DropoutLayout layout_;
};

KernelOrError makeDropout(const KernelSpec &spec) {
  return withFloatType(spec, spec.outputTypes[0].dtype, [&](auto t) -> std::unique_ptr<Kernel> {
    return std::make_unique<DropoutKernel<decltype(t)>>(spec);
  });
}

// What the batch_norm kernels share: x as [rows, channels] (every dimension but the last is a
// sample) and the per-channel statistics a step normalizes with: the batch's in training (sums
// in double, the variance in a second pass), the running averages in evaluation.
template <typename T> class BatchNormKernelBase : public Kernel {
protected:
  // x is input `x`, running_mean and running_var inputs `running` and `running + 1`.
  BatchNormKernelBase(const KernelSpec &spec, unsigned x, unsigned running)
      : x_(x), running_(running), step_(spec.step), threads_(spec.threads) {
    const ir::TensorType &type = spec.inputTypes[x];
    channels_ = type.dims.back();
    rows_ = channels_ == 0 ? 0 : type.numElements() / channels_;
    if (spec.attrs.has("epsilon"))
      epsilon_ = spec.attrs.getFloat("epsilon");
    mean_.resize(static_cast<size_t>(channels_));
    var_.resize(static_cast<size_t>(channels_));
    inv_.resize(static_cast<size_t>(channels_));
  }

  bool training() const { return !step_ || step_->training(); }

  // The batch's mean and biased variance of x into mean_ and var_.
  llvm::Error batchStatistics(llvm::ArrayRef<const RuntimeValue *> inputs) {
    if (rows_ < 2)
      return ir::makeError("batch_norm in a training step needs more than one value per "
                           "channel, x has " +
                           llvm::Twine(rows_) + " per channel");
    const T *x = inputs[x_]->dense.data<T>();
    const int64_t channels = channels_;
    std::vector<double> sum = channelSums(1, [&](int64_t r, double *acc) {
      const T *xr = x + r * channels;
#pragma omp simd
      for (int64_t c = 0; c < channels; ++c)
        acc[c] += static_cast<double>(xr[c]);
    });
    for (int64_t c = 0; c < channels; ++c)
      mean_[c] = sum[c] / static_cast<double>(rows_);
    const double *mean = mean_.data();
    std::vector<double> squares = channelSums(1, [&](int64_t r, double *acc) {
      const T *xr = x + r * channels;
#pragma omp simd
      for (int64_t c = 0; c < channels; ++c) {
        double d = static_cast<double>(xr[c]) - mean[c];
        acc[c] += d * d;
      }
    });
    for (int64_t c = 0; c < channels; ++c)
      var_[c] = squares[c] / static_cast<double>(rows_);
    return llvm::Error::success();
  }

  // mean_ and inv_ = 1 / sqrt(var + epsilon) of the statistics this step normalizes with.
  llvm::Error normalizingStatistics(llvm::ArrayRef<const RuntimeValue *> inputs) {
    if (training()) {
      if (auto err = batchStatistics(inputs))
        return err;
    } else {
      runningStatistics(inputs);
    }
    inverseStd();
    return llvm::Error::success();
  }

  // mean_ and inv_ of the statistics of input `moments` ([mean, mean of squares]; the variance
  // mean(x * x) - mean^2, at least 0) in training, of the running averages in evaluation.
  void momentsStatistics(llvm::ArrayRef<const RuntimeValue *> inputs, unsigned moments) {
    if (training()) {
      const double *m = inputs[moments]->dense.data<double>();
      for (int64_t c = 0; c < channels_; ++c) {
        mean_[c] = m[c];
        var_[c] = std::max(m[channels_ + c] - mean_[c] * mean_[c], 0.0);
      }
    } else {
      runningStatistics(inputs);
    }
    inverseStd();
  }

  // The running averages into mean_ and var_.
  void runningStatistics(llvm::ArrayRef<const RuntimeValue *> inputs) {
    const T *mean = inputs[running_]->dense.data<T>();
    const T *var = inputs[running_ + 1]->dense.data<T>();
    for (int64_t c = 0; c < channels_; ++c) {
      mean_[c] = static_cast<double>(mean[c]);
      var_[c] = static_cast<double>(var[c]);
    }
  }

  // inv_ = 1 / sqrt(var_ + epsilon).
  void inverseStd() {
    for (int64_t c = 0; c < channels_; ++c)
      inv_[c] = 1.0 / std::sqrt(var_[c] + epsilon_);
  }

  // y = scale * (x - mean_) * inv_ + bias with x, scale and bias inputs 0, 1 and 2.
  void normalize(llvm::ArrayRef<const RuntimeValue *> inputs,
                 llvm::ArrayRef<RuntimeValue *> outputs) const {
    const T *x = inputs[0]->dense.data<T>();
    const T *scale = inputs[1]->dense.data<T>();
    const T *bias = inputs[2]->dense.data<T>();
    T *y = outputs[0]->dense.data<T>();
    const int64_t channels = channels_;
    // y = x * a + b per channel.
    std::vector<double> a(static_cast<size_t>(channels)), b(static_cast<size_t>(channels));
    for (int64_t c = 0; c < channels; ++c) {
      a[c] = static_cast<double>(scale[c]) * inv_[c];
      b[c] = static_cast<double>(bias[c]) - mean_[c] * a[c];
    }
    forEachRow([&](int64_t r) {
      const T *xr = x + r * channels;
      T *yr = y + r * channels;
#pragma omp simd
      for (int64_t c = 0; c < channels; ++c)
        yr[c] = static_cast<T>(static_cast<double>(xr[c]) * a[c] + b[c]);
    });
  }

  // sum of dy * (x - mean_) * inv_ per channel into `out`, dy and x inputs 0 and 1.
  void scaleGradient(llvm::ArrayRef<const RuntimeValue *> inputs, T *out) const {
    const T *dy = inputs[0]->dense.data<T>();
    const T *x = inputs[1]->dense.data<T>();
    const int64_t channels = channels_;
    const double *mean = mean_.data();
    std::vector<double> sum = channelSums(1, [&](int64_t r, double *acc) {
      const T *xr = x + r * channels, *dyr = dy + r * channels;
#pragma omp simd
      for (int64_t c = 0; c < channels; ++c)
        acc[c] += static_cast<double>(dyr[c]) * (static_cast<double>(xr[c]) - mean[c]);
    });
    for (int64_t c = 0; c < channels; ++c)
      out[c] = static_cast<T>(sum[c] * inv_[c]);
  }

  // [sum(dy), sum(dy * (x - mean_))] per channel, dy and x the values `dy` and `x`.
  std::vector<double> gradientSums(const RuntimeValue *dyValue, const RuntimeValue *xValue) const {
    const T *dy = dyValue->dense.data<T>();
    const T *x = xValue->dense.data<T>();
    const int64_t channels = channels_;
    const double *mean = mean_.data();
    return channelSums(2, [&](int64_t r, double *acc) {
      const T *xr = x + r * channels, *dyr = dy + r * channels;
#pragma omp simd
      for (int64_t c = 0; c < channels; ++c) {
        double g = static_cast<double>(dyr[c]);
        acc[c] += g;
        acc[channels + c] += g * (static_cast<double>(xr[c]) - mean[c]);
      }
    });
  }

  // fn(r) for every row r, rows split among the threads.
  template <typename Body> void forEachRow(const Body &body) const {
    parallelFor(rows_, threads_,
                std::max<int64_t>(kCheapGrain / std::max<int64_t>(channels_, 1), 1),
                [&](int64_t begin, int64_t end) {
                  for (int64_t r = begin; r < end; ++r)
                    body(r);
                });
  }

  // Per-channel sums over every row: add(r, acc) adds row r's `terms` values per channel into
  // acc[terms * channels]. Rows are summed in blocks of a fixed size, in parallel, and the
  // blocks in order, so the sums do not depend on the thread count.
  template <typename Add> std::vector<double> channelSums(int terms, const Add &add) const {
    constexpr int64_t kRowsPerBlock = 64;
    const int64_t width = terms * channels_;
    const int64_t blocks = (rows_ + kRowsPerBlock - 1) / kRowsPerBlock;
    std::vector<double> partial(static_cast<size_t>(blocks * width), 0.0);
    parallelFor(blocks, threads_,
                std::max<int64_t>(kCheapGrain / std::max<int64_t>(kRowsPerBlock * width, 1), 1),
                [&](int64_t begin, int64_t end) {
                  for (int64_t b = begin; b < end; ++b) {
                    double *acc = partial.data() + b * width;
                    for (int64_t r = b * kRowsPerBlock;
                         r < std::min(rows_, (b + 1) * kRowsPerBlock); ++r)
                      add(r, acc);
                  }
                });
    std::vector<double> sums(static_cast<size_t>(width), 0.0);
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t k = 0; k < width; ++k)
        sums[k] += partial[b * width + k];
    return sums;
  }

  unsigned x_, running_;
  const StepContext *step_;
  int threads_;
  int64_t channels_ = 0, rows_ = 0;
  double epsilon_ = 0;
  std::vector<double> mean_, var_, inv_;
};

// y = scale * (x - mean) * inv + bias.
template <typename T> class BatchNormKernel final : public BatchNormKernelBase<T> {
public:
  explicit BatchNormKernel(const KernelSpec &spec) : BatchNormKernelBase<T>(spec, 0, 3) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    if (auto err = this->normalizingStatistics(inputs))
      return err;
    this->normalize(inputs, outputs);
    return llvm::Error::success();
  }
};

// (x, scale, bias, running_mean, running_var, moments): y with the statistics of moments.
template <typename T> class BatchNormApplyKernel final : public BatchNormKernelBase<T> {
public:
  explicit BatchNormApplyKernel(const KernelSpec &spec) : BatchNormKernelBase<T>(spec, 0, 3) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    this->momentsStatistics(inputs, 5);
    this->normalize(inputs, outputs);
    return llvm::Error::success();
  }
};

// (dy, x, scale, running_mean, running_var, moments): dx = scale * inv * dy, the statistics
// held (their own gradient goes to moments).
template <typename T> class BatchNormApplyGradKernel final : public BatchNormKernelBase<T> {
public:
  explicit BatchNormApplyGradKernel(const KernelSpec &spec) : BatchNormKernelBase<T>(spec, 1, 3) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    this->momentsStatistics(inputs, 5);
    const T *dy = inputs[0]->dense.data<T>();
    const T *scale = inputs[2]->dense.data<T>();
    T *dx = outputs[0]->dense.data<T>();
    const int64_t channels = this->channels_;
    std::vector<double> a(static_cast<size_t>(channels));
    for (int64_t c = 0; c < channels; ++c)
      a[c] = static_cast<double>(scale[c]) * this->inv_[c];
    this->forEachRow([&](int64_t r) {
      const T *dyr = dy + r * channels;
      T *dxr = dx + r * channels;
#pragma omp simd
      for (int64_t c = 0; c < channels; ++c)
        dxr[c] = static_cast<T>(static_cast<double>(dyr[c]) * a[c]);
    });
    return llvm::Error::success();
  }
};

// (dy, x, running_mean, running_var, moments): sum of dy * xhat per channel.
template <typename T> class BatchNormApplyScaleGradKernel final : public BatchNormKernelBase<T> {
public:
  explicit BatchNormApplyScaleGradKernel(const KernelSpec &spec)
      : BatchNormKernelBase<T>(spec, 1, 2) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    this->momentsStatistics(inputs, 4);
    this->scaleGradient(inputs, outputs[0]->dense.data<T>());
    return llvm::Error::success();
  }
};

// (dy, x, scale, moments): [dmean, dmean_of_squares] per channel from sum(dy) and
// sum(dy * (x - mean)) (the reference kernel has the derivation); zero in evaluation.
template <typename T> class BatchNormApplyMomentsGradKernel final : public BatchNormKernelBase<T> {
public:
  explicit BatchNormApplyMomentsGradKernel(const KernelSpec &spec)
      : BatchNormKernelBase<T>(spec, 1, 3) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const int64_t channels = this->channels_;
    double *dmoments = outputs[0]->dense.data<double>();
    if (!this->training()) {
      std::fill(dmoments, dmoments + 2 * channels, 0.0);
      return llvm::Error::success();
    }
    this->momentsStatistics(inputs, 3);
    const T *scale = inputs[2]->dense.data<T>();
    std::vector<double> sums = this->gradientSums(inputs[0], inputs[1]);
    for (int64_t c = 0; c < channels; ++c) {
      double inv = this->inv_[c], inv3 = inv * inv * inv, s = static_cast<double>(scale[c]);
      double sumDy = sums[c], sumDyCentered = sums[channels + c];
      dmoments[c] = s * (-inv * sumDy + this->mean_[c] * inv3 * sumDyCentered);
      dmoments[channels + c] = -0.5 * s * inv3 * sumDyCentered;
    }
    return llvm::Error::success();
  }
};

// (dmoments, x): dx = (dmoments[0] + 2 x dmoments[1]) / rows per channel.
template <typename T> class BatchNormMomentsGradKernel final : public BatchNormKernelBase<T> {
public:
  explicit BatchNormMomentsGradKernel(const KernelSpec &spec)
      : BatchNormKernelBase<T>(spec, 1, 1) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const double *dm = inputs[0]->dense.data<double>();
    const T *x = inputs[1]->dense.data<T>();
    T *dx = outputs[0]->dense.data<T>();
    const int64_t channels = this->channels_;
    const double rows = static_cast<double>(this->rows_);
    std::vector<double> a(static_cast<size_t>(channels)), b(a);
    for (int64_t c = 0; c < channels; ++c) {
      a[c] = dm[c] / rows;
      b[c] = 2 * dm[channels + c] / rows;
    }
    this->forEachRow([&](int64_t r) {
      const T *xr = x + r * channels;
      T *dxr = dx + r * channels;
#pragma omp simd
      for (int64_t c = 0; c < channels; ++c)
        dxr[c] = static_cast<T>(a[c] + b[c] * static_cast<double>(xr[c]));
    });
    return llvm::Error::success();
  }
};

// (x): on one task with no towers the mean over the replicas is x itself.
template <typename T> class ReplicaMeanKernel final : public Kernel {
public:
  explicit ReplicaMeanKernel(const KernelSpec &spec)
      : elements_(spec.outputTypes[0].numElements()) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const T *x = inputs[0]->dense.data<T>();
    T *y = outputs[0]->dense.data<T>();
    if (x != y)
      std::copy(x, x + elements_, y);
    return llvm::Error::success();
  }

private:
  int64_t elements_;
};

// (x): [mean, mean of squares] per channel, summed and kept in double.
template <typename T> class BatchNormMomentsKernel final : public BatchNormKernelBase<T> {
public:
  explicit BatchNormMomentsKernel(const KernelSpec &spec) : BatchNormKernelBase<T>(spec, 0, 0) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const T *x = inputs[0]->dense.data<T>();
    const int64_t channels = this->channels_;
    std::vector<double> sums = this->channelSums(2, [&](int64_t r, double *acc) {
      const T *xr = x + r * channels;
#pragma omp simd
      for (int64_t c = 0; c < channels; ++c) {
        double v = static_cast<double>(xr[c]);
        acc[c] += v;
        acc[channels + c] += v * v;
      }
    });
    double *moments = outputs[0]->dense.data<double>();
    const double rows = static_cast<double>(this->rows_);
    for (int64_t k = 0; k < 2 * channels; ++k)
      moments[k] = sums[k] / rows;
    return llvm::Error::success();
  }
};

// (running_mean, running_var, moments): writes the two variables (the inputs themselves) in
// training, from the moments of the step's global batch of values_per_example × B values per
// channel.
template <typename T> class BatchNormUpdateKernel final : public Kernel {
public:
  explicit BatchNormUpdateKernel(const KernelSpec &spec)
      : step_(spec.step), globalBatch_(spec.globalBatch), batch_(spec.batch),
        momentum_(spec.attrs.getFloat("momentum")),
        perExample_(spec.attrs.getInt("values_per_example")),
        channels_(spec.inputTypes[0].numElements()) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *>) override {
    if (step_ && !step_->training())
      return llvm::Error::success();
    const double count = static_cast<double>(globalBatch_ ? *globalBatch_ : batch_) *
                         static_cast<double>(perExample_);
    if (!(count > 1))
      return ir::makeError("batch_norm in a training step needs more than one value per channel, "
                           "the batch has " +
                           llvm::Twine(static_cast<int64_t>(count)));
    Tensor meanVar = inputs[0]->dense, varVar = inputs[1]->dense;
    T *mean = meanVar.data<T>();
    T *var = varVar.data<T>();
    const double *moments = inputs[2]->dense.data<double>();
    for (int64_t c = 0; c < channels_; ++c) {
      double m = moments[c];
      double biased = moments[channels_ + c] - m * m;
      mean[c] = static_cast<T>((1 - momentum_) * static_cast<double>(mean[c]) + momentum_ * m);
      var[c] = static_cast<T>((1 - momentum_) * static_cast<double>(var[c]) +
                              momentum_ * biased * count / (count - 1));
    }
    return llvm::Error::success();
  }

private:
  const StepContext *step_;
  const int64_t *globalBatch_;
  int64_t batch_;
  double momentum_;
  int64_t perExample_, channels_;
};

// (dy, x, scale, running_mean, running_var): dx = scale * inv * (dy - mean(dy) - xhat *
// mean(dy * xhat)) in training, scale * inv * dy in evaluation.
template <typename T> class BatchNormGradKernel final : public BatchNormKernelBase<T> {
public:
  explicit BatchNormGradKernel(const KernelSpec &spec) : BatchNormKernelBase<T>(spec, 1, 3) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    if (auto err = this->normalizingStatistics(inputs))
      return err;
    const T *dy = inputs[0]->dense.data<T>();
    const T *x = inputs[1]->dense.data<T>();
    const T *scale = inputs[2]->dense.data<T>();
    T *dx = outputs[0]->dense.data<T>();
    const int64_t channels = this->channels_;
    const double *mean = this->mean_.data(), *inv = this->inv_.data();
    // dx = a * dy + b * x + d per channel: a = scale * inv, b = -a * inv * mean(dy * xhat),
    // d = -a * mean(dy) - b * mean.
    std::vector<double> a(static_cast<size_t>(channels)), b(a), d(a);
    std::vector<double> sums =
        this->training() ? this->gradientSums(inputs[0], inputs[1]) : std::vector<double>();
    const double rows = static_cast<double>(this->rows_);
    for (int64_t c = 0; c < channels; ++c) {
      a[c] = static_cast<double>(scale[c]) * inv[c];
      double meanDy = sums.empty() ? 0.0 : sums[c] / rows;
      double meanDyXhat = sums.empty() ? 0.0 : sums[channels + c] * inv[c] / rows;
      b[c] = -a[c] * inv[c] * meanDyXhat;
      d[c] = -a[c] * meanDy - b[c] * mean[c];
    }
    this->forEachRow([&](int64_t r) {
      const T *xr = x + r * channels, *dyr = dy + r * channels;
      T *dxr = dx + r * channels;
#pragma omp simd
      for (int64_t c = 0; c < channels; ++c)
        dxr[c] = static_cast<T>(a[c] * static_cast<double>(dyr[c]) +
                                b[c] * static_cast<double>(xr[c]) + d[c]);
    });
    return llvm::Error::success();
  }
};

// (dy, x, running_mean, running_var): sum of dy * xhat per channel.
template <typename T> class BatchNormScaleGradKernel final : public BatchNormKernelBase<T> {
public:
  explicit BatchNormScaleGradKernel(const KernelSpec &spec) : BatchNormKernelBase<T>(spec, 1, 2) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    if (auto err = this->normalizingStatistics(inputs))
      return err;
    this->scaleGradient(inputs, outputs[0]->dense.data<T>());
    return llvm::Error::success();
  }
};

// A batch_norm kernel K of the dtype of input `x`.
template <template <typename> class K>
KernelOrError makeBatchNorm(const KernelSpec &spec, unsigned x) {
  return withFloatType(spec, spec.inputTypes[x].dtype, [&](auto t) -> std::unique_ptr<Kernel> {
    return std::make_unique<K<decltype(t)>>(spec);
  });
}

} // namespace

void registerTrainingModeKernels(KernelRegistry &registry) {
  registry.add("dropout", makeDropout);
  registry.add("dropout_grad", makeDropout);
  registry.add("batch_norm",
               [](const KernelSpec &spec) { return makeBatchNorm<BatchNormKernel>(spec, 0); });
  registry.add("batch_norm_moments", [](const KernelSpec &spec) {
    return makeBatchNorm<BatchNormMomentsKernel>(spec, 0);
  });
  registry.add("batch_norm_update", [](const KernelSpec &spec) {
    return makeBatchNorm<BatchNormUpdateKernel>(spec, 0);
  });
  registry.add("batch_norm_grad",
               [](const KernelSpec &spec) { return makeBatchNorm<BatchNormGradKernel>(spec, 1); });
  registry.add("batch_norm_scale_grad", [](const KernelSpec &spec) {
    return makeBatchNorm<BatchNormScaleGradKernel>(spec, 1);
  });
  registry.add("batch_norm_apply",
               [](const KernelSpec &spec) { return makeBatchNorm<BatchNormApplyKernel>(spec, 0); });
  registry.add("batch_norm_apply_grad", [](const KernelSpec &spec) {
    return makeBatchNorm<BatchNormApplyGradKernel>(spec, 1);
  });
  registry.add("batch_norm_apply_scale_grad", [](const KernelSpec &spec) {
    return makeBatchNorm<BatchNormApplyScaleGradKernel>(spec, 1);
  });
  registry.add("batch_norm_apply_moments_grad", [](const KernelSpec &spec) {
    return makeBatchNorm<BatchNormApplyMomentsGradKernel>(spec, 1);
  });
  registry.add("batch_norm_moments_grad", [](const KernelSpec &spec) {
    return makeBatchNorm<BatchNormMomentsGradKernel>(spec, 1);
  });
  registry.add("replica_mean",
               [](const KernelSpec &spec) { return makeBatchNorm<ReplicaMeanKernel>(spec, 0); });
}

} // namespace prism::runtime::cpu
