// Reference kernels of convolution and pooling over NHWC tensors (filter [KH, KW, C, O]),
// with their backward ops. `same` padding follows TensorFlow: out = ceil(in / stride),
// pad_total = max((out - 1) * stride + window - in, 0), pad_before = pad_total / 2.
#include <algorithm>
#include <limits>

#include "runtime/reference/KernelSupport.h"

namespace prism::runtime::reference::kernels {
namespace {

// Where the windows of one spatial dimension lie: window o covers input positions
// [o * stride - padBefore, o * stride - padBefore + window).
struct Axis {
  int64_t in = 0, out = 0, window = 1, stride = 1, padBefore = 0;
  int64_t start(int64_t o) const { return o * stride - padBefore; }
};

Axis makeAxis(int64_t in, int64_t window, int64_t stride, llvm::StringRef padding) {
  Axis a;
  a.in = in;
  a.window = window;
  a.stride = stride;
  if (padding == "same") {
    a.out = (in + stride - 1) / stride;
    int64_t total = std::max<int64_t>((a.out - 1) * stride + window - in, 0);
    a.padBefore = total / 2;
  } else {
    a.out = (in - window) / stride + 1;
  }
  return a;
}

// The two spatial axes of an NHWC input for a window [kh, kw].
struct Geometry {
  int64_t n = 0, channels = 0;
  Axis h, w;
};

Geometry makeGeometry(const KernelArgs &args, llvm::ArrayRef<int64_t> x, int64_t kh, int64_t kw) {
  auto stride = args.attrs.getInts("stride");
  std::string padding = args.attrs.getString("padding");
  Geometry g;
  g.n = x[0];
  g.channels = x[3];
  g.h = makeAxis(x[1], kh, stride[0], padding);
  g.w = makeAxis(x[2], kw, stride[1], padding);
  return g;
}

int64_t nhwc(llvm::ArrayRef<int64_t> shape, int64_t n, int64_t h, int64_t w, int64_t c) {
  return ((n * shape[1] + h) * shape[2] + w) * shape[3] + c;
}

// Calls fn(n, oh, ow, ih, iw, kh, kw) for every output position and every window cell that
// lies inside the input (padded cells are skipped).
template <typename F> void forEachTap(const Geometry &g, F fn) {
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t oh = 0; oh < g.h.out; ++oh)
      for (int64_t ow = 0; ow < g.w.out; ++ow)
        for (int64_t kh = 0; kh < g.h.window; ++kh) {
          int64_t ih = g.h.start(oh) + kh;
          if (ih < 0 || ih >= g.h.in)
            continue;
          for (int64_t kw = 0; kw < g.w.window; ++kw) {
            int64_t iw = g.w.start(ow) + kw;
            if (iw < 0 || iw >= g.w.in)
              continue;
            fn(n, oh, ow, ih, iw, kh, kw);
          }
        }
}

// y[n, oh, ow, o] = sum over (kh, kw, c) of x[n, ih, iw, c] * w[kh, kw, c, o]
llvm::Expected<KernelResults> conv2dKernel(const KernelArgs &args) {
  const Tensor &x = args.operand(0), &w = args.operand(1);
  Geometry g = makeGeometry(args, x.shape(), w.shape()[0], w.shape()[1]);
  int64_t outChannels = w.shape()[3];
  Tensor y = zeroResult(args);
  forEachTap(
      g, [&](int64_t n, int64_t oh, int64_t ow, int64_t ih, int64_t iw, int64_t kh, int64_t kw) {
        for (int64_t c = 0; c < g.channels; ++c)
          for (int64_t o = 0; o < outChannels; ++o)
            y.data()[nhwc(y.shape(), n, oh, ow, o)] +=
                x.data()[nhwc(x.shape(), n, ih, iw, c)] * w.data()[nhwc(w.shape(), kh, kw, c, o)];
      });
  return single(std::move(y));
}

// (dy, w, x) -> dx: each tap of the forward sum sends dy * w back to its input cell.
llvm::Expected<KernelResults> conv2dBackpropInputKernel(const KernelArgs &args) {
  const Tensor &dy = args.operand(0), &w = args.operand(1), &x = args.operand(2);
  Geometry g = makeGeometry(args, x.shape(), w.shape()[0], w.shape()[1]);
  int64_t outChannels = w.shape()[3];
  Tensor dx = zeroResult(args);
  forEachTap(
      g, [&](int64_t n, int64_t oh, int64_t ow, int64_t ih, int64_t iw, int64_t kh, int64_t kw) {
        for (int64_t c = 0; c < g.channels; ++c)
          for (int64_t o = 0; o < outChannels; ++o)
            dx.data()[nhwc(dx.shape(), n, ih, iw, c)] +=
                dy.data()[nhwc(dy.shape(), n, oh, ow, o)] * w.data()[nhwc(w.shape(), kh, kw, c, o)];
      });
  return single(std::move(dx));
}

// (x, dy, w) -> dw: each tap contributes x * dy to its filter cell.
llvm::Expected<KernelResults> conv2dBackpropFilterKernel(const KernelArgs &args) {
  const Tensor &x = args.operand(0), &dy = args.operand(1), &w = args.operand(2);
  Geometry g = makeGeometry(args, x.shape(), w.shape()[0], w.shape()[1]);
  int64_t outChannels = w.shape()[3];
  Tensor dw = zeroResult(args);
  forEachTap(
      g, [&](int64_t n, int64_t oh, int64_t ow, int64_t ih, int64_t iw, int64_t kh, int64_t kw) {
        for (int64_t c = 0; c < g.channels; ++c)
          for (int64_t o = 0; o < outChannels; ++o)
            dw.data()[nhwc(dw.shape(), kh, kw, c, o)] +=
                x.data()[nhwc(x.shape(), n, ih, iw, c)] * dy.data()[nhwc(dy.shape(), n, oh, ow, o)];
      });
  return single(std::move(dw));
}

Geometry poolGeometry(const KernelArgs &args, const Tensor &x) {
  auto window = args.attrs.getInts("window");
  return makeGeometry(args, x.shape(), window[0], window[1]);
}

// For every output cell (n, oh, ow, c): the flat input offset of the first maximum of its
// window (row-major over the window), or -1 for a window with no cell inside the input.
std::vector<int64_t> argmaxOfWindows(const Geometry &g, const Tensor &x,
                                     llvm::ArrayRef<int64_t> outShape) {
  std::vector<int64_t> arg(static_cast<size_t>(shapeElements(outShape)), -1);
  forEachTap(g, [&](int64_t n, int64_t oh, int64_t ow, int64_t ih, int64_t iw, int64_t, int64_t) {
    for (int64_t c = 0; c < g.channels; ++c) {
      int64_t &best = arg[nhwc(outShape, n, oh, ow, c)];
      int64_t at = nhwc(x.shape(), n, ih, iw, c);
      // Strictly greater: ties keep the first cell visited.
      if (best < 0 || x.data()[at] > x.data()[best])
        best = at;
    }
  });
  return arg;
}

llvm::Expected<KernelResults> maxPoolKernel(const KernelArgs &args) {
  const Tensor &x = args.operand(0);
  Tensor y = zeroResult(args);
  std::vector<int64_t> arg = argmaxOfWindows(poolGeometry(args, x), x, y.shape());
  for (size_t i = 0; i < arg.size(); ++i)
    y.data()[i] = arg[i] < 0 ? 0.0 : x.data()[arg[i]];
  return single(std::move(y));
}

llvm::Expected<KernelResults> maxPoolGradKernel(const KernelArgs &args) {
  const Tensor &dy = args.operand(0), &x = args.operand(1);
  Tensor dx = zeroResult(args);
  std::vector<int64_t> arg = argmaxOfWindows(poolGeometry(args, x), x, dy.shape());
  for (size_t i = 0; i < arg.size(); ++i)
    if (arg[i] >= 0)
      dx.data()[arg[i]] += dy.data()[i];
  return single(std::move(dx));
}

// How many cells of each output window lie inside the input (padding is not counted).
std::vector<double> windowCounts(const Geometry &g, llvm::ArrayRef<int64_t> outShape) {
  std::vector<double> count(static_cast<size_t>(shapeElements(outShape)), 0.0);
  forEachTap(g, [&](int64_t n, int64_t oh, int64_t ow, int64_t, int64_t, int64_t, int64_t) {
    for (int64_t c = 0; c < g.channels; ++c)
      count[nhwc(outShape, n, oh, ow, c)] += 1;
  });
  return count;
}

llvm::Expected<KernelResults> avgPoolKernel(const KernelArgs &args) {
  const Tensor &x = args.operand(0);
  Tensor y = zeroResult(args);
  Geometry g = poolGeometry(args, x);
  forEachTap(g, [&](int64_t n, int64_t oh, int64_t ow, int64_t ih, int64_t iw, int64_t, int64_t) {
    for (int64_t c = 0; c < g.channels; ++c)
      y.data()[nhwc(y.shape(), n, oh, ow, c)] += x.data()[nhwc(x.shape(), n, ih, iw, c)];
  });
  std::vector<double> count = windowCounts(g, y.shape());
  for (size_t i = 0; i < count.size(); ++i)
    y.data()[i] = count[i] > 0 ? y.data()[i] / count[i] : 0.0;
  return single(std::move(y));
}

llvm::Expected<KernelResults> avgPoolGradKernel(const KernelArgs &args) {
  const Tensor &dy = args.operand(0), &x = args.operand(1);
  Tensor dx = zeroResult(args);
  Geometry g = poolGeometry(args, x);
  std::vector<double> count = windowCounts(g, dy.shape());
  forEachTap(g, [&](int64_t n, int64_t oh, int64_t ow, int64_t ih, int64_t iw, int64_t, int64_t) {
    for (int64_t c = 0; c < g.channels; ++c) {
      int64_t o = nhwc(dy.shape(), n, oh, ow, c);
      dx.data()[nhwc(dx.shape(), n, ih, iw, c)] += dy.data()[o] / count[o];
    }
  });
  return single(std::move(dx));
}

// y[n, c] = mean over h and w of x[n, h, w, c].
llvm::Expected<KernelResults> globalAvgPoolKernel(const KernelArgs &args) {
  const Tensor &x = args.operand(0);
  Tensor y = zeroResult(args);
  int64_t batch = x.shape()[0], height = x.shape()[1], width = x.shape()[2];
  int64_t channels = x.shape()[3];
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t c = 0; c < channels; ++c) {
      double sum = 0;
      for (int64_t h = 0; h < height; ++h)
        for (int64_t w = 0; w < width; ++w)
          sum += x.data()[nhwc(x.shape(), n, h, w, c)];
      y.data()[n * channels + c] = sum / static_cast<double>(height * width);
    }
  return single(std::move(y));
}

} // namespace

void registerConvKernels(KernelTable &t) {
  t["conv2d"] = {conv2dKernel};
  t["conv2d_backprop_input"] = {conv2dBackpropInputKernel};
  t["conv2d_backprop_filter"] = {conv2dBackpropFilterKernel};
  t["max_pool2d"] = {maxPoolKernel};
  t["avg_pool2d"] = {avgPoolKernel};
  t["max_pool2d_grad"] = {maxPoolGradKernel};
  t["avg_pool2d_grad"] = {avgPoolGradKernel};
  t["global_avg_pool"] = {globalAvgPoolKernel};
}

} // namespace prism::runtime::reference::kernels
