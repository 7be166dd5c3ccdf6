// CPU kernels of embedding lookups and sparse values: gather, gather_grad, sparse_add,
// sparse_to_dense, and the row coalescing that optimizer updates and norms share.
#include <algorithm>
#include <cstring>

#include "ir/Diagnostic.h"
#include "runtime/cpu/Kernel.h"
#include "runtime/cpu/kernels/Parallel.h"
#include "runtime/cpu/kernels/SparseRowCoalescer.h"
#include "runtime/cpu/kernels/TargetClones.h"
#include "llvm/ADT/Twine.h"

namespace prism::runtime::cpu {
namespace {

// Below this many bytes moved, starting threads costs more than it saves.
constexpr int64_t kParallelBytes = int64_t(1) << 18;

// A flat slot array for up to this many table rows (16 MiB of int32); larger tables use a map.
constexpr int64_t kMaxFlatSlots = int64_t(1) << 22;

llvm::Error kernelError(const llvm::Twine &message) {
  return ir::makeError(message);
}

int64_t rowElements(llvm::ArrayRef<int64_t> denseDims) {
  int64_t n = 1;
  for (size_t i = 1; i < denseDims.size(); ++i)
    n *= denseDims[i];
  return n;
}

// The shape of the rows of a sparse value of dense shape [V, D...]: [n, D...].
std::vector<int64_t> rowsShape(int64_t n, llvm::ArrayRef<int64_t> denseDims) {
  std::vector<int64_t> shape{n};
  shape.insert(shape.end(), denseDims.begin() + 1, denseDims.end());
  return shape;
}

// Gives `t` the dtype and shape, keeping its storage when the element count is unchanged:
// sparse outputs are allocated by their kernels, and their size rarely changes between steps.
void reshapeOrAllocate(Tensor &t, ir::DType dtype, std::vector<int64_t> shape) {
  int64_t elements = 1;
  for (int64_t d : shape)
    elements *= d;
  if (!t.empty() && t.dtype() == dtype && t.numElements() == elements)
    t = t.reshaped(std::move(shape));
  else
    t = Tensor(dtype, std::move(shape));
}

// An error naming the first index outside [0, rows) and its position in the flattened indices.
template <typename IndexT>
llvm::Error checkIndices(const IndexT *indices, int64_t count, int64_t rows,
                         const llvm::Twine &what) {
  // One branch-free pass (vectorizable); the slow search runs only when something is wrong.
  bool outside = false;
  for (int64_t i = 0; i < count; ++i)
    outside |=
        static_cast<uint64_t>(static_cast<int64_t>(indices[i])) >= static_cast<uint64_t>(rows);
  if (!outside)
    return llvm::Error::success();
  for (int64_t i = 0; i < count; ++i) {
    int64_t index = static_cast<int64_t>(indices[i]);
    if (index < 0 || index >= rows)
      return kernelError("index " + llvm::Twine(index) + " (element " + llvm::Twine(i) +
                         " of the indices) is outside [0, " + llvm::Twine(rows) + ") for " + what);
  }
  return llvm::Error::success();
}

llvm::Error checkIndexType(const ir::TensorType &type) {
  if (type.dtype != ir::DType::I32 && type.dtype != ir::DType::I64)
    return kernelError("indices must be i32 or i64, got " + type.str());
  return llvm::Error::success();
}

// to[j] += from[j]: a row summed into another (sparse values add their repeated rows).
template <typename T>
PRISM_TARGET_CLONES void addRow(T *__restrict to, const T *__restrict from, int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    to[j] += from[j];
}

// Rows of whole cache lines are copied line by line with inlined moves: a call to memcpy per
// row costs as much as the copy for the short rows of embedding tables.
PRISM_ALWAYS_INLINE void copyRow(char *to, const char *from, int64_t bytes) {
  constexpr int64_t kLineBytes = 64;
  if (bytes % kLineBytes != 0) {
    std::memcpy(to, from, static_cast<size_t>(bytes));
    return;
  }
  for (int64_t offset = 0; offset < bytes; offset += kLineBytes)
    __builtin_memcpy(to + offset, from + offset, kLineBytes);
}

// Rows [begin, end) of a gather: out row i is table row indices[i]. The rows are scattered
// over a table usually much larger than the caches, so each row is asked for a few iterations
// before it is copied.
template <typename IndexT>
PRISM_TARGET_CLONES void gatherRows(char *out, const char *table, const IndexT *indices,
                                    int64_t rowBytes, int64_t begin, int64_t end) {
  constexpr int64_t kRowsAhead = 8, kLineBytes = 64, kMostLines = 16;
  const int64_t lines = std::min(kMostLines, (rowBytes + kLineBytes - 1) / kLineBytes);
  for (int64_t i = begin; i < end; ++i) {
    if (i + kRowsAhead < end) {
      const char *ahead = table + static_cast<int64_t>(indices[i + kRowsAhead]) * rowBytes;
      for (int64_t line = 0; line < lines; ++line)
        __builtin_prefetch(ahead + line * kLineBytes, /*write=*/0, /*keep=*/3);
    }
    copyRow(out + i * rowBytes, table + static_cast<int64_t>(indices[i]) * rowBytes, rowBytes);
  }
}

// out[i..., :] = table[indices[i...], :]. Rows are copied as bytes, so any dtype works.
template <typename IndexT> class GatherKernel final : public Kernel {
public:
  GatherKernel(int64_t tableRows, int64_t rowBytes, int threads)
      : tableRows_(tableRows), rowBytes_(rowBytes), threads_(threads) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const char *table = static_cast<const char *>(inputs[0]->dense.raw());
    const IndexT *indices = inputs[1]->dense.data<IndexT>();
    int64_t count = inputs[1]->dense.numElements();
    if (auto err = checkIndices(indices, count, tableRows_,
                                "a table of " + llvm::Twine(tableRows_) + " rows"))
      return err;
    char *out = static_cast<char *>(outputs[0]->dense.raw());
    // Two threads from kParallelBytes moved.
    const int64_t grain =
        std::max<int64_t>(1, kParallelBytes / 2 / std::max<int64_t>(rowBytes_, 1));
    parallelFor(count, threads_, grain, [&](int64_t begin, int64_t end) {
      gatherRows(out, table, indices, rowBytes_, begin, end);
    });
    return llvm::Error::success();
  }

private:
  int64_t tableRows_;
  int64_t rowBytes_;
  int threads_;
};

// (dy[I..., D...], indices[I...]) -> sparse: the indices flattened to i64, dy's elements as the
// rows [n, D...]. The rows are copied: dy's buffer is reused once this kernel has read it.
template <typename IndexT> class GatherGradKernel final : public Kernel {
public:
  explicit GatherGradKernel(const ir::TensorType &outputType)
      : numRows_(outputType.dims[0]), denseDims_(outputType.dims.begin(), outputType.dims.end()),
        dtype_(outputType.dtype) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const Tensor &dy = inputs[0]->dense;
    const IndexT *indices = inputs[1]->dense.data<IndexT>();
    int64_t count = inputs[1]->dense.numElements();
    if (auto err = checkIndices(indices, count, numRows_, "num_rows = " + llvm::Twine(numRows_)))
      return err;
    RuntimeValue &out = *outputs[0];
    out.sparse = true;
    reshapeOrAllocate(out.indices, ir::DType::I64, {count});
    int64_t *flat = out.indices.data<int64_t>();
    for (int64_t i = 0; i < count; ++i)
      flat[i] = static_cast<int64_t>(indices[i]);
    reshapeOrAllocate(out.rows(), dtype_, rowsShape(count, denseDims_));
    if (dy.numBytes())
      std::memcpy(out.rows().raw(), dy.raw(), static_cast<size_t>(dy.numBytes()));
    return llvm::Error::success();
  }

private:
  int64_t numRows_;
  std::vector<int64_t> denseDims_;
  ir::DType dtype_;
};

