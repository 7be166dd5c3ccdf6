// One task of a plan in its own process (`prism task`): registers with the coordinator, then
// trains (a worker) or serves and updates its shards (a parameter server).
#pragma once

#include <string>

#include "plan/plan.pb.h"
#include "runtime/job/JobOptions.h"
#include "llvm/ADT/StringRef.h"

namespace prism::runtime::job {

// Runs task `task` of `plan` against the coordinator at `coordinator` (host:port). Returns the
// process exit code; errors go to stderr and to the coordinator (which stops the job). With
// `options.join` the task is a new worker of an elastic job (`task` is ignored): the coordinator
// names it, and it runs with the job's flags.
// A plan made with --partitions search (plan/PartitionSearch.h) refuses what a restart or a
// late joiner would need from a search it did not see: --restore, periodic checkpoints, --join.
llvm::Error checkPartitionSearchRun(const plan::Plan &plan, const JobOptions &options);
// With --partitions search and JobOptions::variablesDir: the file there that worker:0 writes the
// chosen count to (prism verify puts the PS variables together from that count's shards).
inline constexpr const char *kPartitionSearchChoiceFile = "partition-search";

int runTask(const plan::Plan &plan, llvm::StringRef task, const std::string &coordinator,
            const JobOptions &options);

} // namespace prism::runtime::job
