// Reference kernels of dense layers and losses: matmul, batch_matmul, bias_add, softmax,
// log_softmax, softmax_cross_entropy and their backward ops. Row-wise ops work over the last
// dimension.
#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/reference/KernelSupport.h"

namespace prism::runtime::reference::kernels {
namespace {

// matmul and batch_matmul: op(a) · op(b) for each batch entry (matmul: one entry); an operand
// of rank 2 serves every entry.
llvm::Expected<KernelResults> matmulKernel(const KernelArgs &args) {
  const Tensor &a = args.operand(0), &b = args.operand(1);
  bool ta = args.attrs.getBool("transpose_a"), tb = args.attrs.getBool("transpose_b");
  Tensor out = zeroResult(args);
  int64_t ra = a.rank(), rb = b.rank(), rc = out.rank();
  int64_t m = out.shape()[rc - 2], n = out.shape()[rc - 1];
  int64_t k = a.shape()[ra - (ta ? 2 : 1)];
  int64_t entries = shapeElements(out.shape().drop_back(2));
  int64_t aStride = ra == 2 ? 0 : m * k, bStride = rb == 2 ? 0 : k * n;
  for (int64_t e = 0; e < entries; ++e) {
    const double *ae = a.data().data() + e * aStride, *be = b.data().data() + e * bStride;
    // Element (row, col) of op(a) and op(b).
    auto opA = [&](int64_t i, int64_t j) { return ta ? ae[j * m + i] : ae[i * k + j]; };
    auto opB = [&](int64_t i, int64_t j) { return tb ? be[j * k + i] : be[i * n + j]; };
    double *ce = out.data().data() + e * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += opA(i, p) * opB(p, j);
        ce[i * n + j] = sum;
      }
  }
  return single(std::move(out));
}

llvm::Expected<KernelResults> biasAddKernel(const KernelArgs &args) {
  const Tensor &x = args.operand(0), &bias = args.operand(1);
  Tensor out = x;
  int64_t d = bias.numElements();
  for (size_t i = 0; i < out.data().size(); ++i)
    out.data()[i] += bias.data()[i % d];
  return single(std::move(out));
}

// Calls fn(first element, row length) for each row over the last dimension.
template <typename F> void forEachRow(const Tensor &t, F fn) {
  int64_t d = t.shape().back();
  int64_t rows = d == 0 ? 0 : t.numElements() / d;
  for (int64_t r = 0; r < rows; ++r)
    fn(r * d, d);
}

// log(sum(exp(x[begin .. begin + d)))), shifted by the maximum so that exp cannot overflow.
double logSumExp(const std::vector<double> &x, int64_t begin, int64_t d) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < d; ++j)
    mx = std::max(mx, x[begin + j]);
  double sum = 0;
  for (int64_t j = 0; j < d; ++j)
    sum += std::exp(x[begin + j] - mx);
  return mx + std::log(sum);
}

llvm::Expected<KernelResults> logSoftmaxKernel(const KernelArgs &args) {
  Tensor out = args.operand(0);
  forEachRow(out, [&](int64_t begin, int64_t d) {
    double lse = logSumExp(out.data(), begin, d);
    for (int64_t j = 0; j < d; ++j)
      out.data()[begin + j] -= lse;
  });
  return single(std::move(out));
}

llvm::Expected<KernelResults> softmaxKernel(const KernelArgs &args) {
  auto logs = logSoftmaxKernel(args);
  if (!logs)
    return logs.takeError();
  for (double &v : (*logs)[0].data())
    v = std::exp(v);
  return logs;
}

llvm::Expected<KernelResults> softmaxGradKernel(const KernelArgs &args) {
  const Tensor &dy = args.operand(0), &y = args.operand(1);
  Tensor out = zeroResult(args);
  forEachRow(y, [&](int64_t begin, int64_t d) {
    double dot = 0;
    for (int64_t j = 0; j < d; ++j)
      dot += dy.data()[begin + j] * y.data()[begin + j];
    for (int64_t j = 0; j < d; ++j)
      out.data()[begin + j] = y.data()[begin + j] * (dy.data()[begin + j] - dot);
  });
  return single(std::move(out));
}

llvm::Expected<KernelResults> logSoftmaxGradKernel(const KernelArgs &args) {
  const Tensor &dy = args.operand(0), &y = args.operand(1);
  Tensor out = zeroResult(args);
  forEachRow(y, [&](int64_t begin, int64_t d) {
    double sum = 0;
    for (int64_t j = 0; j < d; ++j)
      sum += dy.data()[begin + j];
    for (int64_t j = 0; j < d; ++j)
      out.data()[begin + j] = dy.data()[begin + j] - std::exp(y.data()[begin + j]) * sum;
  });
  return single(std::move(out));
}

llvm::Error checkLabels(const Tensor &labels, int64_t classes) {
  for (size_t r = 0; r < labels.data().size(); ++r) {
    double label = labels.data()[r];
    if (label < 0 || label >= static_cast<double>(classes))
      return kernelError("label " + llvm::Twine(static_cast<int64_t>(label)) + " of row " +
                         llvm::Twine(r) + " is outside [0, " + llvm::Twine(classes) + ")");
  }
  return llvm::Error::success();
}

// Mean over rows of -log_softmax(logits)[row, label]; 0 for no rows.
llvm::Expected<KernelResults> crossEntropyKernel(const KernelArgs &args) {
  const Tensor &logits = args.operand(0), &labels = args.operand(1);
  int64_t rows = logits.shape()[0], classes = logits.shape()[1];
  if (auto e = checkLabels(labels, classes))
    return std::move(e);
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = static_cast<int64_t>(labels.data()[r]);
    total += logSumExp(logits.data(), r * classes, classes) - logits.data()[r * classes + label];
  }
  return single(Tensor::scalar(rows ? total / static_cast<double>(rows) : 0.0, args.resultDType()));
}

// dloss * (softmax(logits) - onehot(labels)) / rows
llvm::Expected<KernelResults> crossEntropyGradKernel(const KernelArgs &args) {
  double dloss = args.operand(0).data()[0];
  const Tensor &logits = args.operand(1), &labels = args.operand(2);
  int64_t rows = logits.shape()[0], classes = logits.shape()[1];
  if (auto e = checkLabels(labels, classes))
    return std::move(e);
  Tensor out = zeroResult(args);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t begin = r * classes;
    double lse = logSumExp(logits.data(), begin, classes);
    int64_t label = static_cast<int64_t>(labels.data()[r]);
    for (int64_t j = 0; j < classes; ++j) {
      double p = std::exp(logits.data()[begin + j] - lse) - (j == label ? 1.0 : 0.0);
      out.data()[begin + j] = dloss * p / static_cast<double>(rows);
    }
  }
  return single(std::move(out));
}

} // namespace

void registerNeuralNetKernels(KernelTable &t) {
  t["matmul"] = {matmulKernel};
  t["batch_matmul"] = {matmulKernel};
  t["bias_add"] = {biasAddKernel};
  t["softmax"] = {softmaxKernel};
  t["log_softmax"] = {logSoftmaxKernel};
  t["softmax_cross_entropy"] = {crossEntropyKernel};
  t["softmax_grad"] = {softmaxGradKernel};
  t["log_softmax_grad"] = {logSoftmaxGradKernel};
  t["softmax_cross_entropy_grad"] = {crossEntropyGradKernel};
}

} // namespace prism::runtime::reference::kernels
