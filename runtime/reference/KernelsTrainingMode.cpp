// Reference kernels of the ops that compute differently in training and evaluation: dropout
// and dropout_grad, which draw their masks by the rule of runtime/DropoutMask.h, batch_norm
// with its gradients and the update of its running averages, and what batch_norm with sync =
// true expands to (batch_norm_apply and its gradients, replica_mean).
#include <algorithm>
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

// scale * xhat + bias with x, scale and bias operands 0, 1 and 2, xhat normalized by `stats`.
KernelResults normalized(const KernelArgs &args, const ChannelStats &stats) {
  const Tensor &x = args.operand(0);
  std::vector<double> inv = inverseStd(stats, args.attrs.getFloat("epsilon"));
  const std::vector<double> &scale = args.operand(1).data(), &bias = args.operand(2).data();
  Tensor y = x;
  const int64_t channels = static_cast<int64_t>(inv.size());
  for (int64_t i = 0; i < y.numElements(); ++i) {
    int64_t c = i % channels;
    y.data()[i] = scale[c] * (x.data()[i] - stats.mean[c]) * inv[c] + bias[c];
  }
  return single(std::move(y));
}

// sum of dy * xhat per channel with dy and x operands 0 and 1, xhat normalized by `stats`.
KernelResults scaleGradient(const KernelArgs &args, const ChannelStats &stats) {
  const Tensor &dy = args.operand(0), &x = args.operand(1);
  std::vector<double> inv = inverseStd(stats, args.attrs.getFloat("epsilon"));
  const int64_t channels = static_cast<int64_t>(inv.size());
  Tensor dscale = zeroResult(args);
  for (int64_t i = 0; i < x.numElements(); ++i) {
    int64_t c = i % channels;
    dscale.data()[c] += dy.data()[i] * (x.data()[i] - stats.mean[c]) * inv[c];
  }
  return single(std::move(dscale));
}

// (x, scale, bias, running_mean, running_var): scale * xhat + bias.
llvm::Expected<KernelResults> batchNormKernel(const KernelArgs &args) {
  auto stats = normalizingStats(args, args.operand(0), 3);
  if (!stats)
    return stats.takeError();
  return normalized(args, *stats);
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
  auto stats = normalizingStats(args, args.operand(1), 2);
  if (!stats)
    return stats.takeError();
  return scaleGradient(args, *stats);
}

// The statistics of `moments` [2, C] ([mean, mean of squares]; the variance
// mean(x * x) - mean^2, at least 0).
ChannelStats momentsStats(const Tensor &moments) {
  const int64_t channels = moments.shape().back();
  const std::vector<double> &m = moments.data();
  ChannelStats s;
  s.mean.assign(m.begin(), m.begin() + channels);
  s.var.resize(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c)
    s.var[c] = std::max(m[channels + c] - m[c] * m[c], 0.0);
  return s;
}

// The statistics batch_norm_apply and its gradients normalize with: in training those of
// operand `moments`, in evaluation the running averages (operands `running` and `running + 1`).
ChannelStats applyStats(const KernelArgs &args, unsigned running, unsigned moments) {
  if (args.step->training())
    return momentsStats(args.operand(moments));
  ChannelStats s;
  s.mean = args.operand(running).data();
  s.var = args.operand(running + 1).data();
  return s;
}

// (x, scale, bias, running_mean, running_var, moments): scale * xhat + bias.
llvm::Expected<KernelResults> batchNormApplyKernel(const KernelArgs &args) {
  return normalized(args, applyStats(args, 3, 5));
}

// (dy, x, scale, running_mean, running_var, moments): dx with the statistics held,
// scale * inv * dy.
llvm::Expected<KernelResults> batchNormApplyGradKernel(const KernelArgs &args) {
  const Tensor &dy = args.operand(0);
  ChannelStats stats = applyStats(args, 3, 5);
  std::vector<double> inv = inverseStd(stats, args.attrs.getFloat("epsilon"));
  const std::vector<double> &scale = args.operand(2).data();
  const int64_t channels = static_cast<int64_t>(inv.size());
  Tensor dx = zeroResult(args);
  for (int64_t i = 0; i < dx.numElements(); ++i)
    dx.data()[i] = scale[i % channels] * inv[i % channels] * dy.data()[i];
  return single(std::move(dx));
}

