// Fitting a cost profile's figures to measured timings (`prism calibrate`): non-negative least
// squares of seconds = latency + flops / F + bytes / B.
#pragma once

#include <array>
#include <vector>

#include "plan/CostProfile.h"
#include "llvm/ADT/ArrayRef.h"

namespace prism::plan {

// One measured call: its cost rule's flops and bytes (ir::opCost), or a transfer's bytes with
// flops 0, and the seconds it took.
struct TimingSample {
  double flops = 0;
  double bytes = 0;
  double seconds = 0;
};

// The roofline closest to `samples` in squared seconds with every coefficient non-negative
// (latency ≥ 0, 1/F ≥ 0, 1/B ≥ 0); a coefficient fitted to 0 is written as a rate of 0 (the term
// left out, as profiles read it). Terms whose column is 0 in every sample fit to 0. An empty
// `samples` gives all zeros.
KernelCost fitRoofline(llvm::ArrayRef<TimingSample> samples);

// The coefficients themselves: seconds ≈ c[0] + c[1] × flops + c[2] × bytes, each c ≥ 0, least
// squares (the columns may be any other two features, e.g. a fitted curve's terms).
std::array<double, 3> fitNonNegative(llvm::ArrayRef<TimingSample> samples);

// The same for communication: seconds = latency + bytes × seconds_per_byte.
AllReduceCost fitLatencyPerByte(llvm::ArrayRef<TimingSample> samples);

// Row calls (their rows as `flops`): the seconds per row beyond what `call` gives a call of their
// bytes, least squares through 0 on errors relative to each call's time; 0 when the rows cost
// nothing beyond their bytes.
double fitSecondsPerRow(llvm::ArrayRef<TimingSample> rowCalls, const AllReduceCost &call);

} // namespace prism::plan
