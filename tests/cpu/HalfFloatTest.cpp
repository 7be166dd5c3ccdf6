// 16-bit floats on the wire (runtime/HalfFloat.h): every fp16 pattern round-trips; encoding any
// float32 agrees with ir::roundToPrecision, the hardware and portable fp16 paths agree bit for
// bit, and the 16-bit sum is the rounded float32 sum.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ir/Precision.h"
#include "runtime/HalfFloat.h"
#include "llvm/ADT/bit.h"

namespace prism::runtime {
namespace {

using ir::ComputePrecision;

uint32_t bitsOf(float value) {
  return llvm::bit_cast<uint32_t>(value);
}
float floatOf(uint32_t bits) {
  return llvm::bit_cast<float>(bits);
}

// Edge cases, then random bit patterns (every exponent, NaNs included) and random values of
// gradient-like magnitudes.
std::vector<float> samples() {
  std::vector<float> values = {
      0.0f,       -0.0f,        1.0f,        -1.0f,       65504.0f,      65519.99f,
      65520.0f,   -65520.0f,    1e9f,        INFINITY,    -INFINITY,     NAN,
      0x1p-14f,   0x1p-15f,     0x1p-24f,    0x1p-25f,    0x1.0002p-25f, 0x1.8p-24f,
      0x1.4p-24f, 3 * 0x1p-26f, 0x1.002p0f,  0x1.001p0f,  0x1.003p0f,    0x1.0018p0f,
      0x1.008p0f, 0x1.0101p0f,  0x1.0180p0f, 0x1.0080p0f, 1e-30f,        0x1.fffffep127f,
      0x1p-149f,  -0x1p-149f};
  std::mt19937 random(7);
  std::uniform_int_distribution<uint32_t> anyBits;
  std::normal_distribution<float> gradient(0.0f, 0.01f);
  for (int i = 0; i < 300000; ++i)
    values.push_back(floatOf(anyBits(random)));
  for (int i = 0; i < 100000; ++i)
    values.push_back(gradient(random));
  return values;
}

void expectSameFloat(float got, float expected, float input, const char *what) {
  if (std::isnan(expected)) {
    EXPECT_TRUE(std::isnan(got)) << what << " of " << input;
    return;
  }
  EXPECT_EQ(bitsOf(got), bitsOf(expected))
      << what << " of " << std::hexfloat << input << ": " << got << ", expected " << expected;
}

TEST(HalfFloat, EveryFp16PatternRoundTrips) {
  std::vector<uint16_t> patterns(65536), again(65536);
  for (uint32_t i = 0; i < 65536; ++i)
    patterns[i] = static_cast<uint16_t>(i);
  std::vector<float> values(65536);
  decodeHalf(patterns.data(), values.data(), 65536, ComputePrecision::FP16);
  encodeHalf(values.data(), again.data(), 65536, ComputePrecision::FP16);
  for (uint32_t i = 0; i < 65536; ++i) {
    bool nan = (i & 0x7c00u) == 0x7c00u && (i & 0x3ffu);
    if (nan) {
      EXPECT_TRUE(std::isnan(values[i])) << i;
      continue;
    }
    EXPECT_EQ(again[i], patterns[i]) << "pattern " << i << " decoded to " << values[i];
    EXPECT_EQ(detail::portableFp16Bits(values[i]), patterns[i]) << i;
    expectSameFloat(detail::portableFp16Value(patterns[i]), values[i], 0, "portable decode");
  }
  EXPECT_EQ(values[0x3c00], 1.0f);
  EXPECT_EQ(values[0x7bff], 65504.0f);
  EXPECT_EQ(values[0x0001], 0x1p-24f);
}

TEST(HalfFloat, EncodingRoundsAsRoundToPrecision) {
  std::vector<float> values = samples();
  const auto n = static_cast<int64_t>(values.size());
  std::vector<uint16_t> wire(values.size());
  std::vector<float> back(values.size());
  for (ComputePrecision precision : {ComputePrecision::FP16, ComputePrecision::BF16}) {
    encodeHalf(values.data(), wire.data(), n, precision);
    decodeHalf(wire.data(), back.data(), n, precision);
    for (size_t i = 0; i < values.size(); ++i)
      expectSameFloat(back[i], ir::roundToPrecision(values[i], precision), values[i],
                      ir::precisionName(precision).data());
  }
}

TEST(HalfFloat, PortableFp16AgreesWithTheHardwarePath) {
  if (!cpuHasF16c())
    GTEST_SKIP() << "this CPU has no F16C: the portable path is the only one";
  std::vector<float> values = samples();
  std::vector<uint16_t> wire(values.size());
  encodeHalf(values.data(), wire.data(), static_cast<int64_t>(values.size()),
             ComputePrecision::FP16);
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(detail::portableFp16Bits(values[i]), wire[i]) << std::hexfloat << values[i];
}

TEST(HalfFloat, SumIsTheRoundedFloatSum) {
  std::mt19937 random(11);
  std::normal_distribution<float> value(0.0f, 3.0f);
  const int64_t n = 1003; // not a multiple of the vector width
  for (ComputePrecision precision : {ComputePrecision::FP16, ComputePrecision::BF16}) {
    std::vector<float> x(n), y(n);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = value(random);
      y[i] = value(random);
    }
    std::vector<uint16_t> a(n), b(n), c(n);
    encodeHalf(x.data(), a.data(), n, precision);
    encodeHalf(y.data(), b.data(), n, precision);
    std::vector<float> xa(n), yb(n), sum(n);
    decodeHalf(a.data(), xa.data(), n, precision);
    decodeHalf(b.data(), yb.data(), n, precision);
    addHalf(a.data(), b.data(), a.data(), n, precision); // in place, as Gloo calls it
    decodeHalf(a.data(), sum.data(), n, precision);
    for (int64_t i = 0; i < n; ++i)
      expectSameFloat(sum[i], ir::roundToPrecision(xa[i] + yb[i], precision), xa[i] + yb[i], "sum");
  }
}

} // namespace
} // namespace prism::runtime
