// Reference kernels of embedding lookups and sparse values: gather, gather_grad, sparse_add,
// sparse_to_dense.
#include "runtime/reference/KernelSupport.h"

namespace prism::runtime::reference::kernels {
namespace {

llvm::Error checkIndices(const Tensor &indices, int64_t rows, llvm::StringRef what) {
  for (size_t i = 0; i < indices.data().size(); ++i) {
    double index = indices.data()[i];
    if (index < 0 || index >= static_cast<double>(rows))
      return kernelError("index " + llvm::Twine(static_cast<int64_t>(index)) + " (element " +
                         llvm::Twine(i) + " of the indices) is outside [0, " + llvm::Twine(rows) +
                         ") for " + what);
  }
  return llvm::Error::success();
}

// out[i..., :] = table[indices[i...], :]
llvm::Expected<KernelResults> gatherKernel(const KernelArgs &args) {
  const Tensor &table = args.operand(0), &indices = args.operand(1);
  int64_t rows = table.shape()[0];
  if (auto e = checkIndices(indices, rows, "a table of " + std::to_string(rows) + " rows"))
    return std::move(e);
  int64_t d = table.rowSize();
  Tensor out = zeroResult(args);
  for (size_t i = 0; i < indices.data().size(); ++i) {
    int64_t row = static_cast<int64_t>(indices.data()[i]);
    std::copy_n(table.data().begin() + row * d, d, out.data().begin() + i * d);
  }
  return single(std::move(out));
}

// (dy[I..., D...], indices[I...]) -> sparse [num_rows, D...]: the indices flattened, and dy's
// data as the rows [n, D...].
llvm::Expected<KernelResults> gatherGradKernel(const KernelArgs &args) {
  const Tensor &dy = args.operand(0), &indices = args.operand(1);
  int64_t rows = args.attrs.getInt("num_rows");
  if (auto e = checkIndices(indices, rows, "num_rows = " + std::to_string(rows)))
    return std::move(e);
  std::vector<int64_t> flat(indices.data().begin(), indices.data().end());
  return single(Tensor::sparse(args.resultDType(), args.resultShape(), std::move(flat), dy.data()));
}

// Summing two sparse values concatenates their (index, row) pairs; duplicates stay.
llvm::Expected<KernelResults> sparseAddKernel(const KernelArgs &args) {
  const Tensor &a = args.operand(0), &b = args.operand(1);
  std::vector<int64_t> indices = a.indices();
  indices.insert(indices.end(), b.indices().begin(), b.indices().end());
  std::vector<double> rows = a.data();
  rows.insert(rows.end(), b.data().begin(), b.data().end());
  return single(
      Tensor::sparse(args.resultDType(), args.resultShape(), std::move(indices), std::move(rows)));
}

llvm::Expected<KernelResults> sparseToDenseKernel(const KernelArgs &args) {
  return single(args.operand(0).toDense());
}

} // namespace

void registerSparseKernels(KernelTable &t) {
  t["gather"] = {gatherKernel};
  t["gather_grad"] = {gatherGradKernel};
  t["sparse_add"] = {sparseAddKernel, 0b11};
  t["sparse_to_dense"] = {sparseToDenseKernel, 0b1};
}

} // namespace prism::runtime::reference::kernels
