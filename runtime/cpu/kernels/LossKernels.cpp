// CPU kernels of the row-wise ops over the last dimension: softmax, log_softmax, layer_norm,
// softmax_cross_entropy, and their backward ops; and of sigmoid_cross_entropy. Each row is a few
// contiguous passes (max, sum of exponentials, write) that vectorize; rows are spread over
// threads; sums are in double.
#include <algorithm>
#include <limits>

#include "ir/OpTable.h"
#include "runtime/cpu/kernels/DTypeDispatch.h"
#include "runtime/cpu/kernels/FastMath.h"
#include "runtime/cpu/kernels/Parallel.h"
#include "runtime/cpu/kernels/RowSum.h"
#include "runtime/cpu/kernels/TargetClones.h"

namespace prism::runtime::cpu {
namespace {

template <typename T> PRISM_ALWAYS_INLINE T rowMax(const T *__restrict x, int64_t n) {
  T most = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : most)
  for (int64_t i = 0; i < n; ++i)
    most = x[i] > most ? x[i] : most;
  return most;
}

// sum(exp(x - shift)) over a row.
template <typename T> PRISM_ALWAYS_INLINE double sumExp(const T *__restrict x, int64_t n, T shift) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i)
    sum += static_cast<double>(fastmath::exp(x[i] - shift));
  return sum;
}

// log(sum(exp(x))) over a row as most + logSum, shifted by the maximum so that exp cannot
// overflow. The two parts stay apart: x[i] - lse computed as (x[i] - most) - logSum keeps the
// low bits that x[i] - (most + logSum) loses when |most| is large (x ~ 1e4).
template <typename T> struct LogSumExp {
  T most;
  T logSum;
};
template <typename T> PRISM_ALWAYS_INLINE LogSumExp<T> logSumExp(const T *x, int64_t n) {
  T most = rowMax(x, n);
  return {most, static_cast<T>(std::log(sumExp(x, n, most)))};
}

// y = scale * softmax(x) over a row: exponentials shifted by the row's maximum, summed in
// double.
template <typename T>
PRISM_ALWAYS_INLINE void scaledSoftmax(const T *__restrict x, T *__restrict y, int64_t n,
                                       double scale) {
  T most = rowMax(x, n);
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    T e = fastmath::exp(x[i] - most);
    y[i] = e;
    sum += static_cast<double>(e);
  }
  const T factor = static_cast<T>(scale / sum);
  for (int64_t i = 0; i < n; ++i)
    y[i] *= factor;
}

// The rows of a [..., C] tensor: `rows` of `columns` elements.
struct RowShape {
  int64_t rows = 0, columns = 0;
  explicit RowShape(const ir::TensorType &type) {
    columns = type.dims.empty() ? 1 : type.dims.back();
    rows = columns == 0 ? 0 : type.numElements() / columns;
  }
  // Rows per parallel block: enough exponentials to pay for a thread.
  int64_t grain() const {
    return std::max<int64_t>(1, kCostlyGrain / std::max<int64_t>(columns, 1));
  }
};

// RowOp::apply on rows [begin, end) of `columns` elements (b may be null).
template <typename RowOp, typename T>
PRISM_TARGET_CLONES void applyRows(const T *a, const T *b, T *out, int64_t columns, int64_t begin,
                                   int64_t end) {
  for (int64_t r = begin; r < end; ++r)
    RowOp::apply(a + r * columns, b ? b + r * columns : nullptr, out + r * columns, columns);
}

// A kernel that maps each row of its inputs to the same row of its output with `RowOp`:
// RowOp::apply(inputs' row pointers, output row, columns).
template <typename T, typename RowOp> class RowwiseKernel final : public Kernel {
public:
  explicit RowwiseKernel(const KernelSpec &spec)
      : shape_(spec.outputTypes[0]), threads_(spec.threads) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const T *a = inputs[0]->dense.data<T>();
    const T *b = inputs.size() > 1 ? inputs[1]->dense.data<T>() : nullptr;
    T *out = outputs[0]->dense.data<T>();
    int64_t columns = shape_.columns;
    parallelFor(shape_.rows, threads_, shape_.grain(), [&](int64_t begin, int64_t end) {
      applyRows<RowOp>(a, b, out, columns, begin, end);
    });
    return llvm::Error::success();
  }

