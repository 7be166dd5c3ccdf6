// The kernel interface of every device: a kernel is built once per op, device and batch size
// (shapes are then concrete, so it can plan primitives and scratch), and run once per step.
// Kernels are found by (op, device kind) in one registry; the executor checks that every op of
// a program has one before the first step.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/Device.h"
#include "ir/Module.h"
#include "ir/Type.h"
#include "runtime/StepContext.h"
#include "runtime/Tensor.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime {

class Communication;
class Device;

// A value at run time: a dense tensor, or a sparse value of dense shape [V, D...] carried as
// indices i64[n] and rows [n, D...] (n varies from step to step).
struct RuntimeValue {
  Tensor dense; // the value, or the rows of a sparse value
  Tensor indices;
  bool sparse = false;

  Tensor &rows() { return dense; }
  const Tensor &rows() const { return dense; }
  int64_t numRows() const { return sparse ? indices.numElements() : 0; }
};

// What a kernel is built from. Types have B bound to the batch size; a sparse type keeps `?`.
struct KernelSpec {
  const ir::Op *op = nullptr;
  ir::AttrMap attrs; // with the op table's defaults applied
  std::vector<ir::TensorType> inputTypes;
  std::vector<ir::TensorType> outputTypes;
  Device *device = nullptr; // where the kernel runs (its memory, threads or stream)
  int threads = 1;
  int64_t batch = 0; // the task's batch this step (towers each take their slice of it)
  Communication *communication = nullptr; // null outside the distributed runtime
  // The examples of the whole step, over every worker, tower and micro-batch, as the executor
  // sets it before each step (batch_share reads it); null: `batch`.
  const int64_t *globalBatch = nullptr;
  // The step's mode, seed, number and example offset, as the executor sets them before each
  // step (dropout reads them); null: a training step 0 with seed 0 at offset 0.
  const StepContext *step = nullptr;
  // Where this op's examples start within the batch of `step` (a tower's slice of it; 0 for
  // the task's own ops): row r of a batch-major value is example step->exampleOffset +
  // towerOffset + r of the global batch.
  int64_t towerOffset = 0;
  // Float32 matrix products may use TF32 (ExecutorOptions::tf32; GPU kernels only).
  bool tf32 = false;
};

class Kernel {
public:
  virtual ~Kernel() = default;
  // `outputs` of dense type arrive allocated with their shapes (their storage may be reused
  // memory: write every element). Sparse outputs are filled by the kernel (indices and rows).
  // Ops that write variables get the variable's tensor as inputs[i] and update it in place.
  virtual llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                          llvm::ArrayRef<RuntimeValue *> outputs) = 0;

  // A kernel that flags bad input on its device (a label out of range, an index outside a
  // table) rather than waiting for the device after each run returns true here and reports the
  // flag from `check`. The executor checks the kernels that ran, in their order, before the
  // first op that writes state or communicates and at the end of the run, so a GPU's queue
  // drains once there rather than after each such kernel. The ops between see the bad step's
  // values (kernels stay within their memory whatever their input), but no variable, no
  // parameter server and no other task does.
  virtual bool checksLater() const { return false; }
  virtual llvm::Error check() { return llvm::Error::success(); }

  // Why this kernel's runs cannot be recorded once and replayed on a device that captures
  // (Device::canCapture), or empty where they can: a capturable kernel only queues work on its
  // device, with launches that are the same every run once it has run once (what changes from
  // step to step it reads from the device: Device::stepValues), and copies nothing to or from
  // the host.
  virtual std::string notCapturable() const { return ""; }

  // Where a kernel family chooses how to run an op by its shape, which way this kernel took, for
  // the run's report ("convolution passes through cuDNN's implicit GEMM", "convolution passes on
  // patch matrices"); empty where there is no choice.
  virtual std::string choice() const { return ""; }

  // A kernel whose results arrive with the task's communication (an all-reduce staged through
  // host memory, whose ring runs while the step's next kernels do) returns true here and writes
  // them in `finish`, which the executor calls once Communication::synchronize() returned, before
  // anything reads them: before the first op that reads an all-reduce's results and at the end
  // of the run. After a failed synchronize it is not called.
  virtual bool finishesAfterCommunication() const { return false; }
  virtual llvm::Error finish() { return llvm::Error::success(); }
};

using KernelFactory = llvm::Expected<std::unique_ptr<Kernel>> (*)(const KernelSpec &spec);

// The kernels of one device kind, as a kernel family adds them (see registerKernelFamily).
class KernelRegistry {
public:
  void add(llvm::StringRef opName, KernelFactory factory) { (*kernels_)[opName] = factory; }

private:
  friend struct KernelTable;
  explicit KernelRegistry(llvm::StringMap<KernelFactory> *kernels) : kernels_(kernels) {}
  llvm::StringMap<KernelFactory> *kernels_; // the table's map for this device kind
};

// Fills the registry of a device kind other than the CPU (whose families are built in): the
// GPU path calls this once at start-up with its kernel families.
void registerKernelFamily(ir::DeviceKind kind, void (*registerFamily)(KernelRegistry &));

// The kernel of an op on a device kind, or null when there is none.
KernelFactory findKernel(llvm::StringRef opName, ir::DeviceKind kind);

// Every op of `module` has a kernel on `kind`; otherwise an error at the first op without one,
// naming the op, the device and the model line.
llvm::Error checkKernels(const ir::Module &module, ir::DeviceKind kind);

// The error of a communication op's kernel (all_reduce, ps_pull, ...) built without the
// distributed runtime (spec.communication null), on any device.
llvm::Error noCommunication(const KernelSpec &spec);

} // namespace prism::runtime