// a + b of two sparse values: their (index, row) pairs concatenated; duplicates stay.
class SparseAddKernel final : public Kernel {
public:
  explicit SparseAddKernel(const ir::TensorType &outputType)
      : denseDims_(outputType.dims.begin(), outputType.dims.end()), dtype_(outputType.dtype) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const RuntimeValue &a = *inputs[0], &b = *inputs[1];
    int64_t na = a.numRows(), nb = b.numRows();
    RuntimeValue &out = *outputs[0];
    out.sparse = true;
    reshapeOrAllocate(out.indices, ir::DType::I64, {na + nb});
    reshapeOrAllocate(out.rows(), dtype_, rowsShape(na + nb, denseDims_));
    char *indices = static_cast<char *>(out.indices.raw());
    char *rows = static_cast<char *>(out.rows().raw());
    copyBytes(indices, a.indices);
    copyBytes(indices + a.indices.numBytes(), b.indices);
    copyBytes(rows, a.rows());
    copyBytes(rows + a.rows().numBytes(), b.rows());
    return llvm::Error::success();
  }

private:
  static void copyBytes(char *to, const Tensor &from) {
    if (from.numBytes())
      std::memcpy(to, from.raw(), static_cast<size_t>(from.numBytes()));
  }

  std::vector<int64_t> denseDims_;
  ir::DType dtype_;
};

