// CPU kernels of the communication ops. Those that cross tasks hand their tensors to the task's
// Communication (runtime/job implements it); tower_slice and combine_towers stay inside the task.
#include <cstring>

#include "ir/Diagnostic.h"
#include "runtime/BatchSplit.h"
#include "runtime/cpu/Kernel.h"
#include "runtime/cpu/kernels/ElementwiseMath.h"
#include "runtime/exec/Communication.h"

namespace prism::runtime::cpu {
namespace {

// Kernels that reach another task: they keep the op's variable name and the Communication.
class RemoteKernel : public Kernel {
public:
  explicit RemoteKernel(const KernelSpec &spec)
      : communication_(spec.communication), op_(spec.op), attrs_(spec.attrs) {}

protected:
  std::string variable() const { return op_->operand(0)->name(); }
  Communication *communication_;
  const ir::Op *op_;
  ir::AttrMap attrs_;
};

// An evaluation step runs on one task alone (the first worker's test set): there its
// all-reduces are the task's own values (the loss it reports is its own; batch_norm reads its
// running averages, not the synchronized statistics).
class AllReduceKernel : public RemoteKernel {
public:
  explicit AllReduceKernel(const KernelSpec &spec) : RemoteKernel(spec), step_(spec.step) {}
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    std::vector<Tensor *> tensors;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Tensor &out = outputs[i]->dense;
      // The executor lets the result take its operand's buffer where it can (in place).
      if (out.raw() != inputs[i]->dense.raw())
        std::memcpy(out.raw(), inputs[i]->dense.raw(), static_cast<size_t>(out.numBytes()));
      tensors.push_back(&out);
    }
    if (step_ && !step_->training())
      return llvm::Error::success();
    return communication_->allReduce(attrs_.getString("group"), attrs_.getInt("bucket"), tensors);
  }

private:
  const StepContext *step_;
};

class PullKernel : public RemoteKernel {
public:
  using RemoteKernel::RemoteKernel;
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *>,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    auto value = communication_->pull(variable());
    if (!value)
      return value.takeError();
    Tensor &out = outputs[0]->dense;
    if (value->numBytes() != out.numBytes())
      return ir::makeError("pulled " + std::to_string(value->numBytes()) + " bytes of '" +
                           variable() + "', expected " + std::to_string(out.numBytes()));
    std::memcpy(out.raw(), value->raw(), static_cast<size_t>(out.numBytes()));
    return llvm::Error::success();
  }
};

class PullRowsKernel : public RemoteKernel {
public:
  using RemoteKernel::RemoteKernel;
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    auto rows = communication_->pullRows(variable(), inputs[1]->dense);
    if (!rows)
      return rows.takeError();
    Tensor &out = outputs[0]->dense;
    if (rows->numBytes() != out.numBytes())
      return ir::makeError("pulled " + std::to_string(rows->numBytes()) + " bytes of rows of '" +
                           variable() + "', expected " + std::to_string(out.numBytes()));
    std::memcpy(out.raw(), rows->raw(), static_cast<size_t>(out.numBytes()));
    return llvm::Error::success();
  }
};

class PushKernel : public RemoteKernel {
public:
  using RemoteKernel::RemoteKernel;
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *>) override {
    return communication_->push(variable(), *inputs[1]);
  }
};

class GradientKernel : public RemoteKernel {
public:
  using RemoteKernel::RemoteKernel;
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *>,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    auto gradient = communication_->gradient(variable());
    if (!gradient)
      return gradient.takeError();
    RuntimeValue &out = *outputs[0];
    if ((*gradient)->sparse != out.sparse)
      return ir::makeError("the combined gradient of '" + variable() + "' is " +
                           ((*gradient)->sparse ? "sparse" : "dense") + ", expected " +
                           (out.sparse ? "sparse" : "dense"));
    if (out.sparse) {
      out.indices = (*gradient)->indices;
      out.dense = (*gradient)->dense;
      return llvm::Error::success();
    }
    if ((*gradient)->dense.numBytes() != out.dense.numBytes())
      return ir::makeError("the combined gradient of '" + variable() + "' has " +
                           std::to_string((*gradient)->dense.numBytes()) + " bytes, expected " +
                           std::to_string(out.dense.numBytes()));
    std::memcpy(out.dense.raw(), (*gradient)->dense.raw(),
                static_cast<size_t>(out.dense.numBytes()));
    return llvm::Error::success();
  }
};

template <typename K> llvm::Expected<std::unique_ptr<Kernel>> makeRemote(const KernelSpec &spec) {
  if (!spec.communication)
    return noCommunication(spec);
  return std::make_unique<K>(spec);
}

