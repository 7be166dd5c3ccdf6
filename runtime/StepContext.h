// What the kernels of a step may know about the step itself: training or evaluation, the plan's
// seed, the step number and where the step's examples lie in its global batch. Ops that behave
// differently in evaluation (dropout) read the mode; random ones key their draws on the rest,
// so that a draw does not depend on how the global batch is split (docs/runtime.md).
#pragma once

#include <cstdint>

namespace prism::runtime {

enum class StepMode : uint8_t {
  Training,  // a training step: dropout drops
  Evaluation // inference on held-out data: dropout is the identity
};

struct StepContext {
  StepMode mode = StepMode::Training;
  uint64_t seed = 0; // the plan's (the run's) seed
  int64_t step = 0;  // optimizer steps done before this one
  // Where the examples the step runs on here (a worker's share, one micro-batch of it) start
  // within the step's global batch.
  int64_t exampleOffset = 0;

  bool training() const { return mode == StepMode::Training; }
};

} // namespace prism::runtime
