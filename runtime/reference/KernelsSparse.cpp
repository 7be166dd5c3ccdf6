// Reference kernels of embedding lookups and sparse values: gather, gather_grad, sparse_add,
// sparse_to_dense; and combine_towers, which sums dense or sparse values of in-graph towers.
#include "runtime/BatchSplit.h"
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

llvm::Expected<KernelResults> touchedRowsKernel(const KernelArgs &args) {
  Tensor out = zeroResult(args);
  for (int64_t index : args.operand(0).indices())
    out.data()[static_cast<size_t>(index)] = 1;
  return single(std::move(out));
}

llvm::Expected<KernelResults> sparseFromDenseKernel(const KernelArgs &args) {
  const Tensor &g = args.operand(0), &mask = args.operand(1);
  int64_t d = g.rowSize();
  std::vector<int64_t> indices;
  std::vector<double> rows;
  for (size_t i = 0; i < mask.data().size(); ++i)
    if (mask.data()[i] != 0) {
      indices.push_back(static_cast<int64_t>(i));
      rows.insert(rows.end(), g.data().begin() + static_cast<int64_t>(i) * d,
                  g.data().begin() + static_cast<int64_t>(i + 1) * d);
    }
  return single(
      Tensor::sparse(args.resultDType(), args.resultShape(), std::move(indices), std::move(rows)));
}

// combine_towers(x₀, ..., xₙ₋₁) = Σ bᵢ xᵢ / B, with bᵢ tower i's rows of the step's batch of B
// (runtime/BatchSplit.h); sparse values keep every tower's rows, each scaled by its tower's
// weight.
llvm::Expected<KernelResults> combineTowersKernel(const KernelArgs &args) {
  const int64_t towers = args.numOperands(), batch = args.batch;
  if (batch < 1)
    return kernelError(
        "combines " + std::to_string(towers) + " towers' values but the step's batch is " +
        (batch < 0 ? std::string("not bound (no input has B)") : std::to_string(batch)));
  auto weight = [&](int64_t t) {
    return static_cast<double>(splitBatch(batch, t, towers).size) / static_cast<double>(batch);
  };
  if (!args.operand(0).isSparse()) {
    Tensor out = zeroResult(args);
    for (int64_t t = 0; t < towers; ++t)
      for (size_t i = 0; i < out.data().size(); ++i)
        out.data()[i] += weight(t) * args.operand(t).data()[i];
    return single(std::move(out));
  }
  std::vector<int64_t> indices;
  std::vector<double> rows;
  for (int64_t t = 0; t < towers; ++t) {
    const Tensor &x = args.operand(t);
    indices.insert(indices.end(), x.indices().begin(), x.indices().end());
    for (double v : x.data())
      rows.push_back(weight(t) * v);
  }
  return single(
      Tensor::sparse(args.resultDType(), args.resultShape(), std::move(indices), std::move(rows)));
}

} // namespace

void registerSparseKernels(KernelTable &t) {
  t["combine_towers"] = {combineTowersKernel, ~0u};
  t["gather"] = {gatherKernel};
  t["gather_grad"] = {gatherGradKernel};
  t["sparse_add"] = {sparseAddKernel, 0b11};
  t["sparse_to_dense"] = {sparseToDenseKernel, 0b1};
  t["touched_rows"] = {touchedRowsKernel, 0b1};
  t["sparse_from_dense"] = {sparseFromDenseKernel};
}

} // namespace prism::runtime::reference::kernels
