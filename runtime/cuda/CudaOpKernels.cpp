// The GPU's op kernels (see CudaOpKernels.h): each fills the argument struct of its kernels in
// DeviceKernels.cuh and launches them through a GpuBackend.
#include "runtime/cuda/CudaOpKernels.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "ir/Diagnostic.h"
#include "ir/LearningRateSchedule.h"
#include "ir/Module.h"
#include "ir/OpTable.h"
#include "ir/Precision.h"
#include "runtime/BatchSplit.h"
#include "runtime/DropoutMask.h"
#include "runtime/cuda/Cublas.h"
#include "runtime/cuda/CudaModules.h"
#include "runtime/cuda/DeviceKernelsHost.h"
#include "runtime/exec/Device.h"
#include "llvm/ADT/StringMap.h"

namespace prism::runtime::cuda {
namespace {

namespace k = kernels;
using KernelOrError = llvm::Expected<std::unique_ptr<Kernel>>;

// DeviceKernels.cuh as a string literal, written by CMake at configure time.
constexpr char kDeviceKernels[] =
#include "DeviceKernels.inc"
    ;

llvm::Error unsupported(const KernelSpec &spec, const llvm::Twine &what) {
  return ir::makeError(ir::ErrorCode::Unsupported, "the GPU's '" + spec.op->name() + "' " + what);
}

// Every operand and the result dense f32 (the GPU kernels' one float type).
llvm::Error requireF32(const KernelSpec &spec, llvm::ArrayRef<unsigned> operands) {
  for (unsigned i : operands) {
    const ir::TensorType &t = spec.inputTypes[i];
    if (t.sparse)
      return unsupported(spec, "takes dense operands, not the sparse " + t.str() +
                                   " (sparse gradients on the GPU are not supported yet)");
    if (t.dtype != ir::DType::F32)
      return unsupported(spec, "takes f32, not " + t.str());
  }
  return llvm::Error::success();
}

// Every operand dense f32.
llvm::Error requireAllF32(const KernelSpec &spec) {
  std::vector<unsigned> operands;
  for (unsigned i = 0; i < spec.inputTypes.size(); ++i)
    operands.push_back(i);
  return requireF32(spec, operands);
}

// A kernel with its scratch memory allocated on the spec's device.
template <typename K> KernelOrError withScratch(std::unique_ptr<K> kernel, const KernelSpec &spec) {
  if (auto e = kernel->allocate(spec))
    return std::move(e);
  return std::unique_ptr<Kernel>(std::move(kernel));
}

// Reduced precision (`compute = bf16|fp16`, ir/Precision.h) for a matrix product's kernel: the
// operands the op reads in it (OpDef::readsInComputePrecision) are rounded as
// ir::roundToPrecision rounds them into the device's workspace before the float32 products, as
// the CPU's kernels and the reference round them: products of rounded values are exact in
// float32, and sums stay float32. (Tensor cores are not used: the speed is float32's.) The
// kernel's own scratch follows the rounded copies in the workspace.
class Rounding {
public:
  // Plans the rounded copies and reserves them, with `extra` floats after them.
  llvm::Error reserve(const KernelSpec &spec, int64_t extra) {
    if (!spec.device)
      return ir::makeError(ir::ErrorCode::Internal, "a GPU kernel built without its device");
    device_ = spec.device;
    const ir::ComputePrecision precision = ir::computePrecision(*spec.op);
    precision_ = precision == ir::ComputePrecision::BF16   ? 1
                 : precision == ir::ComputePrecision::FP16 ? 2
                                                           : 0;
    // Each copy at a multiple of 64 floats (256 bytes, as cudaMalloc aligns): the libraries'
    // vectorized kernels (cuDNN's, cuBLAS's) want their operands aligned.
    for (unsigned i = 0; precision_ != 0 && i < spec.inputTypes.size(); ++i)
      if (spec.op->def().readsInComputePrecision(i)) {
        slots_.push_back({i, floats_, spec.inputTypes[i].numElements()});
        floats_ += (spec.inputTypes[i].numElements() + 63) / 64 * 64;
      }
    if (floats_ + extra == 0)
      return llvm::Error::success();
    return device_->reserveWorkspace(static_cast<size_t>(floats_ + extra) * sizeof(float));
  }

  // This run's operands: the rounded copies where planned, else their own floats (operand(i)).
  llvm::Error round(GpuBackend &backend, llvm::ArrayRef<const RuntimeValue *> values) {
    in_.clear();
    for (const RuntimeValue *v : values)
      in_.push_back(static_cast<const float *>(v->dense.raw()));
    for (const Slot &slot : slots_) {
      k::RoundArgs a{workspace() + slot.offset, in_[slot.operand], slot.count, precision_};
      if (auto e = backend.launch("prism_round", slot.count, &a))
        return e;
      in_[slot.operand] = a.out;
    }
    return llvm::Error::success();
  }

  const float *operand(size_t i) const { return in_[i]; }
  // The workspace after the rounded copies: the kernel's own part.
  float *extra() const { return workspace() + floats_; }

private:
  float *workspace() const { return static_cast<float *>(device_->workspace()); }

  struct Slot {
    unsigned operand;
    int64_t offset, count;
  };
  Device *device_ = nullptr;
  int precision_ = 0; // prism_round_to's: 1 bf16, 2 fp16
  int64_t floats_ = 0;
  std::vector<Slot> slots_;
  std::vector<const float *> in_;
};

template <typename Args>
llvm::Error launch(GpuBackend &backend, llvm::StringRef kernel, int64_t threads, const Args &a) {
  return backend.launch(kernel, threads, &a);
}

float *floats(const RuntimeValue *v) {
  return static_cast<float *>(const_cast<void *>(v->dense.raw()));
}

// Scratch memory of a kernel on its device, into `into`.
llvm::Error scratch(Tensor &into, const KernelSpec &spec, ir::DType dtype, int64_t elements) {
  if (!spec.device)
    return ir::makeError(ir::ErrorCode::Internal, "a GPU kernel built without its device");
  auto tensor = spec.device->allocateTensor(dtype, {std::max<int64_t>(elements, 1)});
  if (!tensor)
    return tensor.takeError();
  into = std::move(*tensor);
  return llvm::Error::success();
}

// The step's values on the kernel's device (Device::stepValues), which its launches read, into
// `values`.
llvm::Error stepValuesOf(const KernelSpec &spec, const k::StepValues *&values) {
  static_assert(sizeof(k::StepValues) == sizeof(StepValues), "one layout on host and device");
  if (!spec.device)
    return ir::makeError(ir::ErrorCode::Internal, "a GPU kernel built without its device");
  auto onDevice = spec.device->stepValues();
  if (!onDevice)
    return onDevice.takeError();
  values = reinterpret_cast<const k::StepValues *>(*onDevice);
  return llvm::Error::success();
}

// An 8-byte flag on the device that a kernel's launches raise on bad input (the bad element's
// position + 1), cleared before each run and read back by the kernel's `check` (Kernel::
// checksLater), with the input whose element it names.
class DeviceFlag {
public:
  llvm::Error allocate(const KernelSpec &spec) { return scratch(flag_, spec, ir::DType::I64, 1); }

  // Before a run: clears the flag (a launch) and keeps `input` for the message; the flag's
  // address for the run's launches.
  llvm::Expected<long long *> clear(GpuBackend &backend, const Tensor &input) {
    input_ = input;
    auto *flag = static_cast<long long *>(flag_.raw());
    if (auto e = launch(backend, "prism_fill", 1, k::FillArgs{flag, 0, 1, 8}))
      return std::move(e);
    return flag;
  }

  // After the run (Kernel::check): success where nothing was flagged, else `describe`'s error
  // for the flagged position and the kept input, on the host.
  struct Raised {
    int64_t at = -1;
    Tensor input;
  };
  llvm::Error check(Device &device,
                    const std::function<llvm::Error(const Raised &)> &describe) const {
    auto flag = device.toHost(flag_);
    if (!flag)
      return flag.takeError();
    Raised raised;
    raised.at = *flag->data<int64_t>() - 1;
    if (raised.at < 0)
      return llvm::Error::success();
    auto input = device.toHost(input_);
    if (!input)
      return input.takeError();
    raised.input = std::move(*input);
    return describe(raised);
  }

private:
  Tensor flag_, input_;
};

// Element `at` of an index tensor on the host (i32, or i64 where `wide`).
int64_t indexAt(const Tensor &indices, bool wide, int64_t at) {
  return wide ? indices.data<int64_t>()[at] : indices.data<int32_t>()[at];
}

// The CPU's error for a flagged index outside [0, rows) of `what`.
llvm::Error indexError(const DeviceFlag::Raised &raised, bool wide, int64_t rows,
                       const llvm::Twine &what) {
  return ir::makeError("index " + llvm::Twine(indexAt(raised.input, wide, raised.at)) +
                       " (element " + llvm::Twine(raised.at) + " of the indices) is outside [0, " +
                       llvm::Twine(rows) + ") for " + what);
}

// A kernel of one launch: its argument struct, fixed when built but for the pointers `bind`
// sets from the step's values, over `threads` indices.
template <typename Args> class OneLaunch final : public Kernel {
public:
  using Bind = void (*)(Args &, llvm::ArrayRef<const RuntimeValue *>,
                        llvm::ArrayRef<RuntimeValue *>);
  OneLaunch(std::shared_ptr<GpuBackend> backend, llvm::StringRef kernel, int64_t threads, Args args,
            Bind bind)
      : backend_(std::move(backend)), kernel_(kernel.str()), threads_(threads), args_(args),
        bind_(bind) {}
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    Args a = args_;
    bind_(a, inputs, outputs);
    return launch(*backend_, kernel_, threads_, a);
  }

private:
  std::shared_ptr<GpuBackend> backend_;
  std::string kernel_;
  int64_t threads_;
  Args args_;
  Bind bind_;
};

// A long sum in two launches over one argument struct (whose `partial` and `parts` fields it
// sets): `first` sums `parts` ranges of every output into the scratch `partial`, then `second`
// adds each output's parts in order. With one part, `second` alone sums.
// The two launches of such a sum, `a.parts` and the scratch `partial` given.
template <typename Args>
llvm::Error launchInParts(GpuBackend &backend, llvm::StringRef first, llvm::StringRef second,
                          int64_t outputs, Args a, const Tensor &partial) {
  if (a.parts > 1) {
    a.partial = static_cast<double *>(const_cast<void *>(partial.raw()));
    if (auto e = launch(backend, first, outputs * a.parts, a))
      return e;
  }
  return launch(backend, second, outputs, a);
}

template <typename Args> class TwoStage final : public Kernel {
public:
  using Bind = typename OneLaunch<Args>::Bind;
  TwoStage(std::shared_ptr<GpuBackend> backend, llvm::StringRef first, llvm::StringRef second,
           int64_t outputs, Args args, Tensor partial, Bind bind)
      : backend_(std::move(backend)), first_(first.str()), second_(second.str()), outputs_(outputs),
        args_(args), partial_(std::move(partial)), bind_(bind) {}
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    Args a = args_;
    bind_(a, inputs, outputs);
    return launchInParts(*backend_, first_, second_, outputs_, a, partial_);
  }

private:
  std::shared_ptr<GpuBackend> backend_;
  std::string first_, second_;
  int64_t outputs_;
  Args args_;
  Tensor partial_;
  Bind bind_;
};

// How many parts a sum of `length` terms for each of `outputs` outputs is split into: enough
// threads to fill a GPU (about 2^17), none shorter than `shortest` terms.
int64_t sumParts(int64_t outputs, int64_t length, int64_t shortest) {
  constexpr int64_t kThreads = int64_t{1} << 17;
  if (outputs <= 0 || outputs >= kThreads || length < 2 * shortest)
    return 1;
  return std::max<int64_t>(
      1, std::min((length + shortest - 1) / shortest, (kThreads + outputs - 1) / outputs));
}

// A kernel of `first` and `second` (TwoStage) over `outputs` outputs, each summing `length` terms
// in parts of at least `shortest`; the parts' scratch comes from the spec's device.
template <typename Args>
KernelOrError twoStage(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend,
                       llvm::StringRef first, llvm::StringRef second, int64_t outputs,
                       int64_t length, int64_t shortest, Args a,
                       typename OneLaunch<Args>::Bind bind) {
  a.parts = sumParts(outputs, length, shortest);
  Tensor partial;
  if (a.parts > 1)
    if (auto e = scratch(partial, spec, ir::DType::F64, outputs * a.parts))
      return std::move(e);
  return std::make_unique<TwoStage<Args>>(std::move(backend), first, second, outputs, a,
                                          std::move(partial), bind);
}

// The mean of `rows` doubles over a count (prism_mean_of_rows): their sums in parts where they are
// many, the parts' scratch from the spec's device.
class RowsMean {
public:
  llvm::Error allocate(const KernelSpec &spec, int64_t rows) {
    args_.rows = rows;
    args_.parts = sumParts(1, rows, 256);
    if (args_.parts > 1)
      return scratch(partial_, spec, ir::DType::F64, 2 * args_.parts);
    return llvm::Error::success();
  }
  // out (when not null) = Σ loss / Σ counted (counted null: each row counts 1), and the count
  // into *countedTotal (when not null).
  llvm::Error launch(GpuBackend &backend, float *out, double *countedTotal, const double *loss,
                     const double *counted) const {
    k::MeanOfRowsArgs a = args_;
    a.out = out;
    a.countedTotal = countedTotal;
    a.loss = loss;
    a.counted = counted;
    return launchInParts(backend, "prism_mean_of_rows_parts", "prism_mean_of_rows", 1, a, partial_);
  }

private:
  k::MeanOfRowsArgs args_{};
  Tensor partial_;
};

