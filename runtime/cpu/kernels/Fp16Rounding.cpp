// fp16 rounding with F16C where the CPU has it, ir::roundToPrecision elsewhere.
#include "runtime/cpu/kernels/Fp16Rounding.h"

#include <cpuid.h>
#include <immintrin.h>

#include "ir/Precision.h"
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

// F16C from CPUID (leaf 1, ECX bit 29): clang 14's __builtin_cpu_supports has no "f16c".
bool hasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) &&
         __builtin_cpu_supports("avx2");
}

} // namespace

void roundToFp16(const float *from, float *to, int64_t n, int threads) {
  static const bool f16c = hasF16c();
  parallelFor(n, threads, kCheapGrain, [&](int64_t begin, int64_t end) {
    if (f16c)
      roundSpanF16c(from + begin, to + begin, end - begin);
    else
      roundSpanPortable(from + begin, to + begin, end - begin);
  });
}

} // namespace prism::runtime::cpu
