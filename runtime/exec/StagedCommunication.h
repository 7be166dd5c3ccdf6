// The communication ops (all_reduce, ps_pull, ps_pull_rows, ps_push, ps_push_rows) on a device
// whose memory is not the host's, such as a GPU: each stages its tensors through host memory,
// where the task's Communication (Gloo's rings, the parameter servers' gRPC) works, with counted
// copies. An all-reduce copies its results back once the executor has waited for its ring
// (Kernel::finish), so the ring runs while backward's next kernels do. The GPU path registers
// these for `cuda` devices.
#pragma once

#include "runtime/exec/Kernel.h"

namespace prism::runtime {

void registerStagedCommunicationKernels(KernelRegistry &registry);

} // namespace prism::runtime
