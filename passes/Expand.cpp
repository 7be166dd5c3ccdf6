// expand: replaces the ops whose attributes ask for it by the ops that compute them, by the
// op table's expand rules (batch_norm with sync = true becomes its moments, their replica_mean
// and batch_norm_apply), before autodiff differentiates what they became.
#include <vector>

#include "ir/OpTable.h"
#include "passes/Pass.h"

namespace prism::passes {
namespace {

class Expand : public Pass {
public:
  llvm::StringRef name() const override { return "expand"; }
  llvm::StringRef summary() const override {
    return "replaces ops by what computes them where their attributes ask (sync batch_norm)";
  }

  llvm::Expected<bool> run(ir::Module &module, const PassOptions &) override {
    std::vector<ir::Op *> expandable;
    for (const auto &op : module.ops())
      if (op->def().expand)
        expandable.push_back(op.get());
    int64_t expanded = 0;
    for (ir::Op *op : expandable) {
      auto done = op->def().expand(module, *op);
      if (!done)
        return done.takeError();
      expanded += *done ? 1 : 0;
    }
    count("ops expanded", expanded);
    return expanded > 0;
  }
};

} // namespace

std::unique_ptr<Pass> createExpandPass() {
  return std::make_unique<Expand>();
}

} // namespace prism::passes
