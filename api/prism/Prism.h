// The Prism library: load a model, compile it to a plan, train it step by step in a Session
// (your own loop: feed, step, fetch, save, restore), or run whole jobs as the `prism` command
// does. docs/library.md describes it; examples/custom_loop uses it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "prism/Status.h"
#include "prism/Tensor.h"

namespace prism::api {

// The version of the library (and of the `prism` command built with it).
const char *version();

// A shape dimension that is the batch size `B`, bound by each step's feeds.
constexpr int64_t kBatchDim = -1;

// A model's input or variable: name, dtype, shape (kBatchDim where the model says `B`).
struct ValueInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
};

// A model in Prism's IR: the forward graph, the loss and the optimizer, as the user wrote it
// (docs/ir.md), or its training step once compiled. Copies share the (immutable) module.
class Model {
public:
  // Parses a `.prism` file ("-": standard input). Errors name file:line:column.
  static Result<Model> load(const std::string &path);
  // Parses text; `file` is the name errors give it.
  static Result<Model> parse(const std::string &text, const std::string &file = "<string>");

  const std::string &name() const;
  std::vector<ValueInfo> inputs() const;
  std::vector<ValueInfo> variables() const;
  // The optimizer as the model declares it (`adam(lr = 0.001)`); empty when it has none or
  // once compiled.
  std::string optimizer() const;
  // The model in the text format (print and parse give the same model back).
  std::string text() const;

  // The model with its optimizer's lr scaled for `globalBatch` by `rule`: "none", or "linear"
  // (lr × globalBatch / baseBatch, Goyal et al.; `--lr-scale-rule linear --lr-base-batch`). A
  // schedule is kept: it is a factor of lr.
  Result<Model> scaledLearningRate(const std::string &rule, int64_t baseBatch,
                                   int64_t globalBatch) const;

  // The single-device training step: the passes infer-shapes, autodiff, lower-optimizer, cse,
  // dce, and with `fuse` the fusion passes. Sessions and train() compile a model that is not
  // compiled yet themselves; this is for looking at it, or for catching errors early.
  // `precision` "bf16" runs the mixed-precision pass last (matrix products and convolutions in
  // bf16, variables f32); "f32" does not.
  Result<Model> trainingStep(bool fuse = true, const std::string &precision = "f32") const;
  bool isTrainingStep() const;

  struct Impl;

private:
  explicit Model(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
  friend struct ModelAccess;
};

// How a model is compiled into a plan for many devices and hosts. An unset field takes the
// compiler's default (docs/parallelization.md); new settings of the pipeline join here.
struct CompileOptions {
  // A cluster file (YAML, JSON, Parallax's resource_info) or `local:N[,ps=M][,devices=D]`
  // (docs/cluster.md).
  std::string cluster = "local:1";
  // auto, hybrid, allreduce or ps; empty: auto (per variable, from predicted step times).
  std::string strategy;
  std::string replication;           // between-graph or in-graph; empty: between-graph
  std::optional<int64_t> partitions; // row ranges per PS table; 0: by size; unset: chosen
  std::optional<double> bucketMb;    // all-reduce fusion bucket size; unset: chosen
  // Time a few steps of each count of row ranges in the job and train with the fastest
  // (`--partitions search`; partitions is then unused); searchPartitions empty: 1, 2, 4, 8 up to
  // what the plan allows.
  bool partitionSearch = false;
  std::vector<int64_t> searchPartitions;
  std::optional<int64_t> searchSteps;         // timed steps per count; default 5
  std::optional<double> partitionThresholdMb; // split PS tables larger than this
  std::optional<int64_t> batch;               // global batch (all workers together)
  std::optional<int64_t> steps;               // steps the plan runs; 0: decided at run time
  std::optional<uint64_t> seed;               // initial values and data order
  bool fuse = true;                           // the fusion passes
  std::string precision;              // f32, bf16 or fp16 (matmuls, convolutions); empty: f32
  std::optional<int64_t> accumulate;  // micro-batches per optimizer step; 1: none
  std::string lrScaleRule;            // none or linear (lr × batch / lrBaseBatch)
  std::optional<int64_t> lrBaseBatch; // the batch the model's lr is for; default 128
  std::string compress;               // none, fp16 or bf16: gradients on the wire; empty: none
  bool errorFeedback = false;         // with compress: rounding errors carried to the next step
  std::string localAggregation; // auto, on or off (per host, docs/distributed.md); empty: auto

