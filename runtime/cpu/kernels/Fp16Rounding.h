// Rounding float32 values to fp16 precision, as the fp16 kernels read their factors: to nearest
// with ties to even, ±inf past 65504, subnormals down to 2^-24, NaN kept (ir::roundToPrecision's
// rule). x86 CPUs before AVX512_FP16 have no fp16 arithmetic, but F16C converts eight values an
// instruction, there and back.
#pragma once

#include <cstdint>

namespace prism::runtime::cpu {

// to[i] = fp16(from[i]) as a float32, for i < n, on up to `threads` threads; `to` may be `from`.
void roundToFp16(const float *from, float *to, int64_t n, int threads);

} // namespace prism::runtime::cpu