// tower_slice: rows [begin, begin + size) of the task's batch.
class TowerSliceKernel : public Kernel {
public:
  explicit TowerSliceKernel(const KernelSpec &spec)
      : slice_(splitBatch(spec.batch, spec.attrs.getInt("tower"), spec.attrs.getInt("towers"))) {}
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const Tensor &in = inputs[0]->dense;
    Tensor &out = outputs[0]->dense;
    int64_t rowBytes = in.dim(0) ? in.numBytes() / in.dim(0) : 0;
    std::memcpy(out.raw(), static_cast<const char *>(in.raw()) + slice_.begin * rowBytes,
                static_cast<size_t>(slice_.size * rowBytes));
    return llvm::Error::success();
  }

private:
  BatchSlice slice_;
};

// combine_towers: Σ bᵢ xᵢ / Σ bᵢ with bᵢ each tower's share of the task's batch; sparse values
// keep every tower's rows, each scaled by bᵢ / Σ bᵢ.
class CombineTowersKernel : public Kernel {
public:
  explicit CombineTowersKernel(const KernelSpec &spec) : dtype_(spec.outputTypes[0].dtype) {
    int64_t towers = static_cast<int64_t>(spec.inputTypes.size());
    for (int64_t t = 0; t < towers; ++t)
      weights_.push_back(static_cast<double>(splitBatch(spec.batch, t, towers).size) /
                         static_cast<double>(spec.batch));
  }
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    RuntimeValue &out = *outputs[0];
    if (dtype_ == ir::DType::F64)
      return combine<double>(inputs, out);
    return combine<float>(inputs, out);
  }

private:
  template <typename T>
  llvm::Error combine(llvm::ArrayRef<const RuntimeValue *> inputs, RuntimeValue &out) {
    if (!out.sparse) {
      T *dst = out.dense.data<T>();
      int64_t n = out.dense.numElements();
      std::fill(dst, dst + n, T(0));
      for (size_t t = 0; t < inputs.size(); ++t) {
        const T *src = inputs[t]->dense.data<T>();
        T w = static_cast<T>(weights_[t]);
        for (int64_t i = 0; i < n; ++i)
          dst[i] += w * src[i];
      }
      return llvm::Error::success();
    }
    int64_t rows = 0, rowElements = 1;
    for (const RuntimeValue *in : inputs)
      rows += in->numRows();
    const Tensor &first = inputs[0]->dense;
    std::vector<int64_t> shape = first.shape();
    for (size_t d = 1; d < shape.size(); ++d)
      rowElements *= shape[d];
    shape[0] = rows;
    out.indices = Tensor(ir::DType::I64, {rows});
    out.dense = Tensor(first.dtype(), shape);
    int64_t at = 0;
    for (size_t t = 0; t < inputs.size(); ++t) {
      const RuntimeValue &in = *inputs[t];
      T w = static_cast<T>(weights_[t]);
      std::memcpy(out.indices.data<int64_t>() + at, in.indices.data<int64_t>(),
                  static_cast<size_t>(in.numRows()) * sizeof(int64_t));
      const T *src = in.dense.data<T>();
      T *dst = out.dense.data<T>() + at * rowElements;
      elementwise::binaryLoop<elementwise::Mul>(dst, src, true, &w, false,
                                                in.numRows() * rowElements);
      at += in.numRows();
    }
    return llvm::Error::success();
  }

  ir::DType dtype_;
  std::vector<double> weights_;
};

} // namespace

void registerCommunicationKernels(KernelRegistry &registry) {
  registry.add("all_reduce", makeRemote<AllReduceKernel>);
  registry.add("ps_pull", makeRemote<PullKernel>);
  registry.add("ps_pull_rows", makeRemote<PullRowsKernel>);
  registry.add("ps_push", makeRemote<PushKernel>);
  registry.add("ps_push_rows", makeRemote<PushKernel>);
  registry.add("ps_gradient", makeRemote<GradientKernel>);
  registry.add("ps_gradient_rows", makeRemote<GradientKernel>);
  registry.add("tower_slice",
               [](const KernelSpec &spec) -> llvm::Expected<std::unique_ptr<Kernel>> {
                 return std::make_unique<TowerSliceKernel>(spec);
               });
  registry.add("combine_towers",
               [](const KernelSpec &spec) -> llvm::Expected<std::unique_ptr<Kernel>> {
                 return std::make_unique<CombineTowersKernel>(spec);
               });
}

} // namespace prism::runtime::cpu
