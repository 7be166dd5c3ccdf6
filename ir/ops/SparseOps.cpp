// Embedding lookups and the sparse values their gradients are: gather, gather_grad,
// sparse_add (concatenation), sparse_to_dense.
#include "ir/ops/OpHelpers.h"

namespace prism::ir::ops {
namespace {

ShapeResult gatherShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  const TensorType &table = in[0], &indices = in[1];
  if (auto e = expectDense(table, "table"))
    return std::move(e);
  if (table.rank() < 1 || table.dims[0] < 0)
    return shapeError("table must have a static first dimension, got " + table.str());
  if (auto e = expectInteger(indices, "indices"))
    return std::move(e);
  Dims out(indices.dims.begin(), indices.dims.end());
  out.append(table.dims.begin() + 1, table.dims.end());
  return Types{TensorType(table.dtype, out)};
}

OpCost gatherCost(llvm::ArrayRef<TensorType> in, llvm::ArrayRef<TensorType> out, const AttrMap &,
                  int64_t batch) {
  // Only the gathered rows are read, not the whole table.
  OpCost c;
  c.bytes = 2 * bytesOf(out[0], batch) + bytesOf(in[1], batch);
  return c;
}

void gatherGrad(GradientContext &c) {
  Value *dy = c.resultGrad();
  if (!dy)
    return;
  AttrMap a;
  a.set("num_rows", Attr::integer(c.operand(0)->type().dims[0]));
  c.setGrad(0, c.emit("gather_grad", {dy, c.operand(1)}, a));
}

// (dy[I..., D...], indices[I...]) -> sparse [num_rows, D...]
ShapeResult gatherGradShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  const TensorType &dy = in[0], &indices = in[1];
  if (auto e = expectInteger(indices, "indices"))
    return std::move(e);
  if (dy.rank() < indices.rank() ||
      !std::equal(indices.dims.begin(), indices.dims.end(), dy.dims.begin()))
    return shapeError("gradient " + dy.str() + " does not start with the indices' shape " +
                      indices.str());
  int64_t rows = attrs.getInt("num_rows");
  if (rows <= 0)
    return shapeError("num_rows must be positive");
  Dims out{rows};
  out.append(dy.dims.begin() + indices.rank(), dy.dims.end());
  return Types{TensorType(dy.dtype, out, /*sparse=*/true)};
}

OpCost gatherGradCost(llvm::ArrayRef<TensorType> in, llvm::ArrayRef<TensorType>, const AttrMap &,
                      int64_t batch) {
  OpCost c;
  c.bytes = 2 * bytesOf(in[0], batch) + bytesOf(in[1], batch);
  return c;
}

ShapeResult sparseAddShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (!in[0].sparse || !in[1].sparse)
    return shapeError("operands must be sparse, got " + in[0].str() + " and " + in[1].str());
  if (auto e = expectSameType(in[0], in[1], "sparse operands"))
    return std::move(e);
  return Types{in[0]};
}

ShapeResult sparseToDenseShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (!in[0].sparse)
    return shapeError("operand must be sparse, got " + in[0].str());
  return Types{in[0].dense()};
}

ShapeResult touchedRowsShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (!in[0].sparse || in[0].rank() < 1)
    return shapeError("operand must be a sparse table value, got " + in[0].str());
  return Types{TensorType(in[0].dtype, {in[0].dims[0]})};
}

ShapeResult sparseFromDenseShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  const TensorType &g = in[0], &mask = in[1];
  if (auto e = expectDense(g, "values"))
    return std::move(e);
  if (g.rank() < 1 || mask.rank() != 1 || mask.dims[0] != g.dims[0] || mask.dtype != g.dtype)
    return shapeError("mask must be " + TensorType(g.dtype, {g.rank() ? g.dims[0] : 1}).str() +
                      " for values " + g.str() + ", got " + mask.str());
  return Types{TensorType(g.dtype, g.dims, /*sparse=*/true)};
}

// Most of these ops take no attributes: their traits come right after the gradient rule.
OpDef def(const char *name, const char *summary, std::vector<std::string> operands, ShapeRule shape,
          GradRule grad, uint32_t traits = 0) {
  return makeOp(name, summary, std::move(operands), shape, grad, {}, traits);
}

} // namespace

void registerSparseOps(std::vector<OpDef> &t) {
  OpDef gather = def("gather",
                     "rows of table picked by integer indices: out[i..., :] = "
                     "table[indices[i...], :]",
                     {"table", "indices"}, gatherShape, gatherGrad);
  gather.sparseGradOperands = 1u << 0;
  gather.cost = gatherCost;
  t.push_back(gather);
  OpDef gg =
      def("gather_grad", "the sparse gradient of gather: indices (flattened) and the rows of dy",
          {"dy", "indices"}, gatherGradShape, nullptr, kGradientOnly);
  gg.attrs = {attr("num_rows", AttrKind::Int, "rows of the table")};
  gg.cost = gatherGradCost;
  t.push_back(gg);
  t.push_back(def("sparse_add", "sum of two sparse values: their (indices, rows) concatenated",
                  {"a", "b"}, sparseAddShape, nullptr, kGradientOnly));
  t.push_back(def("sparse_to_dense", "a sparse value scattered (summed) into zeros", {"s"},
                  sparseToDenseShape, nullptr, kGradientOnly));
  t.push_back(def("touched_rows", "1 for each row a sparse value has (any number of times), else 0",
                  {"s"}, touchedRowsShape, nullptr, kGradientOnly));
  t.push_back(def("sparse_from_dense",
                  "the rows i of dense values g where mask[i] != 0, as a sparse value",
                  {"g", "mask"}, sparseFromDenseShape, nullptr, kGradientOnly));
}

} // namespace prism::ir::ops
