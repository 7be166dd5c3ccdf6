// The launchers of the f32 kernels in CudaKernels.cu: plain CUDA (no LLVM), so that nvcc compiles
// as little as possible; CudaKernels.h wraps them for the rest of Prism.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace prism::runtime::cuda::launch {

// Each queues its kernel on `stream` (none for an empty range) and returns the launch status.
// Outputs may alias their inputs element for element.
cudaError_t relu(const float *x, float *y, int64_t count, cudaStream_t stream);
cudaError_t reluGrad(const float *dy, const float *x, float *dx, int64_t count,
                     cudaStream_t stream);
cudaError_t biasAdd(const float *x, const float *bias, float *y, int64_t rows, int64_t columns,
                    cudaStream_t stream);
cudaError_t scale(const float *x, float alpha, float *y, int64_t count, cudaStream_t stream);
cudaError_t axpy(float alpha, const float *x, float *y, int64_t count, cudaStream_t stream);

} // namespace prism::runtime::cuda::launch
