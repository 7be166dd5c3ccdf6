// Prints a module in the canonical text format (docs/ir.md), the inverse of the parser.
#pragma once

#include <string>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::ir {

class Module;
struct Optimizer;
struct SchedulePhase;

// The whole module, ending with one newline. For text already in canonical form,
// printModule(parse(text)) == text.
std::string printModule(const Module &module);
void printModule(const Module &module, llvm::raw_ostream &os);

// `adam(lr = 0.001)`: an optimizer as `minimize ... with` writes it; its schedule comes last.
std::string printOptimizer(const Optimizer &optimizer);
// `cosine(total = 10000, final = 0.0)`, or `[warmup_linear(steps = 500), cosine(...)]` for two
// phases: the value of an optimizer's `schedule =`.
std::string printSchedule(llvm::ArrayRef<SchedulePhase> phases);

} // namespace prism::ir