// (dy, x, running_mean, running_var, moments): sum of dy * xhat per channel.
llvm::Expected<KernelResults> batchNormApplyScaleGradKernel(const KernelArgs &args) {
  return scaleGradient(args, applyStats(args, 2, 4));
}

// (dy, x, scale, moments): the gradient of the moments y was normalized with. With
// inv = (q - m^2 + epsilon)^(-1/2), dy/dm = scale * (-inv + (x - m) * m * inv^3) and
// dy/dq = -scale * (x - m) * inv^3 / 2; summed against dy. Zero in evaluation.
llvm::Expected<KernelResults> batchNormApplyMomentsGradKernel(const KernelArgs &args) {
  Tensor dmoments = zeroResult(args);
  if (!args.step->training())
    return single(std::move(dmoments));
  const Tensor &dy = args.operand(0), &x = args.operand(1);
  ChannelStats stats = momentsStats(args.operand(3));
  std::vector<double> inv = inverseStd(stats, args.attrs.getFloat("epsilon"));
  const std::vector<double> &scale = args.operand(2).data();
  const int64_t channels = static_cast<int64_t>(inv.size());
  std::vector<double> sumDy(inv.size(), 0.0), sumDyCentered(inv.size(), 0.0);
  for (int64_t i = 0; i < x.numElements(); ++i) {
    int64_t c = i % channels;
    sumDy[c] += dy.data()[i];
    sumDyCentered[c] += dy.data()[i] * (x.data()[i] - stats.mean[c]);
  }
  for (int64_t c = 0; c < channels; ++c) {
    double inv3 = inv[c] * inv[c] * inv[c];
    dmoments.data()[c] = scale[c] * (-inv[c] * sumDy[c] + stats.mean[c] * inv3 * sumDyCentered[c]);
    dmoments.data()[channels + c] = -0.5 * scale[c] * inv3 * sumDyCentered[c];
  }
  return single(std::move(dmoments));
}

// (dmoments, x): dx = (dmoments[0] + 2 x dmoments[1]) / n per channel, n values per channel.
llvm::Expected<KernelResults> batchNormMomentsGradKernel(const KernelArgs &args) {
  const Tensor &dm = args.operand(0), &x = args.operand(1);
  const int64_t channels = x.shape().back();
  const double count = static_cast<double>(channels == 0 ? 0 : x.numElements() / channels);
  Tensor dx = zeroResult(args);
  for (int64_t i = 0; i < x.numElements(); ++i) {
    int64_t c = i % channels;
    dx.data()[i] = (dm.data()[c] + 2 * x.data()[i] * dm.data()[channels + c]) / count;
  }
  return single(std::move(dx));
}

// (x): on one device the mean over the replicas is x itself.
llvm::Expected<KernelResults> replicaMeanKernel(const KernelArgs &args) {
  return single(args.operand(0));
}

} // namespace

void registerTrainingModeKernels(KernelTable &t) {
  t["batch_norm_apply"] = {batchNormApplyKernel};
  t["batch_norm_apply_grad"] = {batchNormApplyGradKernel};
  t["batch_norm_apply_scale_grad"] = {batchNormApplyScaleGradKernel};
  t["batch_norm_apply_moments_grad"] = {batchNormApplyMomentsGradKernel};
  t["batch_norm_moments_grad"] = {batchNormMomentsGradKernel};
  t["replica_mean"] = {replicaMeanKernel};
  t["dropout"] = {dropoutMaskKernel};
  t["dropout_grad"] = {dropoutMaskKernel};
  t["batch_norm"] = {batchNormKernel};
  t["batch_norm_moments"] = {batchNormMomentsKernel};
  t["batch_norm_update"] = {batchNormUpdateKernel};
  t["batch_norm_grad"] = {batchNormGradKernel};
  t["batch_norm_scale_grad"] = {batchNormScaleGradKernel};
}

} // namespace prism::runtime::reference::kernels