private:
  RowShape shape_;
  int threads_;
};

struct Softmax {
  template <typename T>
  static void apply(const T *__restrict x, const T *, T *__restrict y, int64_t n) {
    scaledSoftmax(x, y, n, 1.0);
  }
};

struct LogSoftmax {
  template <typename T>
  static void apply(const T *__restrict x, const T *, T *__restrict y, int64_t n) {
    const LogSumExp<T> lse = logSumExp(x, n);
    for (int64_t i = 0; i < n; ++i)
      y[i] = (x[i] - lse.most) - lse.logSum;
  }
};

// (dy, y) with y = softmax(x): y * (dy - sum(dy * y)).
struct SoftmaxGrad {
  template <typename T>
  static void apply(const T *__restrict dy, const T *__restrict y, T *__restrict dx, int64_t n) {
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t i = 0; i < n; ++i)
      dot += static_cast<double>(dy[i] * y[i]);
    const T d = static_cast<T>(dot);
    for (int64_t i = 0; i < n; ++i)
      dx[i] = y[i] * (dy[i] - d);
  }
};

// (dy, y) with y = log_softmax(x): dy - exp(y) * sum(dy).
struct LogSoftmaxGrad {
  template <typename T>
  static void apply(const T *__restrict dy, const T *__restrict y, T *__restrict dx, int64_t n) {
    const T s = static_cast<T>(sumAsDouble(dy, n));
    for (int64_t i = 0; i < n; ++i)
      dx[i] = dy[i] - fastmath::exp(y[i]) * s;
  }
};

template <typename RowOp> KernelOrError makeRowwise(const KernelSpec &spec) {
  return withFloatType(spec, spec.outputTypes[0].dtype, [&](auto t) {
    return std::unique_ptr<Kernel>(new RowwiseKernel<decltype(t), RowOp>(spec));
  });
}

// softmax_cross_entropy's ignore_index: positions with this label count for nothing.
struct IgnoredLabel {
  bool active = false;
  int64_t label = 0;
  explicit IgnoredLabel(const ir::AttrMap &attrs) {
    if (const ir::Attr *ignore = attrs.find(ir::kIgnoreIndexAttr)) {
      active = true;
      label = ignore->getInt();
    }
  }
  template <typename Label> bool skips(Label l) const {
    return active && static_cast<int64_t>(l) == label;
  }
};

// Labels are class indices (or the ignored label); one outside [0, classes) is the caller's
// error, reported before anything is computed. Returns how many positions count.
template <typename Label>
llvm::Expected<int64_t> countLabels(const Label *labels, int64_t rows, int64_t classes,
                                    const IgnoredLabel &ignored) {
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (ignored.skips(labels[r]))
      continue;
    if (labels[r] < 0 || static_cast<int64_t>(labels[r]) >= classes)
      return ir::makeError("label " + llvm::Twine(static_cast<int64_t>(labels[r])) + " of row " +
                           llvm::Twine(r) + " is outside [0, " + llvm::Twine(classes) + ")");
    ++counted;
  }
  return counted;
}

// Σ lse(row) - row[label] over the counted rows of [begin, end).
template <typename T, typename Label>
PRISM_TARGET_CLONES double crossEntropySum(const T *logits, const Label *labels, int64_t classes,
                                           IgnoredLabel ignored, int64_t begin, int64_t end) {
  double sum = 0;
  for (int64_t r = begin; r < end; ++r) {
    if (ignored.skips(labels[r]))
      continue;
    const T *row = logits + r * classes;
    const LogSumExp<T> lse = logSumExp(row, classes);
    sum += static_cast<double>(lse.most - row[labels[r]]) + static_cast<double>(lse.logSum);
  }
  return sum;
}