// constant(value, shape, dtype): the value converted as the CPU does (integers truncate, bool is
// value != 0), filled as a bit pattern.
KernelOrError makeConstant(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  const double value = spec.attrs.getFloat("value");
  const ir::TensorType &type = spec.outputTypes[0];
  k::FillArgs a{};
  a.n = type.numElements();
  auto store = [&](auto typed) {
    a.bytes = sizeof(typed);
    std::memcpy(&a.bits, &typed, sizeof(typed));
  };
  switch (type.dtype) {
  case ir::DType::F32:
    store(static_cast<float>(value));
    break;
  case ir::DType::F64:
    store(value);
    break;
  case ir::DType::I32:
    store(static_cast<int32_t>(value));
    break;
  case ir::DType::I64:
    store(static_cast<int64_t>(value));
    break;
  case ir::DType::Bool:
    store(static_cast<uint8_t>(value != 0));
    break;
  }
  return std::make_unique<OneLaunch<k::FillArgs>>(
      std::move(backend), "prism_fill", a.n, a,
      [](k::FillArgs &a, llvm::ArrayRef<const RuntimeValue *>,
         llvm::ArrayRef<RuntimeValue *> outputs) { a.out = outputs[0]->dense.raw(); });
}

// assign(var, value): the variable takes the value (the executor runs it at the step's end).
class AssignKernel final : public Kernel {
public:
  explicit AssignKernel(std::shared_ptr<GpuBackend> backend) : backend_(std::move(backend)) {}
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *>) override {
    const Tensor &value = inputs[1]->dense;
    void *var = const_cast<void *>(inputs[0]->dense.raw());
    if (var == value.raw() || value.numBytes() == 0)
      return llvm::Error::success();
    k::CopyArgs a{var, value.raw(), value.numBytes()};
    return launch(*backend_, "prism_copy", a.bytes % 4 == 0 ? a.bytes / 4 : a.bytes, a);
  }

private:
  std::shared_ptr<GpuBackend> backend_;
};

KernelOrError makeAssign(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  for (const ir::TensorType &t : spec.inputTypes)
    if (t.sparse)
      return unsupported(spec, "takes dense values, not " + t.str());
  return std::make_unique<AssignKernel>(std::move(backend));
}

// The dimensions `axes` names (all when empty; negative axes count from the end), as a mask.
unsigned reducedMask(const ir::AttrMap &attrs, int64_t rank) {
  auto axes = attrs.getInts("axes");
  if (axes.empty())
    return rank >= 32 ? ~0u : (1u << rank) - 1;
  unsigned mask = 0;
  for (int64_t a : axes)
    mask |= 1u << (a < 0 ? a + rank : a);
  return mask;
}

// Where the dimensions in `mask` are one block of neighbours (dimensions of size 1 go with
// either side), the elements of the kept dimensions after it (ReduceArgs::inner); 0 where they
// are not.
int64_t reducedBlockInner(llvm::ArrayRef<int64_t> dims, unsigned mask) {
  enum { After, In, Before } at = After;
  int64_t inner = 1;
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    if (dims[d] == 1)
      continue;
    const bool reduced = mask >> d & 1u;
    if (at == After && reduced)
      at = In;
    else if (at == After)
      inner *= dims[d];
    else if (at == In && !reduced)
      at = Before;
    else if (at == Before && reduced)
      return 0;
  }
  return inner;
}

// x summed over the dimensions in `mask` (scaled by 1 / their size for a mean): prism_reduce.
KernelOrError reduceOver(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend,
                         const ir::TensorType &x, unsigned mask, bool mean) {
  if (auto e = requireF32(spec, {0}))
    return std::move(e);
  if (x.rank() > PRISM_MAX_RANK)
    return unsupported(spec, "takes at most " + llvm::Twine(PRISM_MAX_RANK) + " dimensions, not " +
                                 x.str());
  k::ReduceArgs a{};
  a.rank = static_cast<int>(x.rank());
  a.reduced = mask;
  a.outCount = 1;
  a.reducedCount = 1;
  for (int d = 0; d < a.rank; ++d) {
    a.dims[d] = x.dims[d];
    (a.reduced >> d & 1u ? a.reducedCount : a.outCount) *= x.dims[d];
  }
  a.scale = mean && a.reducedCount > 0
                ? static_cast<float>(1.0 / static_cast<double>(a.reducedCount))
                : 1.0f;
  a.inner = reducedBlockInner(x.dims, mask);
  return twoStage<k::ReduceArgs>(spec, std::move(backend), "prism_reduce_parts", "prism_reduce",
                                 a.outCount, a.reducedCount, 256, a,
                                 [](k::ReduceArgs &a, llvm::ArrayRef<const RuntimeValue *> inputs,
                                    llvm::ArrayRef<RuntimeValue *> outputs) {
                                   a.out = floats(outputs[0]);
                                   a.in = floats(inputs[0]);
                                 });
}

// sum_like(g, ref): g summed over the dimensions along which ref (aligned at the last) was
// broadcast, as the CPU's.
KernelOrError makeSumLike(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  const ir::TensorType &g = spec.inputTypes[0], &ref = spec.inputTypes[1];
  const size_t lead = g.dims.size() - ref.dims.size();
  unsigned mask = 0;
  for (size_t d = 0; d < g.dims.size() && d < 32; ++d)
    if (d < lead || (ref.dims[d - lead] == 1 && g.dims[d] != 1))
      mask |= 1u << d;
  return reduceOver(spec, std::move(backend), g, mask, false);
}

// reduce_sum and reduce_mean(x, axes, keepdims): keepdims changes the shape, not the layout.
KernelOrError makeReduce(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  const ir::TensorType &x = spec.inputTypes[0];
  return reduceOver(spec, std::move(backend), x, reducedMask(spec.attrs, x.rank()),
                    spec.op->name() == "reduce_mean");
}

// expand_like(g, ref, axes, keepdims, mean): g broadcast back over the axes of ref's shape,
// divided by their size for a mean.
KernelOrError makeExpandLike(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  if (auto e = requireF32(spec, {0}))
    return std::move(e);
  const ir::TensorType &out = spec.outputTypes[0];
  if (out.rank() > PRISM_MAX_RANK)
    return unsupported(spec, "takes at most " + llvm::Twine(PRISM_MAX_RANK) + " dimensions, not " +
                                 out.str());
  k::ExpandArgs a{};
  a.rank = static_cast<int>(out.rank());
  a.reduced = reducedMask(spec.attrs, out.rank());
  a.count = out.numElements();
  int64_t spread = 1;
  for (int d = 0; d < a.rank; ++d) {
    a.dims[d] = out.dims[d];
    if (a.reduced >> d & 1u)
      spread *= out.dims[d];
  }
  a.scale = spec.attrs.getBool("mean") && spread > 0
                ? static_cast<float>(1.0 / static_cast<double>(spread))
                : 1.0f;
  return std::make_unique<OneLaunch<k::ExpandArgs>>(std::move(backend), "prism_expand", a.count, a,
                                                    [](k::ExpandArgs &a,
                                                       llvm::ArrayRef<const RuntimeValue *> inputs,
                                                       llvm::ArrayRef<RuntimeValue *> outputs) {
                                                      a.out = floats(outputs[0]);
                                                      a.g = floats(inputs[0]);
                                                    });
}

// gather(table, indices) and gather_grad(dy, indices, num_rows): rows picked by index, and the
// sparse gradient (the indices as i64, dy's elements as the rows, both in memory the kernel owns).
// An index outside the table is flagged on the device and reported by `check`.
class GatherKernel final : public Kernel {
public:
  GatherKernel(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend, bool gradient)
      : backend_(std::move(backend)), device_(spec.device), gradient_(gradient) {
    const ir::TensorType &indices = spec.inputTypes[1];
    args_.wide = indices.dtype == ir::DType::I64 ? 1 : 0;
    args_.count = indices.numElements();
    const ir::TensorType &table = gradient ? spec.outputTypes[0] : spec.inputTypes[0];
    args_.tableRows = table.dims.empty() ? 0 : table.dims[0];
    args_.rowSize = 1;
    for (size_t d = 1; d < table.dims.size(); ++d)
      args_.rowSize *= table.dims[d];
    rowsShape_ = {args_.count};
    rowsShape_.insert(rowsShape_.end(), table.dims.begin() + (table.dims.empty() ? 0 : 1),
                      table.dims.end());
  }

  llvm::Error allocate(const KernelSpec &spec) {
    if (auto e = bad_.allocate(spec))
      return e;
    if (!gradient_)
      return llvm::Error::success();
    auto indices = device_->allocateTensor(ir::DType::I64, {args_.count});
    auto rows = indices ? device_->allocateTensor(ir::DType::F32, rowsShape_) : indices.takeError();
    if (!rows)
      return rows.takeError();
    indices_ = std::move(*indices);
    rows_ = std::move(*rows);
    return llvm::Error::success();
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    auto bad = bad_.clear(*backend_, inputs[1]->dense);
    if (!bad)
      return bad.takeError();
    k::GatherArgs a = args_;
    a.indices = inputs[1]->dense.raw();
    a.bad = *bad;
    if (gradient_) {
      a.flatIndices = static_cast<long long *>(indices_.raw());
    } else {
      a.out = floats(outputs[0]);
      a.table = floats(inputs[0]);
    }
    if (auto e = launch(*backend_, "prism_gather", a.count * a.rowSize, a))
      return e;
    if (gradient_) {
      const Tensor &dy = inputs[0]->dense;
      k::CopyArgs copy{rows_.raw(), dy.raw(), dy.numBytes()};
      if (auto e = launch(*backend_, "prism_copy", copy.bytes / 4, copy))
        return e;
      RuntimeValue &out = *outputs[0];
      out.sparse = true;
      out.indices = indices_;
      out.dense = rows_;
    }
    return llvm::Error::success();
  }

  bool checksLater() const override { return true; }
  llvm::Error check() override {
    return bad_.check(*device_, [&](const DeviceFlag::Raised &raised) {
      return indexError(raised, args_.wide != 0, args_.tableRows,
                        gradient_ ? "num_rows = " + llvm::Twine(args_.tableRows)
                                  : "a table of " + llvm::Twine(args_.tableRows) + " rows");
    });
  }

private:
  std::shared_ptr<GpuBackend> backend_;
  Device *device_;
  bool gradient_;
  k::GatherArgs args_{};
  std::vector<int64_t> rowsShape_;
  DeviceFlag bad_;
  Tensor indices_, rows_;
};

KernelOrError makeGather(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  if (auto e = requireF32(spec, {0}))
    return std::move(e);
  ir::DType indices = spec.inputTypes[1].dtype;
  if (indices != ir::DType::I32 && indices != ir::DType::I64)
    return unsupported(spec, "takes indices of i32 or i64, not " + ir::dtypeName(indices));
  auto kernel =
      std::make_unique<GatherKernel>(spec, std::move(backend), spec.op->name() == "gather_grad");
  if (auto e = kernel->allocate(spec))
    return std::move(e);
  return std::unique_ptr<Kernel>(std::move(kernel));
}

// One spatial axis of a convolution or pooling: its output size and padding before, as the CPU
// and the reference compute them (TensorFlow's `same`: out = ceil(in / stride), pad_before =
// pad_total / 2; `valid`: no padding).
void axisOf(int64_t in, int64_t window, int64_t stride, llvm::StringRef padding, long long &out,
            long long &padBefore) {
  if (padding == "same") {
    out = (in + stride - 1) / stride;
    padBefore = std::max<int64_t>((out - 1) * stride + window - in, 0) / 2;
  } else {
    out = (in - window) / stride + 1;
    padBefore = 0;
  }
}

// The geometry of a convolution or pooling of x [N, H, W, C] by a window [kh, kw] giving `out`
// channels.
k::Conv2dArgs geometry(const KernelSpec &spec, const ir::TensorType &x, int64_t kh, int64_t kw,
                       int64_t out) {
  auto stride = spec.attrs.getInts("stride");
  std::string padding = spec.attrs.getString("padding");
  k::Conv2dArgs a{};
  a.n = x.dims[0];
  a.h = x.dims[1];
  a.w_ = x.dims[2];
  a.c = x.dims[3];
  a.kh = kh;
  a.kw = kw;
  a.o = out;
  a.sh = stride.size() > 0 ? stride[0] : 1;
  a.sw = stride.size() > 1 ? stride[1] : 1;
  axisOf(a.h, kh, a.sh, padding, a.oh, a.padH);
  axisOf(a.w_, kw, a.sw, padding, a.ow, a.padW);
  return a;
}

template <typename Bind>
std::unique_ptr<Kernel> convKernel(std::shared_ptr<GpuBackend> backend, llvm::StringRef kernel,
                                   int64_t threads, const k::Conv2dArgs &a, Bind bind) {
  return std::make_unique<OneLaunch<k::Conv2dArgs>>(std::move(backend), kernel, threads, a, bind);
}

