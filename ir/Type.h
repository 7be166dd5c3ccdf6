// Element types, shapes with a symbolic batch dimension, and tensor types (dense or sparse).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace prism::ir {

enum class DType : uint8_t { F32, F64, I32, I64, Bool };

llvm::StringRef dtypeName(DType dtype);
std::optional<DType> parseDType(llvm::StringRef name);
int64_t dtypeBytes(DType dtype);
inline bool isFloat(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64;
}
inline bool isInteger(DType dtype) {
  return dtype == DType::I32 || dtype == DType::I64;
}

// A dimension is a non-negative extent, or one of these markers.
constexpr int64_t kBatchDim = -(int64_t(1) << 62);       // `B`: the per-run batch size
constexpr int64_t kDynamicDim = -(int64_t(1) << 62) - 1; // `?`: rows of a sparse value

// Largest element count a static shape may describe; beyond it, a shape is rejected as absurd.
constexpr int64_t kMaxElements = int64_t(1) << 40;

using Dims = llvm::SmallVector<int64_t, 4>;

// A tensor type: dtype and shape. A sparse type describes a value of the dense shape [V, D...]
// that is carried as indices i64[?] plus rows [?, D...] (the gradient of a gather).
struct TensorType {
  DType dtype = DType::F32;
  Dims dims;
  bool sparse = false;

  TensorType() = default;
  TensorType(DType dtype, llvm::ArrayRef<int64_t> dims, bool sparse = false)
      : dtype(dtype), dims(dims.begin(), dims.end()), sparse(sparse) {}

  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  bool isScalar() const { return dims.empty(); }
  bool hasBatchDim() const;
  // Element count with `B` bound to `batch`; `?` counts as `rows`.
  int64_t numElements(int64_t batch = 1, int64_t rows = 1) const;
  // The dense counterpart of a sparse type (same dims, sparse = false).
  TensorType dense() const { return TensorType(dtype, dims, false); }

  bool operator==(const TensorType &o) const {
    return dtype == o.dtype && dims == o.dims && sparse == o.sparse;
  }
  bool operator!=(const TensorType &o) const { return !(*this == o); }

  // Text form: `f32[B, 784]`, `i64[]`, `sparse f32[100000, 64]`.
  std::string str() const;
};

std::string dimString(int64_t dim);

} // namespace prism::ir