// perRow * (softmax(row) - onehot(label)) for rows [begin, end); 0 on ignored rows.
template <typename T, typename Label>
PRISM_TARGET_CLONES void crossEntropyGradRows(const T *logits, const Label *labels, T *out,
                                              int64_t classes, IgnoredLabel ignored, double perRow,
                                              int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    T *dx = out + r * classes;
    if (ignored.skips(labels[r])) {
      std::fill(dx, dx + classes, T(0));
      continue;
    }
    scaledSoftmax(logits + r * classes, dx, classes, perRow);
    dx[labels[r]] -= static_cast<T>(perRow);
  }
}

// Mean over the counted positions (rows of [..., classes]) of -log_softmax(logits)[row, label]:
// each block of rows sums its losses, the block sums are added in block order.
template <typename T, typename Label> class CrossEntropyKernel final : public Kernel {
public:
  explicit CrossEntropyKernel(const KernelSpec &spec)
      : shape_(spec.inputTypes[0]), ignored_(spec.attrs), threads_(spec.threads),
        blockSums_(static_cast<size_t>(std::max(spec.threads, 1))) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const T *logits = inputs[0]->dense.data<T>();
    const Label *labels = inputs[1]->dense.data<Label>();
    int64_t rows = shape_.rows, classes = shape_.columns;
    auto counted = countLabels(labels, rows, classes, ignored_);
    if (!counted)
      return counted.takeError();
    int blocks = parallelBlocks(rows, threads_, shape_.grain());
    forEachBlock(rows, blocks, [&](int block, int64_t begin, int64_t end) {
      blockSums_[block] = crossEntropySum(logits, labels, classes, ignored_, begin, end);
    });
    double total = 0;
    for (int block = 0; block < blocks && rows > 0; ++block)
      total += blockSums_[block];
    *outputs[0]->dense.data<T>() =
        static_cast<T>(*counted ? total / static_cast<double>(*counted) : 0.0);
    return llvm::Error::success();
  }

private:
  RowShape shape_;
  IgnoredLabel ignored_;
  int threads_;
  std::vector<double> blockSums_;
};

// The scalar upstream gradient of a loss, as a double.
double lossGradient(const RuntimeValue &value, ir::DType dtype) {
  return dtype == ir::DType::F64 ? *value.dense.data<double>()
                                 : static_cast<double>(*value.dense.data<float>());
}

// dloss * (softmax(logits) - onehot(labels)) / counted positions.
template <typename T, typename Label> class CrossEntropyGradKernel final : public Kernel {
public:
  explicit CrossEntropyGradKernel(const KernelSpec &spec)
      : shape_(spec.inputTypes[1]), ignored_(spec.attrs), lossType_(spec.inputTypes[0].dtype),
        threads_(spec.threads) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    double dloss = lossGradient(*inputs[0], lossType_);
    const T *logits = inputs[1]->dense.data<T>();
    const Label *labels = inputs[2]->dense.data<Label>();
    T *out = outputs[0]->dense.data<T>();
    int64_t rows = shape_.rows, classes = shape_.columns;
    auto counted = countLabels(labels, rows, classes, ignored_);
    if (!counted)
      return counted.takeError();
    const double perRow = *counted ? dloss / static_cast<double>(*counted) : 0.0;
    parallelFor(rows, threads_, shape_.grain(), [&](int64_t begin, int64_t end) {
      crossEntropyGradRows(logits, labels, out, classes, ignored_, perRow, begin, end);
    });
    return llvm::Error::success();
  }

private:
  RowShape shape_;
  IgnoredLabel ignored_;
  ir::DType lossType_;
  int threads_;
};

template <template <typename, typename> class K>
KernelOrError makeCrossEntropy(const KernelSpec &spec, const ir::TensorType &logits,
                               const ir::TensorType &labels) {
  return withFloatType(spec, logits.dtype, [&](auto t) -> KernelOrError {
    using T = decltype(t);
    switch (labels.dtype) {
    case ir::DType::I32:
      return std::unique_ptr<Kernel>(new K<T, int32_t>(spec));
    case ir::DType::I64:
      return std::unique_ptr<Kernel>(new K<T, int64_t>(spec));
    default:
      return unsupportedDType(spec, labels.dtype, "labels of i32 or i64");
    }
  });
}

