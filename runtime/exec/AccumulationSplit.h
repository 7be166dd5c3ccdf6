// Gradient accumulation splits a training step into a micro-step, run once per micro-batch
// (forward, backward, the pulls they need), and a step part, run once per optimizer step on the
// accumulated values (all-reduces, pushes, clipping, updates). The values that cross from one to
// the other are accumulated as batch-weighted means Σ bᵢ vᵢ / Σ bᵢ over the micro-batches, which
// is what one step on their concatenation would compute.
#pragma once

#include <vector>

#include "ir/Module.h"
#include "llvm/Support/Error.h"

namespace prism::runtime {

struct AccumulationSplit {
  // Both in program order; every op of the module is in exactly one.
  std::vector<const ir::Op *> microOps;
  std::vector<const ir::Op *> stepOps;
  // Values made by micro ops and read by step ops (or the loss, or a gradient): averaged over
  // the micro-batches, dense or sparse (rows concatenated).
  std::vector<const ir::Value *> accumulated;
  // Such values that do not depend on the batch (constants, variable reads): every micro-batch
  // computes the same, so the step part reads the last one.
  std::vector<const ir::Value *> kept;
};

// The step part is every op that writes a variable, every all-reduce (kCommunication with a
// result per operand), every op that reads the loss or a declared gradient, and every op that
// reads a value of the step part; the rest is the micro-step. An error names a value that would
// have to cross but cannot be averaged (it has the batch dimension, or is not a float), or a
// step op that reads a data input.
llvm::Expected<AccumulationSplit> splitForAccumulation(const ir::Module &module);

} // namespace prism::runtime
