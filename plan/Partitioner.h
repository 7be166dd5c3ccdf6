// The partitioner: compiles a user's model for a cluster. It runs the parallelizing pipeline
// (plan/Pipeline.h), splits the routed module into one program per task, and emits the plan with
// its estimate. The plan is verified before it is returned.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cluster/Cluster.h"
#include "ir/Module.h"
#include "passes/ParallelizeOptions.h"
#include "plan/CommunicationCost.h"
#include "plan/CostProfile.h"
#include "plan/LearningRateScaling.h"
#include "plan/LocalAggregation.h"
#include "plan/PartitionSearch.h"
#include "plan/Pipeline.h"
#include "plan/Synchronization.h"
#include "plan/plan.pb.h"
#include "llvm/Support/Error.h"

namespace prism::plan {

// The choices the partitioner makes itself with the simulator (plan/AutoParallel.h):
// `--strategy auto`, `--partitions auto`, `--bucket-mb auto`.
struct AutomaticChoices {
  bool strategy = false, partitions = false, bucketMb = false;
  bool any() const { return strategy || partitions || bucketMb; }
};

struct PartitionOptions {
  // The parallelizing passes' options, with their defaults (passes/ParallelizeOptions.h);
  // placement.psTasks is the cluster's, set by the partitioner.
  passes::PlaceVariablesOptions placement;
  passes::RouteGradientsOptions routing;
  int64_t globalBatch = 64;
  int64_t steps = 0;
  uint64_t seed = 0;
  int64_t accumulate = 1; // micro-batches per optimizer step (gradient accumulation)
  // Distinct rows a worker reads per step from each PS table; unset: estimated as uniform draws.
  std::optional<double> rowsPerStep;
  // How a PS table's rows of a step fall over its rows (TableEstimate.row_shares, sampled from
  // data); a table without an entry has them spread as its rows are.
  RowShares rowShares;
  LearningRateScaling lrScaling; // --lr-scale-rule, --lr-base-batch
  bool fuse = true;              // run the fusion passes on the programs
  // Matrix products and convolutions compute in this (mixed-precision); variables stay f32.
  ir::ComputePrecision precision = ir::ComputePrecision::F32;
  // Gradients (and pulled rows) on the wire: f32, or fp16/bf16 (--compress), optionally with
  // error feedback.
  ir::ComputePrecision compress = ir::ComputePrecision::F32;
  bool errorFeedback = false;
  // Local aggregation per host (--local-aggregation; plan/LocalAggregation.h).
  LocalAggregationMode localAggregation = LocalAggregationMode::Auto;
  // --sync, --max-staleness, --backup-workers. Backup workers put every trained variable on the
  // parameter servers (--strategy allreduce is refused with them).
  Synchronization synchronization;
  // Elastic membership (--elastic MIN:MAX): the job goes on with MIN to MAX workers; 0: off.
  int32_t elasticMin = 0, elasticMax = 0;
  std::string jobToken; // empty: a fresh random token
  // What the partitioner chooses itself, and the cost profile it predicts steps with (null: the
  // machine's cached one from `prism calibrate`, else the built-in one).
  AutomaticChoices automatic;
  std::shared_ptr<const CostProfile> profile;
  std::string profileSource; // where `profile` came from, for the plan's decisions
  // --partitions search: the plan carries a candidate per partition count, and the job times
  // them before training with the fastest (placement.partitions is then unused).
  std::optional<PartitionSearchOptions> partitionSearch;
};

struct PartitionResult {
  Plan plan;
  PassStatistics statistics; // every pass's, in pipeline order (for `--stats`)
  // The modules plan.programs' texts were printed from, in the same order.
  std::vector<std::unique_ptr<ir::Module>> programs;
};

// `model` is the user's module (forward, loss, optimizer). Errors name the option, the cluster
// or the model location at fault.
llvm::Expected<PartitionResult> partition(const ir::Module &model, const cluster::Cluster &cluster,
                                          const PartitionOptions &options);
// The same, consuming `model` (no copy of it is made: on a large model the copy is a few
// percent of the time).
llvm::Expected<PartitionResult> partition(std::unique_ptr<ir::Module> model,
                                          const cluster::Cluster &cluster,
                                          const PartitionOptions &options);

} // namespace prism::plan