KernelOrError makeCrossEntropyLoss(const KernelSpec &spec) {
  return makeCrossEntropy<CrossEntropyKernel>(spec, spec.inputTypes[0], spec.inputTypes[1]);
}

KernelOrError makeCrossEntropyGrad(const KernelSpec &spec) {
  if (!ir::isFloat(spec.inputTypes[0].dtype))
    return unsupportedDType(spec, spec.inputTypes[0].dtype, "a loss gradient of f32 or f64");
  return makeCrossEntropy<CrossEntropyGradKernel>(spec, spec.inputTypes[1], spec.inputTypes[2]);
}

// max(x, 0) - x z + log(1 + e^-|x|), branch-free. log1p(e) as log(u) e / (u - 1), u = 1 + e,
// which stays accurate where 1 + e rounds (Goldberg's correction), and is e where u is 1.
template <typename T> PRISM_ALWAYS_INLINE T sigmoidCrossEntropy(T x, T z) {
  T e = fastmath::exp(-std::abs(x));
  T u = T(1) + e, d = u - T(1);
  T softplus = d == T(0) ? e : fastmath::log(u) * (e / d);
  return std::max(x, T(0)) - x * z + softplus;
}

template <typename T>
PRISM_TARGET_CLONES double sigmoidCrossEntropySum(const T *x, const T *z, int64_t begin,
                                                  int64_t end) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = begin; i < end; ++i)
    sum += static_cast<double>(sigmoidCrossEntropy(x[i], z[i]));
  return sum;
}

template <typename T>
PRISM_TARGET_CLONES void sigmoidCrossEntropyGradRange(const T *x, const T *z, T *out, T scale,
                                                      int64_t begin, int64_t end) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i)
    out[i] = scale * (fastmath::sigmoid(x[i]) - z[i]);
}

// Mean over elements: each block sums its elements in double, block sums added in block order.
template <typename T> class SigmoidCrossEntropyKernel final : public Kernel {
public:
  explicit SigmoidCrossEntropyKernel(const KernelSpec &spec)
      : elements_(spec.inputTypes[0].numElements()), threads_(spec.threads),
        blockSums_(static_cast<size_t>(std::max(spec.threads, 1))) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const T *x = inputs[0]->dense.data<T>();
    const T *z = inputs[1]->dense.data<T>();
    int blocks = parallelBlocks(elements_, threads_, kCostlyGrain);
    forEachBlock(elements_, blocks, [&](int block, int64_t begin, int64_t end) {
      blockSums_[block] = sigmoidCrossEntropySum(x, z, begin, end);
    });
    double total = 0;
    for (int block = 0; block < blocks && elements_ > 0; ++block)
      total += blockSums_[block];
    *outputs[0]->dense.data<T>() =
        static_cast<T>(elements_ ? total / static_cast<double>(elements_) : 0.0);
    return llvm::Error::success();
  }

private:
  int64_t elements_;
  int threads_;
  std::vector<double> blockSums_;
};

// dloss * (sigmoid(x) - z) / elements.
template <typename T> class SigmoidCrossEntropyGradKernel final : public Kernel {
public:
  explicit SigmoidCrossEntropyGradKernel(const KernelSpec &spec)
      : elements_(spec.inputTypes[1].numElements()), lossType_(spec.inputTypes[0].dtype),
        threads_(spec.threads) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    double dloss = lossGradient(*inputs[0], lossType_);
    const T scale = static_cast<T>(elements_ ? dloss / static_cast<double>(elements_) : 0.0);
    const T *x = inputs[1]->dense.data<T>();
    const T *z = inputs[2]->dense.data<T>();
    T *out = outputs[0]->dense.data<T>();
    parallelFor(elements_, threads_, kCostlyGrain, [&](int64_t begin, int64_t end) {
      sigmoidCrossEntropyGradRange(x, z, out, scale, begin, end);
    });
    return llvm::Error::success();
  }

