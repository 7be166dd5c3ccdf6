// `prism run`: starts every task of a plan and watches them; the job ends when all tasks end,
// or when one fails or goes silent (then every task stops, and the error names it).
#pragma once

#include <string>

#include "plan/plan.pb.h"
#include "runtime/job/JobOptions.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::job {

// `planPath` is handed to the tasks, which read the plan themselves.
llvm::Error runPlan(const plan::Plan &plan, const std::string &planPath, const JobOptions &options);

} // namespace prism::runtime::job