// conv2d, fused_conv2d and the two backprops as matrix products over the patch matrix P of x
// [N * OH * OW, KH * KW * C] (prism_im2col) and the filter W viewed as [KH * KW * C, O]:
// y = P · W (then the bias and relu), dW = P^T · dy, dx = col2im(dy · W^T). P is made in parts of
// examples that fit the backend's workspace limit (dW adds the parts' products up); a 1x1
// filter of stride 1 without padding needs none: P is x itself.
class ConvKernel final : public Kernel {
public:
  enum class Role { Forward, Input, Filter };
  ConvKernel(std::shared_ptr<GpuBackend> backend, Role role, k::Conv2dArgs g, bool bias, bool relu)
      : backend_(std::move(backend)), role_(role), g_(g), bias_(bias), relu_(relu) {
    columns_ = g.kh * g.kw * g.c;
    rowsPerExample_ = g.oh * g.ow;
    direct_ = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.padH == 0 && g.padW == 0 &&
              g.oh == g.h && g.ow == g.w_;
    const int64_t bytesPerExample = rowsPerExample_ * columns_ * int64_t{sizeof(float)};
    chunk_ = direct_ ? g.n
                     : std::clamp<int64_t>(backend_->workspaceLimit() /
                                               std::max<int64_t>(bytesPerExample, 1),
                                           1, std::max<int64_t>(g.n, 1));
  }

  // In the device's workspace: the rounded operands (reduced precision), then the patch matrix's
  // part.
  llvm::Error allocate(const KernelSpec &spec) {
    return rounding_.reserve(spec, direct_ ? 0 : chunk_ * rowsPerExample_ * columns_);
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    // Operands: forward (x, w[, bias]); input (dy, w, x); filter (x, dy, w).
    if (auto e = rounding_.round(*backend_, inputs))
      return e;
    const float *x = role_ == Role::Input ? nullptr : rounding_.operand(0);
    const float *w = role_ == Role::Filter ? nullptr : rounding_.operand(1);
    const float *dy = role_ == Role::Input    ? rounding_.operand(0)
                      : role_ == Role::Filter ? rounding_.operand(1)
                                              : nullptr;
    float *out = floats(outputs[0]);
    float *patches = direct_ ? nullptr : rounding_.extra();
    for (int64_t first = 0; first < g_.n; first += chunk_) {
      const int64_t count = std::min<int64_t>(chunk_, g_.n - first);
      if (auto e = part(x, w, dy, out, patches, first, count))
        return e;
    }
    if (role_ != Role::Forward || !bias_)
      return llvm::Error::success();
    k::BiasActivationArgs a{out, floats(inputs[2]), g_.n * rowsPerExample_, g_.o, relu_ ? 1 : 0};
    return launch(*backend_, "prism_bias_activation", a.rows * a.columns, a);
  }

  std::string choice() const override { return "convolution passes on patch matrices"; }

private:
  // Examples [first, first + count): row-major R = A · B goes to cuBLAS as column-major
  // R^T = B^T · A^T (as matmul does).
  llvm::Error part(const float *x, const float *w, const float *dy, float *out, float *patches,
                   int64_t first, int64_t count) {
    const int64_t rows = count * rowsPerExample_, o = g_.o;
    const float *p = x ? x + first * g_.h * g_.w_ * g_.c : nullptr;
    const float *dyPart = dy ? dy + first * rowsPerExample_ * o : nullptr;
    if (role_ != Role::Input && !direct_) {
      if (auto e = patchLaunch("prism_im2col", patches, first, count, x, nullptr))
        return e;
      p = patches;
    }
    switch (role_) {
    case Role::Forward: // y [rows, O] = P [rows, K] · W [K, O]
      return backend_->gemm(false, false, o, rows, columns_, w, o, p, columns_,
                            out + first * rowsPerExample_ * o, o, false);
    case Role::Filter: // dW [K, O] (+)= P^T [K, rows] · dy [rows, O]
      return backend_->gemm(false, true, o, columns_, rows, dyPart, o, p, columns_, out, o,
                            first > 0);
    case Role::Input: { // dP [rows, K] = dy [rows, O] · W^T [O, K], then dx from dP
      float *dx = out + first * g_.h * g_.w_ * g_.c;
      if (auto e = backend_->gemm(true, false, columns_, rows, o, w, o, dyPart, o,
                                  direct_ ? dx : patches, columns_, false))
        return e;
      if (direct_)
        return llvm::Error::success();
      return patchLaunch("prism_col2im", patches, first, count, nullptr, out);
    }
    }
    return llvm::Error::success();
  }

  llvm::Error patchLaunch(llvm::StringRef kernel, float *patches, int64_t first, int64_t count,
                          const float *x, float *dx) {
    k::PatchArgs a{g_, patches, first, count};
    a.g.x = x;
    a.g.y = dx;
    const int64_t threads = (kernel == "prism_im2col" ? count * rowsPerExample_ * columns_
                                                      : count * g_.h * g_.w_ * g_.c) /
                            k::prism_patch_width(g_.c);
    return launch(*backend_, kernel, threads, a);
  }

  std::shared_ptr<GpuBackend> backend_;
  Rounding rounding_;
  Role role_;
  k::Conv2dArgs g_;
  bool bias_, relu_, direct_ = false;
  int64_t columns_ = 0, rowsPerExample_ = 0, chunk_ = 1;
};

// A row-major [rows, columns] matrix of 4-byte elements transposed into [columns, rows].
llvm::Error transposeMatrix(GpuBackend &backend, const float *in, float *out, int64_t rows,
                            int64_t columns) {
  k::TransposeArgs a{};
  a.out = reinterpret_cast<unsigned int *>(out);
  a.in = reinterpret_cast<const unsigned int *>(in);
  a.rank = 2;
  a.n = rows * columns;
  a.outDims[0] = columns;
  a.outDims[1] = rows;
  a.inStrides[0] = 1;
  a.inStrides[1] = columns;
  return launch(backend, "prism_transpose", a.n, a);
}

// conv2d, fused_conv2d and the two backprops through cuDNN (Cudnn.h) where it takes the op's
// padding: the filter [KH, KW, C, O] is transposed into cuDNN's [O, KH, KW, C] in the device's
// workspace, and a filter gradient out of it; cuDNN's own workspace follows. The bias and relu of
// fused_conv2d follow cuDNN's forward pass, as they follow the patch matrices' product.
class CudnnConvKernel final : public Kernel {
public:
  CudnnConvKernel(std::shared_ptr<GpuBackend> backend, ConvKernel::Role role, k::Conv2dArgs g,
                  bool bias, bool relu, std::unique_ptr<LibraryConvolution> pass)
      : backend_(std::move(backend)), role_(role), g_(g), bias_(bias), relu_(relu),
        pass_(std::move(pass)) {
    columns_ = g.kh * g.kw * g.c;
  }

  // After the rounded operands: the filter in cuDNN's layout, then cuDNN's workspace, each at a
  // multiple of kAlign floats from the workspace's start.
  llvm::Error allocate(const KernelSpec &spec) {
    const int64_t workFloats =
        (static_cast<int64_t>(pass_->workspaceBytes()) + int64_t{sizeof(float)} - 1) /
        int64_t{sizeof(float)};
    return rounding_.reserve(spec, kAlign + aligned(columns_ * g_.o) + workFloats);
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    // Operands: forward (x, w[, bias]); input (dy, w, x); filter (x, dy, w).
    if (auto e = rounding_.round(*backend_, inputs))
      return e;
    float *filter = alignedPointer(rounding_.extra());
    float *work = filter + aligned(columns_ * g_.o);
    float *out = floats(outputs[0]);
    switch (role_) {
    case ConvKernel::Role::Forward:
      if (auto e = transposeMatrix(*backend_, rounding_.operand(1), filter, columns_, g_.o))
        return e;
      if (auto e = pass_->run(rounding_.operand(0), filter, nullptr, out, work))
        return e;
      break;
    case ConvKernel::Role::Input:
      if (auto e = transposeMatrix(*backend_, rounding_.operand(1), filter, columns_, g_.o))
        return e;
      return pass_->run(nullptr, filter, rounding_.operand(0), out, work);
    case ConvKernel::Role::Filter:
      if (auto e = pass_->run(rounding_.operand(0), nullptr, rounding_.operand(1), filter, work))
        return e;
      return transposeMatrix(*backend_, filter, out, g_.o, columns_);
    }
    if (!bias_)
      return llvm::Error::success();
    k::BiasActivationArgs a{out, floats(inputs[2]), g_.n * g_.oh * g_.ow, g_.o, relu_ ? 1 : 0};
    return launch(*backend_, "prism_bias_activation", a.rows * a.columns, a);
  }

  std::string choice() const override { return "convolution passes through " + pass_->name(); }

private:
  static constexpr int64_t kAlign = 64; // floats: 256 bytes, as cudaMalloc aligns
  static int64_t aligned(int64_t floats) { return (floats + kAlign - 1) / kAlign * kAlign; }
  static float *alignedPointer(float *p) {
    const auto address = reinterpret_cast<uintptr_t>(p);
    const uintptr_t bytes = kAlign * sizeof(float);
    return reinterpret_cast<float *>((address + bytes - 1) / bytes * bytes);
  }

  std::shared_ptr<GpuBackend> backend_;
  Rounding rounding_;
  ConvKernel::Role role_;
  k::Conv2dArgs g_;
  bool bias_, relu_;
  std::unique_ptr<LibraryConvolution> pass_;
  int64_t columns_ = 0;
};

ConvolutionGeometry convolutionGeometry(const k::Conv2dArgs &a) {
  ConvolutionGeometry g;
  g.n = a.n;
  g.h = a.h;
  g.w = a.w_;
  g.c = a.c;
  g.kh = a.kh;
  g.kw = a.kw;
  g.o = a.o;
  g.oh = a.oh;
  g.ow = a.ow;
  g.strideH = a.sh;
  g.strideW = a.sw;
  g.padH = a.padH;
  g.padW = a.padW;
  return g;
}

// conv2d, fused_conv2d and the two backprops: cuDNN's pass where the backend has one for the
// geometry (CudnnConvKernel), else patch matrices and gemm (ConvKernel).
KernelOrError makeConv(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  llvm::StringRef name = spec.op->name();
  if (auto e = requireAllF32(spec))
    return std::move(e);
  std::string activation = spec.attrs.getString("activation", "none");
  if (activation != "none" && activation != "relu")
    return unsupported(spec, "applies no activation or relu, not " + activation);
  // Where x and the filter are among the operands.
  const bool input = name == "conv2d_backprop_input", filter = name == "conv2d_backprop_filter";
  const ir::TensorType &x = spec.inputTypes[input ? 2 : 0];
  const ir::TensorType &w = spec.inputTypes[filter ? 2 : 1];
  if (x.rank() != 4 || w.rank() != 4)
    return unsupported(spec, "takes x [N, H, W, C] and a filter [KH, KW, C, O], not " + x.str() +
                                 " and " + w.str());
  auto role = input    ? ConvKernel::Role::Input
              : filter ? ConvKernel::Role::Filter
                       : ConvKernel::Role::Forward;
  const k::Conv2dArgs g = geometry(spec, x, w.dims[0], w.dims[1], w.dims[3]);
  const bool bias = spec.inputTypes.size() > 2 && role == ConvKernel::Role::Forward;
  auto pass = backend->convolution(input    ? ConvolutionPass::BackwardInput
                                   : filter ? ConvolutionPass::BackwardFilter
                                            : ConvolutionPass::Forward,
                                   convolutionGeometry(g));
  if (!pass)
    return ir::makeError(ir::ErrorCode::Unsupported,
                         "the GPU's '" + name + "': " + llvm::toString(pass.takeError()));
  if (*pass)
    return withScratch(std::make_unique<CudnnConvKernel>(std::move(backend), role, g, bias,
                                                         activation == "relu", std::move(*pass)),
                       spec);
  return withScratch(
      std::make_unique<ConvKernel>(std::move(backend), role, g, bias, activation == "relu"), spec);
}

// max_pool2d(x) and max_pool2d_grad(dy, x): ties to the first maximum of a window, as the CPU;
// avg_pool2d and avg_pool2d_grad: the mean over the window's cells inside the input.
KernelOrError makeMaxPool(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  const bool gradient = spec.op->name().endswith("_grad");
  const std::string kernel = "prism_" + spec.op->name().str();
  if (auto e = requireF32(spec, gradient ? std::vector<unsigned>{0, 1} : std::vector<unsigned>{0}))
    return std::move(e);
  const ir::TensorType &x = spec.inputTypes[gradient ? 1 : 0];
  auto window = spec.attrs.getInts("window");
  if (x.rank() != 4 || window.size() != 2)
    return unsupported(spec, "takes x [N, H, W, C] and a window [kh, kw], not " + x.str());
  k::Conv2dArgs a = geometry(spec, x, window[0], window[1], x.dims[3]);
  using In = llvm::ArrayRef<const RuntimeValue *>;
  using Out = llvm::ArrayRef<RuntimeValue *>;
  if (gradient)
    return convKernel(std::move(backend), kernel, a.n * a.h * a.w_ * a.c, a,
                      [](k::Conv2dArgs &a, In in, Out out) {
                        a.y = floats(out[0]);
                        a.dy = floats(in[0]);
                        a.x = floats(in[1]);
                      });
  return convKernel(std::move(backend), kernel, a.n * a.oh * a.ow * a.c, a,
                    [](k::Conv2dArgs &a, In in, Out out) {
                      a.y = floats(out[0]);
                      a.x = floats(in[0]);
                    });
}