  // How workers wait for each other (docs/distributed.md, "Asynchronous training and backup
  // workers"): sync or async (PS pushes applied on arrival); empty: sync.
  std::string sync;
  std::optional<int64_t> maxStaleness;  // async: steps a worker may run ahead; unset: no bound
  std::optional<int64_t> backupWorkers; // sync: steps use the first workers - K gradients
  std::string elastic; // "MIN:MAX": elastic membership; empty: a lost worker aborts
  // A data set (as RunOptions::data) sampled for the rows a step reads from each PS table: the
  // estimate and the automatic choices weigh them; empty: uniform draws.
  std::string data;
  // The cost profile (`prism calibrate`) the automatic choices predict steps with; empty: the
  // machine's cached one, else the built-in one.
  std::string profile;
};

// A compiled plan: the cluster, the placement of every variable, each task's program. Copies
// share it.
class Plan {
public:
  // Reads and verifies a plan file (`prism partition -o`, Plan::save).
  static Result<Plan> load(const std::string &path);
  // Verifies and writes the plan (atomically); the plan remembers the path.
  Status save(const std::string &path) const;
  // The file it was loaded from or last saved to; empty when it has none.
  std::string path() const;

  const std::string &model() const;
  std::string strategy() const;    // hybrid, allreduce, ps, or auto (chosen per variable)
  std::string replication() const; // between-graph, in-graph
  int64_t globalBatch() const;
  // Task names (`worker:0`, `ps:1`, `coordinator`).
  std::vector<std::string> tasks() const;
  int workers() const;
  int parameterServers() const;
  // What `prism dump` prints: "text", "json" or "dot".
  Result<std::string> dump(const std::string &format = "text") const;

  struct Impl;

private:
  explicit Plan(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
  friend struct PlanAccess;
};

// Compiles `model` (as the user wrote it) into a plan; `prism partition` does the same.
Result<Plan> compile(const Model &model, const CompileOptions &options = {});

// How a session runs its steps. New settings of the single-device path join here.
struct SessionOptions {
  std::string device = "cpu:0";  // `cpu:0`, or `cuda:N` in builds with CUDA
  int threads = 1;               // CPU threads of the kernels
  uint64_t seed = 0;             // initial values (docs/runtime.md's seed rule)
  bool fuse = true;              // the fusion passes of the training step
  std::string precision = "f32"; // or bf16: matrix products and convolutions compute in bf16
  // Gradient accumulation: each step() runs the fed batch as this many micro-batches
  // (contiguous slices) and the optimizer steps once on their batch-weighted mean gradient:
  // the step of the whole batch, with one micro-batch's activations. A plan's session takes
  // the plan's count.
  int64_t accumulate = 1;
};

// One model training on one device, step by step, in the caller's loop:
//
//   auto session = Session::open(model);            // compiles the training step
//   session->feed("x", images); session->feed("y", labels);
//   Status s = session->step();                     // forward, backward, update
//   double loss = session->loss();
//   Result<Tensor> w = session->fetch("w1");
//   session->save("ckpt"); ... session->restore("ckpt");
//
// A session is movable, not copyable, and used by one thread at a time.
class Session {
public:
  static Result<Session> open(const Model &model, const SessionOptions &options = {});
  // A session of a plan's only worker: a plan of one worker and no parameter servers
  // (`local:1`, or in-graph towers on one worker: `local:1,devices=D` with in-graph
  // replication). It runs the worker's program, initialized from the plan's seed
  // (options.seed is not used). Plans of more tasks run through run() and runTask().
  static Result<Session> open(const Plan &plan, const SessionOptions &options = {});
  Session(Session &&) noexcept;
  Session &operator=(Session &&) noexcept;
  ~Session();

