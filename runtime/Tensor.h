// A dense tensor: dtype, concrete shape, the device its storage is on, and storage shared
// between copies (copying a Tensor aliases its storage; clone() copies the elements). Tensors
// made by the constructor are on the host (64-byte aligned); device memory comes from a
// runtime::Device (runtime/exec/Device.h) as views.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ir/Device.h"
#include "ir/Type.h"

namespace prism::runtime {

class Tensor {
public:
  Tensor() = default;
  Tensor(ir::DType dtype, std::vector<int64_t> shape);
  // A tensor over memory owned elsewhere (`base` keeps it alive), `byteOffset` bytes in, on
  // `device`.
  static Tensor view(ir::DType dtype, std::vector<int64_t> shape, std::shared_ptr<void> base,
                     size_t byteOffset, ir::DeviceId device = {});
  // The same elements with another shape of equal element count (shares storage).
  Tensor reshaped(std::vector<int64_t> shape) const;

  ir::DType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_[i]; }
  size_t rank() const { return shape_.size(); }
  int64_t numElements() const { return numElements_; }
  int64_t numBytes() const { return numElements_ * ir::dtypeBytes(dtype_); }
  bool empty() const { return !storage_; }
  ir::DeviceId device() const { return device_; }
  // Elements are addressable by this process's CPU code (data<T>() may be read).
  bool onHost() const { return device_.kind == ir::DeviceKind::Cpu; }

  template <typename T> T *data() { return static_cast<T *>(storage_.get()); }
  template <typename T> const T *data() const { return static_cast<const T *>(storage_.get()); }
  void *raw() { return storage_.get(); }
  const void *raw() const { return storage_.get(); }

  // A host copy of a host tensor's elements (device tensors copy through their Device).
  Tensor clone() const;
  void fillZero();

private:
  ir::DType dtype_ = ir::DType::F32;
  std::vector<int64_t> shape_;
  int64_t numElements_ = 0;
  std::shared_ptr<void> storage_;
  ir::DeviceId device_;
};

} // namespace prism::runtime
