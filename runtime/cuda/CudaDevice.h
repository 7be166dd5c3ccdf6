// CUDA devices for the GPU path: the device count, an owned stream, f32 device buffers, and CUDA
// and cuBLAS status codes as llvm::Error naming the call that failed.
#pragma once

#include <cstdint>
#include <vector>

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include "runtime/Tensor.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::cuda {

// Success, or "<call> failed: <name>: <description>".
llvm::Error cudaCheck(cudaError_t status, const llvm::Twine &call);
llvm::Error cublasCheck(cublasStatus_t status, const llvm::Twine &call);

// The number of CUDA devices; an error with CUDA's message where there is no driver or device.
llvm::Expected<int> cudaDeviceCount();

// A non-blocking stream on the device that was current when it was made.
class CudaStream {
public:
  static llvm::Expected<CudaStream> create();
  CudaStream(CudaStream &&other) noexcept;
  CudaStream &operator=(CudaStream &&other) noexcept;
  ~CudaStream();

  cudaStream_t get() const { return stream_; }
  // Waits for everything queued on the stream.
  llvm::Error synchronize();

private:
  explicit CudaStream(cudaStream_t stream) : stream_(stream) {}
  cudaStream_t stream_ = nullptr;
};

// f32 elements in device memory, allocated, filled and freed in the order of one stream (which
// must outlive the buffer): nothing here waits for the device except download().
class DeviceBuffer {
public:
  static llvm::Expected<DeviceBuffer> allocate(int64_t count, cudaStream_t stream);
  // A buffer with the elements of an f32 tensor.
  static llvm::Expected<DeviceBuffer> upload(const Tensor &tensor, cudaStream_t stream);
  DeviceBuffer(DeviceBuffer &&other) noexcept;
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept;
  ~DeviceBuffer();

  float *data() { return data_; }
  const float *data() const { return data_; }
  int64_t size() const { return count_; }
  cudaStream_t stream() const { return stream_; }

  // Queues a copy of an f32 tensor of size() elements into the buffer. The tensor may change
  // once this returns: CUDA stages copies from pageable host memory before returning.
  llvm::Error copyFrom(const Tensor &tensor);
  // Waits for the stream and returns the elements as an f32 tensor of `shape` (size() elements).
  llvm::Expected<Tensor> download(std::vector<int64_t> shape) const;

private:
  DeviceBuffer(float *data, int64_t count, cudaStream_t stream)
      : data_(data), count_(count), stream_(stream) {}
  void release();

  float *data_ = nullptr;
  int64_t count_ = 0;
  cudaStream_t stream_ = nullptr;
};

} // namespace prism::runtime::cuda
