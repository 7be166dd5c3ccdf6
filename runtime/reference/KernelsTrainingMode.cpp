// Reference kernels of the ops that compute differently in training and evaluation: dropout
// and dropout_grad, which draw their masks by the rule of runtime/DropoutMask.h, and batch_norm
// with its gradients and the update of its running averages.
#include <cmath>
#include <vector>

#include "ir/OpTable.h"
#include "runtime/DropoutMask.h"
#include "runtime/reference/KernelSupport.h"

namespace prism::runtime::reference::kernels {
namespace {

// x through the mask of the op's stream in training; x itself in evaluation. A value whose
// first dimension is B draws per example by its global index; any other is one example
// (index 0) that every replica draws alike.
llvm::Expected<KernelResults> dropoutMaskKernel(const KernelArgs &args) {
  Tensor out = args.operand(0);
  const StepContext &step = *args.step;
  if (!step.training())
    return single(std::move(out));
  double rate = args.attrs.getFloat("rate");
  double scale = dropoutScale(rate);
  bool perExample = args.batchRows[0];
  int64_t n = out.numElements();
  int64_t examples = perExample ? out.shape()[0] : 1;
  int64_t size = examples == 0 ? 0 : n / examples;
  uint64_t stream = dropoutStepStream(step.seed, ir::randomStreamKey(args.op), step.step);
  for (int64_t e = 0; e < examples; ++e) {
    uint64_t example = dropoutExampleStream(stream, perExample ? step.exampleOffset + e : 0);
    for (int64_t i = 0; i < size; ++i) {
      double &v = out.data()[e * size + i];
      v = dropoutKeeps(example, i, rate) ? v * scale : 0.0;
    }
  }
  return single(std::move(out));
}

// Per-channel statistics of x [..., C]: every dimension but the last is a sample.
struct ChannelStats {
  std::vector<double> mean, var; // var: biased (divided by the count)
  int64_t count = 0;             // samples per channel
};

// The batch's mean and biased variance per channel, in two passes.
ChannelStats batchStats(const Tensor &x) {
  ChannelStats s;
  const int64_t channels = x.shape().back();
  s.count = channels == 0 ? 0 : x.numElements() / channels;
  s.mean.assign(static_cast<size_t>(channels), 0.0);
  s.var.assign(static_cast<size_t>(channels), 0.0);
  const std::vector<double> &v = x.data();
  for (int64_t i = 0; i < s.count; ++i)
    for (int64_t c = 0; c < channels; ++c)
      s.mean[c] += v[i * channels + c];
  for (double &m : s.mean)
    m /= static_cast<double>(s.count);
  for (int64_t i = 0; i < s.count; ++i)
    for (int64_t c = 0; c < channels; ++c) {
      double d = v[i * channels + c] - s.mean[c];
      s.var[c] += d * d;
    }
  for (double &var : s.var)
    var /= static_cast<double>(s.count);
  return s;
}

// A training step needs two samples per channel: with one, x - mean is 0 and the unbiased
// variance undefined (PyTorch refuses it alike).
llvm::Error expectSamples(const ChannelStats &s, const Tensor &x) {
  if (s.count > 1)
    return llvm::Error::success();
  return kernelError("batch_norm in a training step needs more than one value per channel, x is " +
                     x.typeString());
}

// The statistics x is normalized with: the batch's in training, the running averages (operands
// `mean` and `mean + 1`) in evaluation.
llvm::Expected<ChannelStats> normalizingStats(const KernelArgs &args, const Tensor &x,
                                              unsigned mean) {
  if (args.step->training()) {
    ChannelStats s = batchStats(x);
    if (auto e = expectSamples(s, x))
      return std::move(e);
    return s;
  }
  ChannelStats s;
  s.mean = args.operand(mean).data();
  s.var = args.operand(mean + 1).data();
  s.count = x.shape().back() == 0 ? 0 : x.numElements() / x.shape().back();
  return s;
}

std::vector<double> inverseStd(const ChannelStats &s, double epsilon) {
  std::vector<double> inv(s.var.size());
  for (size_t c = 0; c < inv.size(); ++c)
    inv[c] = 1.0 / std::sqrt(s.var[c] + epsilon);
  return inv;
}

// (x, scale, bias, running_mean, running_var): scale * xhat + bias.
llvm::Expected<KernelResults> batchNormKernel(const KernelArgs &args) {
  const Tensor &x = args.operand(0);
  auto stats = normalizingStats(args, x, 3);
  if (!stats)
    return stats.takeError();
  std::vector<double> inv = inverseStd(*stats, args.attrs.getFloat("epsilon"));
  const std::vector<double> &scale = args.operand(1).data(), &bias = args.operand(2).data();
  Tensor y = x;
  const int64_t channels = static_cast<int64_t>(inv.size());
  for (int64_t i = 0; i < y.numElements(); ++i) {
    int64_t c = i % channels;
    y.data()[i] = scale[c] * (x.data()[i] - stats->mean[c]) * inv[c] + bias[c];
  }
  return single(std::move(y));
}

// (x): [mean, mean of squares] per channel.
llvm::Expected<KernelResults> batchNormMomentsKernel(const KernelArgs &args) {
  const Tensor &x = args.operand(0);
  const int64_t channels = x.shape().back();
  const int64_t count = channels == 0 ? 0 : x.numElements() / channels;
  Tensor moments = zeroResult(args);
  for (int64_t i = 0; i < x.numElements(); ++i) {
    double v = x.data()[i];
    moments.data()[i % channels] += v / static_cast<double>(count);
    moments.data()[channels + i % channels] += v * v / static_cast<double>(count);
  }
  return single(std::move(moments));
}

// (running_mean, running_var, moments): the new running averages, PyTorch's rule with the
// unbiased variance of the batch's values_per_example × B values per channel; evaluation keeps
// them.
llvm::Expected<KernelResults> batchNormUpdateKernel(const KernelArgs &args) {
  Tensor mean = args.operand(0), var = args.operand(1);
  if (args.step->training()) {
    const Tensor &moments = args.operand(2);
    const double count = static_cast<double>(args.batch) *
                         static_cast<double>(args.attrs.getInt("values_per_example"));
    if (!(count > 1))
      return kernelError("batch_norm in a training step needs more than one value per channel, "
                         "the batch has " +
                         llvm::Twine(static_cast<int64_t>(count)));
    const double momentum = args.attrs.getFloat("momentum");
    const int64_t channels = mean.numElements();
    for (int64_t c = 0; c < channels; ++c) {
      double m = moments.data()[c];
      double biased = moments.data()[channels + c] - m * m;
      mean.data()[c] = (1 - momentum) * mean.data()[c] + momentum * m;
      var.data()[c] = (1 - momentum) * var.data()[c] + momentum * biased * count / (count - 1);
    }
  }
  KernelResults r;
  r.push_back(std::move(mean));
  r.push_back(std::move(var));
  return r;
}

// (dy, x, scale, running_mean, running_var): dx. In training the batch's mean and variance
// depend on x too: dx = scale * inv * (dy - mean(dy) - xhat * mean(dy * xhat)).
llvm::Expected<KernelResults> batchNormGradKernel(const KernelArgs &args) {
  const Tensor &dy = args.operand(0), &x = args.operand(1);
  auto stats = normalizingStats(args, x, 3);
  if (!stats)
    return stats.takeError();
  std::vector<double> inv = inverseStd(*stats, args.attrs.getFloat("epsilon"));
  const std::vector<double> &scale = args.operand(2).data();
  const int64_t channels = static_cast<int64_t>(inv.size());
  std::vector<double> meanDy(inv.size(), 0.0), meanDyXhat(inv.size(), 0.0);
  if (args.step->training()) {
    for (int64_t i = 0; i < x.numElements(); ++i) {
      int64_t c = i % channels;
      meanDy[c] += dy.data()[i];
      meanDyXhat[c] += dy.data()[i] * (x.data()[i] - stats->mean[c]) * inv[c];
    }
    for (int64_t c = 0; c < channels; ++c) {
      meanDy[c] /= static_cast<double>(stats->count);
      meanDyXhat[c] /= static_cast<double>(stats->count);
    }
  }
  Tensor dx = zeroResult(args);
  for (int64_t i = 0; i < x.numElements(); ++i) {
    int64_t c = i % channels;
    double xhat = (x.data()[i] - stats->mean[c]) * inv[c];
    dx.data()[i] = scale[c] * inv[c] * (dy.data()[i] - meanDy[c] - xhat * meanDyXhat[c]);
  }
  return single(std::move(dx));
}

// (dy, x, running_mean, running_var): sum of dy * xhat per channel.
llvm::Expected<KernelResults> batchNormScaleGradKernel(const KernelArgs &args) {
  const Tensor &dy = args.operand(0), &x = args.operand(1);
  auto stats = normalizingStats(args, x, 2);
  if (!stats)
    return stats.takeError();
  std::vector<double> inv = inverseStd(*stats, args.attrs.getFloat("epsilon"));
  const int64_t channels = static_cast<int64_t>(inv.size());
  Tensor dscale = zeroResult(args);
  for (int64_t i = 0; i < x.numElements(); ++i) {
    int64_t c = i % channels;
    dscale.data()[c] += dy.data()[i] * (x.data()[i] - stats->mean[c]) * inv[c];
  }
  return single(std::move(dscale));
}

} // namespace

void registerTrainingModeKernels(KernelTable &t) {
  t["dropout"] = {dropoutMaskKernel};
  t["dropout_grad"] = {dropoutMaskKernel};
  t["batch_norm"] = {batchNormKernel};
  t["batch_norm_moments"] = {batchNormMomentsKernel};
  t["batch_norm_update"] = {batchNormUpdateKernel};
  t["batch_norm_grad"] = {batchNormGradKernel};
  t["batch_norm_scale_grad"] = {batchNormScaleGradKernel};
}

} // namespace prism::runtime::reference::kernels
