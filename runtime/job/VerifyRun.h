// `prism verify`'s runs and comparison: trains a plan distributed and the model on one device
// on the same data from the same initial values, and measures how far apart the losses and the
// variables end up (the correctness oracle of docs/parallelization.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/Module.h"
#include "ir/Precision.h"
#include "plan/plan.pb.h"
#include "runtime/Tensor.h"
#include "runtime/job/JobOptions.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::job {

// Steps compared when the plan does not say, and the relative difference accepted.
constexpr int64_t kDefaultVerifySteps = 20;
constexpr double kDefaultVerifyTolerance = 1e-5;

struct VerifyRunOptions {
  // How the distributed run runs (data, threads, launcher, heartbeat timeout); the steps are the
  // plan's, and the metrics and variables go to `workDir`.
  JobOptions job;
  // The single-device step runs the passes the plan's programs ran: the fusion passes or not.
  bool fuse = true;
  // ... and computes in the plan's precision.
  ir::ComputePrecision precision = ir::ComputePrecision::F32;
  // An existing directory for the plan file, both runs' metrics and the tasks' variables.
  std::string workDir;
};

// The largest relative difference ‖a − b‖∞ / ‖b‖∞ of the distributed value a from the
// single-device value b, and where it is.
struct LossComparison {
  double largest = 0;
  size_t step = 0; // 1-based; 0 when no step differs
  size_t steps = 0;
};
struct VariableComparison {
  double largest = 0;
  std::string variable;
  size_t variables = 0;
};

struct VerifyResult {
  LossComparison losses;
  VariableComparison variables;
  bool within(double tolerance) const {
    return losses.largest <= tolerance && variables.largest <= tolerance;
  }
};

// Runs the plan (its run config: steps, global batch, seed) on its tasks and `model` on one
// device, then compares them.
llvm::Expected<VerifyResult> verifyRun(const ir::Module &model, const plan::Plan &plan,
                                       const VerifyRunOptions &options);

// `prism verify --accumulate K` without a cluster: `steps` steps of `batch` on one device, each
// as K micro-batches, against the same steps with the whole batch at once (same data, same
// initial values). Metrics go to `workDir`.
struct AccumulationVerifyOptions {
  std::string data;
  int threads = 1;
  int64_t steps = kDefaultVerifySteps;
  int64_t batch = 64;
  int64_t accumulate = 2;
  uint64_t seed = 0;
  bool fuse = true;
  ir::ComputePrecision precision = ir::ComputePrecision::F32;
  std::string workDir;
};
llvm::Expected<VerifyResult> verifyAccumulation(const ir::Module &model,
                                                const AccumulationVerifyOptions &options);

// The pieces, each testable alone:
// The loss of each step, in order, from a trainer's JSON-lines metrics.
llvm::Expected<std::vector<double>> readLosses(llvm::StringRef metricsPath);
// ‖a − b‖∞ / ‖b‖∞ over the elements of two f32 or f64 tensors of one size.
double relativeDifference(const Tensor &a, const Tensor &b);
llvm::Expected<LossComparison> compareLosses(llvm::ArrayRef<double> distributed,
                                             llvm::ArrayRef<double> single);
llvm::Expected<VariableComparison>
compareVariables(const std::map<std::string, Tensor> &distributed,
                 const llvm::StringMap<Tensor> &single);
// A PS-held variable put together from its shards: `parts` holds each task's rows of it, its
// ranges one after another in row order (what a PS task stores).
llvm::Expected<Tensor> assembleShards(const plan::Variable &variable,
                                      const std::map<std::string, Tensor> &parts);
// The distributed run's variables from the directory its tasks wrote them to
// (JobOptions::variablesDir): worker:0's, and each PS-held one assembled from its shards.
llvm::Expected<std::map<std::string, Tensor>> collectVariables(const plan::Plan &plan,
                                                               llvm::StringRef dir);

} // namespace prism::runtime::job
