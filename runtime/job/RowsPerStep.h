// Rows per step measured on a data set: how many distinct rows of each PS table a worker reads in
// a step, sampled from the batches it would train on, for the plan's estimate (`prism partition
// --data`). Separate from prism_plan because it reads data sets (runtime/data).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "cluster/Cluster.h"
#include "ir/Module.h"
#include "plan/CommunicationCost.h"
#include "plan/Partitioner.h"
#include "plan/plan.pb.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::job {

// Global batches sampled, at most.
constexpr int64_t kRowsPerStepSamples = 20;

// The inputs whose ids the worker's row pulls read (through tower slices to the input).
std::set<std::string> rowPullIdInputs(const ir::Module &worker);

// The mean distinct ids per input that worker:0's share of the first `batches` global batches
// holds in those inputs (with `workers` > 1: the shares of workers 0 .. workers-1 together, as a
// host's leader pulls them); none when the worker pulls no rows or the data has no batch.
llvm::Expected<std::optional<double>>
sampleRowsPerStep(const plan::Plan &plan, const ir::Module &worker, llvm::StringRef dataSpec,
                  int64_t batches = kRowsPerStepSamples, int64_t workers = 1);

// How the distinct ids of worker:0's share of the first `batches` global batches fall over each
// PS table it pulls rows of: their shares of kRowShareRanges equal ranges of the table's rows
// (plan::TableEstimate.row_shares). Skewed ids (a Zipf law's) crowd the first ranges, and so the
// first of the table's row ranges on the parameter servers. Tables whose ids the sample lacks
// have no entry.
constexpr size_t kRowShareRanges = 64;
llvm::Expected<plan::RowShares> sampleRowShares(const plan::Plan &plan, const ir::Module &worker,
                                                llvm::StringRef dataSpec,
                                                int64_t batches = kRowsPerStepSamples);

// Estimates the plan again with the rows per step sampled from `dataSpec`; its tables' source
// reads "sampled from SPEC". Whether it did: a plan whose workers pull no rows stays as it was.
llvm::Expected<bool> estimateRowsFromData(plan::Plan &plan, llvm::StringRef dataSpec);

// Partitions `model` with the rows per step sampled from `dataSpec` (unless options.rowsPerStep
// gives them): the automatic choices weigh a hybrid plan's sampled rows, and the plan's estimate
// is made from its own (estimateRowsFromData). An empty `dataSpec` partitions as given.
llvm::Expected<plan::PartitionResult> partitionWithData(std::unique_ptr<ir::Module> model,
                                                        const cluster::Cluster &cluster,
                                                        plan::PartitionOptions options,
                                                        llvm::StringRef dataSpec);

} // namespace prism::runtime::job
