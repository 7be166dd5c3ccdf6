// The profile fit (plan/ProfileFit.h) on synthetic timings of known coefficients.
#include "plan/ProfileFit.h"

#include <gtest/gtest.h>

namespace prism::plan {
namespace {

TEST(ProfileFit, RecoversAKnownRoofline) {
  // 4 µs per call, 20 GFLOP/s, 5 GB/s, over shapes that vary flops and bytes independently.
  std::vector<TimingSample> samples;
  for (double flops : {0.0, 1e5, 3e6, 2e7})
    for (double bytes : {64.0, 1e4, 8e5, 5e6})
      samples.push_back({flops, bytes, 4e-6 + flops / 2e10 + bytes / 5e9});
  KernelCost k = fitRoofline(samples);
  EXPECT_NEAR(k.latency, 4e-6, 1e-9);
  EXPECT_NEAR(k.flopsPerSecond, 2e10, 2e10 * 1e-6);
  EXPECT_NEAR(k.bytesPerSecond, 5e9, 5e9 * 1e-6);
}

TEST(ProfileFit, KeepsCoefficientsNonNegative) {
  // Time falls with bytes: the unconstrained fit has a negative per-byte term; the fit leaves
  // that term out (rate 0) instead.
  std::vector<TimingSample> samples = {
      {0, 100, 3e-6}, {0, 1000, 2.9e-6}, {0, 10000, 2.8e-6}, {1e6, 100, 1e-4 + 3e-6}};
  KernelCost k = fitRoofline(samples);
  EXPECT_EQ(k.bytesPerSecond, 0);
  EXPECT_GE(k.latency, 0);
  EXPECT_GT(k.flopsPerSecond, 0);
}

TEST(ProfileFit, NoisyTimingsStayClose) {
  std::vector<TimingSample> samples;
  int i = 0;
  for (double flops : {1e4, 1e6, 1e7, 1e8})
    for (double bytes : {1e3, 1e5, 1e6}) {
      const double noise = (i++ % 2 ? 1.02 : 0.98);
      samples.push_back({flops, bytes, (2e-6 + flops / 1e10 + bytes / 4e9) * noise});
    }
  KernelCost k = fitRoofline(samples);
  EXPECT_NEAR(k.flopsPerSecond, 1e10, 1e9);
  EXPECT_NEAR(k.bytesPerSecond, 4e9, 1e9);
}

TEST(ProfileFit, LatencyPerByte) {
  std::vector<TimingSample> samples;
  for (double bytes : {4.0, 4096.0, 262144.0, 4194304.0, 16777216.0})
    samples.push_back({0, bytes, 5e-5 + bytes * 2e-10});
  AllReduceCost c = fitLatencyPerByte(samples);
  EXPECT_NEAR(c.latency, 5e-5, 1e-10);
  EXPECT_NEAR(c.secondsPerByte, 2e-10, 1e-15);
}

// Row calls of 64 to 4096 rows at 2 us a row beyond a call of their bytes (50 us + 2 ns/B): the
// fit recovers the 2 us; calls no dearer than their bytes, or none, give 0.
TEST(ProfileFit, SecondsPerRow) {
  const AllReduceCost call{5e-5, 2e-9};
  std::vector<TimingSample> rows, cheap;
  for (double n : {64.0, 256.0, 1024.0, 4096.0}) {
    const double bytes = n * 264;
    rows.push_back({n, bytes, call.latency + bytes * call.secondsPerByte + n * 2e-6});
    cheap.push_back({n, bytes, 0.5 * (call.latency + bytes * call.secondsPerByte)});
  }
  EXPECT_NEAR(fitSecondsPerRow(rows, call), 2e-6, 1e-15);
  EXPECT_EQ(fitSecondsPerRow(cheap, call), 0);
  EXPECT_EQ(fitSecondsPerRow({}, call), 0);
}

TEST(ProfileFit, EmptyAndConstantColumns) {
  EXPECT_EQ(fitRoofline({}).latency, 0);
  // No flops anywhere: that term is 0 and the rest still fits.
  KernelCost k = fitRoofline({{0, 10, 1e-6 + 10e-9}, {0, 1000, 1e-6 + 1000e-9}});
  EXPECT_EQ(k.flopsPerSecond, 0);
  EXPECT_NEAR(k.latency, 1e-6, 1e-12);
  EXPECT_NEAR(k.bytesPerSecond, 1e9, 1e3);
}

} // namespace
} // namespace prism::plan
