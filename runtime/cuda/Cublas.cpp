// cuBLAS through dlopen (see Cublas.h). Only its declarations come from cublas_api.h.
#include "runtime/cuda/Cublas.h"

#include <cublas_api.h>
#include <dlfcn.h>

#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "ir/Diagnostic.h"
#include "runtime/cuda/CudaModules.h"
#include "runtime/cuda/DynamicLibrary.h"

namespace prism::runtime::cuda {
namespace {

struct Functions {
  decltype(&::cublasCreate_v2) create = nullptr;
  decltype(&::cublasSetMathMode) setMathMode = nullptr;
  decltype(&::cublasSetStream_v2) setStream = nullptr;
  decltype(&::cublasSgemm_v2) sgemm = nullptr;
  decltype(&::cublasSgemmStridedBatched) sgemmStridedBatched = nullptr;
};

llvm::Expected<Functions> loadFunctions() {
  auto opened =
      openCudaLibrary("libcublas.so.13", "cuBLAS, which the GPU's matrix products run on");
  if (!opened)
    return opened.takeError();
  void *library = *opened;
  Functions f;
  f.create = reinterpret_cast<decltype(f.create)>(dlsym(library, "cublasCreate_v2"));
  f.setMathMode = reinterpret_cast<decltype(f.setMathMode)>(dlsym(library, "cublasSetMathMode"));
  f.setStream = reinterpret_cast<decltype(f.setStream)>(dlsym(library, "cublasSetStream_v2"));
  f.sgemm = reinterpret_cast<decltype(f.sgemm)>(dlsym(library, "cublasSgemm_v2"));
  f.sgemmStridedBatched = reinterpret_cast<decltype(f.sgemmStridedBatched)>(
      dlsym(library, "cublasSgemmStridedBatched"));
  if (!f.create || !f.setMathMode || !f.setStream || !f.sgemm || !f.sgemmStridedBatched)
    return ir::makeError(ir::ErrorCode::Unsupported,
                         "the loaded cuBLAS lacks cublasCreate_v2, cublasSetMathMode, "
                         "cublasSetStream_v2, cublasSgemm_v2 or cublasSgemmStridedBatched");
  return f;
}

llvm::Error checkBlas(cublasStatus_t status, const llvm::Twine &call) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return llvm::Error::success();
  return ir::makeError(call + " failed: cuBLAS status " + llvm::Twine(static_cast<int>(status)));
}

struct Blas {
  std::mutex mutex;
  std::optional<Functions> functions;
  std::string failure;
  std::map<std::pair<int, bool>, cublasHandle_t> handles; // by device and TF32

  static Blas &get() {
    static Blas *blas = new Blas;
    return *blas;
  }

  // The handle of `device` (made current), created on first use with pedantic math, or TF32 math
  // with `tf32`, on the device's stream.
  llvm::Expected<std::pair<const Functions *, cublasHandle_t>> handle(int device, bool tf32) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!functions && failure.empty()) {
      auto loaded = loadFunctions();
      if (loaded)
        functions = *loaded;
      else
        failure = llvm::toString(loaded.takeError());
    }
    if (!functions)
      return ir::makeError(ir::ErrorCode::Unsupported, failure);
    auto stream = deviceStream(device); // the device made current too
    if (!stream)
      return stream.takeError();
    auto it = handles.find({device, tf32});
    if (it == handles.end()) {
      cublasHandle_t h = nullptr;
      if (auto e = checkBlas(functions->create(&h), "cublasCreate"))
        return std::move(e);
      if (auto e = checkBlas(
              functions->setMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH),
              "cublasSetMathMode"))
        return std::move(e);
      if (auto e = checkBlas(functions->setStream(h, *stream), "cublasSetStream"))
        return std::move(e);
      it = handles.emplace(std::make_pair(device, tf32), h).first;
    }
    return std::make_pair(&*functions, it->second);
  }
};

} // namespace

namespace {

// cuBLAS takes 32-bit sizes and leading dimensions.
llvm::Error checkSizes(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc,
                       int64_t batch) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (m > kMax || n > kMax || k > kMax || lda > kMax || ldb > kMax || ldc > kMax || batch > kMax)
    return ir::makeError(ir::ErrorCode::Unsupported,
                         llvm::Twine(batch) + " matrix product(s) of " + llvm::Twine(m) + " x " +
                             llvm::Twine(k) + " by " + llvm::Twine(k) + " x " + llvm::Twine(n) +
                             " exceed cuBLAS's 32-bit sizes");
  return llvm::Error::success();
}

cublasOperation_t operation(bool transpose) {
  return transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
}

int narrow(int64_t value) {
  return static_cast<int>(value);
}

} // namespace

llvm::Error cublasGemm(int device, bool tf32, bool transposeA, bool transposeB, int64_t m,
                       int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                       int64_t ldb, float *c, int64_t ldc, bool accumulate) {
  if (auto e = checkSizes(m, n, k, lda, ldb, ldc, 1))
    return e;
  auto blas = Blas::get().handle(device, tf32);
  if (!blas)
    return blas.takeError();
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  return checkBlas(blas->first->sgemm(blas->second, operation(transposeA), operation(transposeB),
                                      narrow(m), narrow(n), narrow(k), &one, a, narrow(lda), b,
                                      narrow(ldb), &beta, c, narrow(ldc)),
                   "cublasSgemm on cuda:" + llvm::Twine(device));
}

llvm::Error cublasGemmStridedBatched(int device, bool tf32, bool transposeA, bool transposeB,
                                     int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                                     int64_t strideA, const float *b, int64_t ldb, int64_t strideB,
                                     float *c, int64_t ldc, int64_t strideC, int64_t batch) {
  if (batch <= 0)
    return llvm::Error::success();
  if (auto e = checkSizes(m, n, k, lda, ldb, ldc, batch))
    return e;
  auto blas = Blas::get().handle(device, tf32);
  if (!blas)
    return blas.takeError();
  const float one = 1.0f, zero = 0.0f;
  return checkBlas(blas->first->sgemmStridedBatched(
                       blas->second, operation(transposeA), operation(transposeB), narrow(m),
                       narrow(n), narrow(k), &one, a, narrow(lda), strideA, b, narrow(ldb), strideB,
                       &zero, c, narrow(ldc), strideC, narrow(batch)),
                   "cublasSgemmStridedBatched on cuda:" + llvm::Twine(device));
}

} // namespace prism::runtime::cuda
