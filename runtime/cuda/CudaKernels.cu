// f32 elementwise kernels of the GPU path: grid-stride loops queued on the caller's stream.
#include "runtime/cuda/CudaLaunch.h"

#include <algorithm>

namespace prism::runtime::cuda::launch {
namespace {

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU; the grid-stride loops cover the rest.
constexpr int64_t kMaxBlocks = 4096;

int blocksFor(int64_t count) {
  return static_cast<int>(std::min<int64_t>((count + kThreads - 1) / kThreads, kMaxBlocks));
}

__device__ int64_t firstIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ int64_t gridStride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// As the CPU kernels: x > 0 ? x : 0, so NaN gives 0.
__global__ void reluKernel(const float *x, float *y, int64_t count) {
  for (int64_t i = firstIndex(); i < count; i += gridStride())
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void reluGradKernel(const float *dy, const float *x, float *dx, int64_t count) {
  for (int64_t i = firstIndex(); i < count; i += gridStride())
    dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void biasAddKernel(const float *x, const float *bias, float *y, int64_t count,
                              int64_t columns) {
  for (int64_t i = firstIndex(); i < count; i += gridStride())
    y[i] = x[i] + bias[i % columns];
}

__global__ void scaleKernel(const float *x, float alpha, float *y, int64_t count) {
  for (int64_t i = firstIndex(); i < count; i += gridStride())
    y[i] = alpha * x[i];
}

__global__ void axpyKernel(float alpha, const float *x, float *y, int64_t count) {
  for (int64_t i = firstIndex(); i < count; i += gridStride())
    y[i] += alpha * x[i];
}

} // namespace

cudaError_t relu(const float *x, float *y, int64_t count, cudaStream_t stream) {
  if (count <= 0)
    return cudaSuccess;
  reluKernel<<<blocksFor(count), kThreads, 0, stream>>>(x, y, count);
  return cudaGetLastError();
}

cudaError_t reluGrad(const float *dy, const float *x, float *dx, int64_t count,
                     cudaStream_t stream) {
  if (count <= 0)
    return cudaSuccess;
  reluGradKernel<<<blocksFor(count), kThreads, 0, stream>>>(dy, x, dx, count);
  return cudaGetLastError();
}

cudaError_t biasAdd(const float *x, const float *bias, float *y, int64_t rows, int64_t columns,
                    cudaStream_t stream) {
  if (rows <= 0 || columns <= 0)
    return cudaSuccess;
  int64_t count = rows * columns;
  biasAddKernel<<<blocksFor(count), kThreads, 0, stream>>>(x, bias, y, count, columns);
  return cudaGetLastError();
}

cudaError_t scale(const float *x, float alpha, float *y, int64_t count, cudaStream_t stream) {
  if (count <= 0)
    return cudaSuccess;
  scaleKernel<<<blocksFor(count), kThreads, 0, stream>>>(x, alpha, y, count);
  return cudaGetLastError();
}

cudaError_t axpy(float alpha, const float *x, float *y, int64_t count, cudaStream_t stream) {
  if (count <= 0)
    return cudaSuccess;
  axpyKernel<<<blocksFor(count), kThreads, 0, stream>>>(alpha, x, y, count);
  return cudaGetLastError();
}

} // namespace prism::runtime::cuda::launch