// A sparse value summed into zeros of its dense shape.
template <typename T> class SparseToDenseKernel final : public Kernel {
public:
  SparseToDenseKernel(int64_t tableRows, int64_t rowSize)
      : tableRows_(tableRows), rowSize_(rowSize) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const RuntimeValue &s = *inputs[0];
    const int64_t *indices = s.indices.data<int64_t>();
    int64_t count = s.numRows();
    if (auto err = checkIndices(indices, count, tableRows_,
                                "a sparse value of " + llvm::Twine(tableRows_) + " rows"))
      return err;
    Tensor &out = outputs[0]->dense;
    out.fillZero();
    T *dense = out.data<T>();
    const T *rows = s.rows().data<T>();
    const int64_t d = rowSize_;
    for (int64_t r = 0; r < count; ++r)
      addRow(dense + indices[r] * d, rows + r * d, d);
    return llvm::Error::success();
  }

private:
  int64_t tableRows_;
  int64_t rowSize_;
};

llvm::Expected<std::unique_ptr<Kernel>> makeGather(const KernelSpec &spec) {
  const ir::TensorType &table = spec.inputTypes[0], &indices = spec.inputTypes[1];
  if (table.sparse)
    return kernelError("the table must be dense");
  if (auto err = checkIndexType(indices))
    return std::move(err);
  int64_t rowBytes = rowElements(table.dims) * ir::dtypeBytes(table.dtype);
  if (indices.dtype == ir::DType::I32)
    return std::make_unique<GatherKernel<int32_t>>(table.dims[0], rowBytes, spec.threads);
  return std::make_unique<GatherKernel<int64_t>>(table.dims[0], rowBytes, spec.threads);
}

llvm::Expected<std::unique_ptr<Kernel>> makeGatherGrad(const KernelSpec &spec) {
  if (auto err = checkIndexType(spec.inputTypes[1]))
    return std::move(err);
  if (spec.inputTypes[1].dtype == ir::DType::I32)
    return std::make_unique<GatherGradKernel<int32_t>>(spec.outputTypes[0]);
  return std::make_unique<GatherGradKernel<int64_t>>(spec.outputTypes[0]);
}

llvm::Expected<std::unique_ptr<Kernel>> makeSparseAdd(const KernelSpec &spec) {
  if (!spec.inputTypes[0].sparse || !spec.inputTypes[1].sparse)
    return kernelError("both operands must be sparse");
  return std::make_unique<SparseAddKernel>(spec.outputTypes[0]);
}