  const Model &model() const; // the compiled training step (or the worker's program)
  // Gives input `name` its value for the next step (or evaluate()). Checked here: the input
  // exists, the dtype and rank match, static dimensions agree.
  Status feed(const std::string &name, Tensor value);
  // One training step on the fed batch: every input must have been fed; `B` is bound from the
  // feeds. The feeds are consumed: the next step needs new ones. A step that fails in its
  // computation (a label out of range) updates no variable, since updates run last, and keeps
  // its feeds.
  Status step();
  // The loss of the last step; NaN before the first.
  double loss() const;
  // Steps done, with those before a restore.
  int64_t globalStep() const;
  // A copy of a variable's current value (weights and optimizer state, e.g. `w1`, `adam.step`).
  Result<Tensor> fetch(const std::string &variable) const;
  // Replaces a variable's value (same dtype and shape).
  Status assign(const std::string &variable, const Tensor &value);
  // Computes values of the model (e.g. `logits`, the loss) from the current feeds and
  // variables, without training: an evaluation step (dropout is the identity), nothing is
  // updated and the feeds stay.
  Result<std::map<std::string, Tensor>> evaluate(const std::vector<std::string> &values);

  // Writes every variable and the step count to DIR/checkpoint.prism (atomically), the format
  // of `prism train --save`.
  Status save(const std::string &dir) const;
  // Reads a checkpoint of this model back: variables and step count.
  Status restore(const std::string &dir);

