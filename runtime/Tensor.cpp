// Tensors: host storage, and views of any device's memory.
#include "runtime/Tensor.h"

#include <cassert>
#include <cstdlib>
#include <cstring>
#include <new>

namespace prism::runtime {

Tensor::Tensor(ir::DType dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)), numElements_(1) {
  for (int64_t d : shape_)
    numElements_ *= d;
  size_t bytes = static_cast<size_t>(numBytes());
  size_t rounded = (bytes + 63) / 64 * 64;
  void *p = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!p)
    throw std::bad_alloc();
  storage_ = std::shared_ptr<void>(p, std::free);
}

Tensor Tensor::view(ir::DType dtype, std::vector<int64_t> shape, std::shared_ptr<void> base,
                    size_t byteOffset, ir::DeviceId device) {
  Tensor t;
  t.dtype_ = dtype;
  t.device_ = device;
  t.shape_ = std::move(shape);
  t.numElements_ = 1;
  for (int64_t d : t.shape_)
    t.numElements_ *= d;
  t.storage_ = std::shared_ptr<void>(base, static_cast<char *>(base.get()) + byteOffset);
  return t;
}

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  assert(onHost() && "clone() copies host tensors; device tensors copy through their Device");
  Tensor copy(dtype_, shape_);
  if (numBytes())
    std::memcpy(copy.raw(), raw(), static_cast<size_t>(numBytes()));
  return copy;
}

void Tensor::fillZero() {
  assert(onHost() && "fillZero() writes host memory");
  if (numBytes())
    std::memset(raw(), 0, static_cast<size_t>(numBytes()));
}

} // namespace prism::runtime
