// Devices: the shared copy logic, the CPU device and the factory by device kind.
#include "runtime/exec/Device.h"

#include <omp.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "ir/Diagnostic.h"

namespace prism::runtime {

size_t Device::bytesOf(ir::DType dtype, const std::vector<int64_t> &shape) {
  int64_t elements = 1;
  for (int64_t d : shape)
    elements *= d;
  return static_cast<size_t>(elements * ir::dtypeBytes(dtype));
}

llvm::Expected<Tensor> Device::allocateTensor(ir::DType dtype, std::vector<int64_t> shape) {
  auto memory = allocate(bytesOf(dtype, shape));
  if (!memory)
    return memory.takeError();
  return Tensor::view(dtype, std::move(shape), std::move(*memory), 0, id_);
}

llvm::Error Device::reserveWorkspace(size_t bytes) {
  if (bytes <= workspaceBytes_)
    return llvm::Error::success();
  auto memory = allocate(bytes); // on failure the old memory stays, for the kernels built before
  if (!memory)
    return memory.takeError();
  workspace_ = std::move(*memory);
  workspaceBytes_ = bytes;
  return llvm::Error::success();
}

llvm::Error Device::beginCapture() {
  return ir::makeError(ir::ErrorCode::Unsupported, id_.str() + " does not capture kernels");
}

llvm::Expected<std::unique_ptr<CapturedWork>> Device::endCapture() {
  return ir::makeError(ir::ErrorCode::Unsupported, id_.str() + " does not capture kernels");
}

llvm::Expected<const StepValues *> Device::stepValues() {
  constexpr int64_t kWords = sizeof(StepValues) / sizeof(int64_t);
  static_assert(sizeof(StepValues) == kWords * sizeof(int64_t), "StepValues is int64 words");
  if (stepValues_.empty()) {
    // On the CPU the staging memory is the values themselves.
    auto host = allocateStaging(ir::DType::I64, {kWords});
    if (!host)
      return host.takeError();
    std::memset(host->raw(), 0, sizeof(StepValues));
    auto device = isHost() ? *host : allocateTensor(ir::DType::I64, {kWords});
    if (!device)
      return device.takeError();
    stagedStepValues_ = std::move(*host);
    stepValues_ = std::move(*device);
    written_.reset();
  }
  return static_cast<const StepValues *>(stepValues_.raw());
}

llvm::Error Device::writeStepValues(const StepValues &values) {
  if (stepValues_.empty() || written_ == values)
    return llvm::Error::success();
  std::memcpy(stagedStepValues_.raw(), &values, sizeof(StepValues));
  if (auto err = copyInto(stepValues_, stagedStepValues_))
    return err;
  written_ = values;
  return llvm::Error::success();
}

llvm::Expected<Tensor> Device::allocateStaging(ir::DType dtype, std::vector<int64_t> shape) {
  return Tensor(dtype, std::move(shape));
}

llvm::Expected<Tensor> Device::toDevice(const Tensor &tensor) {
  if (tensor.device() == id_ || tensor.empty())
    return tensor;
  if (!tensor.onHost())
    return ir::makeError(ir::ErrorCode::Unsupported, "a copy from " + tensor.device().str() +
                                                         " to " + id_.str() +
                                                         " must go through the host");
  auto copy = allocateTensor(tensor.dtype(), tensor.shape());
  if (!copy)
    return copy.takeError();
  if (auto err = copyToDevice(copy->raw(), tensor.raw(), static_cast<size_t>(tensor.numBytes())))
    return std::move(err);
  copies_.toDeviceBytes += tensor.numBytes();
  ++copies_.toDeviceCopies;
  return copy;
}

llvm::Expected<Tensor> Device::toHost(const Tensor &tensor) {
  if (tensor.onHost() || tensor.empty())
    return tensor;
  Tensor copy(tensor.dtype(), tensor.shape());
  if (auto err = copyToHost(copy.raw(), tensor.raw(), static_cast<size_t>(tensor.numBytes())))
    return std::move(err);
  copies_.toHostBytes += tensor.numBytes();
  ++copies_.toHostCopies;
  return copy;
}

llvm::Error Device::copyInto(Tensor &dst, const Tensor &src) {
  if (dst.numBytes() != src.numBytes())
    return ir::makeError(ir::ErrorCode::Internal, "a copy of " + llvm::Twine(src.numBytes()) +
                                                      " bytes into " + llvm::Twine(dst.numBytes()));
  auto here = [&](const Tensor &t) { return t.onHost() || t.device() == id_; };
  if (!here(dst) || !here(src))
    return ir::makeError(ir::ErrorCode::Unsupported, "a copy from " + src.device().str() + " to " +
                                                         dst.device().str() + " on " + id_.str());
  const size_t bytes = static_cast<size_t>(src.numBytes());
  if (bytes == 0 || dst.raw() == src.raw())
    return llvm::Error::success();
  if (dst.onHost() && src.onHost()) {
    std::memcpy(dst.raw(), src.raw(), bytes);
    return llvm::Error::success();
  }
  if (src.onHost()) {
    copies_.toDeviceBytes += src.numBytes();
    ++copies_.toDeviceCopies;
    return copyToDevice(dst.raw(), src.raw(), bytes);
  }
  if (dst.onHost()) {
    copies_.toHostBytes += src.numBytes();
    ++copies_.toHostCopies;
    return copyToHost(dst.raw(), src.raw(), bytes);
  }
  return copyOnDevice(dst.raw(), src.raw(), bytes);
}

llvm::Error Device::copyFromPeer(Tensor &dst, Device &peer, const Tensor &src) {
  if (&peer == this)
    return copyInto(dst, src);
  if (dst.numBytes() != src.numBytes() || dst.device() != id_ || src.device() != peer.id())
    return ir::makeError(ir::ErrorCode::Internal, "a copy of " + llvm::Twine(src.numBytes()) +
                                                      " bytes on " + src.device().str() + " into " +
                                                      llvm::Twine(dst.numBytes()) + " bytes on " +
                                                      dst.device().str() + ", from " +
                                                      peer.id().str() + " to " + id_.str());
  const size_t bytes = static_cast<size_t>(src.numBytes());
  if (bytes == 0)
    return llvm::Error::success();
  copies_.fromPeerBytes += src.numBytes();
  ++copies_.fromPeerCopies;
  return copyPeerToDevice(dst.raw(), peer, src.raw(), bytes);
}

llvm::Expected<Tensor> Device::fromPeer(Device &peer, const Tensor &src) {
  if (&peer == this || src.empty())
    return src;
  auto copy = allocateTensor(src.dtype(), src.shape());
  if (!copy)
    return copy.takeError();
  if (auto err = copyFromPeer(*copy, peer, src))
    return std::move(err);
  return copy;
}

llvm::Error Device::copyPeerToDevice(void *dst, Device &peer, const void *src, size_t bytes) {
  std::vector<char> host(bytes);
  if (auto err = peer.copyToHost(host.data(), src, bytes))
    return err;
  return copyToDevice(dst, host.data(), bytes);
}

CpuDevice::CpuDevice(int index, int threads)
    : Device(ir::DeviceId{ir::DeviceKind::Cpu, index}), threads_(std::max(threads, 1)) {}

llvm::Expected<std::shared_ptr<void>> CpuDevice::allocate(size_t bytes) {
  size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  void *raw = std::aligned_alloc(64, rounded);
  if (!raw)
    return ir::makeError(ir::ErrorCode::ResourceExhausted,
                         "cannot allocate " + llvm::Twine(bytes) + " bytes on " + id().str());
  return std::shared_ptr<void>(raw, std::free);
}

void CpuDevice::enter() {
  omp_set_num_threads(threads_);
}

// Host memory on both sides: never called by toDevice/toHost, which return host tensors as
// they are, but a plain copy is the right meaning.
llvm::Error CpuDevice::copyToDevice(void *dst, const void *src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  return llvm::Error::success();
}

llvm::Error CpuDevice::copyToHost(void *dst, const void *src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  return llvm::Error::success();
}

llvm::Error CpuDevice::copyOnDevice(void *dst, const void *src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  return llvm::Error::success();
}

namespace {

struct DeviceFactories {
  std::mutex mutex;
  std::array<DeviceFactory, 2> byKind{}; // by ir::DeviceKind
};

DeviceFactories &factories() {
  static DeviceFactories instance;
  return instance;
}

llvm::Expected<std::unique_ptr<Device>> createCpu(ir::DeviceId id, const DeviceOptions &options) {
  if (id.index != 0)
    return ir::makeError(ir::ErrorCode::Unsupported,
                         "device " + id.str() +
                             ": a task has one CPU device, cpu:0 (in-graph "
                             "towers on the CPU share it)");
  return std::make_unique<CpuDevice>(0, options.threads);
}

} // namespace

void registerDeviceFactory(ir::DeviceKind kind, DeviceFactory factory) {
  std::lock_guard<std::mutex> lock(factories().mutex);
  factories().byKind[static_cast<size_t>(kind)] = factory;
}

llvm::Expected<std::unique_ptr<Device>> createDevice(ir::DeviceId id,
                                                     const DeviceOptions &options) {
  if (id.kind == ir::DeviceKind::Cpu)
    return createCpu(id, options);
  DeviceFactory factory;
  {
    std::lock_guard<std::mutex> lock(factories().mutex);
    factory = factories().byKind[static_cast<size_t>(id.kind)];
  }
  if (!factory)
    return ir::makeError(ir::ErrorCode::Unsupported,
                         "device " + id.str() + " was asked for, but this build of prism has no " +
                             ir::deviceKindName(id.kind) +
                             " support (it is built where /usr/local/cuda is found)");
  return factory(id, options);
}

} // namespace prism::runtime
