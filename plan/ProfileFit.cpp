// Non-negative least squares over at most three coefficients (see ProfileFit.h): every subset of
// coefficients left free is solved by its normal equations, and the feasible solution of least
// residual wins (an active-set search made exhaustive, which is exact for three unknowns).
#include "plan/ProfileFit.h"

#include <array>
#include <cmath>
#include <limits>

namespace prism::plan {
namespace {

constexpr int kTerms = 3; // latency, seconds per flop, seconds per byte

std::array<double, kTerms> columns(const TimingSample &s) {
  return {1.0, s.flops, s.bytes};
}

// Solves the k×k system a·x = b in place by Gaussian elimination with partial pivoting; false
// when it is singular.
bool solve(std::array<std::array<double, kTerms>, kTerms> &a, std::array<double, kTerms> &b,
           int k) {
  for (int c = 0; c < k; ++c) {
    int pivot = c;
    for (int r = c + 1; r < k; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[pivot][c]))
        pivot = r;
    if (std::fabs(a[pivot][c]) < 1e-300)
      return false;
    std::swap(a[c], a[pivot]);
    std::swap(b[c], b[pivot]);
    for (int r = 0; r < k; ++r) {
      if (r == c)
        continue;
      const double f = a[r][c] / a[c][c];
      for (int j = c; j < k; ++j)
        a[r][j] -= f * a[c][j];
      b[r] -= f * b[c];
    }
  }
  for (int c = 0; c < k; ++c)
    b[c] /= a[c][c];
  return true;
}

// A sample's weight in the squares: 1, or 1 / seconds² for errors relative to the time (so a
// 4-byte message's 80 µs weighs as much as a 16 MB one's 15 ms, and sets the latency).
double weight(const TimingSample &s, bool relative) {
  return relative && s.seconds > 0 ? 1 / (s.seconds * s.seconds) : 1;
}

// Least squares over the coefficients in `mask` (the others 0); false when singular or a
// coefficient comes out negative.
bool fitSubset(llvm::ArrayRef<TimingSample> samples, const std::array<double, kTerms> &scale,
               unsigned mask, bool relative, std::array<double, kTerms> &out) {
  std::array<int, kTerms> terms{};
  int k = 0;
  for (int t = 0; t < kTerms; ++t)
    if (mask & (1u << t))
      terms[k++] = t;
  std::array<std::array<double, kTerms>, kTerms> a{};
  std::array<double, kTerms> b{};
  for (const TimingSample &s : samples) {
    const auto x = columns(s);
    const double w = weight(s, relative);
    for (int i = 0; i < k; ++i) {
      const double xi = x[terms[i]] / scale[terms[i]];
      b[i] += w * xi * s.seconds;
      for (int j = 0; j < k; ++j)
        a[i][j] += w * xi * x[terms[j]] / scale[terms[j]];
    }
  }
  if (!solve(a, b, k))
    return false;
  out = {};
  for (int i = 0; i < k; ++i) {
    if (b[i] < 0)
      return false;
    out[terms[i]] = b[i] / scale[terms[i]];
  }
  return true;
}

double residual(llvm::ArrayRef<TimingSample> samples, const std::array<double, kTerms> &c,
                bool relative) {
  double sum = 0;
  for (const TimingSample &s : samples) {
    const auto x = columns(s);
    double predicted = 0;
    for (int t = 0; t < kTerms; ++t)
      predicted += c[t] * x[t];
    sum += weight(s, relative) * (predicted - s.seconds) * (predicted - s.seconds);
  }
  return sum;
}

// The coefficients (latency, seconds per flop, seconds per byte).
std::array<double, kTerms> fitCoefficients(llvm::ArrayRef<TimingSample> samples,
                                           bool relative = false) {
  // Columns are scaled to their largest value, so flops (1e9) and the constant (1) condition
  // the normal equations alike.
  std::array<double, kTerms> scale{};
  for (const TimingSample &s : samples) {
    const auto x = columns(s);
    for (int t = 0; t < kTerms; ++t)
      scale[t] = std::max(scale[t], std::fabs(x[t]));
  }
  std::array<double, kTerms> best{};
  double bestResidual = std::numeric_limits<double>::infinity();
  for (unsigned mask = 1; mask < (1u << kTerms); ++mask) {
    bool usable = true;
    for (int t = 0; t < kTerms; ++t)
      usable &= !(mask & (1u << t)) || scale[t] > 0;
    std::array<double, kTerms> c{};
    if (!usable || !fitSubset(samples, scale, mask, relative, c))
      continue;
    if (double r = residual(samples, c, relative); r < bestResidual) {
      bestResidual = r;
      best = c;
    }
  }
  return best;
}

double rate(double secondsPer) {
  return secondsPer > 0 ? 1 / secondsPer : 0;
}

} // namespace

std::array<double, 3> fitNonNegative(llvm::ArrayRef<TimingSample> samples) {
  return fitCoefficients(samples);
}

KernelCost fitRoofline(llvm::ArrayRef<TimingSample> samples) {
  const auto c = fitCoefficients(samples);
  return {c[0], rate(c[1]), rate(c[2])};
}

AllReduceCost fitLatencyPerByte(llvm::ArrayRef<TimingSample> samples) {
  std::vector<TimingSample> bytesOnly(samples.begin(), samples.end());
  for (TimingSample &s : bytesOnly)
    s.flops = 0;
  // Relative errors: sizes span 4 bytes to 16 MB, and in absolute terms the largest ones'
  // noise would set the latency.
  const auto c = fitCoefficients(bytesOnly, /*relative=*/true);
  return {c[0], c[2]};
}

double fitSecondsPerRow(llvm::ArrayRef<TimingSample> rowCalls, const AllReduceCost &call) {
  // Minimizes Σ ((c × rows − beyond) / seconds)²: c = Σ rows × beyond / s² over Σ rows² / s².
  double num = 0, den = 0;
  for (const TimingSample &s : rowCalls) {
    if (s.seconds <= 0 || s.flops <= 0)
      continue;
    const double beyond = s.seconds - (call.latency + s.bytes * call.secondsPerByte);
    const double w = 1 / (s.seconds * s.seconds);
    num += w * s.flops * beyond;
    den += w * s.flops * s.flops;
  }
  return den > 0 ? std::max(0.0, num / den) : 0;
}

} // namespace prism::plan
