// DeviceKernels.cuh compiled for the host: its argument structs, which the op kernels fill, and
// each kernel as a plain function that loops over its indices one at a time (the tests' backend
// runs them so).
#pragma once

#include <cmath>
#include <math.h>

namespace prism::runtime::cuda::kernels {
using std::cos;
using std::exp;
using std::floor;
using std::log;
using std::log1p;
using std::pow;
using std::sqrt;
#define PRISM_HOST_KERNELS
#include "runtime/cuda/DeviceKernels.cuh"
#undef PRISM_HOST_KERNELS
} // namespace prism::runtime::cuda::kernels