// slice(x, axis, begin, end), slice_grad(g, x, axis, begin) (zeros, then g at begin) and
// concat(x..., axis): copies along one axis of 4-byte elements.
class AxisKernel final : public Kernel {
public:
  AxisKernel(std::shared_ptr<GpuBackend> backend, std::string op, int64_t axis, int64_t begin)
      : backend_(std::move(backend)), op_(std::move(op)), axis_(axis), begin_(begin) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    Tensor &out = outputs[0]->dense;
    k::AxisCopyArgs a = view(out.shape());
    a.out = static_cast<unsigned int *>(out.raw());
    if (op_ == "slice_grad") {
      k::FillArgs zero{out.raw(), 0, out.numElements(), 4};
      if (auto e = launch(*backend_, "prism_fill", zero.n, zero))
        return e;
    }
    int64_t at = op_ == "concat" ? 0 : begin_;
    const size_t operands = op_ == "concat" ? inputs.size() : 1;
    for (size_t i = 0; i < operands; ++i) {
      const Tensor &in = inputs[i]->dense;
      a.in = static_cast<const unsigned int *>(in.raw());
      a.inExtent = in.shape()[static_cast<size_t>(axis_)];
      if (op_ == "slice") { // from [begin, end) of x into all of out
        a.inStart = begin_;
        a.outStart = 0;
        a.count = a.outExtent;
      } else { // all of the operand into out from `at` on
        a.inStart = 0;
        a.outStart = at;
        a.count = a.inExtent;
        at += a.inExtent;
      }
      if (auto e = launch(*backend_, "prism_axis_copy", a.outer * a.count * a.inner, a))
        return e;
    }
    return llvm::Error::success();
  }

private:
  // out's shape as [outer, extent, inner] around the axis.
  k::AxisCopyArgs view(llvm::ArrayRef<int64_t> shape) const {
    k::AxisCopyArgs a{};
    a.outer = 1;
    a.inner = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (static_cast<int64_t>(d) < axis_)
        a.outer *= shape[d];
      else if (static_cast<int64_t>(d) > axis_)
        a.inner *= shape[d];
    }
    a.outExtent = shape[static_cast<size_t>(axis_)];
    return a;
  }

  std::shared_ptr<GpuBackend> backend_;
  std::string op_;
  int64_t axis_, begin_;
};

KernelOrError makeAxisCopy(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  for (const ir::TensorType &t : spec.inputTypes)
    if (t.sparse || ir::dtypeBytes(t.dtype) != 4)
      return unsupported(spec, "takes dense values of 4-byte elements, not " + t.str());
  const int64_t rank = spec.outputTypes[0].rank();
  int64_t axis = spec.attrs.getInt("axis");
  if (axis < 0)
    axis += rank;
  return std::make_unique<AxisKernel>(std::move(backend), spec.op->name().str(), axis,
                                      spec.attrs.getInt("begin"));
}

// dropout and dropout_grad: the mask of runtime/DropoutMask.h, drawn on the device from this
// step's stream (the step's number and first example read there, from Device::stepValues); in
// evaluation, the values themselves.
class DropoutKernel final : public Kernel {
public:
  DropoutKernel(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend)
      : backend_(std::move(backend)), key_(ir::randomStreamKey(*spec.op)),
        rate_(spec.attrs.getFloat("rate")), step_(spec.step), towerOffset_(spec.towerOffset),
        elements_(spec.outputTypes[0].numElements()),
        layout_(dropoutLayout(spec.op->result(0)->type(), spec.outputTypes[0])) {}

  llvm::Error allocate(const KernelSpec &spec) { return stepValuesOf(spec, values_); }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const StepContext step = step_ ? *step_ : StepContext{};
    if (!step.training()) {
      k::CopyArgs copy{outputs[0]->dense.raw(), inputs[0]->dense.raw(), elements_ * 4};
      return launch(*backend_, "prism_copy", elements_, copy);
    }
    k::DropoutArgs a{floats(outputs[0]),
                     floats(inputs[0]),
                     elements_,
                     layout_.exampleSize,
                     values_,
                     towerOffset_,
                     streamSeed(step.seed, key_),
                     layout_.perExample ? 1 : 0,
                     rate_,
                     static_cast<float>(dropoutScale(rate_))};
    return launch(*backend_, "prism_dropout", elements_, a);
  }

private:
  std::shared_ptr<GpuBackend> backend_;
  std::string key_;
  double rate_;
  const StepContext *step_;
  int64_t towerOffset_, elements_;
  DropoutLayout layout_;
  const k::StepValues *values_ = nullptr;
};

KernelOrError makeDropout(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  if (auto e = requireF32(spec, {0}))
    return std::move(e);
  return withScratch(std::make_unique<DropoutKernel>(spec, std::move(backend)), spec);
}

// transpose(x, perm) of 4-byte elements.
KernelOrError makeTranspose(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  const ir::TensorType &x = spec.inputTypes[0], &out = spec.outputTypes[0];
  if (x.sparse || ir::dtypeBytes(x.dtype) != 4 || x.rank() > PRISM_MAX_RANK)
    return unsupported(spec, "takes dense values of 4-byte elements and at most " +
                                 llvm::Twine(PRISM_MAX_RANK) + " dimensions, not " + x.str());
  auto perm = spec.attrs.getInts("perm");
  std::vector<int64_t> strides(x.dims.size(), 1);
  for (size_t d = x.dims.size(); d-- > 1;)
    strides[d - 1] = strides[d] * x.dims[d];
  k::TransposeArgs a{};
  a.rank = static_cast<int>(out.rank());
  a.n = out.numElements();
  for (int d = 0; d < a.rank; ++d) {
    a.outDims[d] = out.dims[d];
    a.inStrides[d] = strides[static_cast<size_t>(perm[d])];
  }
  return std::make_unique<OneLaunch<k::TransposeArgs>>(
      std::move(backend), "prism_transpose", a.n, a,
      [](k::TransposeArgs &a, llvm::ArrayRef<const RuntimeValue *> in,
         llvm::ArrayRef<RuntimeValue *> out) {
        a.out = static_cast<unsigned int *>(out[0]->dense.raw());
        a.in = static_cast<const unsigned int *>(in[0]->dense.raw());
      });
}

// softmax, softmax_grad, layer_norm and its two gradients: over the last dimension.
KernelOrError makeRows(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  if (auto e = requireAllF32(spec))
    return std::move(e);
  llvm::StringRef name = spec.op->name();
  const ir::TensorType &x =
      spec.inputTypes[name == "softmax" || name == "layer_norm" || name == "log_softmax" ? 0 : 1];
  k::RowsArgs a{};
  a.width = x.dims.empty() ? 1 : x.dims.back();
  a.rows = a.width ? x.numElements() / a.width : 0;
  a.epsilon = spec.attrs.getFloat("epsilon", 1e-5);
  using In = llvm::ArrayRef<const RuntimeValue *>;
  using Out = llvm::ArrayRef<RuntimeValue *>;
  auto rows = [&](int op, k::RowsArgs args, void (*bind)(k::RowsArgs &, In, Out)) {
    args.op = op;
    return std::make_unique<OneLaunch<k::RowsArgs>>(std::move(backend), "prism_rows", args.rows,
                                                    args, bind);
  };
  if (name == "softmax")
    return rows(0, a, [](k::RowsArgs &a, In in, Out out) {
      a.out = floats(out[0]);
      a.x = floats(in[0]);
    });
  if (name == "log_softmax")
    return rows(4, a, [](k::RowsArgs &a, In in, Out out) {
      a.out = floats(out[0]);
      a.x = floats(in[0]);
    });
  if (name == "softmax_grad" || name == "log_softmax_grad") // (dy, y)
    return rows(name == "softmax_grad" ? 1 : 5, a, [](k::RowsArgs &a, In in, Out out) {
      a.out = floats(out[0]);
      a.dy = floats(in[0]);
      a.x = floats(in[1]);
    });
  if (name == "layer_norm") // (x, gamma, beta)
    return rows(2, a, [](k::RowsArgs &a, In in, Out out) {
      a.out = floats(out[0]);
      a.x = floats(in[0]);
      a.gamma = floats(in[1]);
      a.beta = floats(in[2]);
    });
  if (name == "layer_norm_grad") // (dy, x, gamma)
    return rows(3, a, [](k::RowsArgs &a, In in, Out out) {
      a.out = floats(out[0]);
      a.dy = floats(in[0]);
      a.x = floats(in[1]);
      a.gamma = floats(in[2]);
    });
  // layer_norm_gamma_grad (dy, x): a thread per column.
  return std::make_unique<OneLaunch<k::RowsArgs>>(std::move(backend), "prism_layer_norm_gamma_grad",
                                                  a.width, a, [](k::RowsArgs &a, In in, Out out) {
                                                    a.out = floats(out[0]);
                                                    a.dy = floats(in[0]);
                                                    a.x = floats(in[1]);
                                                  });
}

// batch_matmul: the products of the matrices of the leading dimensions in one batched gemm (an
// operand of rank 2 is shared).
class BatchMatmulKernel final : public Kernel {
public:
  BatchMatmulKernel(std::shared_ptr<GpuBackend> backend, int64_t batch, int64_t m, int64_t n,
                    int64_t k, bool ta, bool tb, bool sharedA, bool sharedB)
      : backend_(std::move(backend)), batch_(batch), m_(m), n_(n), k_(k), ta_(ta), tb_(tb),
        sharedA_(sharedA), sharedB_(sharedB) {}

  llvm::Error allocate(const KernelSpec &spec) { return rounding_.reserve(spec, 0); }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    if (auto e = rounding_.round(*backend_, inputs))
      return e;
    return backend_->gemmBatched(tb_, ta_, n_, m_, k_, rounding_.operand(1), tb_ ? k_ : n_,
                                 sharedB_ ? 0 : k_ * n_, rounding_.operand(0), ta_ ? m_ : k_,
                                 sharedA_ ? 0 : m_ * k_, floats(outputs[0]), n_, m_ * n_, batch_);
  }

private:
  std::shared_ptr<GpuBackend> backend_;
  int64_t batch_, m_, n_, k_;
  bool ta_, tb_, sharedA_, sharedB_;
  Rounding rounding_;
};

KernelOrError makeBatchMatmul(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  if (auto e = requireF32(spec, {0, 1}))
    return std::move(e);
  const ir::TensorType &a = spec.inputTypes[0], &b = spec.inputTypes[1];
  const ir::TensorType &out = spec.outputTypes[0];
  if (a.rank() < 2 || b.rank() < 2)
    return unsupported(spec, "multiplies matrices, not " + a.str() + " by " + b.str());
  bool ta = spec.attrs.getBool("transpose_a"), tb = spec.attrs.getBool("transpose_b");
  int64_t m = ta ? a.dims[a.rank() - 1] : a.dims[a.rank() - 2];
  int64_t k = ta ? a.dims[a.rank() - 2] : a.dims[a.rank() - 1];
  int64_t n = tb ? b.dims[b.rank() - 2] : b.dims[b.rank() - 1];
  int64_t batch = m * n != 0 ? out.numElements() / (m * n) : 0;
  return withScratch(std::make_unique<BatchMatmulKernel>(std::move(backend), batch, m, n, k, ta, tb,
                                                         a.rank() == 2, b.rank() == 2),
                     spec);
}

// The batch_norm family of synchronized statistics (batch_norm_moments, replica_mean,
// batch_norm_apply and its gradients, batch_norm_update): x as [rows, channels], the statistics
// from the moments in training and from the running averages in evaluation (the step's mode is
// read when it runs).
class BatchNormKernel final : public Kernel {
public:
  BatchNormKernel(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend)
      : backend_(std::move(backend)), name_(spec.op->name().str()), step_(spec.step),
        globalBatch_(spec.globalBatch), batch_(spec.batch) {
    llvm::StringRef name = name_;
    // Where x lies among the operands: first for the forward ops, after dy or dmoments else.
    unsigned x =
        spec.inputTypes.size() == 1 || name == "batch_norm_apply" || name == "batch_norm" ? 0 : 1;
    const ir::TensorType &type =
        name == "batch_norm_update" ? spec.inputTypes[0] : spec.inputTypes[x];
    args_.channels = type.dims.empty() ? 1 : type.dims.back();
    args_.rows = args_.channels ? type.numElements() / args_.channels : 0;
    args_.epsilon = spec.attrs.getFloat("epsilon", 1e-5);
    args_.momentum = spec.attrs.getFloat("momentum", 0.1);
    perExample_ = spec.attrs.getInt("values_per_example", 1);
  }

