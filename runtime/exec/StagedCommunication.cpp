// Communication kernels staged through host memory (see StagedCommunication.h).
#include "runtime/exec/StagedCommunication.h"

#include "ir/Diagnostic.h"
#include "ir/Module.h"
#include "runtime/exec/Communication.h"
#include "runtime/exec/Device.h"

namespace prism::runtime {
namespace {

using KernelOrError = llvm::Expected<std::unique_ptr<Kernel>>;

// A host buffer a kernel keeps for staging a value of varying size (a sparse gradient's rows,
// a row pull's indices): the device's staging memory (page-locked on a GPU), made when first
// needed and again when a value outgrows it.
class StagingBuffer {
public:
  // A copy of `src` (of `device`, or the host) in the buffer, viewed at its dtype and shape.
  llvm::Expected<Tensor> hold(Device &device, const Tensor &src) {
    if (src.numBytes() > capacity_.numBytes()) {
      auto grown = device.allocateStaging(ir::DType::Bool, {src.numBytes()});
      if (!grown)
        return grown.takeError();
      capacity_ = std::move(*grown);
      storage_ = std::shared_ptr<void>(std::make_shared<Tensor>(capacity_), capacity_.raw());
    }
    Tensor view = Tensor::view(src.dtype(), src.shape(), storage_, 0);
    if (auto err = device.copyInto(view, src))
      return std::move(err);
    return view;
  }

private:
  Tensor capacity_;
  std::shared_ptr<void> storage_;
};

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
// the ring started, and the results back to the device once the executor has waited for it
// (`finish`): the ring runs while the step's next kernels do.
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
    arriving_.clear(); // a run abandoned after an error leaves nothing to finish
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
    for (RuntimeValue *out : outputs)
      arriving_.push_back(out->dense);
    return llvm::Error::success();
  }
  bool finishesAfterCommunication() const override { return true; }
  llvm::Error finish() override {
    std::vector<Tensor> arriving;
    arriving.swap(arriving_);
    for (size_t i = 0; i < arriving.size(); ++i)
      if (auto e = device_.copyInto(arriving[i], staging_[i]))
        return e;
    return llvm::Error::success();
  }

private:
  std::vector<Tensor> staging_;
  std::vector<Tensor> arriving_; // the outputs of a run whose ring has not been waited for
};

class StagedPull final : public StagedKernel {
public:
  using StagedKernel::StagedKernel;

  // The variable, or (ps_pull_rows) the rows that the indices on the device name.
  llvm::Expected<Tensor> pulled(llvm::ArrayRef<const RuntimeValue *> inputs) {
    if (op_->name() != "ps_pull_rows")
      return communication_.pull(variable());
    auto indices = indices_.hold(device_, inputs[1]->dense);
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

private:
  StagingBuffer indices_;
};

// ps_push and ps_push_rows: the gradient in host buffers this kernel keeps (page-locked on a
// GPU), until the next step (the communication sends pushes at the step's end).
class StagedPush final : public StagedKernel {
public:
  using StagedKernel::StagedKernel;
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *>) override {
    const RuntimeValue &value = *inputs[1];
    auto rows = rows_.hold(device_, value.dense);
    if (!rows)
      return rows.takeError();
    gradient_.sparse = value.sparse;
    gradient_.dense = std::move(*rows);
    if (value.sparse) {
      auto indices = indices_.hold(device_, value.indices);
      if (!indices)
        return indices.takeError();
      gradient_.indices = std::move(*indices);
    }
    return communication_.push(variable(), gradient_);
  }

private:
  StagingBuffer rows_, indices_;
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
