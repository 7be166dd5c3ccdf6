// Single-device training: runs a lowered training module over a data set for some epochs or
// steps, evaluates on the test split at each epoch end, reports progress and metrics, and saves
// or restores checkpoints.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/Module.h"
#include "runtime/data/DataSpec.h"
#include "runtime/exec/Communication.h"
#include "runtime/exec/Executor.h"
#include "runtime/train/Checkpoint.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::train {

// Where a worker stands after its group changed (elastic membership): its rank among how many
// workers, and the step they go on from.
struct Membership {
  int64_t rank = 0;
  int64_t workers = 1;
  int64_t step = 0;
};

// What makes a training run one worker of a distributed job (runtime/job sets it): the
// worker's shard of each global batch, its links to the other tasks, and calls around steps.
struct WorkerRole {
  int64_t rank = 0;
  int64_t workers = 1;
  runtime::Communication *communication = nullptr;
  // Before each step: the step's number (from 0), this worker's examples and all workers'.
  std::function<llvm::Error(int64_t step, int64_t examples, int64_t globalExamples)> beforeStep;
  // After each step (its number): e.g. sends what the step pushed to the parameter servers.
  std::function<llvm::Error(int64_t step)> afterStep;
  // After afterStep: the step to go on with; one past the step just run, or later when the
  // step's push was dropped (backup workers) and the job moved on. The steps in between are
  // skipped: their batches are not trained on by this worker. Null: always the next.
  std::function<int64_t()> resumeAt;
  // After each step's afterStep: whether the job has trained enough, given the steps this
  // worker would run by itself (asynchronous workers run more or fewer). Null: after those.
  std::function<bool(int64_t steps)> trainedEnough;
  // After the last step's afterStep, before its evaluation (e.g. until the other workers are
  // done, so that the evaluation sees the final variables). Null: nothing.
  std::function<llvm::Error()> afterLastStep;
  // Counters added to each step's metrics line (e.g. bytes sent this step), by name.
  std::function<std::vector<std::pair<std::string, double>>()> stepMetrics;
  // Elastic membership (runtime/job/ElasticWorker.h). Before each step (`steps` done): the new
  // membership when the group changed there (a worker joined), with `store` at its step; none
  // when it did not.
  std::function<llvm::Expected<std::optional<Membership>>(int64_t steps,
                                                          runtime::VariableStore &store)>
      atStepBoundary;
  // After a step that failed (`steps` done before it): the membership without the lost worker,
  // with `store` at the step it goes on from, or an error (the step's own when no worker was
  // lost). Unset: a failed step ends training.
  std::function<llvm::Expected<Membership>(llvm::Error failure, int64_t steps,
                                           runtime::VariableStore &store)>
      afterFailedStep;
  // Progress, metrics and evaluation are this worker's only while its rank is 0 (the rank
  // changes with the membership); otherwise the options alone decide.
  bool rankZeroReports = false;
  // A worker joining a running job: it has no rank (and reports nothing) until atStepBoundary
  // gives it its first membership.
  bool joining = false;
};

