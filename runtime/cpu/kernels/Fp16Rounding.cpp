// fp16 rounding with F16C where the CPU has it, ir::roundToPrecision elsewhere.
#include "runtime/cpu/kernels/Fp16Rounding.h"

#include <immintrin.h>

#include "ir/Precision.h"
#include "runtime/HalfFloat.h"
#include "runtime/cpu/kernels/Parallel.h"

namespace prism::runtime::cpu {
namespace {

__attribute__((target("avx2,f16c"))) void roundSpanF16c(const float *from, float *to, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i half = _mm256_cvtps_ph(_mm256_loadu_ps(from + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(to + i, _mm256_cvtph_ps(half));
  }
  for (; i < n; ++i)
    to[i] = ir::roundToPrecision(from[i], ir::ComputePrecision::FP16);
}

void roundSpanPortable(const float *from, float *to, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    to[i] = ir::roundToPrecision(from[i], ir::ComputePrecision::FP16);
}

} // namespace

void roundToFp16(const float *from, float *to, int64_t n, int threads) {
  static const bool f16c = cpuHasF16c();
  parallelFor(n, threads, kCheapGrain, [&](int64_t begin, int64_t end) {
    if (f16c)
      roundSpanF16c(from + begin, to + begin, end - begin);
    else
      roundSpanPortable(from + begin, to + begin, end - begin);
  });
}

} // namespace prism::runtime::cpu
