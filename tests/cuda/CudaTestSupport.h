// What the GPU tests share: the reason there is no CUDA device to test on (empty when there is
// one), so that each test can skip with it, and errors thrown for gtest to report.
#pragma once

#include <stdexcept>
#include <string>

#include "runtime/cuda/CudaDevice.h"

namespace prism::runtime::cuda::testing {

inline std::string noDeviceReason() {
  auto count = cudaDeviceCount();
  if (!count)
    return llvm::toString(count.takeError());
  return *count == 0 ? "cudaGetDeviceCount found 0 devices" : "";
}

// The value, or its error thrown: gtest reports it as the failure of the running test.
template <typename T> T valueOrThrow(llvm::Expected<T> value) {
  if (!value)
    throw std::runtime_error(llvm::toString(value.takeError()));
  return std::move(*value);
}

inline void throwIfError(llvm::Error error) {
  if (error)
    throw std::runtime_error(llvm::toString(std::move(error)));
}

} // namespace prism::runtime::cuda::testing
