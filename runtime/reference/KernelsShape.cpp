// Reference kernels of shape and data-movement ops: reshape, transpose, concat, slice, pad,
// reductions, constant, cast, and the backward ops that undo broadcasting and reductions.
#include <algorithm>

#include "runtime/reference/KernelSupport.h"

namespace prism::runtime::reference::kernels {
namespace {

// Row-major data stays as it is; only the shape changes.
Tensor withShape(const Tensor &t, const KernelArgs &args) {
  return Tensor(args.resultDType(), args.resultShape(), t.data());
}

llvm::Expected<KernelResults> reshapeKernel(const KernelArgs &args) {
  return single(withShape(args.operand(0), args));
}

llvm::Expected<KernelResults> transposeKernel(const KernelArgs &args) {
  const Tensor &x = args.operand(0);
  auto perm = args.attrs.getInts("perm");
  Shape xStrides = rowMajorStrides(x.shape());
  // Output dimension i walks input dimension perm[i].
  Shape strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    strides[i] = xStrides[perm[i]];
  Tensor out = zeroResult(args);
  int64_t flat = 0;
  forEachIndex(out.shape(), [&](llvm::ArrayRef<int64_t> index) {
    out.data()[flat++] = x.data()[offsetOf(index, strides)];
  });
  return single(std::move(out));
}

// Views a shape as [outer, extent along axis, inner].
struct AxisSplit {
  int64_t outer = 1, extent = 1, inner = 1;
};

AxisSplit splitAt(llvm::ArrayRef<int64_t> shape, int64_t axis) {
  AxisSplit s;
  s.outer = shapeElements(shape.take_front(axis));
  s.extent = shape[axis];
  s.inner = shapeElements(shape.drop_front(axis + 1));
  return s;
}

llvm::Expected<KernelResults> concatKernel(const KernelArgs &args) {
  Tensor out = zeroResult(args);
  int64_t axis = normalizedAxis(args.attrs.getInt("axis"), out.rank());
  AxisSplit o = splitAt(out.shape(), axis);
  int64_t offset = 0;
  for (const Tensor *x : args.operands) {
    AxisSplit s = splitAt(x->shape(), axis);
    for (int64_t i = 0; i < s.outer; ++i)
      for (int64_t a = 0; a < s.extent; ++a)
        for (int64_t j = 0; j < s.inner; ++j)
          out.data()[(i * o.extent + offset + a) * o.inner + j] =
              x->data()[(i * s.extent + a) * s.inner + j];
    offset += s.extent;
  }
  return single(std::move(out));
}

llvm::Expected<KernelResults> sliceKernel(const KernelArgs &args) {
  const Tensor &x = args.operand(0);
  int64_t axis = normalizedAxis(args.attrs.getInt("axis"), x.rank());
  int64_t begin = args.attrs.getInt("begin");
  Tensor out = zeroResult(args);
  AxisSplit s = splitAt(x.shape(), axis), o = splitAt(out.shape(), axis);
  for (int64_t i = 0; i < o.outer; ++i)
    for (int64_t a = 0; a < o.extent; ++a)
      for (int64_t j = 0; j < o.inner; ++j)
        out.data()[(i * o.extent + a) * o.inner + j] =
            x.data()[(i * s.extent + begin + a) * s.inner + j];
  return single(std::move(out));
}

// (g, x): g placed at [begin, begin + extent) along axis of zeros shaped like x.
llvm::Expected<KernelResults> sliceGradKernel(const KernelArgs &args) {
  const Tensor &g = args.operand(0);
  Tensor out = zeroResult(args);
  int64_t axis = normalizedAxis(args.attrs.getInt("axis"), out.rank());
  int64_t begin = args.attrs.getInt("begin");
  AxisSplit s = splitAt(g.shape(), axis), o = splitAt(out.shape(), axis);
  for (int64_t i = 0; i < s.outer; ++i)
    for (int64_t a = 0; a < s.extent; ++a)
      for (int64_t j = 0; j < s.inner; ++j)
        out.data()[(i * o.extent + begin + a) * o.inner + j] =
            g.data()[(i * s.extent + a) * s.inner + j];
  return single(std::move(out));
}

// Each output element is x's at the index less the begin pads, or `value` outside x.
llvm::Expected<KernelResults> padKernel(const KernelArgs &args) {
  const Tensor &x = args.operand(0);
  auto pads = args.attrs.getInts("pads");
  double value = args.attrs.getFloat("value");
  Tensor out = zeroResult(args);
  Shape strides = rowMajorStrides(x.shape());
  int64_t rank = x.rank(), flat = 0;
  forEachIndex(out.shape(), [&](llvm::ArrayRef<int64_t> index) {
    int64_t at = 0;
    bool inside = true;
    for (int64_t d = 0; d < rank && inside; ++d) {
      int64_t i = index[d] - pads[d];
      inside = i >= 0 && i < x.shape()[d];
      at += i * strides[d];
    }
    out.data()[flat++] = inside ? x.data()[at] : value;
  });
  return single(std::move(out));
}

// Which axes of a rank-`rank` tensor the `axes` attribute reduces ([] means all).
std::vector<bool> reducedAxes(const ir::AttrMap &attrs, int64_t rank) {
  auto axes = attrs.getInts("axes");
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes)
    reduced[normalizedAxis(a, rank)] = true;
  return reduced;
}

// Strides that map an index of the unreduced shape `full` to the offset of its element in
// the reduced tensor (reduced axes contribute nothing, kept or not).
Shape reductionStrides(llvm::ArrayRef<int64_t> full, const std::vector<bool> &reduced) {
  Shape kept;
  for (size_t i = 0; i < full.size(); ++i)
    if (!reduced[i])
      kept.push_back(full[i]);
  Shape keptStrides = rowMajorStrides(kept);
  Shape strides(full.size(), 0);
  size_t k = 0;
  for (size_t i = 0; i < full.size(); ++i)
    if (!reduced[i])
      strides[i] = keptStrides[k++];
  return strides;
}

// Elements folded into each reduced element.
double reducedCount(llvm::ArrayRef<int64_t> full, const std::vector<bool> &reduced) {
  double n = 1;
  for (size_t i = 0; i < full.size(); ++i)
    if (reduced[i])
      n *= static_cast<double>(full[i]);
  return n;
}

llvm::Expected<KernelResults> reduce(const KernelArgs &args, bool mean) {
  const Tensor &x = args.operand(0);
  std::vector<bool> reduced = reducedAxes(args.attrs, x.rank());
  Shape strides = reductionStrides(x.shape(), reduced);
  Tensor out = zeroResult(args);
  int64_t flat = 0;
  forEachIndex(x.shape(), [&](llvm::ArrayRef<int64_t> index) {
    out.data()[offsetOf(index, strides)] += x.data()[flat++];
  });
  if (mean) {
    double n = reducedCount(x.shape(), reduced);
    for (double &v : out.data())
      v /= n;
  }
  return single(std::move(out));
}

llvm::Expected<KernelResults> reduceSumKernel(const KernelArgs &args) {
  return reduce(args, false);
}

llvm::Expected<KernelResults> reduceMeanKernel(const KernelArgs &args) {
  return reduce(args, true);
}

// (g, ref): g (ref reduced over axes) broadcast back to ref's shape, divided by the reduced
// element count when mean = true.
llvm::Expected<KernelResults> expandLikeKernel(const KernelArgs &args) {
  const Tensor &g = args.operand(0);
  Tensor out = zeroResult(args);
  std::vector<bool> reduced = reducedAxes(args.attrs, out.rank());
  Shape strides = reductionStrides(out.shape(), reduced);
  double divisor = args.attrs.getBool("mean") ? reducedCount(out.shape(), reduced) : 1.0;
  int64_t flat = 0;
  forEachIndex(out.shape(), [&](llvm::ArrayRef<int64_t> index) {
    out.data()[flat++] = g.data()[offsetOf(index, strides)] / divisor;
  });
  return single(std::move(out));
}

// (g, ref): g summed over the dimensions along which ref was broadcast to g's shape.
llvm::Expected<KernelResults> sumLikeKernel(const KernelArgs &args) {
  const Tensor &g = args.operand(0);
  Tensor out = zeroResult(args);
  Shape strides = broadcastStrides(out.shape(), g.shape());
  int64_t flat = 0;
  forEachIndex(g.shape(), [&](llvm::ArrayRef<int64_t> index) {
    out.data()[offsetOf(index, strides)] += g.data()[flat++];
  });
  return single(std::move(out));
}

llvm::Expected<KernelResults> reshapeLikeKernel(const KernelArgs &args) {
  return single(withShape(args.operand(0), args));
}

llvm::Expected<KernelResults> constantKernel(const KernelArgs &args) {
  return single(
      Tensor::filled(args.resultDType(), args.resultShape(), args.attrs.getFloat("value")));
}

// The values are kept; the interpreter rounds them to the new dtype (float to integer
// truncates toward zero, anything nonzero to bool is 1).
llvm::Expected<KernelResults> castKernel(const KernelArgs &args) {
  return single(withShape(args.operand(0), args));
}

} // namespace

void registerShapeKernels(KernelTable &t) {
  t["reshape"] = {reshapeKernel};
  t["transpose"] = {transposeKernel};
  t["concat"] = {concatKernel};
  t["slice"] = {sliceKernel};
  t["pad"] = {padKernel};
  t["reduce_sum"] = {reduceSumKernel};
  t["reduce_mean"] = {reduceMeanKernel};
  t["constant"] = {constantKernel};
  t["cast"] = {castKernel};
  t["reshape_like"] = {reshapeLikeKernel};
  t["sum_like"] = {sumLikeKernel};
  t["expand_like"] = {expandLikeKernel};
  t["slice_grad"] = {sliceGradKernel};
}

} // namespace prism::runtime::reference::kernels
