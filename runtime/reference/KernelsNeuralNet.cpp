// Reference kernels of dense layers, normalization and losses: matmul, batch_matmul, bias_add,
// softmax, log_softmax, layer_norm, softmax_cross_entropy, sigmoid_cross_entropy and their
// backward ops. Row-wise ops work over the last dimension.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "ir/OpTable.h"
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

// The label that counts for nothing (softmax_cross_entropy's ignore_index), when there is one.
std::optional<double> ignoredLabel(const KernelArgs &args) {
  if (const ir::Attr *ignore = args.attrs.find(ir::kIgnoreIndexAttr))
    return static_cast<double>(ignore->getInt());
  return std::nullopt;
}

// The positions counted: labels other than the ignored one, each checked to be a class index.
llvm::Expected<std::vector<bool>> countedPositions(const Tensor &labels, int64_t classes,
                                                   std::optional<double> ignored) {
  std::vector<bool> counted(labels.data().size());
  for (size_t r = 0; r < labels.data().size(); ++r) {
    double label = labels.data()[r];
    if (ignored && label == *ignored)
      continue;
    if (label < 0 || label >= static_cast<double>(classes))
      return kernelError("label " + llvm::Twine(static_cast<int64_t>(label)) + " of row " +
                         llvm::Twine(r) + " is outside [0, " + llvm::Twine(classes) + ")");
    counted[r] = true;
  }
  return counted;
}

// Mean over the counted positions of -log_softmax(logits)[position, label]; 0 for none.
llvm::Expected<KernelResults> crossEntropyKernel(const KernelArgs &args) {
  const Tensor &logits = args.operand(0), &labels = args.operand(1);
  int64_t classes = logits.shape().back();
  auto counted = countedPositions(labels, classes, ignoredLabel(args));
  if (!counted)
    return counted.takeError();
  double total = 0;
  int64_t count = 0;
  for (size_t r = 0; r < counted->size(); ++r) {
    if (!(*counted)[r])
      continue;
    int64_t label = static_cast<int64_t>(labels.data()[r]);
    int64_t begin = static_cast<int64_t>(r) * classes;
    total += logSumExp(logits.data(), begin, classes) - logits.data()[begin + label];
    ++count;
  }
  return single(
      Tensor::scalar(count ? total / static_cast<double>(count) : 0.0, args.resultDType()));
}

// dloss * (softmax(logits) - onehot(labels)) / counted positions; 0 at ignored positions.
llvm::Expected<KernelResults> crossEntropyGradKernel(const KernelArgs &args) {
  double dloss = args.operand(0).data()[0];
  const Tensor &logits = args.operand(1), &labels = args.operand(2);
  int64_t classes = logits.shape().back();
  auto counted = countedPositions(labels, classes, ignoredLabel(args));
  if (!counted)
    return counted.takeError();
  double count = static_cast<double>(std::count(counted->begin(), counted->end(), true));
  Tensor out = zeroResult(args);
  for (size_t r = 0; r < counted->size(); ++r) {
    if (!(*counted)[r])
      continue;
    int64_t begin = static_cast<int64_t>(r) * classes;
    double lse = logSumExp(logits.data(), begin, classes);
    int64_t label = static_cast<int64_t>(labels.data()[r]);
    for (int64_t j = 0; j < classes; ++j) {
      double p = std::exp(logits.data()[begin + j] - lse) - (j == label ? 1.0 : 0.0);
      out.data()[begin + j] = dloss * p / count;
    }
  }
  return single(std::move(out));
}

// Mean over elements of max(x, 0) - x z + log(1 + e^-|x|).
llvm::Expected<KernelResults> sigmoidCrossEntropyKernel(const KernelArgs &args) {
  const std::vector<double> &x = args.operand(0).data(), &z = args.operand(1).data();
  double total = 0;
  for (size_t i = 0; i < x.size(); ++i)
    total += std::max(x[i], 0.0) - x[i] * z[i] + std::log1p(std::exp(-std::abs(x[i])));
  double mean = x.empty() ? 0.0 : total / static_cast<double>(x.size());
  return single(Tensor::scalar(mean, args.resultDType()));
}

