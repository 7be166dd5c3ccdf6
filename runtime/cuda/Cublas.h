// cuBLAS, loaded when first needed (dlopen of libcublas.so.13) like NVRTC, so that programs built
// with the GPU path start where it is missing: per device a handle of pedantic f32 math and, when
// asked for, one of TF32 math.
#pragma once

#include <cstdint>

#include "llvm/Support/Error.h"

namespace prism::runtime::cuda {

// C = op(A) · op(B) (with `accumulate`, C += op(A) · op(B)) on `device`, column-major (cuBLAS's
// convention), on the legacy default stream; pedantic f32 math, or with `tf32` TF32 on the tensor
// cores (10-bit mantissas in, f32 sums).
llvm::Error cublasGemm(int device, bool tf32, bool transposeA, bool transposeB, int64_t m,
                       int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                       int64_t ldb, float *c, int64_t ldc, bool accumulate = false);

// `batch` products C_i = op(A_i) · op(B_i) as cublasGemm, in one call: matrix i of each operand
// `stride` elements after matrix i - 1 (0: one matrix shared by all).
llvm::Error cublasGemmStridedBatched(int device, bool tf32, bool transposeA, bool transposeB,
                                     int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                                     int64_t strideA, const float *b, int64_t ldb, int64_t strideB,
                                     float *c, int64_t ldc, int64_t strideC, int64_t batch);

} // namespace prism::runtime::cuda
