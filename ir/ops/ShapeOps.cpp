// Shape and data-movement ops: reshape, transpose, concat, slice, pad, reductions, constant,
// cast, and the backward ops that undo broadcasting and reductions.
#include <algorithm>
#include <numeric>

#include "ir/ops/OpHelpers.h"

namespace prism::ir::ops {
namespace {

// Product of the static dimensions; counts batch dimensions separately.
bool staticProduct(llvm::ArrayRef<int64_t> dims, int64_t &product, int &batchDims) {
  product = 1;
  batchDims = 0;
  for (int64_t d : dims) {
    if (d == kBatchDim) {
      ++batchDims;
      continue;
    }
    if (d < 0)
      return false;
    if (d != 0 && product > kMaxElements / d)
      return false;
    product *= d;
  }
  return true;
}

ShapeResult reshapeShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectDense(in[0], "x"))
    return std::move(e);
  auto shape = attrs.getInts("shape");
  int64_t pin, pout;
  int bin, bout;
  if (!staticProduct(in[0].dims, pin, bin) || !staticProduct(shape, pout, bout))
    return shapeError("shape " + Attr::ints(shape).str() + " has an invalid dimension");
  if (bin != bout || bout > 1 || pin != pout)
    return shapeError("cannot reshape " + in[0].str() + " to " + Attr::ints(shape).str());
  return Types{TensorType(in[0].dtype, shape)};
}

void reshapeGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad())
    c.setGrad(0, c.emit("reshape_like", {dy, c.operand(0)}));
}

ShapeResult reshapeLikeShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  AttrMap a;
  a.set("shape", Attr::ints(in[1].dims));
  auto r = reshapeShape(in.take_front(), a);
  if (!r)
    return r.takeError();
  return Types{in[1].dense()};
}

ShapeResult transposeShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectDense(in[0], "x"))
    return std::move(e);
  auto perm = attrs.getInts("perm");
  if (static_cast<int64_t>(perm.size()) != in[0].rank())
    return shapeError("perm " + Attr::ints(perm).str() + " does not match rank of " + in[0].str());
  std::vector<bool> seen(perm.size(), false);
  Dims out;
  for (int64_t p : perm) {
    if (p < 0 || p >= in[0].rank() || seen[p])
      return shapeError("perm " + Attr::ints(perm).str() + " is not a permutation");
    seen[p] = true;
    out.push_back(in[0].dims[p]);
  }
  return Types{TensorType(in[0].dtype, out)};
}

void transposeGrad(GradientContext &c) {
  Value *dy = c.resultGrad();
  if (!dy)
    return;
  auto perm = c.resolvedAttrs().getInts("perm");
  Dims inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = static_cast<int64_t>(i);
  AttrMap a;
  a.set("perm", Attr::ints(inverse));
  c.setGrad(0, c.emit("transpose", {dy}, a));
}

ShapeResult concatShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  for (const TensorType &t : in)
    if (auto e = expectDense(t, "operand"))
      return std::move(e);
  auto axis = normalizeAxis(attrs.getInt("axis"), in[0].rank());
  if (!axis)
    return axis.takeError();
  TensorType out = in[0];
  out.dims[*axis] = 0;
  for (const TensorType &t : in) {
    if (t.rank() != out.rank() || t.dtype != out.dtype)
      return shapeError("cannot concatenate " + in[0].str() + " and " + t.str());
    for (int64_t i = 0; i < t.rank(); ++i) {
      if (i == *axis)
        continue;
      if (t.dims[i] != in[0].dims[i])
        return shapeError("cannot concatenate " + in[0].str() + " and " + t.str() + " along axis " +
                          llvm::Twine(*axis));
    }
    if (t.dims[*axis] < 0)
      return shapeError("cannot concatenate along a dynamic dimension: " + t.str());
    out.dims[*axis] += t.dims[*axis];
  }
  return Types{out};
}