  llvm::Error allocate(const KernelSpec &spec) {
    for (Tensor *t : {&mean_, &inv_, &coefB_, &coefD_})
      if (auto e = scratch(*t, spec, ir::DType::F64, args_.channels))
        return e;
    return stepValuesOf(spec, args_.step);
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> in,
                  llvm::ArrayRef<RuntimeValue *> out) override {
    k::BatchNormArgs a = args_;
    a.training = !step_ || step_->training() ? 1 : 0;
    a.mean = static_cast<double *>(mean_.raw());
    a.inv = static_cast<double *>(inv_.raw());
    a.coefB = static_cast<double *>(coefB_.raw());
    a.coefD = static_cast<double *>(coefD_.raw());
    if (name_ == "batch_norm" || name_ == "batch_norm_grad" || name_ == "batch_norm_scale_grad")
      return runPlain(a, in, out);
    auto f = [&](const RuntimeValue *v) { return floats(v); };
    auto d = [](const RuntimeValue *v) {
      return static_cast<double *>(const_cast<void *>(v->dense.raw()));
    };
    const int64_t elements = a.rows * a.channels;
    if (name_ == "replica_mean") { // one task, no towers: the values themselves
      k::CopyArgs copy{out[0]->dense.raw(), in[0]->dense.raw(), out[0]->dense.numBytes()};
      return launch(*backend_, "prism_copy", copy.bytes / 4, copy);
    }
    if (name_ == "batch_norm_moments") { // (x)
      a.x = f(in[0]);
      a.dmoments = d(out[0]);
      a.op = 0;
      return launch(*backend_, "prism_bn_channels", a.channels, a);
    }
    if (name_ == "batch_norm_moments_grad") { // (dmoments, x)
      a.moments = d(in[0]);
      a.x = f(in[1]);
      a.out = f(out[0]);
      a.op = 2;
      return launch(*backend_, "prism_bn_elements", elements, a);
    }
    if (name_ == "batch_norm_update") { // (running_mean, running_var, moments)
      // The count the kernel reads from the step's values, checked here.
      const double count = static_cast<double>(globalBatch_ ? *globalBatch_ : batch_) *
                           static_cast<double>(perExample_);
      if (a.training && !(count > 1))
        return ir::makeError("batch_norm in a training step needs more than one value per "
                             "channel, the batch has " +
                             llvm::Twine(static_cast<int64_t>(count)));
      a.perExample = static_cast<double>(perExample_);
      a.updateMean = f(in[0]);
      a.updateVar = f(in[1]);
      a.moments = d(in[2]);
      a.op = 3;
      return launch(*backend_, "prism_bn_channels", a.channels, a);
    }
    return runApply(a, in, out);
  }

private:
  // batch_norm_apply and its three gradients: their operands, then the statistics (from the
  // moments, or the running averages), then the op.
  llvm::Error runApply(k::BatchNormArgs a, llvm::ArrayRef<const RuntimeValue *> in,
                       llvm::ArrayRef<RuntimeValue *> out) {
    auto f = [](const RuntimeValue *v) { return floats(v); };
    auto d = [](const RuntimeValue *v) {
      return static_cast<double *>(const_cast<void *>(v->dense.raw()));
    };
    const int64_t elements = a.rows * a.channels;
    unsigned running = 0, moments = 0;
    if (name_ == "batch_norm_apply") { // (x, scale, bias, running_mean, running_var, moments)
      a.x = f(in[0]);
      a.scale = f(in[1]);
      a.bias = f(in[2]);
      running = 3;
      moments = 5;
    } else if (name_ == "batch_norm_apply_grad") { // (dy, x, scale, running..., moments)
      a.dy = f(in[0]);
      a.x = f(in[1]);
      a.scale = f(in[2]);
      running = 3;
      moments = 5;
    } else if (name_ == "batch_norm_apply_scale_grad") { // (dy, x, running..., moments)
      a.dy = f(in[0]);
      a.x = f(in[1]);
      running = 2;
      moments = 4;
    } else { // batch_norm_apply_moments_grad (dy, x, scale, moments): training only
      a.dy = f(in[0]);
      a.x = f(in[1]);
      a.scale = f(in[2]);
      moments = 3;
    }
    a.moments = d(in[moments]);
    if (running) {
      a.runningMean = f(in[running]);
      a.runningVar = f(in[running + 1]);
    } else if (!a.training) {
      a.op = 2;
      a.dmoments = d(out[0]);
      return launch(*backend_, "prism_bn_channels", a.channels, a);
    }
    if (auto e = launch(*backend_, "prism_bn_stats", a.channels, a))
      return e;
    if (name_ == "batch_norm_apply" || name_ == "batch_norm_apply_grad") {
      a.out = f(out[0]);
      a.op = name_ == "batch_norm_apply" ? 0 : 1;
      return launch(*backend_, "prism_bn_elements", elements, a);
    }
    a.op = name_ == "batch_norm_apply_scale_grad" ? 1 : 2;
    if (a.op == 1)
      a.out = f(out[0]);
    else
      a.dmoments = d(out[0]);
    return launch(*backend_, "prism_bn_channels", a.channels, a);
  }

  // batch_norm (x, scale, bias, running...), batch_norm_grad (dy, x, scale, running...) and
  // batch_norm_scale_grad (dy, x, running...): training statistics from x in two passes.
  llvm::Error runPlain(k::BatchNormArgs a, llvm::ArrayRef<const RuntimeValue *> in,
                       llvm::ArrayRef<RuntimeValue *> out) {
    if (a.training && a.rows < 2)
      return ir::makeError("batch_norm in a training step needs more than one value per "
                           "channel, x has " +
                           llvm::Twine(a.rows) + " per channel");
    const bool forward = name_ == "batch_norm";
    unsigned running = name_ == "batch_norm_scale_grad" ? 2 : 3;
    a.fromX = 1;
    a.x = floats(in[forward ? 0 : 1]);
    a.runningMean = floats(in[running]);
    a.runningVar = floats(in[running + 1]);
    if (auto e = launch(*backend_, "prism_bn_stats", a.channels, a))
      return e;
    a.out = floats(out[0]);
    if (forward) {
      a.scale = floats(in[1]);
      a.bias = floats(in[2]);
      a.op = 0;
      return launch(*backend_, "prism_bn_elements", a.rows * a.channels, a);
    }
    a.dy = floats(in[0]);
    if (name_ == "batch_norm_scale_grad") {
      a.op = 1;
      return launch(*backend_, "prism_bn_channels", a.channels, a);
    }
    a.scale = floats(in[2]);
    if (!a.training) { // dx = dy * scale * inv
      a.op = 1;
      return launch(*backend_, "prism_bn_elements", a.rows * a.channels, a);
    }
    a.op = 4;
    if (auto e = launch(*backend_, "prism_bn_channels", a.channels, a))
      return e;
    a.op = 3;
    return launch(*backend_, "prism_bn_elements", a.rows * a.channels, a);
  }

  std::shared_ptr<GpuBackend> backend_;
  std::string name_;
  const StepContext *step_;
  const int64_t *globalBatch_;
  int64_t batch_;
  int64_t perExample_ = 1;
  k::BatchNormArgs args_{};
  Tensor mean_, inv_, coefB_, coefD_;
};

KernelOrError makeBatchNorm(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  for (const ir::TensorType &t : spec.inputTypes)
    if (t.sparse || (t.dtype != ir::DType::F32 && t.dtype != ir::DType::F64))
      return unsupported(spec, "takes dense f32 values and f64 moments, not " + t.str());
  return withScratch(std::make_unique<BatchNormKernel>(spec, std::move(backend)), spec);
}

// pad(x, pads, value) of 4-byte elements, pads as [begins..., ends...].
KernelOrError makePad(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  const ir::TensorType &x = spec.inputTypes[0], &out = spec.outputTypes[0];
  if (x.sparse || ir::dtypeBytes(x.dtype) != 4 || x.rank() > PRISM_MAX_RANK)
    return unsupported(spec, "takes dense values of 4-byte elements and at most " +
                                 llvm::Twine(PRISM_MAX_RANK) + " dimensions, not " + x.str());
  auto pads = spec.attrs.getInts("pads");
  k::PadArgs a{};
  a.rank = static_cast<int>(x.rank());
  a.n = out.numElements();
  for (int d = 0; d < a.rank; ++d) {
    a.outDims[d] = out.dims[d];
    a.inDims[d] = x.dims[d];
    a.before[d] = pads[static_cast<size_t>(d)];
  }
  const double value = spec.attrs.getFloat("value");
  if (x.dtype == ir::DType::F32) {
    float v = static_cast<float>(value);
    std::memcpy(&a.value, &v, 4);
  } else {
    int32_t v = static_cast<int32_t>(value);
    std::memcpy(&a.value, &v, 4);
  }
  return std::make_unique<OneLaunch<k::PadArgs>>(
      std::move(backend), "prism_pad", a.n, a,
      [](k::PadArgs &a, llvm::ArrayRef<const RuntimeValue *> in,
         llvm::ArrayRef<RuntimeValue *> out) {
        a.out = static_cast<unsigned int *>(out[0]->dense.raw());
        a.in = static_cast<const unsigned int *>(in[0]->dense.raw());
      });
}

// The type code of DeviceKernels.cuh's cast: 0 f32, 1 f64, 2 i32, 3 i64, 4 bool.
int typeCode(ir::DType dtype) {
  switch (dtype) {
  case ir::DType::F32:
    return 0;
  case ir::DType::F64:
    return 1;
  case ir::DType::I32:
    return 2;
  case ir::DType::I64:
    return 3;
  case ir::DType::Bool:
    return 4;
  }
  return 0;
}

KernelOrError makeCast(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  if (spec.inputTypes[0].sparse)
    return unsupported(spec, "takes dense values, not " + spec.inputTypes[0].str());
  k::CastArgs a{nullptr, nullptr, spec.outputTypes[0].numElements(),
                typeCode(spec.inputTypes[0].dtype), typeCode(spec.outputTypes[0].dtype)};
  return std::make_unique<OneLaunch<k::CastArgs>>(std::move(backend), "prism_cast", a.n, a,
                                                  [](k::CastArgs &a,
                                                     llvm::ArrayRef<const RuntimeValue *> in,
                                                     llvm::ArrayRef<RuntimeValue *> out) {
                                                    a.out = out[0]->dense.raw();
                                                    a.in = in[0]->dense.raw();
                                                  });
}

// where(cond, a, b), maximum_grad(dy, a, b), minimum_grad(dy, a, b): f32 values (where's cond of
// any dtype), each operand of the result's shape or a scalar.
KernelOrError makeSelect(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  llvm::StringRef name = spec.op->name();
  const ir::TensorType &out = spec.outputTypes[0];
  k::SelectArgs a{};
  a.n = out.numElements();
  a.op = name == "where" ? 0 : name == "maximum_grad" ? 1 : 2;
  a.condType = typeCode(spec.inputTypes[0].dtype);
  long long *strides[] = {&a.s0, &a.s1, &a.s2};
  for (unsigned i = 0; i < 3; ++i) {
    const ir::TensorType &t = spec.inputTypes[i];
    if (t.sparse || (i > 0 || name != "where" ? t.dtype != ir::DType::F32 : false))
      return unsupported(spec, "takes dense f32 operands, not " + t.str());
    if (t.dims != out.dims && t.numElements() != 1)
      return unsupported(spec, "takes operands of its result's shape " + out.str() +
                                   " or scalars, not " + t.str() +
                                   " (broadcasting it is not "
                                   "supported yet on the GPU)");
    *strides[i] = t.dims == out.dims ? 1 : 0;
  }
  return std::make_unique<OneLaunch<k::SelectArgs>>(std::move(backend), "prism_select", a.n, a,
                                                    [](k::SelectArgs &a,
                                                       llvm::ArrayRef<const RuntimeValue *> in,
                                                       llvm::ArrayRef<RuntimeValue *> out) {
                                                      a.out = floats(out[0]);
                                                      a.p0 = in[0]->dense.raw();
                                                      a.p1 = floats(in[1]);
                                                      a.p2 = floats(in[2]);
                                                    });
}

// scale(x, s) of a dense x.
KernelOrError makeScale(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  if (auto e = requireF32(spec, {0, 1}))
    return std::move(e);
  k::ScaleArgs a{nullptr, nullptr, nullptr, spec.outputTypes[0].numElements()};
  return std::make_unique<OneLaunch<k::ScaleArgs>>(std::move(backend), "prism_scale", a.n, a,
                                                   [](k::ScaleArgs &a,
                                                      llvm::ArrayRef<const RuntimeValue *> in,
                                                      llvm::ArrayRef<RuntimeValue *> out) {
                                                     a.out = floats(out[0]);
                                                     a.x = floats(in[0]);
                                                     a.s = floats(in[1]);
                                                   });
}

// global_norm(g...) and all_finite(g...) of dense f32 values: each operand in parts summed on
// threads of their own, then the parts in order on one; clip_scale(norm) on one thread.
class NormKernel final : public Kernel {
public:
  static constexpr int64_t kParts = 256;

  NormKernel(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend)
      : backend_(std::move(backend)), name_(spec.op->name().str()),
        clip_(spec.attrs.getFloat("clip_norm")) {}

  llvm::Error allocate(const KernelSpec &spec) {
    return scratch(partial_, spec, ir::DType::F64,
                   kParts * std::max<size_t>(spec.inputTypes.size(), 1));
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    auto *partial = static_cast<double *>(partial_.raw());
    if (name_ == "clip_scale")
      return launch(*backend_, "prism_norm_finish", 1,
                    k::NormFinishArgs{floats(outputs[0]), partial, floats(inputs[0]), 0, clip_, 2});
    const int op = name_ == "global_norm" ? 0 : 1;
    for (size_t i = 0; i < inputs.size(); ++i) {
      k::NormArgs a{partial + i * kParts, floats(inputs[i]), inputs[i]->dense.numElements(), kParts,
                    op};
      if (auto e = launch(*backend_, "prism_norm_parts", kParts, a))
        return e;
    }
    return launch(*backend_, "prism_norm_finish", 1,
                  k::NormFinishArgs{floats(outputs[0]), partial, nullptr,
                                    static_cast<long long>(inputs.size()) * kParts, 0, op});
  }

private:
  std::shared_ptr<GpuBackend> backend_;
  std::string name_;
  double clip_;
  Tensor partial_;
};

KernelOrError makeNorm(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  if (auto e = requireAllF32(spec))
    return std::move(e);
  return withScratch(std::make_unique<NormKernel>(spec, std::move(backend)), spec);
}