llvm::Expected<std::unique_ptr<Kernel>> makeSparseToDense(const KernelSpec &spec) {
  const ir::TensorType &type = spec.inputTypes[0];
  if (!type.sparse)
    return kernelError("the operand must be sparse");
  int64_t rowSize = rowElements(type.dims);
  if (type.dtype == ir::DType::F32)
    return std::make_unique<SparseToDenseKernel<float>>(type.dims[0], rowSize);
  if (type.dtype == ir::DType::F64)
    return std::make_unique<SparseToDenseKernel<double>>(type.dims[0], rowSize);
  return kernelError("sparse values must be f32 or f64, got " + type.str());
}

template <typename T> class TouchedRowsKernel final : public Kernel {
public:
  explicit TouchedRowsKernel(int64_t tableRows) : tableRows_(tableRows) {}
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const RuntimeValue &s = *inputs[0];
    const int64_t *indices = s.indices.data<int64_t>();
    if (auto err = checkIndices(indices, s.numRows(), tableRows_,
                                "a sparse value of " + llvm::Twine(tableRows_) + " rows"))
      return err;
    Tensor &out = outputs[0]->dense;
    out.fillZero();
    for (int64_t r = 0; r < s.numRows(); ++r)
      out.data<T>()[indices[r]] = T(1);
    return llvm::Error::success();
  }

private:
  int64_t tableRows_;
};

template <typename T> class SparseFromDenseKernel final : public Kernel {
public:
  explicit SparseFromDenseKernel(std::vector<int64_t> dims) : dims_(std::move(dims)) {}
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const T *g = inputs[0]->dense.data<T>(), *mask = inputs[1]->dense.data<T>();
    int64_t d = rowElements(dims_), n = 0;
    for (int64_t i = 0; i < dims_[0]; ++i)
      n += mask[i] != T(0);
    RuntimeValue &out = *outputs[0];
    reshapeOrAllocate(out.indices, ir::DType::I64, {n});
    reshapeOrAllocate(out.rows(), inputs[0]->dense.dtype(), rowsShape(n, dims_));
    int64_t at = 0;
    for (int64_t i = 0; i < dims_[0]; ++i)
      if (mask[i] != T(0)) {
        out.indices.data<int64_t>()[at] = i;
        std::memcpy(out.rows().data<T>() + at * d, g + i * d, static_cast<size_t>(d) * sizeof(T));
        ++at;
      }
    return llvm::Error::success();
  }

private:
  std::vector<int64_t> dims_;
};

llvm::Expected<std::unique_ptr<Kernel>> makeTouchedRows(const KernelSpec &spec) {
  const ir::TensorType &type = spec.inputTypes[0];
  if (type.dtype == ir::DType::F32)
    return std::make_unique<TouchedRowsKernel<float>>(type.dims[0]);
  if (type.dtype == ir::DType::F64)
    return std::make_unique<TouchedRowsKernel<double>>(type.dims[0]);
  return kernelError("sparse values must be f32 or f64, got " + type.str());
}

llvm::Expected<std::unique_ptr<Kernel>> makeSparseFromDense(const KernelSpec &spec) {
  const ir::TensorType &type = spec.inputTypes[0];
  std::vector<int64_t> dims(type.dims.begin(), type.dims.end());
  if (type.dtype == ir::DType::F32)
    return std::make_unique<SparseFromDenseKernel<float>>(dims);
  if (type.dtype == ir::DType::F64)
    return std::make_unique<SparseFromDenseKernel<double>>(dims);
  return kernelError("values must be f32 or f64, got " + type.str());
}

} // namespace

SparseRowCoalescer::SparseRowCoalescer(int64_t tableRows, int64_t rowSize)
    : tableRows_(tableRows), rowSize_(rowSize), useFlatSlots_(tableRows <= kMaxFlatSlots) {}

