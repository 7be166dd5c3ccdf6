// Communication kernels staged through host memory (see StagedCommunication.h).
#include "runtime/exec/StagedCommunication.h"

#include "ir/Diagnostic.h"
#include "ir/Module.h"
#include "runtime/exec/Communication.h"
#include "runtime/exec/Device.h"

namespace prism::runtime {
namespace {

using KernelOrError = llvm::Expected<std::unique_ptr<Kernel>>;

// A host copy of a device value (dense, or a sparse value's indices and rows).
llvm::Expected<RuntimeValue> download(Device &device, const RuntimeValue &value) {
  RuntimeValue host;
  host.sparse = value.sparse;
  auto dense = device.toHost(value.dense);
  if (!dense)
    return dense.takeError();
  host.dense = std::move(*dense);
  if (value.sparse) {
    auto indices = device.toHost(value.indices);
    if (!indices)
      return indices.takeError();
    host.indices = std::move(*indices);
  }
  return host;
}

class StagedKernel : public Kernel {
public:
  explicit StagedKernel(const KernelSpec &spec)
      : device_(*spec.device), communication_(*spec.communication), op_(spec.op),
        attrs_(spec.attrs), step_(spec.step) {}
  // Memory kept across steps, taken when the kernel is built.
  virtual llvm::Error allocate(const KernelSpec &) { return llvm::Error::success(); }
  std::string notCapturable() const override { return "it communicates through host memory"; }

protected:
  std::string variable() const { return op_->operand(0)->name(); }
  Device &device_;
  Communication &communication_;
  const ir::Op *op_;
  ir::AttrMap attrs_;
  const StepContext *step_;
};

// all_reduce: the inputs to host buffers (the device's staging memory, page-locked on a GPU),
// the ring, the results back to the device.
class StagedAllReduce final : public StagedKernel {
public:
  explicit StagedAllReduce(const KernelSpec &spec) : StagedKernel(spec) {}

  llvm::Error allocate(const KernelSpec &spec) override {
    for (const ir::TensorType &type : spec.inputTypes) {
      auto buffer = device_.allocateStaging(
          type.dtype, std::vector<int64_t>(type.dims.begin(), type.dims.end()));
      if (!buffer)
        return buffer.takeError();
      staging_.push_back(std::move(*buffer));
    }
    return llvm::Error::success();
  }
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    // Values the all-reduce keeps (a sole worker's), and an evaluation step's, stay where they
    // are.
    if ((step_ && !step_->training()) ||
        communication_.keepsValues(attrs_.getString("group"), attrs_.getInt("bucket"))) {
      for (size_t i = 0; i < outputs.size(); ++i)
        if (auto e = device_.copyInto(outputs[i]->dense, inputs[i]->dense))
          return e;
      return llvm::Error::success();
    }
    std::vector<Tensor *> tensors;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (auto e = device_.copyInto(staging_[i], inputs[i]->dense))
        return e;
      tensors.push_back(&staging_[i]);
    }
    if (auto e =
            communication_.allReduce(attrs_.getString("group"), attrs_.getInt("bucket"), tensors))
      return e;
    if (auto e = communication_.synchronize())
      return e;
    for (size_t i = 0; i < outputs.size(); ++i)
      if (auto e = device_.copyInto(outputs[i]->dense, staging_[i]))
        return e;
    return llvm::Error::success();
  }

private:
  std::vector<Tensor> staging_;
};

class StagedPull final : public StagedKernel {
public:
  using StagedKernel::StagedKernel;

  // The variable, or (ps_pull_rows) the rows that the indices on the device name.
  llvm::Expected<Tensor> pulled(llvm::ArrayRef<const RuntimeValue *> inputs) {
    if (op_->name() != "ps_pull_rows")
      return communication_.pull(variable());
    auto indices = device_.toHost(inputs[1]->dense);
    if (!indices)
      return indices.takeError();
    return communication_.pullRows(variable(), *indices);
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    auto value = pulled(inputs);
    if (!value)
      return value.takeError();
    if (value->numBytes() != outputs[0]->dense.numBytes())
      return ir::makeError("pulled " + std::to_string(value->numBytes()) + " bytes of '" +
                           variable() + "', expected " +
                           std::to_string(outputs[0]->dense.numBytes()));
    return device_.copyInto(outputs[0]->dense, *value);
  }
};

// ps_push and ps_push_rows: the gradient in host memory, kept until the next step (the
// communication sends pushes at the step's end).
class StagedPush final : public StagedKernel {
public:
  using StagedKernel::StagedKernel;
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *>) override {
    auto host = download(device_, *inputs[1]);
    if (!host)
      return host.takeError();
    gradient_ = std::move(*host);
    return communication_.push(variable(), gradient_);
  }

private:
  RuntimeValue gradient_;
};

template <typename K> KernelOrError makeStaged(const KernelSpec &spec) {
  if (!spec.communication)
    return noCommunication(spec);
  if (!spec.device)
    return ir::makeError(ir::ErrorCode::Internal, "a staged kernel built without its device");
  auto kernel = std::make_unique<K>(spec);
  if (auto e = kernel->allocate(spec))
    return std::move(e);
  return std::unique_ptr<Kernel>(std::move(kernel));
}

} // namespace

void registerStagedCommunicationKernels(KernelRegistry &registry) {
  registry.add("all_reduce", makeStaged<StagedAllReduce>);
  registry.add("ps_pull", makeStaged<StagedPull>);
  registry.add("ps_pull_rows", makeStaged<StagedPull>);
  registry.add("ps_push", makeStaged<StagedPush>);
  registry.add("ps_push_rows", makeStaged<StagedPush>);
}

} // namespace prism::runtime
