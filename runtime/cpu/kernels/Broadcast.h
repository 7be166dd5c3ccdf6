// Broadcast plans: how an output of one shape reads operands of other shapes, worked out once
// when a kernel is built, so that running it is contiguous inner loops over precomputed offsets.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "llvm/ADT/ArrayRef.h"

namespace prism::runtime::cpu {

// Strides, in elements, of a row-major operand of `shape` read at the indices of `outShape`
// (numpy broadcasting, aligned at the last dimension): 0 along dimensions it repeats.
inline std::vector<int64_t> broadcastStrides(llvm::ArrayRef<int64_t> shape,
                                             llvm::ArrayRef<int64_t> outShape) {
  std::vector<int64_t> strides(outShape.size(), 0);
  int64_t stride = 1;
  size_t lead = outShape.size() - shape.size();
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1)
      strides[lead + i] = stride;
    stride *= shape[i];
  }
  return strides;
}

// The output walked as `rows` rows of `inner` contiguous elements. Operand k's part of row r
// starts at rowStart(k, r) and steps by innerStep[k] along the row: 1, or 0 where the operand
// repeats one element. Dimensions of extent 1 are dropped and neighbouring dimensions that every
// operand walks contiguously are merged first, so that same shapes are one row, [N, C] with [C]
// is N rows with no table, and only genuinely strided patterns keep a table of row starts.
template <size_t N> class BroadcastPlan {
public:
  BroadcastPlan() = default;
  // `strides[k]` are operand k's strides over the dimensions of `outShape`; the innermost
  // stride of each operand must be 0 or 1 (true of broadcasting and of reductions undone).
  BroadcastPlan(llvm::ArrayRef<int64_t> outShape,
                const std::array<std::vector<int64_t>, N> &strides) {
    std::vector<int64_t> dims;
    std::array<std::vector<int64_t>, N> merged;
    for (size_t d = 0; d < outShape.size(); ++d) {
      if (outShape[d] == 1)
        continue;
      bool mergeable = !dims.empty();
      for (size_t k = 0; k < N && mergeable; ++k)
        mergeable = merged[k].back() == strides[k][d] * outShape[d];
      if (mergeable) {
        dims.back() *= outShape[d];
        for (size_t k = 0; k < N; ++k)
          merged[k].back() = strides[k][d];
        continue;
      }
      dims.push_back(outShape[d]);
      for (size_t k = 0; k < N; ++k)
        merged[k].push_back(strides[k][d]);
    }
    total_ = 1;
    for (int64_t d : outShape)
      total_ *= d;
    inner_ = dims.empty() ? 1 : dims.back();
    rows_ = inner_ == 0 ? 0 : total_ / inner_;
    for (size_t k = 0; k < N; ++k) {
      innerStep_[k] = dims.empty() ? 0 : merged[k].back();
      rowStep_[k] = dims.size() == 2 ? merged[k][0] : 0;
    }
    if (dims.size() <= 2 || rows_ == 0)
      return;
    // Several outer dimensions: tabulate each row's start with an odometer over them.
    size_t outer = dims.size() - 1;
    std::vector<int64_t> index(outer, 0);
    for (size_t k = 0; k < N; ++k)
      starts_[k].resize(rows_);
    std::array<int64_t, N> at{};
    for (int64_t r = 0; r < rows_; ++r) {
      for (size_t k = 0; k < N; ++k)
        starts_[k][r] = at[k];
      for (size_t d = outer; d-- > 0;) {
        for (size_t k = 0; k < N; ++k)
          at[k] += merged[k][d];
        if (++index[d] < dims[d])
          break;
        for (size_t k = 0; k < N; ++k)
          at[k] -= merged[k][d] * dims[d];
        index[d] = 0;
      }
    }
  }

  int64_t total() const { return total_; }
  int64_t rows() const { return rows_; }
  int64_t inner() const { return inner_; }
  int64_t innerStep(size_t k) const { return innerStep_[k]; }
  bool singleRow() const { return rows_ <= 1; }
  int64_t rowStart(size_t k, int64_t row) const {
    return starts_[k].empty() ? row * rowStep_[k] : starts_[k][row];
  }

  // Calls piece(outOffset, operandOffsets, count) for the row pieces that cover the output
  // elements [begin, end), in order: the inner loop of a kernel runs over `count` elements.
  template <typename Piece> void forRange(int64_t begin, int64_t end, const Piece &piece) const {
    if (begin >= end)
      return;
    int64_t row = begin / inner_, column = begin % inner_;
    while (begin < end) {
      int64_t count = std::min(inner_ - column, end - begin);
      std::array<int64_t, N> at;
      for (size_t k = 0; k < N; ++k)
        at[k] = rowStart(k, row) + column * innerStep_[k];
      piece(begin, at, count);
      begin += count;
      ++row;
      column = 0;
    }
  }

private:
  int64_t total_ = 0, rows_ = 0, inner_ = 1;
  std::array<int64_t, N> innerStep_{}, rowStep_{};
  std::array<std::vector<int64_t>, N> starts_;
};

} // namespace prism::runtime::cpu