void concatGrad(GradientContext &c) {
  Value *dy = c.resultGrad();
  if (!dy)
    return;
  int64_t axis = c.resolvedAttrs().getInt("axis");
  if (axis < 0)
    axis += c.operand(0)->type().rank();
  int64_t offset = 0;
  for (unsigned i = 0; i < c.op().numOperands(); ++i) {
    int64_t extent = c.operand(i)->type().dims[axis];
    AttrMap a;
    a.set("axis", Attr::integer(axis));
    a.set("begin", Attr::integer(offset));
    a.set("end", Attr::integer(offset + extent));
    c.setGrad(i, c.emit("slice", {dy}, a));
    offset += extent;
  }
}

ShapeResult sliceShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectDense(in[0], "x"))
    return std::move(e);
  auto axis = normalizeAxis(attrs.getInt("axis"), in[0].rank());
  if (!axis)
    return axis.takeError();
  int64_t extent = in[0].dims[*axis];
  int64_t begin = attrs.getInt("begin"), end = attrs.getInt("end");
  if (extent < 0)
    return shapeError("cannot slice a dynamic dimension: " + in[0].str());
  if (begin < 0 || end > extent || begin >= end)
    return shapeError("slice [" + llvm::Twine(begin) + ", " + llvm::Twine(end) +
                      ") is empty or outside [0, " + llvm::Twine(extent) + ")");
  TensorType out = in[0];
  out.dims[*axis] = end - begin;
  return Types{out};
}

void sliceGrad(GradientContext &c) {
  Value *dy = c.resultGrad();
  if (!dy)
    return;
  AttrMap r = c.resolvedAttrs();
  AttrMap a;
  a.set("axis", *r.find("axis"));
  a.set("begin", *r.find("begin"));
  c.setGrad(0, c.emit("slice_grad", {dy, c.operand(0)}, a));
}

ShapeResult sliceGradShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  const TensorType &g = in[0], &x = in[1];
  auto axis = normalizeAxis(attrs.getInt("axis"), x.rank());
  if (!axis)
    return axis.takeError();
  if (g.rank() != x.rank())
    return shapeError("gradient " + g.str() + " does not match the rank of " + x.str());
  AttrMap a = attrs;
  a.set("end", Attr::integer(attrs.getInt("begin") + g.dims[*axis]));
  auto fwd = sliceShape(in.drop_front(), a);
  if (!fwd)
    return fwd.takeError();
  if (auto e = expectSameType((*fwd)[0], g, "gradient and slice output"))
    return std::move(e);
  return Types{x};
}

// pads = [begin_0, ..., begin_{r-1}, end_0, ..., end_{r-1}] (ONNX's order), non-negative; the
// batch dimension keeps its extent, so that a replica's share of the batch stays its own.
ShapeResult padShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  const TensorType &x = in[0];
  if (auto e = expectDense(x, "x"))
    return std::move(e);
  if (x.dtype == DType::Bool)
    return shapeError("x must be numeric, got " + x.str());
  auto pads = attrs.getInts("pads");
  int64_t rank = x.rank();
  if (static_cast<int64_t>(pads.size()) != 2 * rank)
    return shapeError("pads " + Attr::ints(pads).str() +
                      " must have 2 * rank = " + llvm::Twine(2 * rank) +
                      " entries (all begins, then all ends) for " + x.str());
  TensorType out = x;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t begin = pads[i], end = pads[rank + i];
    if (begin < 0 || end < 0)
      return shapeError("pads " + Attr::ints(pads).str() + " must be non-negative");
    if (begin == 0 && end == 0)
      continue;
    if (x.dims[i] == kBatchDim)
      return shapeError("dimension " + llvm::Twine(i) + " of " + x.str() +
                        " is the batch dimension, which cannot be padded");
    if (x.dims[i] < 0 || begin > kMaxElements - end - x.dims[i])
      return shapeError("cannot pad dimension " + llvm::Twine(i) + " of " + x.str());
    out.dims[i] = x.dims[i] + begin + end;
  }
  return Types{out};
}

