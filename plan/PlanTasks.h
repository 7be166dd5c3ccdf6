// Questions about a plan's tasks that the runtime and the tools ask: find one, count a role,
// whether the job stays on loopback, the job's token, a task's name as a file name, its GPUs.
#pragma once

#include <string>
#include <vector>

#include "plan/plan.pb.h"
#include "llvm/ADT/StringRef.h"

namespace prism::plan {

// By name ("worker:1"); null when the plan has none.
const Task *findTask(const Plan &plan, llvm::StringRef name);
// The tasks of a role ("worker", "ps").
int countTasks(const Plan &plan, llvm::StringRef role);
// Every task on 127.x: servers may take free ports and publish them (docs/distributed.md).
bool onLoopback(const Plan &plan);
// PRISM_JOB_TOKEN from the environment when set, else the plan's token.
std::string jobToken(const Plan &plan);
// "worker:1" -> "worker-1", for the task's files and directories.
std::string taskFileName(llvm::StringRef task);
// A task's GPUs: its `gpu:N` devices, in order (empty for a task on CPUs).
std::vector<std::string> taskGpus(const Task &task);

} // namespace prism::plan
