// infer-shapes: gives every op result its type from the op table's shape rules, in program
// order, and checks the types the source declared.
#include "ir/TypeInference.h"
#include "passes/Pass.h"

namespace prism::passes {
namespace {

class InferShapes : public Pass {
public:
  llvm::StringRef name() const override { return "infer-shapes"; }
  llvm::StringRef summary() const override {
    return "sets the type of every op result from the op table's shape rules";
  }

  llvm::Expected<bool> run(ir::Module &module, const PassOptions &) override {
    auto typed = ir::inferTypes(module, ir::DeclaredTypes::Check);
    if (!typed)
      return typed.takeError();
    count("values typed", *typed);
    return *typed > 0;
  }
};

} // namespace

std::unique_ptr<Pass> createInferShapesPass() {
  return std::make_unique<InferShapes>();
}

} // namespace prism::passes