// The gradient is dy with the padding sliced off, one slice per padded dimension.
void padGrad(GradientContext &c) {
  Value *g = c.resultGrad();
  if (!g || !isFloat(c.operand(0)->type().dtype))
    return;
  auto pads = c.resolvedAttrs().getInts("pads");
  const TensorType &x = c.operand(0)->type();
  int64_t rank = x.rank();
  for (int64_t i = 0; i < rank; ++i) {
    if (pads[i] == 0 && pads[rank + i] == 0)
      continue;
    AttrMap a;
    a.set("axis", Attr::integer(i));
    a.set("begin", Attr::integer(pads[i]));
    a.set("end", Attr::integer(pads[i] + x.dims[i]));
    g = c.emit("slice", {g}, a);
  }
  c.setGrad(0, g);
}

// Axes normalized and sorted; empty means every axis.
llvm::Expected<Dims> reductionAxes(const TensorType &x, const AttrMap &attrs) {
  auto axes = attrs.getInts("axes");
  Dims out;
  if (axes.empty()) {
    for (int64_t i = 0; i < x.rank(); ++i)
      out.push_back(i);
    return out;
  }
  for (int64_t a : axes) {
    auto n = normalizeAxis(a, x.rank());
    if (!n)
      return n.takeError();
    if (std::find(out.begin(), out.end(), *n) != out.end())
      return shapeError("axis " + llvm::Twine(a) + " is listed twice");
    out.push_back(*n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

ShapeResult reduceShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectDense(in[0], "x"))
    return std::move(e);
  if (in[0].dtype == DType::Bool)
    return shapeError("x must be numeric, got " + in[0].str());
  auto axes = reductionAxes(in[0], attrs);
  if (!axes)
    return axes.takeError();
  bool keep = attrs.getBool("keepdims");
  Dims out;
  for (int64_t i = 0; i < in[0].rank(); ++i) {
    bool reduced = std::find(axes->begin(), axes->end(), i) != axes->end();
    if (!reduced)
      out.push_back(in[0].dims[i]);
    else if (keep)
      out.push_back(1);
  }
  return Types{TensorType(in[0].dtype, out)};
}

void reduceGradImpl(GradientContext &c, bool mean) {
  Value *dy = c.resultGrad();
  if (!dy)
    return;
  AttrMap r = c.resolvedAttrs();
  AttrMap a;
  a.set("axes", *r.find("axes"));
  a.set("keepdims", *r.find("keepdims"));
  a.set("mean", Attr::boolean(mean));
  c.setGrad(0, c.emit("expand_like", {dy, c.operand(0)}, a));
}
void reduceSumGrad(GradientContext &c) {
  reduceGradImpl(c, false);
}
void reduceMeanGrad(GradientContext &c) {
  reduceGradImpl(c, true);
}

// (g, ref): g is ref reduced over `axes` -> ref's type.
ShapeResult expandLikeShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  auto reduced = reduceShape(in.drop_front(), attrs);
  if (!reduced)
    return reduced.takeError();
  if (auto e = expectSameType((*reduced)[0], in[0], "gradient and reduction output"))
    return std::move(e);
  return Types{in[1].dense()};
}

// (g, ref): g's broadcast dimensions summed away -> ref's type.
ShapeResult sumLikeShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectDense(in[0], "gradient"))
    return std::move(e);
  auto b = broadcastDims(in[0].dims, in[1].dims);
  if (!b)
    return b.takeError();
  if (*b != in[0].dims)
    return shapeError(in[1].str() + " does not broadcast to " + in[0].str());
  return Types{TensorType(in[0].dtype, in[1].dims)};
}

ShapeResult constantShape(llvm::ArrayRef<TensorType>, const AttrMap &attrs) {
  auto dtype = parseDType(attrs.getString("dtype"));
  if (!dtype)
    return shapeError("unknown dtype '" + attrs.getString("dtype") + "'");
  auto shape = attrs.getInts("shape");
  int64_t product;
  int batch;
  if (!staticProduct(shape, product, batch) || batch)
    return shapeError("constant shape " + Attr::ints(shape).str() + " must be static");
  return Types{TensorType(*dtype, shape)};
}

ShapeResult castShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectDense(in[0], "x"))
    return std::move(e);
  auto dtype = parseDType(attrs.getString("dtype"));
  if (!dtype)
    return shapeError("unknown dtype '" + attrs.getString("dtype") + "'");
  return Types{TensorType(*dtype, in[0].dims)};
}

