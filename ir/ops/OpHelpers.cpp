// Shared pieces for op definitions.
#include "ir/ops/OpHelpers.h"

#include <algorithm>

namespace prism::ir::ops {

llvm::Expected<Dims> broadcastDims(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  Dims out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1)
      out[i] = da;
    else if (da == 1)
      out[i] = db;
    else
      return shapeError("cannot broadcast dimension " + dimString(da) + " against " +
                        dimString(db));
  }
  return out;
}

llvm::Error expectDense(const TensorType &t, llvm::StringRef what) {
  if (t.sparse)
    return shapeError(what + " must be dense, got " + t.str());
  return llvm::Error::success();
}

llvm::Error expectFloat(const TensorType &t, llvm::StringRef what) {
  if (!isFloat(t.dtype))
    return shapeError(what + " must be f32 or f64, got " + t.str());
  return llvm::Error::success();
}

llvm::Error expectInteger(const TensorType &t, llvm::StringRef what) {
  if (!isInteger(t.dtype))
    return shapeError(what + " must be i32 or i64, got " + t.str());
  return llvm::Error::success();
}

llvm::Error expectRank(const TensorType &t, int64_t rank, llvm::StringRef what) {
  if (t.rank() != rank)
    return shapeError(what + " must have rank " + llvm::Twine(rank) + ", got " + t.str());
  return llvm::Error::success();
}

llvm::Error expectSameType(const TensorType &a, const TensorType &b, llvm::StringRef what) {
  if (a != b)
    return shapeError(what + ": " + a.str() + " and " + b.str() + " differ");
  return llvm::Error::success();
}

llvm::Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    return shapeError("axis " + llvm::Twine(axis) + " is out of range for rank " +
                      llvm::Twine(rank));
  return a;
}

double elements(const TensorType &t, int64_t batch) {
  return static_cast<double>(t.numElements(batch, batch));
}

double bytesOf(const TensorType &t, int64_t batch) {
  double n = elements(t, batch) * static_cast<double>(dtypeBytes(t.dtype));
  if (t.sparse && !t.dims.empty())
    n += static_cast<double>(batch) * 8; // the indices
  return n;
}

OpCost elementwiseCost(llvm::ArrayRef<TensorType> operands, llvm::ArrayRef<TensorType> results,
                       const AttrMap &, int64_t batch) {
  OpCost c;
  for (const TensorType &t : operands)
    c.bytes += bytesOf(t, batch);
  for (const TensorType &t : results) {
    c.bytes += bytesOf(t, batch);
    c.flops += elements(t, batch);
  }
  return c;
}

Value *sumLike(GradientContext &ctx, Value *g, Value *ref) {
  if (g->hasType() && ref->hasType() && g->type().dims == ref->type().dims)
    return g;
  return ctx.emit("sum_like", {g, ref});
}

OpDef makeOp(const char *name, const char *summary, std::vector<std::string> operands,
             ShapeRule shape, GradRule grad, std::vector<AttrSpec> attrs, uint32_t traits) {
  OpDef d;
  d.name = name;
  d.summary = summary;
  d.operands = std::move(operands);
  d.shape = shape;
  d.gradient = grad;
  d.attrs = std::move(attrs);
  d.traits = traits;
  return d;
}

AttrSpec attr(const char *name, AttrKind kind, const char *doc) {
  return AttrSpec{name, kind, true, Attr(), doc};
}

AttrSpec attr(const char *name, AttrKind kind, Attr dflt, const char *doc) {
  return AttrSpec{name, kind, false, std::move(dflt), doc};
}

AttrSpec optionalAttr(const char *name, AttrKind kind, const char *doc) {
  return AttrSpec{name, kind, false, Attr(), doc, false};
}

} // namespace prism::ir::ops
