// The GPU kernels' llvm::Error side: checks, launch statuses, and matmul through cuBLAS.
#include "runtime/cuda/CudaKernels.h"

#include <algorithm>
#include <climits>
#include <utility>

#include <cublas_v2.h>

#include "ir/Diagnostic.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaLaunch.h"

namespace prism::runtime::cuda {
namespace {

llvm::Error checkCount(int64_t count, const char *kernel) {
  if (count < 0)
    return ir::makeError(llvm::Twine(kernel) + " of " + llvm::Twine(count) + " elements");
  return llvm::Error::success();
}

} // namespace

llvm::Error relu(const float *x, float *y, int64_t count, cudaStream_t stream) {
  if (llvm::Error error = checkCount(count, "relu"))
    return error;
  return cudaCheck(launch::relu(x, y, count, stream), "relu kernel launch");
}

llvm::Error reluGrad(const float *dy, const float *x, float *dx, int64_t count,
                     cudaStream_t stream) {
  if (llvm::Error error = checkCount(count, "relu_grad"))
    return error;
  return cudaCheck(launch::reluGrad(dy, x, dx, count, stream), "relu_grad kernel launch");
}

llvm::Error biasAdd(const float *x, const float *bias, float *y, int64_t rows, int64_t columns,
                    cudaStream_t stream) {
  if (rows < 0 || columns < 0)
    return ir::makeError("bias_add over [" + llvm::Twine(rows) + ", " + llvm::Twine(columns) + "]");
  return cudaCheck(launch::biasAdd(x, bias, y, rows, columns, stream), "bias_add kernel launch");
}

llvm::Error scale(const float *x, float alpha, float *y, int64_t count, cudaStream_t stream) {
  if (llvm::Error error = checkCount(count, "scale"))
    return error;
  return cudaCheck(launch::scale(x, alpha, y, count, stream), "scale kernel launch");
}

llvm::Error axpy(float alpha, const float *x, float *y, int64_t count, cudaStream_t stream) {
  if (llvm::Error error = checkCount(count, "axpy"))
    return error;
  return cudaCheck(launch::axpy(alpha, x, y, count, stream), "axpy kernel launch");
}

llvm::Expected<CublasHandle> CublasHandle::create() {
  cublasHandle_t handle = nullptr;
  if (llvm::Error error = cublasCheck(cublasCreate(&handle), "cublasCreate"))
    return std::move(error);
  // Pedantic math: plain f32 arithmetic, never TF32 tensor cores, whatever the environment says.
  if (llvm::Error error =
          cublasCheck(cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode")) {
    cublasDestroy(handle);
    return std::move(error);
  }
  return CublasHandle(handle);
}

CublasHandle::CublasHandle(CublasHandle &&other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)) {}

CublasHandle &CublasHandle::operator=(CublasHandle &&other) noexcept {
  if (this != &other) {
    if (handle_)
      cublasDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

CublasHandle::~CublasHandle() {
  if (handle_)
    cublasDestroy(handle_);
}

llvm::Error matmul(CublasHandle &blas, const float *a, const float *b, float *c, int64_t m,
                   int64_t n, int64_t k, bool transposeA, bool transposeB, cudaStream_t stream) {
  if (m < 0 || n < 0 || k < 0 || m > INT_MAX || n > INT_MAX || k > INT_MAX)
    return ir::makeError("matmul of [" + llvm::Twine(m) + ", " + llvm::Twine(k) + "] by [" +
                         llvm::Twine(k) + ", " + llvm::Twine(n) + "]: sizes out of cuBLAS's range");
  if (m == 0 || n == 0)
    return llvm::Error::success();
  if (llvm::Error error = cublasCheck(cublasSetStream(blas.get(), stream), "cublasSetStream"))
    return error;
  // cuBLAS is column-major, and a row-major [r, s] matrix is its column-major transpose: compute
  // cᵀ [n, m] = op(b)ᵀ · op(a)ᵀ, i.e. swap the operands and keep each one's transposition.
  const float one = 1.0f, zero = 0.0f;
  // A leading dimension is at least 1, even of an empty (k == 0) operand.
  int lda = static_cast<int>(std::max<int64_t>(transposeA ? m : k, 1));
  int ldb = static_cast<int>(std::max<int64_t>(transposeB ? k : n, 1));
  return cublasCheck(cublasSgemm(blas.get(), transposeB ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 transposeA ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                                 static_cast<int>(m), static_cast<int>(k), &one, b, ldb, a, lda,
                                 &zero, c, static_cast<int>(n)),
                     "cublasSgemm");
}

} // namespace prism::runtime::cuda
