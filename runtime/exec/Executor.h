// The executor: runs a module one training (or evaluation) step at a time on a device (and its
// in-graph towers each on a device of its own, where asked), with the kernels registered for
// that device. Per batch size it builds a program once: kernels with concrete shapes, and an
// arena of memory per device whose offsets are planned from value lifetimes (a buffer is reused
// once its last reader ran). Every op's kernel is checked when the executor is created, so a
// model the device cannot run fails before its first step.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/Device.h"
#include "ir/Module.h"
#include "runtime/Tensor.h"
#include "runtime/exec/Communication.h"
#include "runtime/exec/Device.h"
#include "runtime/exec/Kernel.h"
#include "runtime/exec/MemoryPlanner.h"
#include "runtime/exec/Trace.h"
#include "runtime/exec/VariableStore.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

namespace prism::runtime {

struct ExecutorOptions {
  // The device the program runs on; `cpu:0` unless the plan says otherwise. Variables live on
  // it, and the ops not in a tower run there.
  ir::DeviceId device;
  // In-graph towers on devices of their own (a worker's GPUs): tower t's ops run on
  // towerDevices[t], of `device`'s kind, one per tower of the module. A value an op reads on
  // another device is copied there before its first reader (a feed from the host straight to
  // each device that reads it; a variable each step, as it is then). Empty: every tower on
  // `device` (towers on the CPU share its threads).
  std::vector<ir::DeviceId> towerDevices;
  int threads = 1;
  // Values to compute and keep after a step (e.g. `logits` for evaluation). When non-empty,
  // only the ops these need run, and no variable is written.
  std::vector<std::string> outputs;
  // What the kernels see: training, or evaluation (dropout is then the identity). Evaluation
  // on held-out data (the trainer's test accuracy, Session::evaluate) sets Evaluation.
  StepMode mode = StepMode::Training;
  // The run's seed: random ops (dropout) draw from it (runtime/DropoutMask.h).
  uint64_t seed = 0;
  // The task's links to other tasks, for communication ops (runtime/job); must outlive the
  // executor.
  Communication *communication = nullptr;
  // Gradient accumulation: the training step is split into a micro-step and a step part
  // (AccumulationSplit.h) and runs through accumulatedStep(); an evaluation step (`outputs`)
  // ignores it.
  bool accumulate = false;
  // Records each op's kernel (and waits for all-reduces) on the track "ops" when set
  // (`--trace`); must outlive the executor.
  TraceRecorder *trace = nullptr;
  // A GPU's float32 matrix products on its tensor cores in TF32 (10-bit mantissas in, float32
  // sums; `--tf32`): faster, less exact. An error on a CPU device.
  bool tf32 = false;
  // Steps as CUDA graphs (`--cuda-graphs`): from a program's second step on, each run of ops
  // whose kernels can be recorded (Kernel::notCapturable) is recorded once and replayed, one
  // launch instead of one per kernel; the ops between run as they do (captureReport says which
  // and why). Recorded again when what they read or write moved. Not with `trace` (which times
  // each op) or `accumulate`. An error on a device that cannot capture (the CPU).
  bool captureSteps = false;
};

using Feeds = std::map<std::string, Tensor>;

class Executor {
public:
  // Makes the device and checks that it has a kernel for every op the step runs. The module
  // must outlive the executor.
  static llvm::Expected<std::unique_ptr<Executor>> create(const ir::Module &module,
                                                          std::shared_ptr<VariableStore> variables,
                                                          ExecutorOptions options = {});
  ~Executor();

  // One step: binds B from the feeds, runs the ops, applies variable updates at the end.
  llvm::Error step(const Feeds &feeds);

  // One optimizer step over micro-batches (ExecutorOptions::accumulate): the micro-step on each
  // (an arena planned for its size, so activations are those of one micro-batch), the values
  // the step part reads averaged over them by batch size, then the step part once. Equal to
  // step() on the micro-batches concatenated, up to float rounding.
  llvm::Error accumulatedStep(llvm::ArrayRef<Feeds> microBatches);

  // The examples of the next steps over the whole job (every worker's share): a worker's
  // trainer sets it before each step. Unset (0), a step's global batch is its own examples (all
  // its micro-batches). The `batch_share` op reads it.
  void setGlobalBatch(int64_t examples) { globalBatchOverride_ = examples; }
  // Where this task's examples of the next steps start within the global batch (a worker's
  // shard, as the data sharding gives it); 0 unless set. Micro-batches and towers add their
  // own offsets to it. Random ops key their draws on the global example index.
  void setExampleOffset(int64_t offset) { exampleOffset_ = offset; }
  // The number of the next step (optimizer steps done before it): the trainer sets it from its
  // position, so that a restored run draws what an uninterrupted one would. Otherwise the
  // executor counts its training steps from 0.
  void setStepNumber(int64_t step) { context_.step = step; }

