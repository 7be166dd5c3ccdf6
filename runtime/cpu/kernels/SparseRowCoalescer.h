// Sums the rows of repeated indices of a sparse value, so that optimizer updates and norms see
// each row of the table once (the reference semantics of a sparse value is the sum of its rows).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/cpu/Kernel.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::cpu {

class SparseRowCoalescer {
public:
  // For sparse values of dense shape [tableRows, rowSize...] with f32 rows.
  SparseRowCoalescer(int64_t tableRows, int64_t rowSize);

  // Coalesces `value` (sparse); the result stays valid until the next call or until the rows
  // of `value` change. An index outside [0, tableRows) is an error.
  llvm::Error coalesce(const RuntimeValue &value);

  // The distinct indices, in order of first appearance, and the summed row of each (rowSize
  // floats). A row that appears once is read in place; only repeated rows are summed.
  llvm::ArrayRef<int64_t> indices() const { return distinct_; }
  const float *row(int64_t r) const { return rowOf_[static_cast<size_t>(r)]; }
  int64_t numRows() const { return static_cast<int64_t>(distinct_.size()); }
  int64_t rowSize() const { return rowSize_; }

private:
  void forget();

  int64_t tableRows_;
  int64_t rowSize_;
  // Slot of each table row seen in this call, -1 otherwise. A flat array is much faster than
  // a hash map and is used while it stays small; huge tables fall back to the map.
  bool useFlatSlots_;
  std::vector<int32_t> flatSlots_;
  llvm::DenseMap<int64_t, int32_t> mapSlots_;
  std::vector<int64_t> distinct_;
  std::vector<int32_t> slotOfPosition_;
  std::vector<int32_t> firstPosition_;
  std::vector<int32_t> occurrences_;
  std::vector<int32_t> summedSlot_; // where a repeated row is summed, -1 for a single row
  std::vector<float> summed_;
  std::vector<const float *> rowOf_;
};

} // namespace prism::runtime::cpu
