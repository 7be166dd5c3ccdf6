// Automatic choices (`--strategy auto`, `--partitions auto`, `--bucket-mb auto`): the partitioner
// compiles candidate plans, predicts each one's step with the simulator (plan/Simulator.h) over a
// cost profile, and keeps the fastest. Each decision, with the predicted step of every
// alternative, goes into the plan (Plan.decisions), where `prism partition --explain` and
// `prism dump` show it. docs/parallelization.md describes the search.
#pragma once

#include "cluster/Cluster.h"
#include "ir/Module.h"
#include "plan/Partitioner.h"
#include "plan/plan.pb.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::plan {

// An alternative must predict a step this much shorter than the choice it would replace (today's
// default, or the placement so far) to be taken: predictions closer than that are within the
// simulator's error (11.5% median on loopback) and within the spread of one plan's measured
// steps between runs on a shared machine (5–8%), and a stable choice is worth more than a guess.
constexpr double kDecisionMargin = 0.05;

// Each candidate is a pass through the pipeline and a simulated step of every worker: past this
// many ops in the model as written (about a second per candidate), or this many ops times
// workers, the defaults are kept instead of searching (the plan's decisions say so).
constexpr size_t kSearchedOps = 20000;
constexpr double kSearchedOpsTimesWorkers = 1e7;
inline bool searchable(const ir::Module &model, int64_t workers) {
  const double ops = static_cast<double>(model.ops().size());
  return ops <= kSearchedOps && ops * static_cast<double>(workers) <= kSearchedOpsTimesWorkers;
}

// Partitions `model` with the choices `options.automatic` names made by prediction; the others
// are as given. Errors are those of the partitioner (the default choice's, when no candidate
// compiles).
llvm::Expected<PartitionResult> partitionAutomatically(const ir::Module &model,
                                                       const cluster::Cluster &cluster,
                                                       const PartitionOptions &options);

// The plan's decisions for a person: each subject, the choice and why, then every alternative
// with its predicted step (and how much slower it is than the choice), or why it was refused.
// Nothing when the plan has no decisions.
void printDecisions(const Plan &plan, llvm::raw_ostream &os);

} // namespace prism::plan
