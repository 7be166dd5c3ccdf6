// infer-shapes: gives every op result its type from the op table's shape rules, in program
// order, and checks the types the source declared.
#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
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
    int64_t typed = 0;
    for (const auto &op : module.ops()) {
      std::string where = "'" + op->name().str() + "'" +
                          (op->numResults() ? " defining " + op->result(0)->ref() : "");
      auto types = ir::inferResultTypes(*op);
      if (!types)
        return ir::makeError(module.sourceFile(), op->loc,
                             where + ": " + ir::messageOf(types.takeError()));
      for (unsigned i = 0; i < op->numResults(); ++i) {
        ir::Value *result = op->result(i);
        const ir::TensorType &inferred = (*types)[i];
        if (result->hasType()) {
          if (result->type() != inferred)
            return ir::makeError(module.sourceFile(), op->loc,
                                 where + ": result " + result->ref() + " is declared " +
                                     result->type().str() + " but the op gives " + inferred.str());
          continue;
        }
        result->setType(inferred);
        ++typed;
      }
    }
    count("values typed", typed);
    return typed > 0;
  }
};

} // namespace

std::unique_ptr<Pass> createInferShapesPass() {
  return std::make_unique<InferShapes>();
}

} // namespace prism::passes
