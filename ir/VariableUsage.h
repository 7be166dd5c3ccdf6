// How a variable is read, from the op table: through sparse-gradient operands only (an
// embedding table read by gathers), densely, or both.
#pragma once

#include "ir/Module.h"
#include "llvm/ADT/StringRef.h"

namespace prism::ir {

enum class VariableUsage { Unused, Dense, Sparse, Mixed };

VariableUsage classifyVariableUsage(const Module &module, const Variable &variable);
llvm::StringRef variableUsageName(VariableUsage usage);

} // namespace prism::ir
