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

// What a device's kernels read of the step from the device's own memory (Device::stepValues)
// rather than from their launch arguments, so that a kernel launches the same way every step:
// the executor writes them before the step's kernels run.
struct StepValues {
  int64_t step = 0;          // StepContext::step
  int64_t exampleOffset = 0; // StepContext::exampleOffset
  int64_t globalBatch = 0;   // the examples of the step's global batch (batch_share)

  bool operator==(const StepValues &o) const {
    return step == o.step && exampleOffset == o.exampleOffset && globalBatch == o.globalBatch;
  }
};

} // namespace prism::runtime
