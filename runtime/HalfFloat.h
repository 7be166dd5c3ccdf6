// float32 values as 16-bit floats (fp16 or bf16) and back: how compressed communication
// (`--compress`) carries gradients and rows on the wire. Encoding rounds to nearest with ties to
// even (ir::roundToPrecision's rule, so decode(encode(x)) == roundToPrecision(x)); fp16
// overflows to ±infinity and keeps its subnormals; NaN stays NaN.
#pragma once

#include <cstdint>

#include "ir/Precision.h"

namespace prism::runtime {

// to[i] = the 16-bit pattern of from[i] in `precision` (BF16 or FP16), for i < n.
void encodeHalf(const float *from, uint16_t *to, int64_t n, ir::ComputePrecision precision);
// to[i] = the float32 value of the 16-bit pattern from[i].
void decodeHalf(const uint16_t *from, float *to, int64_t n, ir::ComputePrecision precision);
// c[i] = encode(decode(a[i]) + decode(b[i])): the sum a 16-bit all-reduce takes at each hop
// (`c` may be `a` or `b`).
void addHalf(const uint16_t *a, const uint16_t *b, uint16_t *c, int64_t n,
             ir::ComputePrecision precision);

// Whether the CPU converts fp16 in hardware (F16C, with AVX2), from CPUID.
bool cpuHasF16c();

namespace detail {
// The conversions used where the CPU has no F16C, for tests on CPUs that have it.
uint16_t portableFp16Bits(float value);
float portableFp16Value(uint16_t bits);
} // namespace detail

} // namespace prism::runtime