void castGrad(GradientContext &c) {
  Value *dy = c.resultGrad();
  if (!dy || !isFloat(c.operand(0)->type().dtype) || !isFloat(c.result()->type().dtype))
    return;
  AttrMap a;
  a.set("dtype", Attr::string(dtypeName(c.operand(0)->type().dtype).str()));
  c.setGrad(0, c.emit("cast", {dy}, a));
}

std::vector<AttrSpec> reduceAttrs() {
  return {attr("axes", AttrKind::Ints, Attr::ints({}), "axes to reduce; [] means all"),
          attr("keepdims", AttrKind::Bool, Attr::boolean(false), "keep reduced axes as 1")};
}

} // namespace

void registerShapeOps(std::vector<OpDef> &t) {
  t.push_back(makeOp("reshape", "x with a new shape of the same element count", {"x"}, reshapeShape,
                     reshapeGrad,
                     {attr("shape", AttrKind::Ints, "the new dimensions; B for the batch")}));
  t.push_back(makeOp("transpose", "x with its dimensions permuted: out.dims[i] = x.dims[perm[i]]",
                     {"x"}, transposeShape, transposeGrad,
                     {attr("perm", AttrKind::Ints, "a permutation of 0..rank-1")}));
  OpDef concat = makeOp("concat", "operands joined along one axis", {"x"}, concatShape, concatGrad,
                        {attr("axis", AttrKind::Int, "the axis to join along")});
  concat.variadic = true;
  t.push_back(concat);
  t.push_back(makeOp(
      "slice", "x restricted to [begin, end) along one axis", {"x"}, sliceShape, sliceGrad,
      {attr("axis", AttrKind::Int, "the axis"), attr("begin", AttrKind::Int, "first index kept"),
       attr("end", AttrKind::Int, "one past the last index kept")}));
  t.push_back(makeOp(
      "pad", "x with constant padding before and after each dimension (not the batch)", {"x"},
      padShape, padGrad,
      {attr("pads", AttrKind::Ints,
            "[begin_0, ..., begin_{r-1}, end_0, ..., end_{r-1}], non-negative (ONNX's order)"),
       attr("value", AttrKind::Float, Attr::real(0.0), "the value of the padding")}));
  t.push_back(
      makeOp("reduce_sum", "sum over axes", {"x"}, reduceShape, reduceSumGrad, reduceAttrs()));
  t.push_back(
      makeOp("reduce_mean", "mean over axes", {"x"}, reduceShape, reduceMeanGrad, reduceAttrs()));
  t.push_back(makeOp("constant", "a tensor filled with one value", {}, constantShape, nullptr,
                     {attr("value", AttrKind::Float, "the fill value"),
                      attr("shape", AttrKind::Ints, Attr::ints({}), "static dimensions"),
                      attr("dtype", AttrKind::String, Attr::string("f32"), "element type")}));
  t.push_back(makeOp("cast", "x converted to another element type", {"x"}, castShape, castGrad,
                     {attr("dtype", AttrKind::String, "the new element type")}, kElementwise));
  t.push_back(makeOp("reshape_like", "g reshaped to the shape of ref", {"g", "ref"},
                     reshapeLikeShape, nullptr, {}, kGradientOnly));
  t.push_back(makeOp("sum_like", "g summed over the dimensions along which ref was broadcast",
                     {"g", "ref"}, sumLikeShape, nullptr, {}, kGradientOnly));
  std::vector<AttrSpec> expand = reduceAttrs();
  expand.push_back(attr("mean", AttrKind::Bool, Attr::boolean(false),
                        "divide by the number of reduced elements"));
  t.push_back(makeOp("expand_like",
                     "g (ref reduced over axes) broadcast back to ref's shape, for reduction "
                     "gradients",
                     {"g", "ref"}, expandLikeShape, nullptr, expand, kGradientOnly));
  t.push_back(makeOp(
      "slice_grad", "g placed at [begin, begin + extent) along axis of zeros like x", {"g", "x"},
      sliceGradShape, nullptr,
      {attr("axis", AttrKind::Int, "the axis"), attr("begin", AttrKind::Int, "where g starts")},
      kGradientOnly));
}

} // namespace prism::ir::ops