private:
  int64_t elements_;
  ir::DType lossType_;
  int threads_;
};

// A row's mean and 1 / sqrt(variance + epsilon), the (biased) variance taken around the mean in
// a second pass, both in double.
struct RowMoments {
  double mean = 0, rstd = 0;
};

template <typename T>
PRISM_ALWAYS_INLINE RowMoments rowMoments(const T *__restrict x, int64_t n, double epsilon) {
  RowMoments m;
  m.mean = sumAsDouble(x, n) / static_cast<double>(n);
  const double mean = m.mean;
  double squares = 0;
#pragma omp simd reduction(+ : squares)
  for (int64_t i = 0; i < n; ++i) {
    double d = static_cast<double>(x[i]) - mean;
    squares += d * d;
  }
  m.rstd = 1 / std::sqrt(squares / static_cast<double>(n) + epsilon);
  return m;
}

// xhat = (x - mean) * rstd in T. The mean is split into T's nearest value and the rest, so that
// rows far from 0 with a small spread (where x - mean cancels) keep their accuracy.
template <typename T> struct Normalizer {
  T meanHi, meanLo, rstd;
  explicit Normalizer(const RowMoments &m)
      : meanHi(static_cast<T>(m.mean)),
        meanLo(static_cast<T>(m.mean - static_cast<double>(meanHi))), rstd(static_cast<T>(m.rstd)) {
  }
  PRISM_ALWAYS_INLINE T operator()(T x) const { return ((x - meanHi) - meanLo) * rstd; }
};

// y = gamma * (x - mean) * rstd + beta for rows [begin, end) of n elements.
template <typename T>
PRISM_TARGET_CLONES void layerNormRows(const T *x, const T *gamma, const T *beta, T *y, int64_t n,
                                       double epsilon, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const T *__restrict row = x + r * n;
    T *__restrict out = y + r * n;
    const Normalizer<T> xhat(rowMoments(row, n, epsilon));
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      out[i] = gamma[i] * xhat(row[i]) + beta[i];
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, for rows [begin, end).
template <typename T>
PRISM_TARGET_CLONES void layerNormGradRows(const T *dy, const T *x, const T *gamma, T *dx,
                                           int64_t n, double epsilon, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const T *__restrict dyRow = dy + r * n;
    const T *__restrict row = x + r * n;
    T *__restrict out = dx + r * n;
    const Normalizer<T> xhat(rowMoments(row, n, epsilon));
    double sumG = 0, sumGx = 0;
#pragma omp simd reduction(+ : sumG, sumGx)
    for (int64_t i = 0; i < n; ++i) {
      T g = dyRow[i] * gamma[i];
      sumG += static_cast<double>(g);
      sumGx += static_cast<double>(g * xhat(row[i]));
    }
    const T meanG = static_cast<T>(sumG / static_cast<double>(n));
    const T meanGx = static_cast<T>(sumGx / static_cast<double>(n));
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      out[i] = xhat.rstd * (dyRow[i] * gamma[i] - meanG - xhat(row[i]) * meanGx);
  }
}

// partial[i] += dy * xhat over rows [begin, end), in double.
template <typename T>
PRISM_TARGET_CLONES void layerNormGammaGradRows(const T *dy, const T *x, double *partial, int64_t n,
                                                double epsilon, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const T *__restrict dyRow = dy + r * n;
    const T *__restrict row = x + r * n;
    const Normalizer<T> xhat(rowMoments(row, n, epsilon));
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      partial[i] += static_cast<double>(dyRow[i] * xhat(row[i]));
  }
}

