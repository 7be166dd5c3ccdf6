// The device seam of the runtime: what the executor asks of the hardware a program runs on.
// A Device gives memory (the step's arena is one allocation), prepares its threads or stream
// for a step, copies tensors between host and device (counted: copies happen only at feeds,
// fetches, PS pulls and pushes, checkpoints and accumulated micro-steps) and waits for queued
// work. The CPU is the first device; other kinds register a factory (the GPU path does, where
// it is built).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "ir/Device.h"
#include "runtime/StepContext.h"
#include "runtime/Tensor.h"
#include "llvm/Support/Error.h"

namespace prism::runtime {

// Bytes and copies between the host and a device since it was made.
struct CopyCounters {
  int64_t toDeviceBytes = 0;
  int64_t toHostBytes = 0;
  int64_t toDeviceCopies = 0;
  int64_t toHostCopies = 0;
  // Copies into this device from another (in-graph towers on devices of their own).
  int64_t fromPeerBytes = 0;
  int64_t fromPeerCopies = 0;
};

// Work a device recorded to run again as it was recorded (a GPU's CUDA graph): the same kernels
// with the same arguments, over the same memory.
class CapturedWork {
public:
  virtual ~CapturedWork() = default;
  virtual llvm::Error replay() = 0;
};

struct DeviceOptions {
  int threads = 1; // CPU: OpenMP threads for kernels (oneDNN fixes them when a primitive is made)
};

class Device {
public:
  virtual ~Device() = default;
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;

  ir::DeviceId id() const { return id_; }
  // Its memory is host memory: tensors on it need no copies to be read by CPU code.
  bool isHost() const { return id_.kind == ir::DeviceKind::Cpu; }

  // `bytes` of this device's memory (aligned for any kernel), freed with the last reference.
  virtual llvm::Expected<std::shared_ptr<void>> allocate(size_t bytes) = 0;
  // A tensor of this device's memory.
  llvm::Expected<Tensor> allocateTensor(ir::DType dtype, std::vector<int64_t> shape);
  // A tensor of host memory that this device copies to and from fastest (a GPU's page-locked
  // memory), for buffers that stage values every step; plain host memory by default.
  virtual llvm::Expected<Tensor> allocateStaging(ir::DType dtype, std::vector<int64_t> shape);
  // Makes this device the one the calling thread's kernels run on (CPU: OpenMP threads).
  virtual void enter() {}
  // Waits for everything queued on the device.
  virtual llvm::Error synchronize() { return llvm::Error::success(); }

  // Whether this device can record its kernels' launches once and replay them (a GPU's CUDA
  // graphs). Between beginCapture and endCapture the calling thread's kernels are recorded, not
  // run, and nothing may be copied to, from or within the device; endCapture returns the
  // record, or an error naming what could not be recorded.
  virtual bool canCapture() const { return false; }
  virtual llvm::Error beginCapture();
  virtual llvm::Expected<std::unique_ptr<CapturedWork>> endCapture();

  // A tensor's elements on this device: the tensor itself where it already is there (no copy).
  llvm::Expected<Tensor> toDevice(const Tensor &tensor);
  // A tensor's elements on the host: the tensor itself where it already is there.
  llvm::Expected<Tensor> toHost(const Tensor &tensor);
  // Copies `src` into `dst`, tensors of equal size each on the host or on this device (a copy
  // between the two is counted; one within the host, or within the device, is not).
  llvm::Error copyInto(Tensor &dst, const Tensor &src);
  // Copies `src`, a tensor of `peer`'s memory, into `dst` on this device (equal sizes; counted
  // as a copy from a peer): device to device where both are GPUs, through the host otherwise.
  // Everything queued on either device before it is done first. With `peer` this device, a
  // plain copyInto.
  llvm::Error copyFromPeer(Tensor &dst, Device &peer, const Tensor &src);
  // A copy of `src`, of `peer`'s memory, in new memory of this device (as copyFromPeer).
  llvm::Expected<Tensor> fromPeer(Device &peer, const Tensor &src);
  const CopyCounters &copies() const { return copies_; }

  // Scratch memory shared by the kernels of this device, which run one after another on it (a
  // GPU's on its one stream): a kernel asks for the bytes it needs when it is built, and the
  // largest ask is kept, so the scratch costs the largest kernel's need, not the sum of all.
  // A kernel takes `workspace()` when it runs (an ask may have replaced the memory since it was
  // built); what it leaves there is not kept for the next kernel.
  llvm::Error reserveWorkspace(size_t bytes);
  void *workspace() const { return workspace_.get(); }
  size_t workspaceBytes() const { return workspaceBytes_; }

  // The step's values (StepValues) in this device's memory, for kernels that read them when they
  // run (dropout's step and first example, batch_share's global batch): made when a kernel
  // first asks, as it is built. Then the executor writes them before each step's kernels
  // (`writeStepValues`: a counted copy, from page-locked memory on a GPU, when they changed).
  llvm::Expected<const StepValues *> stepValues();
  llvm::Error writeStepValues(const StepValues &values);

protected:
  explicit Device(ir::DeviceId id) : id_(id) {}
  // The bytes of a tensor of `dtype` and `shape`.
  static size_t bytesOf(ir::DType dtype, const std::vector<int64_t> &shape);
  // Copies `bytes` from host memory to this device's memory, or back.
  virtual llvm::Error copyToDevice(void *dst, const void *src, size_t bytes) = 0;
  virtual llvm::Error copyToHost(void *dst, const void *src, size_t bytes) = 0;
  // Copies `bytes` within this device's memory (a device whose memory is the host's never gets
  // here: its copies are plain).
  virtual llvm::Error copyOnDevice(void *dst, const void *src, size_t bytes) = 0;
  // Copies `bytes` of `peer`'s memory into this device's: by default through a host buffer.
  virtual llvm::Error copyPeerToDevice(void *dst, Device &peer, const void *src, size_t bytes);

private:
  ir::DeviceId id_;
  CopyCounters copies_;
  std::shared_ptr<void> workspace_;
  size_t workspaceBytes_ = 0;
  Tensor stepValues_, stagedStepValues_; // on the device, and its host staging
  std::optional<StepValues> written_;
};

// The host's CPU: aligned host memory; kernels run on OpenMP threads.
class CpuDevice final : public Device {
public:
  CpuDevice(int index, int threads);
  llvm::Expected<std::shared_ptr<void>> allocate(size_t bytes) override;
  void enter() override;
  int threads() const { return threads_; }

protected:
  llvm::Error copyToDevice(void *dst, const void *src, size_t bytes) override;
  llvm::Error copyToHost(void *dst, const void *src, size_t bytes) override;
  llvm::Error copyOnDevice(void *dst, const void *src, size_t bytes) override;

private:
  int threads_;
};

using DeviceFactory = llvm::Expected<std::unique_ptr<Device>> (*)(ir::DeviceId id,
                                                                  const DeviceOptions &options);
// Lets `createDevice` make devices of `kind` (the CPU's is built in).
void registerDeviceFactory(ir::DeviceKind kind, DeviceFactory factory);

// The device `id`. A device this build or machine cannot provide (`cuda:0` without the GPU path,
// or with no such GPU) is an Unsupported error naming it, never a fallback to another device.
llvm::Expected<std::unique_ptr<Device>> createDevice(ir::DeviceId id,
                                                     const DeviceOptions &options = {});

} // namespace prism::runtime