  struct Impl;

private:
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Training over a data set with Prism's own loop (what `prism train` runs): progress on the
// terminal, test-set evaluation at epoch ends, metrics and checkpoints. Unset fields take the
// defaults of `prism train`.
struct TrainOptions {
  // A data spec (docs/data.md); empty: the one the model names (`data "..."`), else fashion-mnist.
  std::string data;
  std::optional<int64_t> epochs; // default 1 when neither is set
  std::optional<int64_t> steps;  // steps in all, across a restore
  std::optional<int64_t> batch;  // default 128
  std::optional<int> threads;    // default 1
  std::string device;            // empty: cpu:0
  bool tf32 = false;             // a GPU's float32 matrix products in TF32 (`--tf32`)
  bool cudaGraphs = false;       // a GPU's steps as CUDA graphs (`--cuda-graphs`)
  uint64_t seed = 0;
  std::string metricsOut; // JSON lines; empty: none
  std::string saveDir;    // empty: no checkpoint
  std::string restoreDir; // empty: start fresh
  // Periodic checkpoints: every checkpointEvery steps into checkpointDir/step-N, the newest
  // keepCheckpoints kept (default 3); with no restoreDir, training resumes from the newest.
  std::string checkpointDir;
  int64_t checkpointEvery = 0;
  std::optional<int64_t> keepCheckpoints;
  bool evaluate = true;
  bool quiet = false;
  std::string precision;             // f32, bf16 or fp16, for a model not compiled yet; empty: f32
  std::optional<int64_t> accumulate; // micro-batches per step; default 1 (none)
  // For a model not compiled yet: the scaling rule of its lr (none or linear, by `batch` over
  // lrBaseBatch, default 128).
  std::string lrScaleRule;
  std::optional<int64_t> lrBaseBatch;
};

struct TrainSummary {
  int64_t steps = 0;        // steps run by this call
  int64_t globalStep = 0;   // with those before a restore
  std::string restoredFrom; // the checkpoint it started from (restoreDir or the newest periodic)
  double lastLoss = 0;
  double samplesPerSec = 0;
  std::optional<double> testAccuracy;
  std::optional<double> testLoss;
  // Dynamic loss scaling (fp16, or the optimizer's loss_scale): the scale after the last step
  // and the steps skipped because their gradients were not finite. Unset without it.
  std::optional<double> lossScale;
  int64_t skippedSteps = 0;
  // Where the steps ran (`cpu:0`, `cuda:0`) and what they took there: the arena's peak and the
  // kernels' shared workspace in bytes, and the copies to and from the host over the run (none
  // on the CPU, whose memory is the host's).
  std::string device;
  int64_t arenaBytes = 0;
  int64_t workspaceBytes = 0;
  int64_t copiesToDevice = 0;
  int64_t bytesToDevice = 0;
  int64_t copiesToHost = 0;
  int64_t bytesToHost = 0;
  // The same as a line (`cuda:0: arena 1.2 MB, workspace ...; N copies to the device ...`),
  // then each other device of in-graph towers in the same form after "; "; empty on the CPU.
  std::string deviceReport;
};

Result<TrainSummary> train(const Model &model, const TrainOptions &options);

// Running a plan (what `prism run` and `prism task` take besides it). Unset fields take the
// defaults of `prism run`.
struct RunOptions {
  std::string data; // empty: the one the plan's model names (`data "..."`), else fashion-mnist
  std::optional<int64_t> steps; // default: the plan's steps, else one epoch
  std::optional<int64_t> epochs;
  std::optional<int> threads; // per task; default 1
  std::string metricsOut;     // worker:0's JSON lines; empty: none
  bool quiet = false;
  bool evaluate = true;
  // A command prefix for each task ({host}, {address} replaced); empty: local processes.
  std::string launcher;
  // The program each task runs as `PROGRAM task ...`: the installed `prism` (the package sets
  // PRISM_EXECUTABLE to it). Empty: this program, which must then be `prism` itself.
  std::string taskProgram;
  std::optional<int64_t> heartbeatTimeoutMs; // default 5000
  std::string variablesDir;                  // every task writes its variables here at the end
  std::string saveDir;                       // a checkpoint of the whole job at the end
  std::string restoreDir;                    // one to start from
  std::string jobToken;                      // empty: PRISM_JOB_TOKEN, else the plan's
  // Periodic checkpoints of the whole job (as TrainOptions'), and how often a job that lost a
  // task is restarted from the newest complete one (docs/distributed.md, "Recovery").
  std::string checkpointDir;
  int64_t checkpointEvery = 0;
  std::optional<int64_t> keepCheckpoints;
  int maxRestarts = 0;
  // TLS on every gRPC channel of the job (docs/security.md): tls makes a CA and a certificate
  // per task for this job; or the files, {task} standing for each task's file name (worker-0).
  bool tls = false;
  std::string tlsCa, tlsCert, tlsKey;
  // Every task writes its timeline here, DIR/<task>.json (Chrome trace events; `prism trace
  // merge` joins them); empty: none.
  std::string traceDir;
  // GPU workers' float32 matrix products in TF32 (`--tf32`); an error for a CPU worker.
  bool tf32 = false;
  // GPU workers' steps as CUDA graphs (`--cuda-graphs`); an error for a CPU worker.
  bool cudaGraphs = false;
};

// Starts every task of the plan (local processes, or through options.launcher) and watches
// them until the job ends; a plan without a path is written to a temporary file first (the
// tasks read it). Each task is a process of options.taskProgram.
Status run(const Plan &plan, const RunOptions &options);
// Runs one task of the plan (`worker:1`, `ps:0`) in this process against the coordinator at
// `coordinator` (host:port). The task's exit status.
Result<int> runTask(const Plan &plan, const std::string &task, const std::string &coordinator,
                    const RunOptions &options);
// The same from a `prism task` command line (the arguments after `prism task`).
Result<int> runTaskCommand(const std::vector<std::string> &args);

} // namespace prism::api
