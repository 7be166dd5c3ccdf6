// `prism run`: starts every task of a plan and watches them; the job ends when all tasks end,
// or when one fails or goes silent (then every task stops, and the error names it).
#pragma once

#include <string>
#include <vector>

#include "plan/plan.pb.h"
#include "runtime/job/JobOptions.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::job {

// `planPath` is handed to the tasks, which read the plan themselves.
llvm::Error runPlan(const plan::Plan &plan, const std::string &planPath, const JobOptions &options);

// The program tasks run: $PRISM_TASK_PROGRAM when set (a wrapper that starts prism through its
// own loader and libraries, as scripts/gpu-bundle makes), else this process's executable.
std::string taskProgram();

// The command that runs `argv` on a host through `launcher` (`prism run --launcher`: a command
// prefix in which {host} and {address} stand for the host's name and address), through
// /bin/sh; `argv` itself when `launcher` is empty.
std::vector<std::string> onHost(const std::string &launcher, const std::string &hostName,
                                const std::string &address, std::vector<std::string> argv);

} // namespace prism::runtime::job
