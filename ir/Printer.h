// Prints a module in the canonical text format (docs/ir.md), the inverse of the parser.
#pragma once

#include <string>

#include "llvm/Support/raw_ostream.h"

namespace prism::ir {

class Module;
struct Optimizer;

// The whole module, ending with one newline. For text already in canonical form,
// printModule(parse(text)) == text.
std::string printModule(const Module &module);
void printModule(const Module &module, llvm::raw_ostream &os);

// `adam(lr = 0.001)`: an optimizer as `minimize ... with` writes it.
std::string printOptimizer(const Optimizer &optimizer);

} // namespace prism::ir
