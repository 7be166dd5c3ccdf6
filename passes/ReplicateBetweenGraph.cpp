// replicate-between-graph: makes the module the program every worker task runs on its shard of
// the global batch. Gradients are routed later (route-gradients); this pass makes the loss a
// worker reports the global batch's loss: the batch-weighted mean over the workers, which is
// what single-device training on the global batch reports.
#include <string>
#include <vector>

#include "ir/Collectives.h"
#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "passes/ParallelizeOptions.h"
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

  llvm::Expected<bool> run(ir::Module &module, const PassOptions &passOptions) override {
    auto options = ReplicateOptions::fromPassOptions(passOptions);
    if (!options)
      return options.takeError();
    if (!module.loss)
      return ir::makeError(module.sourceFile(), {}, "replicate-between-graph needs a loss");
    count("workers", options->workers);
    ir::Value *loss = module.loss->value;
    if (options->workers == 1 || (loss->kind() == ir::ValueKind::OpResult &&
                                  loss->definingOp()->def().has(ir::kCommunication) &&
                                  loss->definingOp()->attrs.getString("group") == ir::kWorkerGroup))
      return false;
    ir::AttrMap attrs;
    attrs.set("group", ir::Attr::string(ir::kWorkerGroup));
    attrs.set("bucket", ir::Attr::integer(ir::kLossBucket));
    // Right after the loss: nothing in the step reads the global loss, so the runtime can
    // finish it while backward runs.
    ir::Op *after = loss->definingOp() ? loss->definingOp()->next() : nullptr;
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
