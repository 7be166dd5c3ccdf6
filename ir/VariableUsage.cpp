// How a variable is read.
#include "ir/VariableUsage.h"

#include "ir/OpTable.h"

namespace prism::ir {

VariableUsage classifyVariableUsage(const Module &module, const Variable &variable) {
  bool sparse = false, dense = false;
  for (const OpUse &use : variable.value->uses()) {
    const OpDef &def = use.op->def();
    if (def.has(kSideEffect))
      continue; // updates write the variable; they do not read it for the loss
    if (def.sparseGradient(use.operand))
      sparse = true;
    else
      dense = true;
  }
  if (sparse && dense)
    return VariableUsage::Mixed;
  if (sparse)
    return VariableUsage::Sparse;
  return dense ? VariableUsage::Dense : VariableUsage::Unused;
}

llvm::StringRef variableUsageName(VariableUsage usage) {
  switch (usage) {
  case VariableUsage::Unused:
    return "unused";
  case VariableUsage::Dense:
    return "dense";
  case VariableUsage::Sparse:
    return "sparse";
  case VariableUsage::Mixed:
    return "mixed";
  }
  return "?";
}

} // namespace prism::ir
