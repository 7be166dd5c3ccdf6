// CUDA devices, streams and device buffers; CUDA and cuBLAS errors as llvm::Error.
#include "runtime/cuda/CudaDevice.h"

#include <utility>

#include "ir/Diagnostic.h"

namespace prism::runtime::cuda {

llvm::Error cudaCheck(cudaError_t status, const llvm::Twine &call) {
  if (status == cudaSuccess)
    return llvm::Error::success();
  return ir::makeError(call + " failed: " + cudaGetErrorName(status) + ": " +
                       cudaGetErrorString(status));
}

llvm::Error cublasCheck(cublasStatus_t status, const llvm::Twine &call) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return llvm::Error::success();
  return ir::makeError(call + " failed: " + cublasGetStatusName(status) + ": " +
                       cublasGetStatusString(status));
}

llvm::Expected<int> cudaDeviceCount() {
  int count = 0;
  if (llvm::Error error = cudaCheck(cudaGetDeviceCount(&count), "cudaGetDeviceCount"))
    return std::move(error);
  return count;
}

llvm::Expected<CudaStream> CudaStream::create() {
  cudaStream_t stream = nullptr;
  if (llvm::Error error = cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                                    "cudaStreamCreateWithFlags"))
    return std::move(error);
  return CudaStream(stream);
}

CudaStream::CudaStream(CudaStream &&other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)) {}

CudaStream &CudaStream::operator=(CudaStream &&other) noexcept {
  if (this != &other) {
    if (stream_)
      cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

CudaStream::~CudaStream() {
  if (stream_)
    cudaStreamDestroy(stream_);
}

llvm::Error CudaStream::synchronize() {
  return cudaCheck(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

namespace {

llvm::Error checkF32(const Tensor &tensor, int64_t count, llvm::StringRef what) {
  if (tensor.dtype() != ir::DType::F32)
    return ir::makeError(what + ": the GPU path holds f32 tensors only");
  if (tensor.numElements() != count)
    return ir::makeError(what + ": " + llvm::Twine(tensor.numElements()) +
                         " elements for a device buffer of " + llvm::Twine(count));
  return llvm::Error::success();
}

} // namespace

llvm::Expected<DeviceBuffer> DeviceBuffer::allocate(int64_t count, cudaStream_t stream) {
  if (count < 0)
    return ir::makeError("a device buffer of " + llvm::Twine(count) + " elements");
  void *data = nullptr;
  if (count > 0)
    if (llvm::Error error =
            cudaCheck(cudaMallocAsync(&data, static_cast<size_t>(count) * sizeof(float), stream),
                      "cudaMallocAsync of " + llvm::Twine(count) + " floats"))
      return std::move(error);
  return DeviceBuffer(static_cast<float *>(data), count, stream);
}

llvm::Expected<DeviceBuffer> DeviceBuffer::upload(const Tensor &tensor, cudaStream_t stream) {
  auto buffer = allocate(tensor.numElements(), stream);
  if (!buffer)
    return buffer.takeError();
  if (llvm::Error error = buffer->copyFrom(tensor))
    return std::move(error);
  return buffer;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer &&other) noexcept
    : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)),
      stream_(other.stream_) {}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    count_ = std::exchange(other.count_, 0);
    stream_ = other.stream_;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  release();
}

void DeviceBuffer::release() {
  if (data_)
    cudaFreeAsync(data_, stream_);
  data_ = nullptr;
  count_ = 0;
}

llvm::Error DeviceBuffer::copyFrom(const Tensor &tensor) {
  if (llvm::Error error = checkF32(tensor, count_, "upload"))
    return error;
  if (count_ == 0)
    return llvm::Error::success();
  return cudaCheck(cudaMemcpyAsync(data_, tensor.raw(), static_cast<size_t>(tensor.numBytes()),
                                   cudaMemcpyHostToDevice, stream_),
                   "cudaMemcpyAsync to the device");
}

llvm::Expected<Tensor> DeviceBuffer::download(std::vector<int64_t> shape) const {
  Tensor tensor(ir::DType::F32, std::move(shape));
  if (llvm::Error error = checkF32(tensor, count_, "download"))
    return std::move(error);
  if (count_ > 0)
    if (llvm::Error error =
            cudaCheck(cudaMemcpyAsync(tensor.raw(), data_, static_cast<size_t>(tensor.numBytes()),
                                      cudaMemcpyDeviceToHost, stream_),
                      "cudaMemcpyAsync to the host"))
      return std::move(error);
  if (llvm::Error error = cudaCheck(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"))
    return std::move(error);
  return tensor;
}

} // namespace prism::runtime::cuda
