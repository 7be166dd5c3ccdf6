// exp, log, tanh and sigmoid written so that loops over them vectorize: libm's versions are
// opaque calls, so the float versions here are branch-free polynomial approximations (Cephes'
// coefficients, a few ulp of float accuracy) that the compiler turns into SIMD code. The double
// versions call libm: f64 is the precise path, not the fast one. sqrt needs nothing here:
// prism_cpu is built with -fno-math-errno, so std::sqrt is the SIMD square root.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "runtime/cpu/kernels/TargetClones.h"

namespace prism::runtime::cpu::fastmath {

inline float bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint32_t floatToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// 2^n for n in [-126, 127].
inline float exp2Int(int32_t n) {
  return bitsToFloat(static_cast<uint32_t>(n + 127) << 23);
}

PRISM_ALWAYS_INLINE float exp(float x) {
  // Beyond these bounds the result is 0 or inf anyway; clamping keeps the exponent in range.
  float t = x < -104.0f ? -104.0f : x;
  t = t > 89.0f ? 89.0f : t;
  // x = n ln2 + r with |r| <= ln2 / 2; ln2 is split in two so that n ln2 is exact.
  // Rounded with the 1.5 * 2^23 trick rather than std::floor or a float-to-int conversion,
  // which keep the loop from vectorizing (both may trap, so they are not if-converted).
  float shifted = t * 1.44269504088896341f + 12582912.0f;
  float n = shifted - 12582912.0f;
  int32_t k = static_cast<int32_t>(floatToBits(shifted) - 0x4b400000u);
  float r = t - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r2 + r + 1.0f;
  // 2^n in two factors, so that results near the overflow and denormal ends stay right.
  int32_t half = k / 2;
  y = y * exp2Int(half) * exp2Int(k - half);
  return x == x ? y : x;
}

PRISM_ALWAYS_INLINE float log(float x) {
  // Denormals are scaled into the normal range first so the exponent field is meaningful.
  // (Selects pick constants, not results of arithmetic: a select between two computed values
  // that may trap is not if-converted, and the loop would not vectorize.)
  bool tiny = x < 1.17549435e-38f;
  uint32_t bits = floatToBits(x * (tiny ? 8388608.0f : 1.0f));
  int32_t e = static_cast<int32_t>((bits >> 23) & 0xff) - (tiny ? 149 : 126);
  float m = bitsToFloat((bits & 0x007fffffu) | 0x3f000000u); // mantissa in [0.5, 1)
  // Map m to [sqrt(1/2), sqrt(2)) so that m - 1 is small.
  bool low = m < 0.707106781186547524f;
  float ef = static_cast<float>(e) - (low ? 1.0f : 0.0f);
  m = m * (low ? 2.0f : 1.0f) - 1.0f;
  float m2 = m * m;
  float p = 7.0376836292e-2f;
  p = p * m - 1.1514610310e-1f;
  p = p * m + 1.1676998740e-1f;
  p = p * m - 1.2420140846e-1f;
  p = p * m + 1.4249322787e-1f;
  p = p * m - 1.6668057665e-1f;
  p = p * m + 2.0000714765e-1f;
  p = p * m - 2.4999993993e-1f;
  p = p * m + 3.3333331174e-1f;
  float y = m * m2 * p;
  y = y - 2.12194440e-4f * ef;
  y = y - 0.5f * m2;
  y = m + y + 0.693359375f * ef;
  // Special values: log(0) = -inf, log(negative) = NaN, log(inf) = inf, log(NaN) = NaN.
  y = x == 0.0f ? -INFINITY : y;
  y = x < 0.0f ? NAN : y;
  y = x == INFINITY ? x : y;
  return x == x ? y : x;
}

PRISM_ALWAYS_INLINE float tanh(float x) {
  float a = std::fabs(x);
  // Small |x|: an odd polynomial; elsewhere 1 - 2 / (e^2|x| + 1), which cancels badly near 0.
  float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float small = p * z * x + x;
  float large = 1.0f - 2.0f / (exp(a + a) + 1.0f);
  large = x < 0.0f ? -large : large;
  return a < 0.625f ? small : large;
}

PRISM_ALWAYS_INLINE float sigmoid(float x) {
  return 1.0f / (1.0f + exp(-x));
}

inline double exp(double x) {
  return std::exp(x);
}
inline double log(double x) {
  return std::log(x);
}
inline double tanh(double x) {
  return std::tanh(x);
}
inline double sigmoid(double x) {
  // Two branches so that exp never overflows.
  if (x >= 0)
    return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

} // namespace prism::runtime::cpu::fastmath
