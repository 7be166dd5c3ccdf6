// CUDA GPUs behind the executor's Device interface.
#include "runtime/cuda/CudaRuntimeDevice.h"

#include "ir/Diagnostic.h"
#include "runtime/cuda/CudaModules.h"
#include "runtime/exec/Device.h"
#include <cuda_runtime_api.h>

namespace prism::runtime::cuda {
namespace {

// A captured run of kernels, instantiated: replayed on the device's stream.
class CudaGraph final : public CapturedWork {
public:
  CudaGraph(cudaGraphExec_t graph, cudaStream_t stream, int device)
      : graph_(graph), stream_(stream), device_(device) {}
  ~CudaGraph() override { cudaGraphExecDestroy(graph_); }
  llvm::Error replay() override {
    if (auto e = checkCuda(cudaSetDevice(device_), "cudaSetDevice"))
      return e;
    return checkCuda(cudaGraphLaunch(graph_, stream_),
                     "cudaGraphLaunch on cuda:" + llvm::Twine(device_));
  }

private:
  cudaGraphExec_t graph_;
  cudaStream_t stream_;
  int device_;
};

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

  // Stream capture on the device's stream, of this thread's work only: its kernels and cuBLAS
  // calls are recorded into a graph, instantiated at the end.
  bool canCapture() const override { return true; }
  llvm::Error beginCapture() override {
    auto stream = deviceStream(id().index);
    if (!stream)
      return stream.takeError();
    return checkCuda(cudaStreamBeginCapture(*stream, cudaStreamCaptureModeThreadLocal),
                     "cudaStreamBeginCapture on " + id().str());
  }
  llvm::Expected<std::unique_ptr<CapturedWork>> endCapture() override {
    auto stream = deviceStream(id().index);
    if (!stream)
      return stream.takeError();
    cudaGraph_t graph = nullptr;
    if (auto e = checkCuda(cudaStreamEndCapture(*stream, &graph),
                           "cudaStreamEndCapture on " + id().str()))
      return std::move(e);
    cudaGraphExec_t instance = nullptr;
    llvm::Error made = checkCuda(cudaGraphInstantiate(&instance, graph, 0),
                                 "cudaGraphInstantiate on " + id().str());
    cudaGraphDestroy(graph);
    if (made)
      return std::move(made);
    return std::make_unique<CudaGraph>(instance, *stream, id().index);
  }

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