// dloss * (sigmoid(x) - z) / elements
llvm::Expected<KernelResults> sigmoidCrossEntropyGradKernel(const KernelArgs &args) {
  double dloss = args.operand(0).data()[0];
  const std::vector<double> &x = args.operand(1).data(), &z = args.operand(2).data();
  Tensor out = zeroResult(args);
  for (size_t i = 0; i < x.size(); ++i)
    out.data()[i] = dloss * (1 / (1 + std::exp(-x[i])) - z[i]) / static_cast<double>(x.size());
  return single(std::move(out));
}

// xhat = (x - mean) / sqrt(var + epsilon) of each row of x[begin .. begin + d); returns
// 1 / sqrt(var + epsilon).
double normalizeRow(const std::vector<double> &x, int64_t begin, int64_t d, double epsilon,
                    std::vector<double> &xhat) {
  double mean = 0, var = 0;
  for (int64_t j = 0; j < d; ++j)
    mean += x[begin + j];
  mean /= static_cast<double>(d);
  for (int64_t j = 0; j < d; ++j)
    var += (x[begin + j] - mean) * (x[begin + j] - mean);
  var /= static_cast<double>(d);
  double rstd = 1 / std::sqrt(var + epsilon);
  xhat.resize(static_cast<size_t>(d));
  for (int64_t j = 0; j < d; ++j)
    xhat[j] = (x[begin + j] - mean) * rstd;
  return rstd;
}

llvm::Expected<KernelResults> layerNormKernel(const KernelArgs &args) {
  const Tensor &x = args.operand(0), &gamma = args.operand(1), &beta = args.operand(2);
  double epsilon = args.attrs.getFloat("epsilon");
  Tensor out = zeroResult(args);
  std::vector<double> xhat;
  forEachRow(x, [&](int64_t begin, int64_t d) {
    normalizeRow(x.data(), begin, d, epsilon, xhat);
    for (int64_t j = 0; j < d; ++j)
      out.data()[begin + j] = gamma.data()[j] * xhat[j] + beta.data()[j];
  });
  return single(std::move(out));
}

// (dy, x, gamma): with g = dy * gamma, (g - mean(g) - xhat * mean(g * xhat)) / sqrt(var + eps).
llvm::Expected<KernelResults> layerNormGradKernel(const KernelArgs &args) {
  const Tensor &dy = args.operand(0), &x = args.operand(1), &gamma = args.operand(2);
  double epsilon = args.attrs.getFloat("epsilon");
  Tensor out = zeroResult(args);
  std::vector<double> xhat;
  forEachRow(x, [&](int64_t begin, int64_t d) {
    double rstd = normalizeRow(x.data(), begin, d, epsilon, xhat);
    double meanG = 0, meanGx = 0;
    for (int64_t j = 0; j < d; ++j) {
      double g = dy.data()[begin + j] * gamma.data()[j];
      meanG += g;
      meanGx += g * xhat[j];
    }
    meanG /= static_cast<double>(d);
    meanGx /= static_cast<double>(d);
    for (int64_t j = 0; j < d; ++j) {
      double g = dy.data()[begin + j] * gamma.data()[j];
      out.data()[begin + j] = rstd * (g - meanG - xhat[j] * meanGx);
    }
  });
  return single(std::move(out));
}

// (dy, x): sum over rows of dy * xhat.
llvm::Expected<KernelResults> layerNormGammaGradKernel(const KernelArgs &args) {
  const Tensor &dy = args.operand(0), &x = args.operand(1);
  double epsilon = args.attrs.getFloat("epsilon");
  Tensor out = zeroResult(args);
  std::vector<double> xhat;
  forEachRow(x, [&](int64_t begin, int64_t d) {
    normalizeRow(x.data(), begin, d, epsilon, xhat);
    for (int64_t j = 0; j < d; ++j)
      out.data()[j] += dy.data()[begin + j] * xhat[j];
  });
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
  t["sigmoid_cross_entropy"] = {sigmoidCrossEntropyKernel};
  t["sigmoid_cross_entropy_grad"] = {sigmoidCrossEntropyGradKernel};
  t["layer_norm"] = {layerNormKernel};
  t["layer_norm_grad"] = {layerNormGradKernel};
  t["layer_norm_gamma_grad"] = {layerNormGammaGradKernel};
}

} // namespace prism::runtime::reference::kernels