// batch_share(x): b / N for x's batch b and the step's global batch N, computed on the host when
// the step runs and filled in.
class BatchShareKernel final : public Kernel {
public:
  BatchShareKernel(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend)
      : backend_(std::move(backend)), globalBatch_(spec.globalBatch), batch_(spec.batch) {}

  llvm::Error allocate(const KernelSpec &spec) { return stepValuesOf(spec, values_); }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const int64_t global = globalBatch_ && *globalBatch_ > 0 ? *globalBatch_ : batch_;
    if (global <= 0)
      return ir::makeError("batch_share: the step has no examples");
    k::BatchShareArgs a{floats(outputs[0]), values_, inputs[0]->dense.dim(0), batch_};
    return launch(*backend_, "prism_batch_share", 1, a);
  }

private:
  std::shared_ptr<GpuBackend> backend_;
  const int64_t *globalBatch_;
  int64_t batch_;
  const k::StepValues *values_ = nullptr;
};

// global_avg_pool(x [N, H, W, C]): the mean over H and W.
KernelOrError makeGlobalAvgPool(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  const ir::TensorType &x = spec.inputTypes[0];
  if (x.rank() != 4)
    return unsupported(spec, "takes x [N, H, W, C], not " + x.str());
  return reduceOver(spec, std::move(backend), x, 0b0110, true);
}

// lr_schedule(step): the schedule's factor at the step count, computed on the device; a count
// that is not a whole number >= 0 is flagged there and reported by `check` (as the CPU).
class LrScheduleKernel final : public Kernel {
public:
  LrScheduleKernel(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend,
                   const ir::LearningRateSchedule &schedule)
      : backend_(std::move(backend)), device_(spec.device) {
    args_.warmupSteps = schedule.warmupSteps;
    args_.warmupStart = schedule.warmupStart;
    args_.decay = static_cast<int>(schedule.decay);
    args_.every = schedule.every;
    args_.gamma = schedule.gamma;
    args_.total = schedule.total;
    args_.finalFactor = schedule.finalFactor;
  }

  llvm::Error allocate(const KernelSpec &spec) { return bad_.allocate(spec); }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    auto bad = bad_.clear(*backend_, inputs[0]->dense);
    if (!bad)
      return bad.takeError();
    k::LrScheduleArgs a = args_;
    a.out = floats(outputs[0]);
    a.step = floats(inputs[0]);
    a.bad = *bad;
    return launch(*backend_, "prism_lr_schedule", 1, a);
  }

  bool checksLater() const override { return true; }
  llvm::Error check() override {
    return bad_.check(*device_, [](const DeviceFlag::Raised &raised) {
      return ir::stepNumber(static_cast<double>(*raised.input.data<float>())).takeError();
    });
  }

private:
  std::shared_ptr<GpuBackend> backend_;
  Device *device_;
  k::LrScheduleArgs args_{};
  DeviceFlag bad_;
};

KernelOrError makeLrSchedule(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  if (auto e = requireF32(spec, {0}))
    return std::move(e);
  auto schedule = ir::scheduleFromAttrs(spec.attrs);
  if (!schedule)
    return schedule.takeError();
  return withScratch(std::make_unique<LrScheduleKernel>(spec, std::move(backend), *schedule), spec);
}

// sigmoid_cross_entropy(logits, labels): the mean of each element's term (RowsMean);
// sigmoid_cross_entropy_grad(dloss, logits, labels).
class SigmoidCrossEntropyKernel final : public Kernel {
public:
  SigmoidCrossEntropyKernel(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend)
      : backend_(std::move(backend)), gradient_(spec.op->name() == "sigmoid_cross_entropy_grad"),
        elements_(spec.inputTypes[gradient_ ? 1 : 0].numElements()) {}

  llvm::Error allocate(const KernelSpec &spec) {
    if (gradient_)
      return llvm::Error::success();
    if (auto e = mean_.allocate(spec, elements_))
      return e;
    return scratch(terms_, spec, ir::DType::F64, elements_);
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    k::SigmoidCrossEntropyArgs a{};
    a.out = floats(outputs[0]);
    a.n = elements_;
    if (gradient_) {
      a.dloss = floats(inputs[0]);
      a.x = floats(inputs[1]);
      a.z = floats(inputs[2]);
      a.op = 1;
      return launch(*backend_, "prism_sigmoid_cross_entropy", elements_, a);
    }
    a.x = floats(inputs[0]);
    a.z = floats(inputs[1]);
    a.terms = static_cast<double *>(terms_.raw());
    a.op = 0;
    if (auto e = launch(*backend_, "prism_sigmoid_cross_entropy", elements_, a))
      return e;
    return mean_.launch(*backend_, a.out, nullptr, a.terms, nullptr);
  }

private:
  std::shared_ptr<GpuBackend> backend_;
  bool gradient_;
  int64_t elements_;
  Tensor terms_;
  RowsMean mean_;
};

KernelOrError makeSigmoidCrossEntropy(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  if (auto e = requireAllF32(spec))
    return std::move(e);
  return withScratch(std::make_unique<SigmoidCrossEntropyKernel>(spec, std::move(backend)), spec);
}

// A kernel's sparse result in device buffers it keeps, grown when a step has more rows: i64
// indices and f32 rows of the dense shape `dims` (its first dimension the row count).
class SparseResult {
public:
  void describe(Device *device, std::vector<int64_t> dims) {
    device_ = device;
    dims_ = std::move(dims);
    rowSize_ = 1;
    for (size_t d = 1; d < dims_.size(); ++d)
      rowSize_ *= dims_[d];
  }
  // `out` as a sparse value of `rows` rows over the buffers.
  llvm::Error view(int64_t rows, RuntimeValue &out) {
    if (rows > capacity_) {
      auto indices = device_->allocate(static_cast<size_t>(rows) * 8);
      auto values = indices ? device_->allocate(static_cast<size_t>(rows * rowSize_) * 4)
                            : indices.takeError();
      if (!values)
        return values.takeError();
      indices_ = std::move(*indices);
      values_ = std::move(*values);
      capacity_ = rows;
    }
    std::vector<int64_t> shape = dims_;
    if (shape.empty())
      shape.push_back(rows);
    else
      shape[0] = rows;
    out.sparse = true;
    out.indices = Tensor::view(ir::DType::I64, {rows}, indices_, 0, device_->id());
    out.dense = Tensor::view(ir::DType::F32, shape, values_, 0, device_->id());
    return llvm::Error::success();
  }
  int64_t rowSize() const { return rowSize_; }

private:
  Device *device_ = nullptr;
  std::vector<int64_t> dims_;
  int64_t rowSize_ = 1, capacity_ = 0;
  std::shared_ptr<void> indices_, values_;
};

// The sparse-value ops: sparse_add (indices and rows concatenated), sparse_to_dense (rows summed
// into zeros), touched_rows (1 per row present), sparse_from_dense (the masked rows, in order;
// their count is read back, a counted copy of 8 bytes); and update_loss_scale. A sparse result
// lives in buffers that grow as needed, viewed at this step's row count.
class SparseValueKernel final : public Kernel {
public:
  SparseValueKernel(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend)
      : backend_(std::move(backend)), device_(spec.device), name_(spec.op->name().str()),
        attrs_(spec.attrs) {
    const ir::TensorType &type = name_ == "sparse_from_dense" || name_ == "sparse_add"
                                     ? spec.outputTypes[0]
                                     : spec.inputTypes[0];
    result_.describe(spec.device, std::vector<int64_t>(type.dims.begin(), type.dims.end()));
    tableRows_ = type.dims.empty() ? 1 : type.dims[0];
    rowSize_ = result_.rowSize();
  }

  llvm::Error allocate(const KernelSpec &spec) {
    if (auto e = bad_.allocate(spec))
      return e;
    if (auto e = scratch(total_, spec, ir::DType::I64, 1))
      return e;
    if (name_ != "sparse_from_dense")
      return llvm::Error::success();
    parts_ = sumParts(1, tableRows_, 256);
    if (auto e = scratch(partCounts_, spec, ir::DType::I64, parts_))
      return e;
    return scratch(position_, spec, ir::DType::I64, tableRows_);
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> in,
                  llvm::ArrayRef<RuntimeValue *> out) override {
    if (name_ == "update_loss_scale")
      return launch(*backend_, "prism_update_loss_scale", 1,
                    k::LossScaleArgs{floats(in[0]), floats(in[1]), floats(in[2]), floats(in[3]),
                                     static_cast<double>(attrs_.getInt("growth_interval")),
                                     attrs_.getFloat("growth_factor"),
                                     attrs_.getFloat("backoff_factor")});
    if (name_ == "sparse_add")
      return concatenate(*in[0], *in[1], *out[0]);
    if (name_ == "sparse_from_dense")
      return compact(*in[0], *in[1], *out[0]);
    return scatter(*in[0], out[0]->dense);
  }

  std::string notCapturable() const override {
    return name_ == "sparse_from_dense" ? "it reads its row count back to the host" : "";
  }

  // sparse_to_dense and touched_rows flag an index outside the dense value.
  bool checksLater() const override {
    return name_ == "sparse_to_dense" || name_ == "touched_rows";
  }
  llvm::Error check() override {
    if (!checksLater())
      return llvm::Error::success();
    return bad_.check(*device_, [&](const DeviceFlag::Raised &raised) {
      return indexError(raised, true, tableRows_,
                        "a sparse value of " + llvm::Twine(tableRows_) + " rows");
    });
  }

private:
  // sparse_to_dense and touched_rows: zeros, then each row (or a 1) at its index.
  llvm::Error scatter(const RuntimeValue &s, Tensor &dense) {
    k::SparseArgs a{};
    a.dense = static_cast<float *>(dense.raw());
    a.indices = static_cast<const long long *>(s.indices.raw());
    a.rows = static_cast<const float *>(s.dense.raw());
    a.count = s.numRows();
    a.rowSize = rowSize_;
    a.tableRows = tableRows_;
    a.op = name_ == "sparse_to_dense" ? 0 : 1;
    if (auto e = launch(*backend_, "prism_fill", dense.numElements(),
                        k::FillArgs{dense.raw(), 0, dense.numElements(), 4}))
      return e;
    auto bad = bad_.clear(*backend_, s.indices);
    if (!bad)
      return bad.takeError();
    a.bad = *bad;
    return launch(*backend_, "prism_sparse", a.count * (a.op == 0 ? rowSize_ : 1), a);
  }

  // sparse_add: a's indices and rows, then b's.
  llvm::Error concatenate(const RuntimeValue &a, const RuntimeValue &b, RuntimeValue &out) {
    const int64_t rows = a.numRows() + b.numRows();
    if (auto e = result_.view(rows, out))
      return e;
    auto copy = [&](void *to, const Tensor &from) {
      k::CopyArgs args{to, from.raw(), from.numBytes()};
      return launch(*backend_, "prism_copy", args.bytes / 4, args);
    };
    char *indices = static_cast<char *>(out.indices.raw());
    char *values = static_cast<char *>(out.dense.raw());
    if (auto e = copy(indices, a.indices))
      return e;
    if (auto e = copy(indices + a.indices.numBytes(), b.indices))
      return e;
    if (auto e = copy(values, a.dense))
      return e;
    if (auto e = copy(values + a.dense.numBytes(), b.dense))
      return e;
    return llvm::Error::success();
  }

  // sparse_from_dense(g, mask): the positions and count on the device, the count read back, then
  // the masked rows copied in order.
  llvm::Error compact(const RuntimeValue &g, const RuntimeValue &mask, RuntimeValue &out) {
    k::SparseArgs a{};
    a.rows = floats(&g);
    a.mask = floats(&mask);
    a.position = static_cast<long long *>(position_.raw());
    a.total = static_cast<long long *>(total_.raw());
    a.rowSize = rowSize_;
    a.tableRows = tableRows_;
    a.parts = parts_;
    a.partCounts = static_cast<long long *>(partCounts_.raw());
    for (auto [kernel, threads] :
         {std::pair{"prism_mask_counts", parts_}, std::pair{"prism_mask_offsets", int64_t{1}},
          std::pair{"prism_mask_positions", parts_}})
      if (auto e = launch(*backend_, kernel, threads, a))
        return e;
    auto total = device_->toHost(total_);
    if (!total)
      return total.takeError();
    if (auto e = result_.view(*total->data<int64_t>(), out))
      return e;
    a.outIndices = static_cast<long long *>(out.indices.raw());
    a.outRows = static_cast<float *>(out.dense.raw());
    a.op = 3;
    return launch(*backend_, "prism_sparse", tableRows_ * rowSize_, a);
  }

  std::shared_ptr<GpuBackend> backend_;
  Device *device_;
  std::string name_;
  ir::AttrMap attrs_;
  SparseResult result_;
  int64_t tableRows_ = 0, rowSize_ = 1;
  int64_t parts_ = 1; // sparse_from_dense: the mask's rows in this many ranges
  DeviceFlag bad_;
  Tensor total_, position_, partCounts_;
};

KernelOrError makeSparseValue(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  for (const ir::TensorType &t : spec.inputTypes)
    if (t.dtype != ir::DType::F32)
      return unsupported(spec, "takes f32 values, not " + t.str());
  return withScratch(std::make_unique<SparseValueKernel>(spec, std::move(backend)), spec);
}

