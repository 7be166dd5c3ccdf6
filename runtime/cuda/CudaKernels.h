// f32 GPU kernels with the CPU ops' semantics (docs/ops.md) on device pointers: relu, relu_grad,
// bias_add, the scale/axpy of the all-reduce's batch-weighted mean, and matmul via cuBLAS. Each
// call queues its work on `stream` and returns without waiting for the device.
#pragma once

#include <cstdint>

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include "llvm/Support/Error.h"

namespace prism::runtime::cuda {

// Outputs may alias their inputs element for element (y == x computes in place).
// relu: y = x > 0 ? x : 0.
llvm::Error relu(const float *x, float *y, int64_t count, cudaStream_t stream);
// relu_grad: dx = x > 0 ? dy : 0.
llvm::Error reluGrad(const float *dy, const float *x, float *dx, int64_t count,
                     cudaStream_t stream);
// bias_add: y[r, c] = x[r, c] + bias[c] over x viewed as [rows, columns] (columns: its last dim).
llvm::Error biasAdd(const float *x, const float *bias, float *y, int64_t rows, int64_t columns,
                    cudaStream_t stream);
// y = alpha * x: the all-reduce scales by this task's examples before the sum and by 1 / all
// examples after it.
llvm::Error scale(const float *x, float alpha, float *y, int64_t count, cudaStream_t stream);
// y += alpha * x.
llvm::Error axpy(float alpha, const float *x, float *y, int64_t count, cudaStream_t stream);

// A cuBLAS handle on the device that was current when it was made; one per thread.
class CublasHandle {
public:
  static llvm::Expected<CublasHandle> create();
  CublasHandle(CublasHandle &&other) noexcept;
  CublasHandle &operator=(CublasHandle &&other) noexcept;
  ~CublasHandle();

  cublasHandle_t get() const { return handle_; }

private:
  explicit CublasHandle(cublasHandle_t handle) : handle_(handle) {}
  cublasHandle_t handle_ = nullptr;
};

// matmul on row-major matrices: c[m, n] = op(a) · op(b) with op(a) [m, k] and op(b) [k, n]; a is
// stored [m, k] ([k, m] with transposeA), b [k, n] ([n, k] with transposeB). Full f32 (no TF32).
llvm::Error matmul(CublasHandle &blas, const float *a, const float *b, float *c, int64_t m,
                   int64_t n, int64_t k, bool transposeA, bool transposeB, cudaStream_t stream);

} // namespace prism::runtime::cuda
