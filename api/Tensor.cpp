// The library's tensor: a host runtime::Tensor behind a shared pointer.
#include <cstring>

#include "api/Internal.h"

namespace prism::api {

const char *dtypeName(DType dtype) {
  return ir::dtypeName(TensorAccess::dtype(dtype)).data(); // the IR's names, literals
}

size_t dtypeBytes(DType dtype) {
  return static_cast<size_t>(ir::dtypeBytes(TensorAccess::dtype(dtype)));
}

ir::DType TensorAccess::dtype(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return ir::DType::F32;
  case DType::F64:
    return ir::DType::F64;
  case DType::I32:
    return ir::DType::I32;
  case DType::I64:
    return ir::DType::I64;
  case DType::Bool:
    return ir::DType::Bool;
  }
  return ir::DType::F32;
}

DType TensorAccess::dtype(ir::DType dtype) {
  switch (dtype) {
  case ir::DType::F32:
    return DType::F32;
  case ir::DType::F64:
    return DType::F64;
  case ir::DType::I32:
    return DType::I32;
  case ir::DType::I64:
    return DType::I64;
  case ir::DType::Bool:
    return DType::Bool;
  }
  return DType::F32;
}

Tensor TensorAccess::make(runtime::Tensor tensor) {
  return Tensor(std::make_shared<Tensor::Impl>(Tensor::Impl{std::move(tensor)}));
}

Tensor::Tensor() = default;

Tensor::Tensor(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape) {
  for (int64_t &d : shape)
    d = std::max<int64_t>(d, 0);
  runtime::Tensor t(TensorAccess::dtype(dtype), std::move(shape));
  t.fillZero();
  impl_ = std::make_shared<Impl>(Impl{std::move(t)});
}

Result<Tensor> Tensor::fromData(DType dtype, std::vector<int64_t> shape, const void *data,
                                size_t bytes) {
  for (int64_t d : shape)
    if (d < 0)
      return Status(ErrorCode::Invalid,
                    "error: a tensor's dimensions are 0 or more, got " + std::to_string(d));
  Tensor t(dtype, std::move(shape));
  if (bytes != t.numBytes())
    return Status(ErrorCode::Invalid, "error: a " + t.typeString() + " tensor holds " +
                                          std::to_string(t.numBytes()) + " bytes, got " +
                                          std::to_string(bytes));
  if (bytes)
    std::memcpy(t.data(), data, bytes);
  return t;
}

bool Tensor::empty() const {
  return !impl_ || impl_->tensor.empty();
}

DType Tensor::dtype() const {
  return impl_ ? TensorAccess::dtype(impl_->tensor.dtype()) : DType::F32;
}

const std::vector<int64_t> &Tensor::shape() const {
  static const std::vector<int64_t> none;
  return impl_ ? impl_->tensor.shape() : none;
}

int64_t Tensor::numElements() const {
  return impl_ ? impl_->tensor.numElements() : 0;
}

size_t Tensor::numBytes() const {
  return impl_ ? static_cast<size_t>(impl_->tensor.numBytes()) : 0;
}

void *Tensor::data() {
  return impl_ ? impl_->tensor.raw() : nullptr;
}

const void *Tensor::data() const {
  return impl_ ? impl_->tensor.raw() : nullptr;
}

double Tensor::at(int64_t index) const {
  if (empty() || index < 0 || index >= numElements())
    return 0;
  const runtime::Tensor &t = impl_->tensor;
  switch (t.dtype()) {
  case ir::DType::F32:
    return t.data<float>()[index];
  case ir::DType::F64:
    return t.data<double>()[index];
  case ir::DType::I32:
    return t.data<int32_t>()[index];
  case ir::DType::I64:
    return static_cast<double>(t.data<int64_t>()[index]);
  case ir::DType::Bool:
    return t.data<bool>()[index] ? 1 : 0;
  }
  return 0;
}

Tensor Tensor::clone() const {
  if (!impl_)
    return Tensor();
  return TensorAccess::make(impl_->tensor.clone());
}

std::string Tensor::typeString() const {
  if (empty())
    return "empty";
  std::string text = std::string(dtypeName(dtype())) + "[";
  for (size_t i = 0; i < shape().size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape()[i]);
  return text + "]";
}

} // namespace prism::api
