// The compile pipelines, each written once: the passes that turn a user's model into its
// single-device training step (`prism train`, and the run `prism verify` compares with), and the
// parallelizing pipeline the partitioner runs (`prism partition`, `train --cluster`, `verify`,
// bench/compile).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/Module.h"
#include "ir/Precision.h"
#include "passes/ParallelizeOptions.h"
#include "passes/Pass.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::plan {

// Every pass's statistics, in pipeline order (for `--stats`): pass name, statistic.
using PassStatistics = std::vector<std::pair<std::string, passes::Pass::Statistic>>;

// Runs `pipeline` (pass names, comma-separated) with those of `options` its passes read, and
// appends each pass's statistics to `statistics` when given. The module is verified once at the
// end (`prism opt` verifies after every pass), unless `verify` is false: a caller that runs
// several pipelines, or verifies the result itself, verifies once.
llvm::Error runPipeline(ir::Module &module, llvm::StringRef pipeline,
                        const passes::PassOptions &options = {},
                        PassStatistics *statistics = nullptr, bool verify = true);

// The single-device training step: infer-shapes, autodiff, lower-optimizer, cse, dce, and with
// `fuse` the fusion passes (fuse-bias-activation, fuse-elementwise).
std::string trainingPipeline(bool fuse = true);
llvm::Error compileTrainingStep(ir::Module &module, bool fuse = true,
                                PassStatistics *statistics = nullptr);

// What the single-device training step takes besides the model.
struct TrainingStepOptions {
  bool fuse = true; // the fusion passes at the end
  // Below f32, mixed-precision runs last: matrix products and convolutions compute in it;
  // fp16 also has lower-optimizer add dynamic loss scaling.
  ir::ComputePrecision precision = ir::ComputePrecision::F32;
};
llvm::Error compileTrainingStep(ir::Module &module, const TrainingStepOptions &options,
                                PassStatistics *statistics = nullptr);

// What the parallelizing pipeline takes besides the model.
struct ParallelPipelineOptions {
  passes::ReplicateOptions replicate;      // worker tasks, and towers in each (in-graph)
  passes::PlaceVariablesOptions placement; // strategy, PS tasks, row partitions
  passes::RouteGradientsOptions routing;   // all-reduce bucket size
  bool fuse = true;                        // the fusion passes at the end
  ir::ComputePrecision precision = ir::ComputePrecision::F32; // mixed-precision when below f32
  bool verify = true; // the result, once; false for a caller that verifies what it makes of it
};

// The parallelizing pipeline: the training step (unfused), classify-variables,
// replicate-in-graph (more than one tower), replicate-between-graph, place-variables,
// route-gradients, with `fuse` the fusion passes, and below f32 mixed-precision. A strategy that
// puts variables on parameter servers when there are none is an error naming the variable and the
// way out.
llvm::Error parallelize(ir::Module &module, const ParallelPipelineOptions &options,
                        PassStatistics *statistics = nullptr);

} // namespace prism::plan
