// fuse-bias-activation: replaces matmul|conv2d -> bias_add -> (relu) chains with one fused op
// (fused_matmul, fused_conv2d) whose kernel applies the bias and activation as a oneDNN
// post-op, saving one or two passes over the output.
#include <optional>

#include "ir/OpTable.h"
#include "passes/Pass.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

namespace prism::passes {
namespace {

// Which op fuses into which, and the statistic that counts it.
struct FusionRule {
  const char *product;
  const char *fused;
  const char *statistic;
};
constexpr FusionRule kFusionRules[] = {
    {"matmul", "fused_matmul", "chains fused (matmul)"},
    {"conv2d", "fused_conv2d", "chains fused (conv2d)"},
};

// A chain found in the module: product -> bias_add -> (relu), and the relu_grad ops that read
// the pre-activation value as their `x`.
struct Chain {
  ir::Op *product = nullptr;
  ir::Op *biasAdd = nullptr;
  ir::Op *relu = nullptr;
  llvm::SmallVector<ir::Op *, 2> reluGrads;
  ir::Op *last() const { return relu ? relu : biasAdd; }
};

class FuseBiasActivation : public Pass {
public:
  llvm::StringRef name() const override { return "fuse-bias-activation"; }
  llvm::StringRef summary() const override {
    return "fuses matmul|conv2d -> bias_add -> relu chains into fused_matmul|fused_conv2d";
  }

  llvm::Expected<bool> run(ir::Module &module, const PassOptions &) override {
    // Products are the only candidates and fusing one erases only the ops after it in its own
    // chain, so the list stays valid while chains are fused.
    llvm::SmallVector<std::pair<ir::Op *, const FusionRule *>, 16> candidates;
    for (const auto &op : module.ops())
      for (const FusionRule &rule : kFusionRules)
        if (&op->def() == &ir::getOp(rule.product))
          candidates.push_back({op.get(), &rule});
    llvm::StringMap<int64_t> fused;
    int64_t reluGradsRewritten = 0;
    for (auto [product, rule] : candidates) {
      std::optional<Chain> chain = findChain(product);
      if (!chain)
        continue;
      if (!fuse(module, *chain, ir::getOp(rule->fused)))
        continue;
      ++fused[rule->statistic];
      reluGradsRewritten += static_cast<int64_t>(chain->reluGrads.size());
    }
    int64_t total = 0;
    for (const FusionRule &rule : kFusionRules) {
      count(rule.statistic, fused.lookup(rule.statistic));
      total += fused.lookup(rule.statistic);
    }
    count("relu_grad rewritten", reluGradsRewritten);
    return total > 0;
  }

private:
  // The only op that reads `v`, once, as operand `operand`; null when there are other reads
  // (the loss and the recorded gradients read values too: such a value must stay).
  static ir::Op *soleUser(const ir::Value *v, const ir::OpDef &def, unsigned operand) {
    if (v->numUses() != 1 || v->readOutsideOps())
      return nullptr;
    const ir::OpUse &use = v->uses().front();
    return &use.op->def() == &def && use.operand == operand ? use.op : nullptr;
  }

  static std::optional<Chain> findChain(ir::Op *product) {
    Chain chain;
    chain.product = product;
    chain.biasAdd = soleUser(product->result(0), ir::getOp("bias_add"), 0);
    if (!chain.biasAdd)
      return std::nullopt;
    // The pre-activation value folds into a relu when the relu and relu_grad ops that come
    // after it are its only readers; otherwise the chain ends at bias_add.
    const ir::Value *pre = chain.biasAdd->result(0);
    if (!pre->hasUses() || pre->readOutsideOps())
      return chain;
    ir::Op *relu = nullptr;
    llvm::SmallVector<ir::Op *, 2> reluGrads;
    for (const ir::OpUse &use : pre->uses()) {
      ir::Op *user = use.op;
      if (&user->def() == &ir::getOp("relu") && !relu) {
        relu = user;
      } else if (&user->def() == &ir::getOp("relu_grad") && user->operand(0) != pre) {
        reluGrads.push_back(user);
      } else {
        return chain;
      }
    }
    if (!relu)
      return chain;
    // relu_grad will read the relu's output, so it must come after the relu.
    for (ir::Op *grad : reluGrads)
      if (grad->isBefore(*relu))
        return chain;
    chain.relu = relu;
    chain.reluGrads = std::move(reluGrads);
    return chain;
  }

  // Puts the fused op where the chain's last op was (every operand is defined by then), moves
  // every use of the last value to it, and gives it that value's name. Returns false, leaving
  // the module as it was, when the fused op's shape rule rejects the operands.
  static bool fuse(ir::Module &module, const Chain &chain, const ir::OpDef &fusedDef) {
    ir::Op *last = chain.last();
    ir::Value *lastValue = last->result(0);
    ir::AttrMap attrs = chain.product->attrs;
    if (chain.relu)
      attrs.set("activation", ir::Attr::string("relu"));
    ir::Value *a = chain.product->operand(0), *b = chain.product->operand(1);
    ir::Value *bias = chain.biasAdd->operand(1);
    ir::Op *fused = module.createOp(fusedDef, {a, b, bias}, std::move(attrs),
                                    {lastValue->name() + ".fused"}, last);
    if (a->hasType() && b->hasType() && bias->hasType()) {
      auto types = ir::inferResultTypes(*fused);
      if (!types) {
        llvm::consumeError(types.takeError());
        module.eraseOp(fused);
        return false;
      }
      fused->result(0)->setType((*types)[0]);
    } else {
      fused->result(0)->setType(lastValue->maybeType());
    }
    fused->loc = chain.product->loc;
    fused->trivia = chain.product->trivia;
    for (const ir::Op *op : {chain.biasAdd, chain.relu})
      if (op)
        llvm::append_range(fused->trivia.leadingComments, op->trivia.leadingComments);
    fused->trivia.trailingComment = last->trivia.trailingComment;

    // y = relu(pre) is positive exactly where pre is, so relu_grad(dy, pre) = relu_grad(dy, y).
    for (ir::Op *grad : chain.reluGrads)
      grad->setOperand(1, fused->result(0));
    module.replaceAllUses(lastValue, fused->result(0));
    std::string name = lastValue->name();
    for (ir::Op *op : {chain.relu, chain.biasAdd, chain.product})
      if (op)
        module.eraseOp(op);
    module.renameValue(fused->result(0), name);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createFuseBiasActivationPass() {
  return std::make_unique<FuseBiasActivation>();
}

} // namespace prism::passes