// reshape(x, shape) and reshape_like(g, ref): the same elements, copied (the output is a value
// of its own in the step's arena).
KernelOrError makeReshape(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  if (spec.inputTypes[0].sparse)
    return unsupported(spec, "takes dense values, not " + spec.inputTypes[0].str());
  const int64_t bytes =
      spec.outputTypes[0].numElements() * ir::dtypeBytes(spec.outputTypes[0].dtype);
  k::CopyArgs a{nullptr, nullptr, bytes};
  return std::make_unique<OneLaunch<k::CopyArgs>>(
      std::move(backend), "prism_copy", bytes % 4 == 0 ? bytes / 4 : bytes, a,
      [](k::CopyArgs &a, llvm::ArrayRef<const RuntimeValue *> in,
         llvm::ArrayRef<RuntimeValue *> out) {
        a.out = out[0]->dense.raw();
        a.in = in[0]->dense.raw();
      });
}

// tower_slice: rows [begin, begin + size) of the task's batch (any dtype), copied.
class TowerSliceKernel final : public Kernel {
public:
  TowerSliceKernel(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend)
      : backend_(std::move(backend)) {
    const ir::TensorType &in = spec.inputTypes[0];
    const BatchSlice slice =
        splitBatch(spec.batch, spec.attrs.getInt("tower"), spec.attrs.getInt("towers"));
    const int64_t rows = in.dims.empty() ? 1 : in.dims[0];
    const int64_t rowBytes = rows ? in.numElements() * ir::dtypeBytes(in.dtype) / rows : 0;
    offset_ = slice.begin * rowBytes;
    bytes_ = slice.size * rowBytes;
  }
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> in,
                  llvm::ArrayRef<RuntimeValue *> out) override {
    k::CopyArgs a{out[0]->dense.raw(), static_cast<const char *>(in[0]->dense.raw()) + offset_,
                  bytes_};
    return launch(*backend_, "prism_copy", bytes_ % 4 == 0 ? bytes_ / 4 : bytes_, a);
  }

private:
  std::shared_ptr<GpuBackend> backend_;
  int64_t offset_ = 0, bytes_ = 0;
};

KernelOrError makeTowerSlice(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  if (spec.inputTypes[0].sparse)
    return unsupported(spec, "takes a dense value, not " + spec.inputTypes[0].str());
  return std::make_unique<TowerSliceKernel>(spec, std::move(backend));
}

// combine_towers: Σ bᵢ xᵢ / Σ bᵢ with bᵢ each tower's share of the task's batch, summed in tower
// order; sparse values keep every tower's indices and rows, the rows scaled by bᵢ / Σ bᵢ, in
// buffers that grow as needed.
class CombineTowersKernel final : public Kernel {
public:
  CombineTowersKernel(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend)
      : backend_(std::move(backend)) {
    const int64_t towers = static_cast<int64_t>(spec.inputTypes.size());
    for (int64_t t = 0; t < towers; ++t)
      weights_.push_back(
          static_cast<float>(static_cast<double>(splitBatch(spec.batch, t, towers).size) /
                             static_cast<double>(spec.batch)));
    const ir::TensorType &type = spec.outputTypes[0];
    result_.describe(spec.device, std::vector<int64_t>(type.dims.begin(), type.dims.end()));
    rowSize_ = result_.rowSize();
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> in,
                  llvm::ArrayRef<RuntimeValue *> out) override {
    if (!in[0]->sparse) {
      const int64_t n = out[0]->dense.numElements();
      for (size_t t = 0; t < in.size(); ++t)
        if (auto e = launch(
                *backend_, "prism_weighted_add", n,
                k::WeightedAddArgs{floats(out[0]), floats(in[t]), n, weights_[t], t > 0 ? 1 : 0}))
          return e;
      return llvm::Error::success();
    }
    int64_t rows = 0;
    for (const RuntimeValue *v : in)
      rows += v->numRows();
    if (auto e = result_.view(rows, *out[0]))
      return e;
    int64_t at = 0;
    for (size_t t = 0; t < in.size(); ++t) {
      const int64_t count = in[t]->numRows();
      k::CopyArgs indices{static_cast<long long *>(out[0]->indices.raw()) + at,
                          in[t]->indices.raw(), count * 8};
      if (auto e = launch(*backend_, "prism_copy", count * 2, indices))
        return e;
      k::WeightedAddArgs values{floats(out[0]) + at * rowSize_, floats(in[t]), count * rowSize_,
                                weights_[t], 0};
      if (auto e = launch(*backend_, "prism_weighted_add", values.n, values))
        return e;
      at += count;
    }
    return llvm::Error::success();
  }

private:
  std::shared_ptr<GpuBackend> backend_;
  std::vector<float> weights_;
  SparseResult result_;
  int64_t rowSize_ = 1;
};

KernelOrError makeCombineTowers(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  for (const ir::TensorType &t : spec.inputTypes)
    if (t.dtype != ir::DType::F32)
      return unsupported(spec, "takes f32 values, not " + t.str());
  if (spec.outputTypes[0].sparse && (spec.outputTypes[0].dims.empty() || !spec.device))
    return unsupported(spec, "takes sparse values with rows, not " + spec.outputTypes[0].str());
  return std::make_unique<CombineTowersKernel>(spec, std::move(backend));
}

// matmul and fused_matmul: row-major C [m, n] = op(A) · op(B) is column-major C^T = op(B)^T ·
// op(A)^T, so cuBLAS gets B first; then, fused, the bias along the columns and the activation.
class MatmulKernel final : public Kernel {
public:
  MatmulKernel(std::shared_ptr<GpuBackend> backend, int64_t m, int64_t n, int64_t k,
               bool transposeA, bool transposeB, bool fused, bool relu)
      : backend_(std::move(backend)), m_(m), n_(n), k_(k), transposeA_(transposeA),
        transposeB_(transposeB), fused_(fused), relu_(relu) {}

  llvm::Error allocate(const KernelSpec &spec) { return rounding_.reserve(spec, 0); }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    if (auto e = rounding_.round(*backend_, inputs))
      return e;
    float *c = floats(outputs[0]);
    if (auto e = backend_->gemm(transposeB_, transposeA_, n_, m_, k_, rounding_.operand(1),
                                transposeB_ ? k_ : n_, rounding_.operand(0), transposeA_ ? m_ : k_,
                                c, n_, /*accumulate=*/false))
      return e;
    if (!fused_)
      return llvm::Error::success();
    k::BiasActivationArgs a{c, rounding_.operand(2), m_, n_, relu_ ? 1 : 0};
    return launch(*backend_, "prism_bias_activation", m_ * n_, a);
  }

private:
  std::shared_ptr<GpuBackend> backend_;
  int64_t m_, n_, k_;
  bool transposeA_, transposeB_, fused_, relu_;
  Rounding rounding_;
};

KernelOrError makeMatmul(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  bool fused = spec.op->name() == "fused_matmul";
  if (auto e =
          requireF32(spec, fused ? std::vector<unsigned>{0, 1, 2} : std::vector<unsigned>{0, 1}))
    return std::move(e);
  std::string activation = spec.attrs.getString("activation", "none");
  if (fused && activation != "none" && activation != "relu")
    return unsupported(spec, "applies no activation or relu, not " + activation);
  const ir::TensorType &a = spec.inputTypes[0], &b = spec.inputTypes[1];
  if (a.rank() != 2 || b.rank() != 2)
    return unsupported(spec, "multiplies matrices, not " + a.str() + " by " + b.str());
  bool ta = spec.attrs.getBool("transpose_a"), tb = spec.attrs.getBool("transpose_b");
  int64_t m = ta ? a.dims[1] : a.dims[0], k = ta ? a.dims[0] : a.dims[1];
  int64_t n = tb ? b.dims[0] : b.dims[1];
  return withScratch(std::make_unique<MatmulKernel>(std::move(backend), m, n, k, ta, tb, fused,
                                                    activation == "relu"),
                     spec);
}

// softmax_cross_entropy and its gradient: a thread per row (position; wide rows' statistics in
// parts), the mean over the rows in parts (RowsMean). A label outside [0, classes) is flagged on
// the device and read back by `check` (a copy of 8 bytes, counted), then reported as the CPU
// reports it.
class CrossEntropyKernel final : public Kernel {
public:
  CrossEntropyKernel(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend, bool gradient)
      : backend_(std::move(backend)), device_(spec.device), gradient_(gradient) {
    const ir::TensorType &logits = spec.inputTypes[gradient ? 1 : 0];
    classes_ = logits.dims.back();
    rows_ = classes_ ? logits.numElements() / classes_ : 0;
    labels_.wide = spec.inputTypes[gradient ? 2 : 1].dtype == ir::DType::I64;
    if (const ir::Attr *ignore = spec.attrs.find(ir::kIgnoreIndexAttr)) {
      labels_.ignoring = 1;
      labels_.ignore = ignore->getInt();
    }
    stats_.rows = rows_;
    stats_.classes = classes_;
    stats_.parts = sumParts(rows_, classes_, 256);
  }

  llvm::Error allocate(const KernelSpec &spec) {
    const int64_t wideRows = stats_.parts > 1 ? rows_ : 0;
    const int64_t wideParts = wideRows * static_cast<int64_t>(stats_.parts);
    for (auto [tensor, dtype, n] :
         {std::tuple{&loss_, ir::DType::F64, rows_}, std::tuple{&counted_, ir::DType::F64, rows_},
          std::tuple{&countedTotal_, ir::DType::F64, int64_t{1}},
          // Wide rows: their statistics in parts (prism_row_max_parts and the rest).
          std::tuple{&partMost_, ir::DType::F32, wideParts},
          std::tuple{&partSum_, ir::DType::F64, wideParts},
          std::tuple{&most_, ir::DType::F32, wideRows},
          std::tuple{&sum_, ir::DType::F64, wideRows}}) {
      if (auto e = scratch(*tensor, spec, dtype, n))
        return e;
    }
    if (auto e = bad_.allocate(spec))
      return e;
    return mean_.allocate(spec, rows_);
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const unsigned first = gradient_ ? 1 : 0;
    k::LabelsView labels = labels_;
    labels.labels = inputs[first + 1]->dense.raw();
    auto bad = bad_.clear(*backend_, inputs[first + 1]->dense);
    if (!bad)
      return bad.takeError();
    const bool wide = stats_.parts > 1;
    if (wide)
      if (auto e = rowStatistics(floats(inputs[first])))
        return e;
    const float *most = wide ? static_cast<const float *>(most_.raw()) : nullptr;
    const double *sum = wide ? doubles(sum_) : nullptr;
    k::CrossEntropyRowsArgs rows{doubles(loss_),
                                 doubles(counted_),
                                 floats(inputs[first]),
                                 labels,
                                 rows_,
                                 classes_,
                                 *bad,
                                 most,
                                 sum};
    if (auto e = launch(*backend_, "prism_cross_entropy_rows", rows_, rows))
      return e;
    if (auto e = mean_.launch(*backend_, gradient_ ? nullptr : floats(outputs[0]),
                              doubles(countedTotal_), doubles(loss_), doubles(counted_)))
      return e;
    if (gradient_) {
      k::CrossEntropyGradArgs grad{floats(outputs[0]),
                                   floats(inputs[0]),
                                   floats(inputs[1]),
                                   labels,
                                   doubles(countedTotal_),
                                   rows_,
                                   classes_,
                                   most,
                                   sum};
      if (auto e =
              wide ? launch(*backend_, "prism_cross_entropy_grad_elements", rows_ * classes_, grad)
                   : launch(*backend_, "prism_cross_entropy_grad", rows_, grad))
        return e;
    }
    return llvm::Error::success();
  }

  bool checksLater() const override { return true; }
  llvm::Error check() override {
    return bad_.check(*device_, [&](const DeviceFlag::Raised &raised) {
      return ir::makeError("label " + llvm::Twine(indexAt(raised.input, labels_.wide, raised.at)) +
                           " of row " + llvm::Twine(raised.at) + " is outside [0, " +
                           llvm::Twine(classes_) + ")");
    });
  }

private:
  static double *doubles(Tensor &t) { return static_cast<double *>(t.raw()); }

  // most_ and sum_ of wide rows of x, in parts (the launches of RowStatsArgs).
  llvm::Error rowStatistics(const float *x) {
    k::RowStatsArgs a = stats_;
    a.x = x;
    a.partMost = static_cast<float *>(partMost_.raw());
    a.partSum = doubles(partSum_);
    a.most = static_cast<float *>(most_.raw());
    a.sum = doubles(sum_);
    const int64_t parts = rows_ * a.parts;
    for (auto [kernel, threads] :
         {std::pair{"prism_row_max_parts", parts}, std::pair{"prism_row_max", rows_},
          std::pair{"prism_row_exp_parts", parts}, std::pair{"prism_row_exp_sum", rows_}})
      if (auto e = launch(*backend_, kernel, threads, a))
        return e;
    return llvm::Error::success();
  }

  std::shared_ptr<GpuBackend> backend_;
  Device *device_;
  bool gradient_;
  int64_t rows_ = 0, classes_ = 0;
  k::LabelsView labels_{};
  k::RowStatsArgs stats_{};
  Tensor loss_, counted_, countedTotal_, partMost_, partSum_, most_, sum_;
  DeviceFlag bad_;
  RowsMean mean_;
};

