// Prints a module in the canonical text format (docs/ir.md), the inverse of the parser.
#pragma once

#include <string>

#include "llvm/Support/raw_ostream.h"

namespace prism::ir {

class Module;

// The whole module, ending with one newline. For text already in canonical form,
// printModule(parse(text)) == text.
std::string printModule(const Module &module);
void printModule(const Module &module, llvm::raw_ostream &os);

} // namespace prism::ir
