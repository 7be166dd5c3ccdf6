// Element types, shapes and tensor types.
#include "ir/Type.h"

namespace prism::ir {

llvm::StringRef dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::Bool:
    return "bool";
  }
  return "?";
}

std::optional<DType> parseDType(llvm::StringRef name) {
  if (name == "f32")
    return DType::F32;
  if (name == "f64")
    return DType::F64;
  if (name == "i32")
    return DType::I32;
  if (name == "i64")
    return DType::I64;
  if (name == "bool")
    return DType::Bool;
  return std::nullopt;
}

int64_t dtypeBytes(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::Bool:
    return 1;
  }
  return 0;
}

bool TensorType::hasBatchDim() const {
  for (int64_t d : dims)
    if (d == kBatchDim)
      return true;
  return false;
}

int64_t TensorType::numElements(int64_t batch, int64_t rows) const {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d == kBatchDim ? batch : d == kDynamicDim ? rows : d;
  return n;
}

std::string dimString(int64_t dim) {
  if (dim == kBatchDim)
    return "B";
  if (dim == kDynamicDim)
    return "?";
  return std::to_string(dim);
}

std::string TensorType::str() const {
  std::string s = sparse ? "sparse " : "";
  s += dtypeName(dtype).str();
  s += "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i)
      s += ", ";
    s += dimString(dims[i]);
  }
  s += "]";
  return s;
}

} // namespace prism::ir
