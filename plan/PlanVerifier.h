// The plan verifier: run when a plan is emitted and when one is read. A corrupt or hand-edited
// plan gets an error naming the field and the value at fault, never a crash: every variable
// placed exactly once, every gradient routed exactly once, buckets identical across a group's
// members, shapes consistent, ports unique.
#pragma once

#include <memory>

#include "ir/Module.h"
#include "plan/plan.pb.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::plan {

llvm::Error verifyPlan(const Plan &plan);
// The same with the programs' modules at hand (programs[i] is the module plan.programs(i)'s text
// was printed from): they are verified as modules instead of parsed back, which on a
// 500,000-op model took a quarter of `prism partition`.
llvm::Error verifyPlan(const Plan &plan, llvm::ArrayRef<const ir::Module *> programs);

// The program `task` runs, or null.
const Program *findProgram(const Plan &plan, llvm::StringRef task);
// A program's IR, parsed and verified; errors read `<plan program NAME>:line:column: ...`.
llvm::Expected<std::unique_ptr<ir::Module>> parseProgram(const Program &program);

} // namespace prism::plan
