// CPU kernels of the row-wise ops over the last dimension: softmax, log_softmax,
// softmax_cross_entropy, and their backward ops. Each row is a few contiguous passes (max, sum of
// exponentials, write) that vectorize; rows are spread over threads; sums are in double.
#include <limits>

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

// log(sum(exp(x))) over a row, shifted by the maximum so that exp cannot overflow.
template <typename T> PRISM_ALWAYS_INLINE T logSumExp(const T *x, int64_t n) {
  T most = rowMax(x, n);
  return most + static_cast<T>(std::log(sumExp(x, n, most)));
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
    const T lse = logSumExp(x, n);
    for (int64_t i = 0; i < n; ++i)
      y[i] = x[i] - lse;
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

// Labels are class indices; one outside [0, classes) is the caller's error, reported before
// anything is computed.
template <typename Label>
llvm::Error checkLabels(const Label *labels, int64_t rows, int64_t classes) {
  for (int64_t r = 0; r < rows; ++r)
    if (labels[r] < 0 || static_cast<int64_t>(labels[r]) >= classes)
      return ir::makeError("label " + llvm::Twine(static_cast<int64_t>(labels[r])) + " of row " +
                           llvm::Twine(r) + " is outside [0, " + llvm::Twine(classes) + ")");
  return llvm::Error::success();
}

// Σ lse(row) - row[label] over rows [begin, end).
template <typename T, typename Label>
PRISM_TARGET_CLONES double crossEntropySum(const T *logits, const Label *labels, int64_t classes,
                                           int64_t begin, int64_t end) {
  double sum = 0;
  for (int64_t r = begin; r < end; ++r) {
    const T *row = logits + r * classes;
    sum += static_cast<double>(logSumExp(row, classes) - row[labels[r]]);
  }
  return sum;
}

// perRow * (softmax(row) - onehot(label)) for rows [begin, end).
template <typename T, typename Label>
PRISM_TARGET_CLONES void crossEntropyGradRows(const T *logits, const Label *labels, T *out,
                                              int64_t classes, double perRow, int64_t begin,
                                              int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    T *dx = out + r * classes;
    scaledSoftmax(logits + r * classes, dx, classes, perRow);
    dx[labels[r]] -= static_cast<T>(perRow);
  }
}

// Mean over rows of -log_softmax(logits)[row, label]: each block of rows sums its losses, the
// block sums are added in block order.
template <typename T, typename Label> class CrossEntropyKernel final : public Kernel {
public:
  explicit CrossEntropyKernel(const KernelSpec &spec)
      : shape_(spec.inputTypes[0]), threads_(spec.threads),
        blockSums_(static_cast<size_t>(std::max(spec.threads, 1))) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const T *logits = inputs[0]->dense.data<T>();
    const Label *labels = inputs[1]->dense.data<Label>();
    int64_t rows = shape_.rows, classes = shape_.columns;
    if (auto err = checkLabels(labels, rows, classes))
      return err;
    int blocks = parallelBlocks(rows, threads_, shape_.grain());
    forEachBlock(rows, blocks, [&](int block, int64_t begin, int64_t end) {
      blockSums_[block] = crossEntropySum(logits, labels, classes, begin, end);
    });
    double total = 0;
    for (int block = 0; block < blocks && rows > 0; ++block)
      total += blockSums_[block];
    *outputs[0]->dense.data<T>() = static_cast<T>(rows ? total / static_cast<double>(rows) : 0.0);
    return llvm::Error::success();
  }

private:
  RowShape shape_;
  int threads_;
  std::vector<double> blockSums_;
};

// dloss * (softmax(logits) - onehot(labels)) / rows.
template <typename T, typename Label> class CrossEntropyGradKernel final : public Kernel {
public:
  explicit CrossEntropyGradKernel(const KernelSpec &spec)
      : shape_(spec.inputTypes[1]), lossType_(spec.inputTypes[0].dtype), threads_(spec.threads) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const Tensor &lossGrad = inputs[0]->dense;
    double dloss = lossType_ == ir::DType::F64 ? *lossGrad.data<double>()
                                               : static_cast<double>(*lossGrad.data<float>());
    const T *logits = inputs[1]->dense.data<T>();
    const Label *labels = inputs[2]->dense.data<Label>();
    T *out = outputs[0]->dense.data<T>();
    int64_t rows = shape_.rows, classes = shape_.columns;
    if (auto err = checkLabels(labels, rows, classes))
      return err;
    const double perRow = rows ? dloss / static_cast<double>(rows) : 0.0;
    parallelFor(rows, threads_, shape_.grain(), [&](int64_t begin, int64_t end) {
      crossEntropyGradRows(logits, labels, out, classes, perRow, begin, end);
    });
    return llvm::Error::success();
  }

private:
  RowShape shape_;
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

} // namespace

void registerLossKernels(KernelRegistry &registry) {
  registry.add("softmax", makeRowwise<Softmax>);
  registry.add("log_softmax", makeRowwise<LogSoftmax>);
  registry.add("softmax_grad", makeRowwise<SoftmaxGrad>);
  registry.add("log_softmax_grad", makeRowwise<LogSoftmaxGrad>);
  registry.add("softmax_cross_entropy", makeCrossEntropyLoss);
  registry.add("softmax_cross_entropy_grad", makeCrossEntropyGrad);
}

} // namespace prism::runtime::cpu
