// Picks the instantiation of a kernel template for a run-time dtype, or says which dtypes the
// kernel takes.
#pragma once

#include <cstdint>
#include <memory>

#include "ir/Diagnostic.h"
#include "runtime/cpu/Kernel.h"

namespace prism::runtime::cpu {

using KernelOrError = llvm::Expected<std::unique_ptr<Kernel>>;

// The executor prefixes the op's name and location.
inline llvm::Error unsupportedDType(const KernelSpec &, ir::DType dtype,
                                    llvm::StringRef supported) {
  return ir::makeError("the CPU kernel takes " + supported + ", not " + ir::dtypeName(dtype));
}

// make(T{}) with T the C++ type of a floating-point dtype.
template <typename Make>
KernelOrError withFloatType(const KernelSpec &spec, ir::DType dtype, const Make &make) {
  switch (dtype) {
  case ir::DType::F32:
    return make(float{});
  case ir::DType::F64:
    return make(double{});
  default:
    return unsupportedDType(spec, dtype, "f32 or f64");
  }
}

// make(T{}) with T the C++ type of a floating-point or integer dtype.
template <typename Make>
KernelOrError withNumericType(const KernelSpec &spec, ir::DType dtype, const Make &make) {
  switch (dtype) {
  case ir::DType::F32:
    return make(float{});
  case ir::DType::F64:
    return make(double{});
  case ir::DType::I32:
    return make(int32_t{});
  case ir::DType::I64:
    return make(int64_t{});
  default:
    return unsupportedDType(spec, dtype, "f32, f64, i32 or i64");
  }
}

// make(T{}) with T the C++ type holding a dtype's elements (bool as bool: one byte, 0 or 1).
template <typename Make>
KernelOrError withElementType(const KernelSpec &spec, ir::DType dtype, const Make &make) {
  if (dtype == ir::DType::Bool)
    return make(bool{});
  return withNumericType(spec, dtype, make);
}

// make(T{}) with T an unsigned integer as wide as the dtype's elements: for kernels that move
// elements without looking at them.
template <typename Make>
KernelOrError withElementBits(const KernelSpec &spec, ir::DType dtype, const Make &make) {
  switch (ir::dtypeBytes(dtype)) {
  case 1:
    return make(uint8_t{});
  case 4:
    return make(uint32_t{});
  case 8:
    return make(uint64_t{});
  default:
    return unsupportedDType(spec, dtype, "elements of 1, 4 or 8 bytes");
  }
}

} // namespace prism::runtime::cpu
