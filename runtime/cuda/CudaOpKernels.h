// The GPU's op kernels beyond the elementwise family: constant, sum_like, matmul and fused_matmul
// (cuBLAS, then the bias and activation), softmax_cross_entropy and its gradient, and the dense
// updates apply_sgd, apply_momentum and apply_adam. Each is written once against a GpuBackend,
// which launches the kernels of DeviceKernels.cuh, runs cuBLAS's column-major gemm and, on a GPU,
// plans cuDNN's convolutions: a GPU's backend on cuda devices, or the tests' host backend, which
// runs the same kernel source on the CPU so that the kernels are checked on machines without a
// GPU.
#pragma once

#include <memory>

#include "runtime/cuda/Cudnn.h"
#include "runtime/exec/Kernel.h"
#include "llvm/ADT/ArrayRef.h"

namespace prism::runtime::cuda {

class GpuBackend {
public:
  virtual ~GpuBackend() = default;
  // Runs `kernel` (a name from PRISM_DEVICE_KERNELS) over `threads` indices with its argument
  // struct.
  virtual llvm::Error launch(llvm::StringRef kernel, int64_t threads, const void *arguments) = 0;
  // C = op(A) · op(B), or with `accumulate` C += op(A) · op(B), column-major as cuBLAS: C [m, n],
  // op(A) [m, k], op(B) [k, n]; f32 (on a GPU, TF32 where its kernel's spec asks for it).
  virtual llvm::Error gemm(bool transposeA, bool transposeB, int64_t m, int64_t n, int64_t k,
                           const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                           int64_t ldc, bool accumulate) = 0;
  // `batch` products C_i = op(A_i) · op(B_i), column-major as gemm, matrix i of each operand
  // `stride` elements after matrix i - 1 (a stride of 0 shares one matrix). By default a gemm
  // each; a GPU's backend makes them one strided batched call.
  virtual llvm::Error gemmBatched(bool transposeA, bool transposeB, int64_t m, int64_t n, int64_t k,
                                  const float *a, int64_t lda, int64_t strideA, const float *b,
                                  int64_t ldb, int64_t strideB, float *c, int64_t ldc,
                                  int64_t strideC, int64_t batch);
  // The most scratch (bytes of the device's workspace) a kernel takes for its intermediate
  // matrices, a convolution's patch matrix: a larger one is made in parts of examples.
  virtual int64_t workspaceLimit() const { return int64_t{64} << 20; }
  // cuDNN's `pass` of a convolution where the backend has cuDNN (a GPU's) and it takes the
  // geometry (Cudnn.h), else null: the convolution kernels then make the pass themselves, from
  // patch matrices and gemm, as they do on the tests' host backend.
  virtual llvm::Expected<std::unique_ptr<LibraryConvolution>>
  convolution(ConvolutionPass pass, const ConvolutionGeometry &g) {
    (void)pass;
    (void)g;
    return nullptr;
  }
};

// DeviceKernels.cuh, as NVRTC compiles it.
llvm::StringRef deviceKernelsSource();

// The ops these kernels cover.
llvm::ArrayRef<llvm::StringRef> gpuOpKernelNames();

// The kernel of spec.op on `backend`; spec.device gives the scratch memory and reads back the
// flags a kernel raises (a label out of range). An op, dtype or attribute the GPU kernels do not
// take is an Unsupported error naming it.
llvm::Expected<std::unique_ptr<Kernel>> makeGpuOpKernel(const KernelSpec &spec,
                                                        std::shared_ptr<GpuBackend> backend);

// Adds these kernels, on the backend of the spec's cuda device, to a registry.
void registerOpKernels(KernelRegistry &registry);

} // namespace prism::runtime::cuda
