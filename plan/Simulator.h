// The step simulator: replays one training step of a plan over a cost profile
// (plan/CostProfile.h) and predicts its time, each task's busy and idle time, and the bytes on
// each host's link. docs/simulate.md describes the model and what it leaves out.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/Module.h"
#include "plan/CostProfile.h"
#include "plan/plan.pb.h"
#include "llvm/Support/Error.h"

namespace prism::plan {

// One predicted span of a task's step, for the trace (`prism simulate --trace-out`): the tracks
// and categories are those of measured traces (runtime/exec/Trace.h).
struct SimulatedSpan {
  std::string task;
  std::string track;         // "steps", "ops", "all-reduce", "ps", "apply"
  std::string name;          // "step 0", "matmul %h1", "bucket 0", "pull emb", "apply step 0"
  std::string category;      // "step", "op", "all_reduce", "ps_pull", "ps_pull_rows", ...
  double begin = 0, end = 0; // seconds from the step's start
  double bytes = 0;          // moved, for communication spans
};

struct TaskPrediction {
  std::string task;
  double computeSeconds = 0;       // kernels (workers) or updates (parameter servers)
  double communicationSeconds = 0; // all-reduce stream and PS calls (workers)
  double idleSeconds = 0;          // the step's time the task's timeline was not busy
  double bytesSent = 0, bytesReceived = 0;
};

struct LinkPrediction {
  std::string host;
  double bytesOut = 0, bytesIn = 0; // to and from other hosts per step
  double busySeconds = 0;           // on its link (0 on loopback hosts)
};

struct Prediction {
  double stepSeconds = 0;
  double samplesPerSecond = 0;
  int64_t globalBatch = 0;
  // The CPU workers' kernels' time over the median step's, for the slowest worker a synchronous
  // step waits for (the profile's step spread; 1: none).
  double slowestWorkerRatio = 1;
  std::vector<TaskPrediction> tasks; // workers, then parameter servers, by index
  std::vector<LinkPrediction> links; // by host
  std::vector<SimulatedSpan> spans;
};

struct SimulateOptions {
  // Record Prediction::spans (the predicted trace). Off, a thousand workers' step takes a
  // fraction of the memory and time: a span per op and worker is most of both.
  bool spans = true;
};

// The quantile of one worker's step time at which the median of the k-th fastest of n workers'
// steps lies (P(at least k of n below it) = 1/2): 0.5^(1/n) for the slowest, k = n.
double orderStatisticQuantile(int64_t k, int64_t n);

// Predicts a step of `plan` whose worker program is `worker` (the partitioner's module, or the
// plan's program parsed).
llvm::Expected<Prediction> simulateStep(const Plan &plan, const ir::Module &worker,
                                        const CostProfile &profile,
                                        const SimulateOptions &options = SimulateOptions());
// The same, parsing the plan's programs.
llvm::Expected<Prediction> simulateStep(const Plan &plan, const CostProfile &profile,
                                        const SimulateOptions &options = SimulateOptions());

} // namespace prism::plan