KernelOrError makeCrossEntropy(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  bool gradient = spec.op->name() == "softmax_cross_entropy_grad";
  if (auto e = requireF32(spec, gradient ? std::vector<unsigned>{0, 1} : std::vector<unsigned>{0}))
    return std::move(e);
  ir::DType labels = spec.inputTypes[gradient ? 2 : 1].dtype;
  if (labels != ir::DType::I32 && labels != ir::DType::I64)
    return unsupported(spec, "takes labels of i32 or i64, not " + ir::dtypeName(labels));
  return withScratch(std::make_unique<CrossEntropyKernel>(spec, std::move(backend), gradient),
                     spec);
}

// apply_sgd (w, g[, lr_factor, finite]), apply_momentum (w, a, g[, ...]) and apply_adam (w, m, v,
// g, t[, ...]): updates in place, the scalars read on the device. A sparse gradient is coalesced
// first (rows of one index add up, in a scratch of the variable's shape) and only the rows it
// touches are updated, once each (lazy, as on the CPU).
class UpdateKernel final : public Kernel {
public:
  UpdateKernel(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend, unsigned gradient,
               unsigned factor)
      : backend_(std::move(backend)), device_(spec.device), name_(spec.op->name().str()),
        gradient_(gradient), factor_(spec.inputTypes.size() > factor ? factor : 0),
        finite_(spec.inputTypes.size() > factor + 1 ? factor + 1 : 0),
        elements_(spec.inputTypes[0].numElements()), sparse_(spec.inputTypes[gradient].sparse),
        attrs_(spec.attrs) {
    const ir::TensorType &w = spec.inputTypes[0];
    rows_ = w.dims.empty() ? 1 : w.dims[0];
    rowSize_ = rows_ ? elements_ / rows_ : 0;
  }

  llvm::Error allocate(const KernelSpec &spec) {
    if (!sparse_)
      return llvm::Error::success();
    if (auto e = scratch(sum_, spec, ir::DType::F32, elements_))
      return e;
    return scratch(claimed_, spec, ir::DType::I32, rows_);
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *>) override {
    k::UpdateScalars s{factor_ ? floats(inputs[factor_]) : nullptr,
                       finite_ ? floats(inputs[finite_]) : nullptr,
                       static_cast<float>(attrs_.getFloat("lr")), nullptr, 0};
    const float *g = floats(inputs[gradient_]);
    int64_t n = elements_;
    if (sparse_) {
      auto coalesced = coalesce(*inputs[gradient_]);
      if (!coalesced)
        return coalesced.takeError();
      g = static_cast<const float *>(sum_.raw());
      n = *coalesced * rowSize_;
      s.order = static_cast<const long long *>(order_.raw());
      s.rowSize = rowSize_;
    }
    if (name_ == "apply_sgd")
      return launch(*backend_, "prism_apply_sgd", n, k::SgdArgs{floats(inputs[0]), g, n, s});
    if (name_ == "apply_momentum")
      return launch(*backend_, "prism_apply_momentum", n,
                    k::MomentumArgs{floats(inputs[0]), floats(inputs[1]), g, n, s,
                                    static_cast<float>(attrs_.getFloat("momentum")),
                                    attrs_.getBool("nesterov") ? 1 : 0});
    return launch(*backend_, "prism_apply_adam", n,
                  k::AdamArgs{floats(inputs[0]), floats(inputs[1]), floats(inputs[2]), g,
                              floats(inputs[4]), n, s, attrs_.getFloat("beta1"),
                              attrs_.getFloat("beta2"), attrs_.getFloat("epsilon")});
  }

private:
  // Sums the rows of each index into sum_ and claims each index once (order_); returns the
  // number of positions.
  llvm::Expected<int64_t> coalesce(const RuntimeValue &g) {
    const int64_t count = g.numRows();
    if (g.indices.dtype() != ir::DType::I64)
      return ir::makeError(ir::ErrorCode::Unsupported,
                           "the GPU's '" + name_ + "' takes sparse gradients with i64 indices");
    if (order_.numElements() < count) {
      auto order = device_->allocateTensor(ir::DType::I64, {count});
      if (!order)
        return order.takeError();
      order_ = std::move(*order);
    }
    k::SparseRowsArgs a{static_cast<float *>(sum_.raw()),
                        static_cast<int *>(claimed_.raw()),
                        static_cast<long long *>(order_.raw()),
                        static_cast<const long long *>(g.indices.raw()),
                        static_cast<const float *>(g.dense.raw()),
                        count,
                        rowSize_,
                        0};
    for (int stage : {0, 1, 2}) {
      a.stage = stage;
      if (auto e = launch(*backend_, "prism_sparse_rows", stage == 2 ? count : count * rowSize_, a))
        return std::move(e);
    }
    return count;
  }

  std::shared_ptr<GpuBackend> backend_;
  Device *device_;
  std::string name_;
  unsigned gradient_, factor_, finite_;
  int64_t elements_;
  bool sparse_;
  int64_t rows_ = 0, rowSize_ = 0;
  ir::AttrMap attrs_;
  Tensor sum_, claimed_, order_;
};

KernelOrError makeUpdate(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  llvm::StringRef name = spec.op->name();
  unsigned gradient = name == "apply_sgd" ? 1 : name == "apply_momentum" ? 2 : 3;
  unsigned factor = name == "apply_adam" ? 5 : gradient + 1;
  std::vector<unsigned> dense;
  for (unsigned i = 0; i < spec.inputTypes.size(); ++i)
    if (i != gradient)
      dense.push_back(i);
  if (auto e = requireF32(spec, dense))
    return std::move(e);
  if (spec.inputTypes[gradient].dtype != ir::DType::F32)
    return unsupported(spec, "takes f32, not " + spec.inputTypes[gradient].str());
  return withScratch(std::make_unique<UpdateKernel>(spec, std::move(backend), gradient, factor),
                     spec);
}

using Maker = KernelOrError (*)(const KernelSpec &, std::shared_ptr<GpuBackend>);

KernelOrError makeBatchShare(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  return withScratch(std::make_unique<BatchShareKernel>(spec, std::move(backend)), spec);
}

// Each op with a GPU kernel here, and what builds it.
const std::vector<std::pair<llvm::StringRef, Maker>> &makers() {
  static const std::vector<std::pair<llvm::StringRef, Maker>> table = {
      {"constant", makeConstant},
      {"assign", makeAssign},
      {"sum_like", makeSumLike},
      {"reduce_sum", makeReduce},
      {"reduce_mean", makeReduce},
      {"expand_like", makeExpandLike},
      {"gather", makeGather},
      {"gather_grad", makeGather},
      {"conv2d", makeConv},
      {"fused_conv2d", makeConv},
      {"conv2d_backprop_input", makeConv},
      {"conv2d_backprop_filter", makeConv},
      {"max_pool2d", makeMaxPool},
      {"max_pool2d_grad", makeMaxPool},
      {"avg_pool2d", makeMaxPool},
      {"avg_pool2d_grad", makeMaxPool},
      {"global_avg_pool", makeGlobalAvgPool},
      {"cast", makeCast},
      {"where", makeSelect},
      {"maximum_grad", makeSelect},
      {"minimum_grad", makeSelect},
      {"softmax", makeRows},
      {"softmax_grad", makeRows},
      {"log_softmax", makeRows},
      {"log_softmax_grad", makeRows},
      {"layer_norm", makeRows},
      {"layer_norm_grad", makeRows},
      {"layer_norm_gamma_grad", makeRows},
      {"scale", makeScale},
      {"global_norm", makeNorm},
      {"all_finite", makeNorm},
      {"clip_scale", makeNorm},
      {"batch_share", makeBatchShare},
      {"lr_schedule", makeLrSchedule},
      {"sigmoid_cross_entropy", makeSigmoidCrossEntropy},
      {"sigmoid_cross_entropy_grad", makeSigmoidCrossEntropy},
      {"reshape", makeReshape},
      {"reshape_like", makeReshape},
      {"dropout", makeDropout},
      {"dropout_grad", makeDropout},
      {"transpose", makeTranspose},
      {"pad", makePad},
      {"replica_mean", makeBatchNorm},
      {"batch_norm", makeBatchNorm},
      {"batch_norm_grad", makeBatchNorm},
      {"batch_norm_scale_grad", makeBatchNorm},
      {"batch_norm_moments", makeBatchNorm},
      {"batch_norm_moments_grad", makeBatchNorm},
      {"batch_norm_apply", makeBatchNorm},
      {"batch_norm_apply_grad", makeBatchNorm},
      {"batch_norm_apply_scale_grad", makeBatchNorm},
      {"batch_norm_apply_moments_grad", makeBatchNorm},
      {"batch_norm_update", makeBatchNorm},
      {"batch_matmul", makeBatchMatmul},
      {"slice", makeAxisCopy},
      {"slice_grad", makeAxisCopy},
      {"concat", makeAxisCopy},
      {"matmul", makeMatmul},
      {"fused_matmul", makeMatmul},
      {"softmax_cross_entropy", makeCrossEntropy},
      {"softmax_cross_entropy_grad", makeCrossEntropy},
      {"apply_sgd", makeUpdate},
      {"apply_momentum", makeUpdate},
      {"apply_adam", makeUpdate},
      {"sparse_add", makeSparseValue},
      {"sparse_to_dense", makeSparseValue},
      {"touched_rows", makeSparseValue},
      {"sparse_from_dense", makeSparseValue},
      {"update_loss_scale", makeSparseValue},
      {"tower_slice", makeTowerSlice},
      {"combine_towers", makeCombineTowers},
  };
  return table;
}

const Maker *makerOf(llvm::StringRef op) {
  for (const auto &[name, make] : makers())
    if (name == op)
      return &make;
  return nullptr;
}

// The backend of a cuda device: DeviceKernels.cuh through NVRTC, cuBLAS through dlopen.
class DeviceBackend final : public GpuBackend {
public:
  DeviceBackend(int device, bool tf32) : device_(device), tf32_(tf32) {}

  llvm::Error launch(llvm::StringRef kernel, int64_t threads, const void *arguments) override {
    // A kernel's few launch names are looked up once (the module's table takes a lock and a
    // string key per lookup).
    auto [it, added] = handles_.try_emplace(kernel, nullptr);
    if (added) {
      auto handle = loadKernel("prism_device_kernels", deviceKernelsSource(), kernel, device_);
      if (!handle) {
        handles_.erase(it);
        return handle.takeError();
      }
      it->second = *handle;
    }
    void *params[] = {const_cast<void *>(arguments)};
    return launchKernel(it->second, device_, threads, params, kernel);
  }

  llvm::Error gemm(bool transposeA, bool transposeB, int64_t m, int64_t n, int64_t k,
                   const float *a, int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc,
                   bool accumulate) override {
    return cublasGemm(device_, tf32_, transposeA, transposeB, m, n, k, a, lda, b, ldb, c, ldc,
                      accumulate);
  }

  llvm::Error gemmBatched(bool transposeA, bool transposeB, int64_t m, int64_t n, int64_t k,
                          const float *a, int64_t lda, int64_t strideA, const float *b, int64_t ldb,
                          int64_t strideB, float *c, int64_t ldc, int64_t strideC,
                          int64_t batch) override {
    return cublasGemmStridedBatched(device_, tf32_, transposeA, transposeB, m, n, k, a, lda,
                                    strideA, b, ldb, strideB, c, ldc, strideC, batch);
  }

  llvm::Expected<std::unique_ptr<LibraryConvolution>>
  convolution(ConvolutionPass pass, const ConvolutionGeometry &g) override {
    return CudnnConvolution::plan(device_, tf32_, pass, g, static_cast<size_t>(workspaceLimit()));
  }

private:
  int device_;
  bool tf32_;
  llvm::StringMap<cudaKernel_t> handles_;
};

KernelOrError makeOnDevice(const KernelSpec &spec) {
  if (!spec.device || spec.device->id().kind != ir::DeviceKind::Cuda)
    return ir::makeError(ir::ErrorCode::Internal, "a GPU kernel asked for on a device not a GPU");
  return makeGpuOpKernel(spec, std::make_shared<DeviceBackend>(spec.device->id().index, spec.tf32));
}

} // namespace

llvm::Error GpuBackend::gemmBatched(bool transposeA, bool transposeB, int64_t m, int64_t n,
                                    int64_t k, const float *a, int64_t lda, int64_t strideA,
                                    const float *b, int64_t ldb, int64_t strideB, float *c,
                                    int64_t ldc, int64_t strideC, int64_t batch) {
  for (int64_t i = 0; i < batch; ++i)
    if (auto e = gemm(transposeA, transposeB, m, n, k, a + i * strideA, lda, b + i * strideB, ldb,
                      c + i * strideC, ldc, /*accumulate=*/false))
      return e;
  return llvm::Error::success();
}

llvm::StringRef deviceKernelsSource() {
  return kDeviceKernels;
}

llvm::ArrayRef<llvm::StringRef> gpuOpKernelNames() {
  static const std::vector<llvm::StringRef> names = [] {
    std::vector<llvm::StringRef> all;
    for (const auto &[op, make] : makers())
      all.push_back(op);
    return all;
  }();
  return names;
}

KernelOrError makeGpuOpKernel(const KernelSpec &spec, std::shared_ptr<GpuBackend> backend) {
  const Maker *make = makerOf(spec.op->name());
  if (!make)
    return ir::makeError(ir::ErrorCode::Unsupported, "no GPU kernel for '" + spec.op->name() + "'");
  return (*make)(spec, std::move(backend));
}

void registerOpKernels(KernelRegistry &registry) {
  for (llvm::StringRef op : gpuOpKernelNames())
    registry.add(op, makeOnDevice);
}

} // namespace prism::runtime::cuda
