// CUDA GPUs behind the executor's Device interface.
#include "runtime/cuda/CudaRuntimeDevice.h"

#include "ir/Diagnostic.h"
#include "runtime/cuda/CudaModules.h"
#include "runtime/exec/Device.h"
#include <cuda_runtime_api.h>

namespace prism::runtime::cuda {
namespace {

class CudaGpu final : public Device {
public:
  explicit CudaGpu(int index) : Device(ir::DeviceId{ir::DeviceKind::Cuda, index}) {}

  llvm::Expected<std::shared_ptr<void>> allocate(size_t bytes) override {
    enter();
    void *memory = nullptr;
    if (auto err = checkCuda(cudaMalloc(&memory, std::max<size_t>(bytes, 256)),
                             "cudaMalloc(" + llvm::Twine(bytes) + ") on " + id().str()))
      return ir::makeError(ir::ErrorCode::ResourceExhausted, ir::messageOf(std::move(err)));
    return std::shared_ptr<void>(memory, [](void *p) { cudaFree(p); });
  }

  // Page-locked host memory: copies to and from it run at the bus's speed.
  llvm::Expected<Tensor> allocateStaging(ir::DType dtype, std::vector<int64_t> shape) override {
    const size_t bytes = std::max<size_t>(bytesOf(dtype, shape), 1);
    enter();
    void *memory = nullptr;
    if (auto err = checkCuda(cudaHostAlloc(&memory, bytes, cudaHostAllocDefault),
                             "cudaHostAlloc(" + llvm::Twine(bytes) + ") for " + id().str()))
      return ir::makeError(ir::ErrorCode::ResourceExhausted, ir::messageOf(std::move(err)));
    return Tensor::view(dtype, std::move(shape),
                        std::shared_ptr<void>(memory, [](void *p) { cudaFreeHost(p); }), 0,
                        ir::DeviceId{});
  }

  void enter() override { cudaSetDevice(id().index); }

  llvm::Error synchronize() override {
    enter();
    return checkCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize on " + id().str());
  }

protected:
  llvm::Error copyToDevice(void *dst, const void *src, size_t bytes) override {
    enter();
    return checkCuda(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice),
                     "cudaMemcpy to " + id().str());
  }
  llvm::Error copyToHost(void *dst, const void *src, size_t bytes) override {
    enter();
    return checkCuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost),
                     "cudaMemcpy from " + id().str());
  }
  llvm::Error copyOnDevice(void *dst, const void *src, size_t bytes) override {
    enter();
    return checkCuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice),
                     "cudaMemcpy within " + id().str());
  }
  // Between two GPUs: over NVLink or PCIe where they can reach each other, else staged by the
  // driver; after the work queued on both.
  llvm::Error copyPeerToDevice(void *dst, Device &peer, const void *src, size_t bytes) override {
    if (peer.id().kind != ir::DeviceKind::Cuda)
      return Device::copyPeerToDevice(dst, peer, src, bytes);
    return checkCuda(cudaMemcpyPeer(dst, id().index, src, peer.id().index, bytes),
                     "cudaMemcpyPeer from " + peer.id().str() + " to " + id().str());
  }
};

llvm::Expected<std::unique_ptr<Device>> createGpu(ir::DeviceId id, const DeviceOptions &) {
  int count = 0;
  if (auto err = checkCuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount"))
    return ir::makeError(ir::ErrorCode::Unsupported,
                         "device " + id.str() + " was asked for, but this machine has no usable " +
                             "CUDA device (" + ir::messageOf(std::move(err)) + ")");
  if (id.index >= count)
    return ir::makeError(ir::ErrorCode::Unsupported,
                         "device " + id.str() + " was asked for, but this machine has " +
                             llvm::Twine(count) + " CUDA device" + (count == 1 ? "" : "s"));
  return std::make_unique<CudaGpu>(id.index);
}

} // namespace

void registerCudaDevice() {
  registerDeviceFactory(ir::DeviceKind::Cuda, createGpu);
}

} // namespace prism::runtime::cuda