struct TrainOptions {
  data::DataSpec data;
  std::optional<int64_t> epochs; // default 1 when neither is given
  std::optional<int64_t> steps;  // total steps, across a restore
  int64_t batchSize = 128;
  // Gradient accumulation: each step's batch (a worker's share of it) runs as this many
  // micro-batches, contiguous slices in order, and the optimizer steps once on their
  // batch-weighted mean gradient: the same step as one batch, with one micro-batch's activations.
  int64_t accumulate = 1;
  int64_t evalBatchSize = 1000;
  ir::DeviceId device; // where the steps run (cpu:0 by default)
  // In-graph towers each on a device of its own (ExecutorOptions::towerDevices); empty: on
  // `device`.
  std::vector<ir::DeviceId> towerDevices;
  bool tf32 = false;       // a GPU's float32 matrix products in TF32 (ExecutorOptions::tf32)
  bool cudaGraphs = false; // a GPU's steps as CUDA graphs (ExecutorOptions::captureSteps)
  int threads = 1;
  uint64_t seed = 0;
  std::string metricsOut; // JSON lines; empty: none
  std::string saveDir;    // empty: no checkpoint
  std::string restoreDir; // empty: start fresh
  // Every `checkpointEvery` steps (when the step count is a multiple of it), `checkpoint` is
  // called with the position and the variables (it writes them: see CheckpointDir.h).
  int64_t checkpointEvery = 0;
  std::function<llvm::Error(const TrainingPosition &, const llvm::StringMap<Tensor> &)> checkpoint;
  // The timeline (`--trace`): each step, its batch's loading and its ops; null: none.
  runtime::TraceRecorder *trace = nullptr;
  bool evaluate = true; // test-set evaluation at epoch ends and at the end
  bool quiet = false;   // no progress output
  // Set for a worker of a distributed run: batches are global, this worker trains on its
  // shard (the last, smaller batch of an epoch is dropped so every worker has examples).
  const WorkerRole *worker = nullptr;
};

// Where a run's steps ran and what they took there: the training executor's device, its memory
// (the arena's peak and the kernels' shared workspace) and its copies to and from the host over
// the run (feeds, variables on the way in and out, PS calls, accumulated micro-steps).
struct DeviceUse {
  ir::DeviceId device;
  int64_t steps = 0;
  size_t arenaBytes = 0;
  size_t workspaceBytes = 0;
  runtime::CopyCounters copies;
  std::string capture; // with --cuda-graphs: Executor::captureReport
  std::string kernels; // the kernels' choices by shape: Executor::kernelChoices
};

// "cuda:0: arena 12.3 MB, workspace 8.4 MB; 601 copies to the device (74.9 MB) and 4 to the host
// (1.3 MB) in 200 steps", for a device other than the CPU, with ", 400 from other devices (...)"
// where towers on other devices sent it values, with --cuda-graphs "; captured: 6 of 6 ops in 2
// CUDA graphs, ...", and "; kernels: convolution passes through cuDNN's implicit GEMM (2), ..."
// where kernels chose by shape; empty on the CPU (its memory is the host's: nothing is copied).
std::string describeDeviceUse(const DeviceUse &use);

struct TrainResult {
  int64_t steps = 0;        // steps run by this call
  int64_t globalStep = 0;   // steps done in all, with those before a restore
  double lastLoss = 0;      // the loss of the last step
  double samplesPerSec = 0; // over this call
  std::optional<double> testAccuracy;
  std::optional<double> testLoss;
  size_t peakArenaBytes = 0; // the training step's activation and gradient memory
  std::shared_ptr<runtime::VariableStore> store; // the variables after training
  DeviceUse device;                              // where the steps ran, and what it took there
  std::vector<DeviceUse> towerDevices;           // in-graph towers' devices other than `device`
};

// describeDeviceUse of each device the run's steps used, the training device first (in-graph
// towers' others after it); none on the CPU.
std::vector<std::string> describeDevices(const TrainResult &result);

// A batch of `size` examples as `parts` micro-batches: contiguous slices, in order, the first
// size % parts one example longer (runtime/BatchSplit.h); empty ones are left out.
std::vector<runtime::Feeds> microBatches(const runtime::Feeds &batch, int64_t size, int64_t parts);

// An error unless `accumulate` micro-batches per step fit the batch: at least 1, and at most
// each worker's share of `batchSize` (the smallest share; no micro-batch may be empty).
llvm::Error checkAccumulation(int64_t accumulate, int64_t batchSize, int64_t workers = 1);

// `module` is a training module after infer-shapes, autodiff and lower-optimizer: a loss and
// variable updates. Its inputs are fed from the data set's fields by name (see docs/data.md).
llvm::Expected<TrainResult> train(const ir::Module &module, const TrainOptions &options);

} // namespace prism::runtime::train
