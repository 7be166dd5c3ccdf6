// A tensor a user fills and reads: dtype, shape and row-major elements on the host. Copies
// share the elements (like a shared pointer); clone() copies them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "prism/Status.h"

namespace prism::api {

enum class DType { F32, F64, I32, I64, Bool };

// "f32", "f64", "i32", "i64", "bool".
const char *dtypeName(DType dtype);
// Bytes per element (a bool is one byte).
size_t dtypeBytes(DType dtype);

// The C++ element type of each dtype: float, double, int32_t, int64_t, bool.
template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::F32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::F64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::I32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::I64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::Bool; };

class Tensor {
public:
  // An empty tensor (no dtype, no elements): what a failed fetch leaves.
  Tensor();
  // Zeros of `dtype` and `shape` (every dimension at least 0).
  Tensor(DType dtype, std::vector<int64_t> shape);
  // A tensor of `shape` holding `values` (as many as the shape has elements).
  template <typename T>
  static Result<Tensor> fromVector(std::vector<int64_t> shape, const std::vector<T> &values) {
    return fromData(DTypeOf<T>::value, std::move(shape), values.data(), values.size() * sizeof(T));
  }
  static Result<Tensor> fromData(DType dtype, std::vector<int64_t> shape, const void *data,
                                 size_t bytes);

  bool empty() const;
  DType dtype() const;
  const std::vector<int64_t> &shape() const;
  int64_t numElements() const;
  size_t numBytes() const;

  void *data();
  const void *data() const;
  // The elements as T; null when T is not the tensor's element type.
  template <typename T> T *data() {
    return !empty() && DTypeOf<T>::value == dtype() ? static_cast<T *>(data()) : nullptr;
  }
  template <typename T> const T *data() const {
    return !empty() && DTypeOf<T>::value == dtype() ? static_cast<const T *>(data()) : nullptr;
  }
  // Element `index` (row-major) as a double, whatever the dtype; 0 out of range.
  double at(int64_t index) const;
  // A copy that shares nothing with this one.
  Tensor clone() const;
  // `f32[2, 3]`.
  std::string typeString() const;

  struct Impl;

private:
  explicit Tensor(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
  friend struct TensorAccess;
};

} // namespace prism::api
