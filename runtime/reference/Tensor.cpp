// Concrete tensors of the reference interpreter.
#include "runtime/reference/Tensor.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <map>

#include "ir/Attribute.h"
#include "ir/Diagnostic.h"

namespace prism::runtime::reference {

int64_t shapeElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Shape rowMajorStrides(llvm::ArrayRef<int64_t> shape) {
  Shape strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    strides[i - 1] = strides[i] * shape[i];
  return strides;
}

std::string shapeString(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor::Tensor(ir::DType dtype, llvm::ArrayRef<int64_t> shape, std::vector<double> data)
    : dtype_(dtype), shape_(shape.begin(), shape.end()), data_(std::move(data)) {
  if (data_.empty())
    data_.assign(static_cast<size_t>(std::max<int64_t>(shapeElements(shape_), 0)), 0.0);
}

Tensor Tensor::scalar(double value, ir::DType dtype) {
  return Tensor(dtype, {}, {value});
}

Tensor Tensor::filled(ir::DType dtype, llvm::ArrayRef<int64_t> shape, double value) {
  Tensor t(dtype, shape);
  std::fill(t.data_.begin(), t.data_.end(), value);
  return t;
}

Tensor Tensor::sparse(ir::DType dtype, llvm::ArrayRef<int64_t> denseShape,
                      std::vector<int64_t> indices, std::vector<double> rows) {
  Tensor t(dtype, {});
  t.shape_.assign(denseShape.begin(), denseShape.end());
  t.sparse_ = true;
  t.indices_ = std::move(indices);
  t.data_ = std::move(rows);
  return t;
}

int64_t Tensor::rowSize() const {
  return shape_.empty() ? 1 : shapeElements(llvm::ArrayRef<int64_t>(shape_).drop_front());
}

static int64_t flatIndex(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> index) {
  assert(index.size() == shape.size() && "index rank differs from the tensor's");
  int64_t flat = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    assert(index[i] >= 0 && index[i] < shape[i] && "index out of range");
    flat = flat * shape[i] + index[i];
  }
  return flat;
}

double Tensor::at(llvm::ArrayRef<int64_t> index) const {
  assert(!sparse_ && "at() reads dense tensors");
  return data_[flatIndex(shape_, index)];
}

double &Tensor::at(llvm::ArrayRef<int64_t> index) {
  assert(!sparse_ && "at() reads dense tensors");
  return data_[flatIndex(shape_, index)];
}

Tensor Tensor::toDense() const {
  if (!sparse_)
    return *this;
  Tensor out(dtype_, shape_);
  int64_t d = rowSize();
  for (size_t r = 0; r < indices_.size(); ++r)
    for (int64_t j = 0; j < d; ++j)
      out.data_[indices_[r] * d + j] += data_[r * d + j];
  return out;
}

Tensor Tensor::coalesced() const {
  assert(sparse_ && "coalesced() is for sparse values");
  int64_t d = rowSize();
  std::map<int64_t, std::vector<double>> sums;
  for (size_t r = 0; r < indices_.size(); ++r) {
    auto &row = sums[indices_[r]];
    row.resize(d, 0.0);
    for (int64_t j = 0; j < d; ++j)
      row[j] += data_[r * d + j];
  }
  std::vector<int64_t> indices;
  std::vector<double> rows;
  for (auto &[index, row] : sums) {
    indices.push_back(index);
    rows.insert(rows.end(), row.begin(), row.end());
  }
  return sparse(dtype_, shape_, std::move(indices), std::move(rows));
}

llvm::Error Tensor::validate() const {
  for (int64_t d : shape_)
    if (d < 0)
      return ir::makeError("tensor " + typeString() + " has a negative dimension");
  if (sparse_) {
    if (shape_.empty())
      return ir::makeError("a sparse tensor needs a shape of rank 1 or more");
    if (static_cast<int64_t>(data_.size()) != numRows() * rowSize())
      return ir::makeError("sparse tensor " + typeString() + " has " + llvm::Twine(data_.size()) +
                           " row elements, expected " + llvm::Twine(numRows() * rowSize()));
    for (int64_t index : indices_)
      if (index < 0 || index >= shape_[0])
        return ir::makeError("sparse tensor " + typeString() + " has row index " +
                             llvm::Twine(index) + " outside [0, " + llvm::Twine(shape_[0]) + ")");
  } else if (static_cast<int64_t>(data_.size()) != numElements()) {
    return ir::makeError("tensor " + typeString() + " has " + llvm::Twine(data_.size()) +
                         " elements, expected " + llvm::Twine(numElements()));
  }
  if (!ir::isFloat(dtype_))
    for (double v : data_)
      if (v != std::trunc(v) || (dtype_ == ir::DType::Bool && v != 0 && v != 1))
        return ir::makeError("tensor " + typeString() + " holds " + ir::formatDouble(v) +
                             ", which its dtype cannot represent");
  return llvm::Error::success();
}

bool Tensor::matches(const ir::TensorType &type, int64_t batch) const {
  if (type.dtype != dtype_ || type.sparse != sparse_ || type.rank() != rank())
    return false;
  for (int64_t i = 0; i < rank(); ++i) {
    int64_t want = type.dims[i];
    if (want == ir::kBatchDim)
      want = batch;
    if (want == ir::kDynamicDim)
      continue;
    if (want != shape_[i])
      return false;
  }
  return true;
}

std::string Tensor::typeString() const {
  std::string s = sparse_ ? "sparse " : "";
  s += ir::dtypeName(dtype_).str() + shapeString(shape_);
  if (sparse_)
    s += " (" + std::to_string(numRows()) + " rows)";
  return s;
}

void conformToDType(Tensor &t) {
  if (ir::isInteger(t.dtype()))
    for (double &v : t.data())
      v = std::trunc(v);
  else if (t.dtype() == ir::DType::Bool)
    for (double &v : t.data())
      v = v != 0 ? 1.0 : 0.0;
}

} // namespace prism::runtime::reference
