// The sum of a contiguous row accumulated in double, shared by the reductions and the row-wise
// ops: a long f32 sum does not drift, and integers are exact up to 2^53, as in the reference.
#pragma once

#include <cstdint>

#include "runtime/cpu/kernels/TargetClones.h"

namespace prism::runtime::cpu {

template <typename T> PRISM_ALWAYS_INLINE double sumAsDouble(const T *__restrict x, int64_t n) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i)
    sum += static_cast<double>(x[i]);
  return sum;
}

} // namespace prism::runtime::cpu
