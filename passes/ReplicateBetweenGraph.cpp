// replicate-between-graph: makes the module the program every worker task runs on its shard of
// the global batch. Gradients are routed later (route-gradients); this pass makes the loss a
// worker reports the global batch's loss: the batch-weighted mean over the workers, which is
// what single-device training on the global batch reports.
#include <string>
#include <vector>

#include "ir/Collectives.h"
#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "passes/Pass.h"

namespace prism::passes {
namespace {

class ReplicateBetweenGraph : public Pass {
public:
  llvm::StringRef name() const override { return "replicate-between-graph"; }
  llvm::StringRef summary() const override {
    return "one program per worker task; the reported loss is the global batch's";
  }
  std::vector<std::string> optionKeys() const override { return {"workers"}; }

  llvm::Expected<bool> run(ir::Module &module, const PassOptions &options) override {
    auto workers = options.getInt("workers", 1);
    if (!workers)
      return workers.takeError();
    if (*workers < 1)
      return ir::makeError("option --workers: expected at least 1 worker, got '" +
                           options.get("workers") + "'");
    if (!module.loss)
      return ir::makeError(module.sourceFile(), {}, "replicate-between-graph needs a loss");
    count("workers", *workers);
    ir::Value *loss = module.loss->value;
    if (*workers == 1 || (loss->kind() == ir::ValueKind::OpResult &&
                          loss->definingOp()->def().has(ir::kCommunication) &&
                          loss->definingOp()->attrs.getString("group") == ir::kWorkerGroup))
      return false;
    ir::AttrMap attrs;
    attrs.set("group", ir::Attr::string(ir::kWorkerGroup));
    attrs.set("bucket", ir::Attr::integer(ir::kLossBucket));
    // Right after the loss: nothing in the step reads the global loss, so the runtime can
    // finish it while backward runs.
    ir::Op *after = nullptr;
    if (loss->kind() == ir::ValueKind::OpResult) {
      size_t index = module.indexOf(loss->definingOp());
      if (index + 1 < module.ops().size())
        after = module.ops()[index + 1].get();
    }
    ir::Op *reduce = module.createOp(ir::getOp("all_reduce"), {loss}, std::move(attrs),
                                     {module.uniqueName(loss->name() + ".global")}, after);
    reduce->result()->setType(loss->maybeType());
    module.loss->value = reduce->result();
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createReplicateBetweenGraphPass() {
  return std::make_unique<ReplicateBetweenGraph>();
}

} // namespace prism::passes
