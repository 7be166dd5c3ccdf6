// Questions about a plan's tasks that the runtime and the tools ask: find one, count a role,
// whether the job stays on loopback, the job's token, a task's name as a file name, its GPUs,
// the machine it runs on.
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
// The machine a host runs on: its `machine`, else its address (hosts of one address are one
// machine); hosts of one machine share its cores.
const std::string &machineOf(const Host &host);
// The machine of a task's host; the task's own name when its host is not in the plan.
std::string machineOfTask(const Plan &plan, const Task &task);
// How many machines the plan's hosts are on.
int countMachines(const Plan &plan);

} // namespace prism::plan