void SparseRowCoalescer::forget() {
  if (useFlatSlots_)
    for (int64_t index : distinct_)
      flatSlots_[static_cast<size_t>(index)] = -1;
  else
    mapSlots_.clear();
}

llvm::Error SparseRowCoalescer::coalesce(const RuntimeValue &value) {
  const int64_t *indices = value.indices.data<int64_t>();
  const int64_t count = value.numRows();
  if (auto err = checkIndices(indices, count, tableRows_,
                              "a sparse value of " + llvm::Twine(tableRows_) + " rows"))
    return err;
  if (useFlatSlots_ && flatSlots_.empty())
    flatSlots_.assign(static_cast<size_t>(tableRows_), -1);

  // Slots in order of first appearance; the slot table is cleared again before returning, so
  // each call costs time in the number of rows, not in the size of the table.
  distinct_.clear();
  firstPosition_.clear();
  occurrences_.clear();
  slotOfPosition_.resize(static_cast<size_t>(count));
  for (int64_t p = 0; p < count; ++p) {
    int32_t next = static_cast<int32_t>(distinct_.size());
    int32_t slot;
    if (useFlatSlots_) {
      // The slot table outgrows the caches that the updates between two calls leave us.
      constexpr int64_t kAhead = 16;
      if (p + kAhead < count)
        __builtin_prefetch(&flatSlots_[static_cast<size_t>(indices[p + kAhead])], 1, 3);
      int32_t &flat = flatSlots_[static_cast<size_t>(indices[p])];
      if (flat < 0)
        flat = next;
      slot = flat;
    } else {
      slot = mapSlots_.try_emplace(indices[p], next).first->second;
    }
    if (slot == next) {
      distinct_.push_back(indices[p]);
      firstPosition_.push_back(static_cast<int32_t>(p));
      occurrences_.push_back(0);
    }
    ++occurrences_[static_cast<size_t>(slot)];
    slotOfPosition_[static_cast<size_t>(p)] = slot;
  }
  forget();

  // Rows that appear once are used where they are; repeated ones are summed into summed_.
  const float *rows = value.rows().data<float>();
  const int64_t d = rowSize_;
  const size_t distinct = distinct_.size();
  rowOf_.resize(distinct);
  summedSlot_.resize(distinct);
  int64_t repeated = 0;
  for (size_t s = 0; s < distinct; ++s) {
    if (occurrences_[s] == 1) {
      summedSlot_[s] = -1;
      rowOf_[s] = rows + firstPosition_[s] * d;
    } else {
      summedSlot_[s] = static_cast<int32_t>(repeated++);
    }
  }
  if (repeated == 0)
    return llvm::Error::success();
  summed_.resize(static_cast<size_t>(repeated * d));
  float *summed = summed_.data();
  for (int64_t p = 0; p < count; ++p) {
    int32_t slot = slotOfPosition_[static_cast<size_t>(p)];
    int32_t target = summedSlot_[static_cast<size_t>(slot)];
    if (target < 0)
      continue;
    float *to = summed + target * d;
    const float *from = rows + p * d;
    if (firstPosition_[static_cast<size_t>(slot)] == p)
      std::memcpy(to, from, static_cast<size_t>(d) * sizeof(float));
    else
      addRow(to, from, d);
  }
  for (size_t s = 0; s < distinct; ++s)
    if (summedSlot_[s] >= 0)
      rowOf_[s] = summed + summedSlot_[s] * d;
  return llvm::Error::success();
}

void registerSparseKernels(KernelRegistry &registry) {
  registry.add("gather", makeGather);
  registry.add("gather_grad", makeGatherGrad);
  registry.add("sparse_add", makeSparseAdd);
  registry.add("sparse_to_dense", makeSparseToDense);
  registry.add("touched_rows", makeTouchedRows);
  registry.add("sparse_from_dense", makeSparseFromDense);
}

} // namespace prism::runtime::cpu
