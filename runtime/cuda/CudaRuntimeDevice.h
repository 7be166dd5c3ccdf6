// A CUDA GPU as a device of the executor (runtime/exec/Device.h): device memory from
// cudaMalloc, counted host<->device copies, the GPU made current for a step's kernels.
#pragma once

namespace prism::runtime::cuda {

// Lets runtime::createDevice make `cuda:N` devices; called once at start-up by programs built
// with the GPU path. Without a driver or with fewer GPUs, createDevice then answers with an
// Unsupported error naming the device and what the machine has.
void registerCudaDevice();

} // namespace prism::runtime::cuda