  // The loss of the last step (modules with a loss).
  std::optional<double> loss() const { return loss_; }
  // A kept output (ExecutorOptions::outputs) of the last step, on the executor's device.
  const RuntimeValue *output(llvm::StringRef name) const;
  // A dense kept output of the last step in host memory: a counted copy from a GPU, the tensor
  // itself on the CPU.
  llvm::Expected<Tensor> fetch(llvm::StringRef name);
  // On a device other than the CPU, variables live in its memory: a step uploads those the store
  // holds on the host (once: the store then holds the device's copy). This brings them back, the
  // store holding host copies again (counted), for checkpoints and the trained result. On the
  // CPU it does nothing.
  llvm::Error variablesToHost();
  // With captureSteps: how the last step's program ran, "12 of 14 ops in 2 CUDA graphs,
  // recorded 2 and replayed 18 times; not captured: all_reduce %loss (it communicates through
  // host memory), ..."; empty otherwise.
  std::string captureReport() const;
  // The choices the last program's kernels made by shape (Kernel::choice), counted: "convolution
  // passes through cuDNN's implicit GEMM (2), convolution passes on patch matrices (2)"; empty
  // where none chose.
  std::string kernelChoices() const;
  // The largest arena planned so far, in bytes (activations and gradients of one step): on
  // `device`, or on all the program's devices together.
  size_t arenaBytes(const Device *device = nullptr) const;
  VariableStore &variables() { return *variables_; }
  Device &device() { return *device_; }
  // Every device the program runs on: `device` first, then the towers' others.
  std::vector<Device *> devices() const;

private:
  struct Program;
  Executor(const ir::Module &module, std::shared_ptr<VariableStore> variables,
           ExecutorOptions options, std::unique_ptr<Device> device);
  llvm::Error createTowerDevices(const DeviceOptions &options);
  llvm::Error checkCapture() const;
  Device &deviceOf(const ir::Op &op) const;
  Device &homeOf(const ir::Value *v) const;
  void planMirrors(Program &program);
  llvm::Error allocateMirrors(Program &program);
  llvm::Error copyMirrors(Program &program, size_t op);
  llvm::Error selectOps();
  llvm::Error selectEvaluationOps();
  void markSynchronization();
  llvm::Expected<int64_t> bindBatch(const Feeds &feeds) const;
  llvm::Expected<Program *> programFor(int64_t batch);
  using LastUse = std::function<int(const ir::Value *, int)>;
  void requestBuffers(Program &program, Device *device, const LastUse &lastUseOf,
                      const llvm::DenseSet<const ir::Value *> &kept,
                      std::vector<BufferRequest> &requests,
                      std::vector<std::pair<const ir::Value *, size_t>> &planned);
  llvm::Error planArena(Program &program);
  llvm::Error buildKernels(Program &program);
  llvm::Error bindFeedsAndVariables(Program &program, const Feeds &feeds);
  static llvm::Error bindFeed(Device &device, Tensor &slot, const Tensor &feed);
  llvm::Error runKernels(Program &program, size_t begin, size_t end, bool capture = false);
  llvm::Error checkRan(Program &program, std::vector<size_t> &unchecked);
  llvm::Error awaitCommunication(Program &program);
  void abandonCommunication(Program &program);
  llvm::Error beforeOp(Program &program, size_t i, bool checkFirst, std::vector<size_t> &unchecked);
  void planSegments(Program &program);
  llvm::Expected<bool> runSegment(Program &program, size_t segment);
  llvm::Error readLoss(Program &program);
  void countStep();
  llvm::Error selectAccumulationOps();
  llvm::Error addMicroBatch(Program &program, int64_t batch);
  llvm::Error writeMeans(Program &program, int64_t examples);
  ir::TensorType boundType(const ir::Value *v, int64_t batch) const;
  std::string traceName(const ir::Op &op) const;

  const ir::Module &module_;
  std::shared_ptr<VariableStore> variables_;
  ExecutorOptions options_;
  std::unique_ptr<Device> device_;
  std::vector<std::unique_ptr<Device>> otherDevices_; // towers' devices other than device_
  std::vector<Device *> towerDevice_;                 // by tower; empty: all on device_
  std::vector<const ir::Op *> order_; // ops to run: compute first, then variable writes
  int64_t towers_ = 1;                // in-graph towers: ops pinned to device index i
  std::vector<bool> syncBefore_;      // parallel to order_: reads an all-reduce's results
  std::vector<bool> checkBefore_;     // parallel to order_: writes state or communicates
  std::map<int64_t, std::unique_ptr<Program>> programs_;
  std::optional<double> loss_;
  int64_t globalBatchOverride_ = 0;
  int64_t globalBatch_ = 0; // this step's (KernelSpec::globalBatch points here)
  int64_t exampleOffset_ = 0;
  StepContext context_; // this step's, or micro-batch's (KernelSpec::step points here)
  llvm::StringMap<const ir::Value *> outputValues_;
  Program *last_ = nullptr;
  std::vector<std::string> traceNames_; // parallel to order_, made at the first traced step
  // Gradient accumulation: order_[0, microEnd_) is the micro-step; the values it hands to the
  // step part, and their running sums Σ bᵢ vᵢ (dense; sparse: indices and rows appended).
  struct Accumulator {
    std::vector<double> sum;
    std::vector<int64_t> indices;
    std::vector<double> rows;
  };
  bool accumulating_ = false; // a training step with ExecutorOptions::accumulate
  size_t microEnd_ = 0;
  std::vector<const ir::Value *> accumulated_, keptAcrossMicroBatches_;
  std::vector<Accumulator> accumulators_;
};

} // namespace prism::runtime
