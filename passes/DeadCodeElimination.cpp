// dce: removes ops whose results nothing reads (no op, not the loss, no gradient) and that
// have no side effect.
#include "ir/OpTable.h"
#include "passes/Pass.h"

namespace prism::passes {
namespace {

class DeadCodeElimination : public Pass {
public:
  llvm::StringRef name() const override { return "dce"; }
  llvm::StringRef summary() const override {
    return "removes ops without side effects whose results are never used";
  }

  llvm::Expected<bool> run(ir::Module &module, const PassOptions &) override {
    // Every reader comes after what it reads, so one sweep from the end sees each op only after
    // all its readers have been decided: that sweep reaches the fixed point. The loss and the
    // gradients are uses that never die.
    std::vector<ir::Op *> order;
    for (const auto &op : module.ops())
      order.push_back(op.get());
    int64_t removed = 0;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      ir::Op *op = *it;
      if (op->def().has(ir::kSideEffect))
        continue;
      bool used = false;
      for (unsigned i = 0; i < op->numResults(); ++i)
        used |= op->result(i)->hasUses();
      if (used)
        continue;
      module.eraseOp(op);
      ++removed;
    }
    count("ops removed", removed);
    return removed > 0;
  }
};

} // namespace

std::unique_ptr<Pass> createDeadCodeEliminationPass() {
  return std::make_unique<DeadCodeElimination>();
}

} // namespace prism::passes
