// fp16 through F16C where the CPU has it (eight values an instruction), bit arithmetic
// elsewhere; bf16 is the upper half of a float32, rounded.
#include "runtime/HalfFloat.h"

#include <cmath>
#include <cpuid.h>
#include <immintrin.h>

#include "llvm/ADT/bit.h"

namespace prism::runtime {
namespace {

uint32_t bitsOf(float value) {
  return llvm::bit_cast<uint32_t>(value);
}
float floatOf(uint32_t bits) {
  return llvm::bit_cast<float>(bits);
}

uint16_t bf16Bits(float value) {
  uint32_t bits = bitsOf(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it quiet
    return static_cast<uint16_t>((bits | 0x00400000u) >> 16);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

float bf16Value(uint16_t bits) {
  return floatOf(static_cast<uint32_t>(bits) << 16);
}

uint16_t fp16Bits(float value) {
  uint32_t bits = bitsOf(value);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) // NaN: quiet, the payload's upper bits kept (as F16C does)
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  if (magnitude >= 0x477ff000u) // 65520 and up round past 65504: infinity
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude < 0x38800000u) { // below 2^-14: a subnormal step of 2^-24 (exact scaling)
    float steps = std::nearbyint(floatOf(magnitude) * 16777216.0f); // ties to even
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(steps));
  }
  uint32_t half = ((((magnitude >> 23) - 127 + 15) << 10) | ((magnitude & 0x7fffffu) >> 13));
  uint32_t rest = magnitude & 0x1fffu; // the 13 bits dropped: round to nearest, ties to even
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
    ++half; // a carry moves into the exponent, as it should
  return static_cast<uint16_t>(sign | half);
}

float fp16Value(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) // zero or subnormal: mantissa · 2^-24
    return floatOf(sign | bitsOf(std::ldexp(static_cast<float>(mantissa), -24)));
  if (exponent == 31)
    return floatOf(sign | 0x7f800000u | (mantissa << 13));
  return floatOf(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

__attribute__((target("avx2,f16c"))) void encodeFp16F16c(const float *from, uint16_t *to,
                                                         int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i *>(to + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(from + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i)
    to[i] = fp16Bits(from[i]);
}

__attribute__((target("avx2,f16c"))) void decodeFp16F16c(const uint16_t *from, float *to,
                                                         int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(to + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(from + i))));
  for (; i < n; ++i)
    to[i] = fp16Value(from[i]);
}

__attribute__((target("avx2,f16c"))) void addFp16F16c(const uint16_t *a, const uint16_t *b,
                                                      uint16_t *c, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(a + i)));
    __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(b + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i *>(c + i),
                     _mm256_cvtps_ph(_mm256_add_ps(x, y), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i)
    c[i] = fp16Bits(fp16Value(a[i]) + fp16Value(b[i]));
}

bool hardwareFp16() {
  static const bool f16c = cpuHasF16c();
  return f16c;
}

} // namespace

bool cpuHasF16c() {
  // CPUID leaf 1, ECX bit 29: clang 14's __builtin_cpu_supports has no "f16c".
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) &&
         __builtin_cpu_supports("avx2");
}

void encodeHalf(const float *from, uint16_t *to, int64_t n, ir::ComputePrecision precision) {
  if (precision == ir::ComputePrecision::FP16 && hardwareFp16())
    return encodeFp16F16c(from, to, n);
  if (precision == ir::ComputePrecision::FP16)
    for (int64_t i = 0; i < n; ++i)
      to[i] = fp16Bits(from[i]);
  else
    for (int64_t i = 0; i < n; ++i)
      to[i] = bf16Bits(from[i]);
}

void decodeHalf(const uint16_t *from, float *to, int64_t n, ir::ComputePrecision precision) {
  if (precision == ir::ComputePrecision::FP16 && hardwareFp16())
    return decodeFp16F16c(from, to, n);
  if (precision == ir::ComputePrecision::FP16)
    for (int64_t i = 0; i < n; ++i)
      to[i] = fp16Value(from[i]);
  else
    for (int64_t i = 0; i < n; ++i)
      to[i] = bf16Value(from[i]);
}

void addHalf(const uint16_t *a, const uint16_t *b, uint16_t *c, int64_t n,
             ir::ComputePrecision precision) {
  if (precision == ir::ComputePrecision::FP16 && hardwareFp16())
    return addFp16F16c(a, b, c, n);
  if (precision == ir::ComputePrecision::FP16)
    for (int64_t i = 0; i < n; ++i)
      c[i] = fp16Bits(fp16Value(a[i]) + fp16Value(b[i]));
  else
    for (int64_t i = 0; i < n; ++i)
      c[i] = bf16Bits(bf16Value(a[i]) + bf16Value(b[i]));
}

namespace detail {

uint16_t portableFp16Bits(float value) {
  return fp16Bits(value);
}
float portableFp16Value(uint16_t bits) {
  return fp16Value(bits);
}

} // namespace detail
} // namespace prism::runtime
