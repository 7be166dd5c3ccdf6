// Concrete tensors of the reference interpreter: a dtype, a concrete shape and float64 data;
// a sparse tensor holds int64 indices and rows [n, D...] of a dense shape [V, D...].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/Type.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::reference {

using Shape = llvm::SmallVector<int64_t, 4>;

// Product of the extents (1 for a scalar).
int64_t shapeElements(llvm::ArrayRef<int64_t> shape);
// Row-major strides: strides[i] is the distance between neighbours along dimension i.
Shape rowMajorStrides(llvm::ArrayRef<int64_t> shape);
// `[2, 3]`
std::string shapeString(llvm::ArrayRef<int64_t> shape);

// Every element is held as a double, whatever the dtype: f32 values are computed in float64,
// integer and bool values are doubles with integral values (exact up to 2^53).
class Tensor {
public:
  // An f32 scalar 0.
  Tensor() : Tensor(ir::DType::F32, {}) {}
  // A dense tensor; `data` is row-major, and empty data means zeros.
  Tensor(ir::DType dtype, llvm::ArrayRef<int64_t> shape, std::vector<double> data = {});
  static Tensor scalar(double value, ir::DType dtype = ir::DType::F32);
  static Tensor filled(ir::DType dtype, llvm::ArrayRef<int64_t> shape, double value);
  // A sparse value of the dense shape [V, D...]: row i of `rows` ([n, D...], row-major) belongs
  // at index indices[i]. Indices may repeat; the value is the sum.
  static Tensor sparse(ir::DType dtype, llvm::ArrayRef<int64_t> denseShape,
                       std::vector<int64_t> indices, std::vector<double> rows);

  ir::DType dtype() const { return dtype_; }
  // The dense shape (of a sparse value: [V, D...]).
  llvm::ArrayRef<int64_t> shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  bool isSparse() const { return sparse_; }
  // Elements of the dense shape.
  int64_t numElements() const { return shapeElements(shape_); }

  // Dense: the elements. Sparse: the rows, [numRows(), D...] row-major.
  std::vector<double> &data() { return data_; }
  const std::vector<double> &data() const { return data_; }
  // Sparse only: the row index of each row.
  std::vector<int64_t> &indices() { return indices_; }
  const std::vector<int64_t> &indices() const { return indices_; }
  // Elements per row of the dense shape: the product of shape[1:].
  int64_t rowSize() const;
  // Sparse: how many (index, row) pairs it carries.
  int64_t numRows() const { return static_cast<int64_t>(indices_.size()); }

  // Dense only: the element at a full index.
  double at(llvm::ArrayRef<int64_t> index) const;
  double &at(llvm::ArrayRef<int64_t> index);

  // The dense value: a sparse value's rows summed into zeros; a dense tensor copied.
  Tensor toDense() const;
  // Sparse: the same value with sorted, distinct indices (rows of duplicates summed).
  Tensor coalesced() const;

  // Checks the invariants a caller could have broken: data length, index range, integral
  // values for integer dtypes.
  llvm::Error validate() const;

  // Whether the tensor can be a value of `type` with B bound to `batch` (B unbound: < 0).
  bool matches(const ir::TensorType &type, int64_t batch) const;

  // `f32[2, 3]`, `sparse f32[10, 4] (3 rows)`
  std::string typeString() const;

private:
  ir::DType dtype_;
  Shape shape_;
  bool sparse_ = false;
  std::vector<double> data_;
  std::vector<int64_t> indices_;
};

// Rounds values to what their dtype can hold: integers truncate toward zero, bool becomes 0/1;
// floating-point values stay as they are (f32 is computed in float64).
void conformToDType(Tensor &t);

} // namespace prism::runtime::reference
