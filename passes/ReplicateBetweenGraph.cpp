// replicate-between-graph: makes the module the program every worker task runs on its shard of
// the global batch. Gradients are routed later (route-gradients); this pass makes the loss a
// worker reports the global batch's loss: the batch-weighted mean over the workers, which is
// what single-device training on the global batch reports. Each replica_mean (synchronized
// batch statistics) becomes an all_reduce over the workers.
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
    if (options->workers == 1)
      return false;
    bool changed = reduceReplicaMeans(module);
    ir::Value *loss = module.loss->value;
    if (loss->kind() == ir::ValueKind::OpResult &&
        loss->definingOp()->def().has(ir::kCommunication) &&
        loss->definingOp()->attrs.getString("group") == ir::kWorkerGroup)
      return changed;
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

private:
  // Every replica_mean becomes the all_reduce over the workers of its operand (under its name),
  // each its own bucket, numbered down from kFirstReplicaMeanBucket in program order.
  bool reduceReplicaMeans(ir::Module &module) {
    std::vector<ir::Op *> means;
    for (const auto &op : module.ops())
      if (op->def().has(ir::kReplicaMean))
        means.push_back(op.get());
    int64_t bucket = ir::kFirstReplicaMeanBucket;
    for (ir::Op *mean : means) {
      ir::AttrMap attrs;
      attrs.set("group", ir::Attr::string(ir::kWorkerGroup));
      attrs.set("bucket", ir::Attr::integer(bucket--));
      ir::Value *result = mean->result();
      std::string name = result->name();
      module.renameValue(result, module.uniqueName(name + ".replica"));
      ir::Op *reduce = module.createOp(ir::getOp("all_reduce"), {mean->operand(0)},
                                       std::move(attrs), {name}, mean);
      reduce->loc = mean->loc;
      reduce->result()->setType(result->maybeType());
      module.replaceAllUses(result, reduce->result());
      module.eraseOp(mean);
    }
    count("replica means all-reduced", static_cast<int64_t>(means.size()));
    return !means.empty();
  }
};

} // namespace

std::unique_ptr<Pass> createReplicateBetweenGraphPass() {
  return std::make_unique<ReplicateBetweenGraph>();
}

} // namespace prism::passes
