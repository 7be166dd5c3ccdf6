// classify-variables: records on each trainable variable how the model reads it (`kind =
// dense | sparse | mixed | unused`), which decides where place-variables puts it.
#include "ir/VariablePlacement.h"
#include "ir/VariableUsage.h"
#include "passes/Pass.h"

namespace prism::passes {
namespace {

class ClassifyVariables : public Pass {
public:
  llvm::StringRef name() const override { return "classify-variables"; }
  llvm::StringRef summary() const override {
    return "sets kind = dense|sparse|mixed|unused on each trainable variable";
  }

  llvm::Expected<bool> run(ir::Module &module, const PassOptions &) override {
    bool changed = false;
    int64_t dense = 0, sparse = 0, mixed = 0;
    for (const auto &variable : module.variables()) {
      // Optimizer state and other untrained variables have no gradient to route.
      if (!variable->trainable())
        continue;
      ir::VariableUsage usage = ir::classifyVariableUsage(module, *variable);
      dense += usage == ir::VariableUsage::Dense;
      sparse += usage == ir::VariableUsage::Sparse;
      mixed += usage == ir::VariableUsage::Mixed;
      if (ir::variableKind(*variable) == usage)
        continue;
      ir::setVariableKind(*variable, usage);
      changed = true;
    }
    count("dense variables", dense);
    count("sparse variables", sparse);
    count("mixed variables", mixed);
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createClassifyVariablesPass() {
  return std::make_unique<ClassifyVariables>();
}

} // namespace prism::passes
