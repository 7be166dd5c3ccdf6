// Checks CPU kernels against the float64 reference interpreter: the same module, variables and
// random feeds on both, outputs (or variables after a training step) compared.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/Device.h"
#include "ir/Module.h"
#include "runtime/StepContext.h"

namespace prism::testing {

struct ReferenceCheckOptions {
  // Inputs of integer type draw from [0, intBound[name]) (default 10).
  std::map<std::string, int64_t> intBound;
  // Float inputs draw uniformly from [low, high), never exactly zero.
  double low = -1.0, high = 1.0;
  // Largest allowed relative error, ||a - b|| / max(||a||, ||b||, 1e-12).
  double tolerance = 1e-4;
  int64_t batch = 3;
  int threads = 1;
  // Steps to run (training checks compare variables after each).
  int steps = 1;
  // The first step's mode, seed, number and example offset, on both interpreters.
  runtime::StepContext context;
  // Where the executor runs (the GPU tests check their kernels with `cuda:0`); outputs are copied
  // back to the host to be compared.
  ir::DeviceId device;
};

// y = op(x0[, x1]) when `expr` names a fusable elementwise op, else y = fused_elementwise(x0, x1,
// ..., expr): operand i an input of `dims[i]` and `dtype`.
std::unique_ptr<ir::Module> elementwiseModule(const std::string &expr,
                                              const std::vector<ir::Dims> &dims, ir::DType dtype);

// Evaluates `outputs` of a typed module on both interpreters; gtest failures on mismatch.
// With empty `outputs`, runs training steps and compares every variable afterwards.
// Feeds are fresh random values each run; the seed is printed on failure.
void expectMatchesReference(const ir::Module &module, const std::vector<std::string> &outputs,
                            const ReferenceCheckOptions &options = {});

} // namespace prism::testing