// layer_norm and layer_norm_grad: rows spread over threads, each a few vectorized passes.
template <typename T, bool Backward> class LayerNormKernel final : public Kernel {
public:
  explicit LayerNormKernel(const KernelSpec &spec)
      : shape_(spec.outputTypes[0]), epsilon_(spec.attrs.getFloat("epsilon")),
        threads_(spec.threads) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const T *a = inputs[0]->dense.data<T>();
    const T *b = inputs[1]->dense.data<T>();
    const T *c = inputs[2]->dense.data<T>();
    T *out = outputs[0]->dense.data<T>();
    int64_t n = shape_.columns;
    parallelFor(shape_.rows, threads_, shape_.grain(), [&](int64_t begin, int64_t end) {
      if constexpr (Backward) // (dy, x, gamma)
        layerNormGradRows(a, b, c, out, n, epsilon_, begin, end);
      else // (x, gamma, beta)
        layerNormRows(a, b, c, out, n, epsilon_, begin, end);
    });
    return llvm::Error::success();
  }

private:
  RowShape shape_;
  double epsilon_;
  int threads_;
};

// layer_norm_gamma_grad: a sum over rows, so each block of rows has its own partial sums
// (allocated here) and the blocks are added in block order.
template <typename T> class LayerNormGammaGradKernel final : public Kernel {
public:
  explicit LayerNormGammaGradKernel(const KernelSpec &spec)
      : shape_(spec.inputTypes[1]), epsilon_(spec.attrs.getFloat("epsilon")),
        threads_(spec.threads),
        partials_(static_cast<size_t>(std::max(spec.threads, 1) * shape_.columns)) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const T *dy = inputs[0]->dense.data<T>();
    const T *x = inputs[1]->dense.data<T>();
    T *out = outputs[0]->dense.data<T>();
    int64_t n = shape_.columns;
    std::fill(partials_.begin(), partials_.end(), 0.0);
    int blocks = parallelBlocks(shape_.rows, threads_, shape_.grain());
    forEachBlock(shape_.rows, blocks, [&](int block, int64_t begin, int64_t end) {
      layerNormGammaGradRows(dy, x, partials_.data() + block * n, n, epsilon_, begin, end);
    });
    for (int64_t i = 0; i < n; ++i) {
      double sum = 0;
      for (int block = 0; block < blocks; ++block)
        sum += partials_[static_cast<size_t>(block * n + i)];
      out[i] = static_cast<T>(sum);
    }
    return llvm::Error::success();
  }

private:
  RowShape shape_;
  double epsilon_;
  int threads_;
  std::vector<double> partials_;
};

template <template <typename> class K> KernelOrError makeFloatKernel(const KernelSpec &spec) {
  return withFloatType(spec, spec.outputTypes[0].dtype,
                       [&](auto t) { return std::unique_ptr<Kernel>(new K<decltype(t)>(spec)); });
}

template <typename T> using LayerNormForward = LayerNormKernel<T, false>;
template <typename T> using LayerNormBackward = LayerNormKernel<T, true>;

KernelOrError makeSigmoidCrossEntropyGrad(const KernelSpec &spec) {
  if (!ir::isFloat(spec.inputTypes[0].dtype))
    return unsupportedDType(spec, spec.inputTypes[0].dtype, "a loss gradient of f32 or f64");
  return makeFloatKernel<SigmoidCrossEntropyGradKernel>(spec);
}

} // namespace

void registerLossKernels(KernelRegistry &registry) {
  registry.add("softmax", makeRowwise<Softmax>);
  registry.add("log_softmax", makeRowwise<LogSoftmax>);
  registry.add("softmax_grad", makeRowwise<SoftmaxGrad>);
  registry.add("log_softmax_grad", makeRowwise<LogSoftmaxGrad>);
  registry.add("softmax_cross_entropy", makeCrossEntropyLoss);
  registry.add("softmax_cross_entropy_grad", makeCrossEntropyGrad);
  registry.add("sigmoid_cross_entropy", makeFloatKernel<SigmoidCrossEntropyKernel>);
  registry.add("sigmoid_cross_entropy_grad", makeSigmoidCrossEntropyGrad);
  registry.add("layer_norm", makeFloatKernel<LayerNormForward>);
  registry.add("layer_norm_grad", makeFloatKernel<LayerNormBackward>);
  registry.add("layer_norm_gamma_grad", makeFloatKernel<LayerNormGammaGradKernel>);
}

} // namespace prism::runtime::cpu
