// fuse-elementwise: replaces trees of elementwise ops (add, mul, sigmoid, tanh_grad, ...) whose
// intermediate values are read only inside the tree with one fused_elementwise op, so that the
// kernel makes one pass over memory instead of one per op.
#include <map>
#include <string>

#include "ir/OpTable.h"
#include "ir/ops/ElementwiseExpr.h"
#include "passes/Pass.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

namespace prism::passes {
namespace {

// Each op's index in program order before the pass.
using Positions = llvm::DenseMap<const ir::Op *, size_t>;

// Groups stay small enough that their expression nests within the parser's depth limit.
constexpr size_t kMaxGroupOps = 128;

// A producer joins its consumer's group only when at most this many ops lie between them. The
// fused op runs where the root was, so the operands of a far producer would stay alive (and
// out of cache) over everything in between: fusing the gradient sums of an unrolled model
// that way keeps every step's gradient alive at once and is slower than not fusing.
constexpr size_t kMaxProducerDistance = 16;

class FuseElementwise : public Pass {
public:
  llvm::StringRef name() const override { return "fuse-elementwise"; }
  llvm::StringRef summary() const override {
    return "fuses trees of elementwise ops of one shape into fused_elementwise";
  }

  llvm::Expected<bool> run(ir::Module &module, const PassOptions &) override {
    Positions positions;
    for (const auto &op : module.ops())
      positions[op.get()] = positions.size();
    // Roots are tried from the last op backwards, so each group grows from the op nearest the
    // group's consumers and takes in everything it can.
    std::vector<ir::Op *> order;
    for (const auto &op : module.ops())
      order.push_back(op.get());
    llvm::DenseSet<const ir::Op *> taken;
    int64_t groups = 0, fusedOps = 0;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      ir::Op *root = *it;
      if (taken.count(root) || !fusable(*root))
        continue;
      llvm::SmallVector<ir::Op *, 8> group{root};
      grow(positions, *root, root->result(0)->type(), taken, group);
      if (group.size() < 2)
        continue;
      for (ir::Op *op : group)
        taken.insert(op);
      if (!fuse(module, group))
        continue;
      ++groups;
      fusedOps += static_cast<int64_t>(group.size());
    }
    count("groups fused", groups);
    count("ops fused", fusedOps);
    return groups > 0;
  }

private:
  // An op the expression language covers, with a known float result whose operands are of its
  // type or scalars of its dtype.
  static bool fusable(const ir::Op &op) {
    const ir::OpDef &def = op.def();
    if (!def.has(ir::kElementwise) || def.has(ir::kSideEffect) ||
        !ir::isFusableElementwiseOp(def.name) || op.numResults() != 1 || !op.result(0)->hasType())
      return false;
    const ir::TensorType &type = op.result(0)->type();
    if (type.sparse || !ir::isFloat(type.dtype))
      return false;
    return llvm::all_of(op.operands(), [&](const ir::Value *v) {
      if (!v->hasType())
        return false;
      const ir::TensorType &t = v->type();
      return !t.sparse && t.dtype == type.dtype && (t.dims == type.dims || t.dims.empty());
    });
  }

  // Takes into `group` every producer of `op`'s operands whose result only `op` reads, once
  // (not the loss or a gradient either), which has the group's result type and is near `op`;
  // then the same for each producer taken.
  static void grow(const Positions &positions, const ir::Op &op, const ir::TensorType &type,
                   const llvm::DenseSet<const ir::Op *> &taken,
                   llvm::SmallVector<ir::Op *, 8> &group) {
    for (ir::Value *v : op.operands()) {
      ir::Op *producer = v->definingOp();
      // A group stays on one device: towers' ops run on theirs (replicate-in-graph).
      if (!producer || taken.count(producer) || llvm::is_contained(group, producer) ||
          !fusable(*producer) || v->type() != type || v->numUses() != 1 ||
          producer->attrs.getString(ir::kDeviceAttr) != op.attrs.getString(ir::kDeviceAttr))
        continue;
      if (group.size() >= kMaxGroupOps ||
          positions.lookup(&op) > positions.lookup(producer) + kMaxProducerDistance + 1)
        continue;
      group.push_back(producer);
      grow(positions, *producer, type, taken, group);
    }
  }

  // The expression of `op`'s result with values from outside the group as operand references.
  static std::string expression(const ir::Op &op, llvm::ArrayRef<ir::Op *> group,
                                llvm::SmallVectorImpl<ir::Value *> &operands) {
    std::string text = op.def().name + "(";
    for (unsigned i = 0; i < op.numOperands(); ++i) {
      ir::Value *v = op.operand(i);
      if (i > 0)
        text += ", ";
      ir::Op *producer = v->definingOp();
      if (producer && llvm::is_contained(group, producer)) {
        text += expression(*producer, group, operands);
        continue;
      }
      auto found = llvm::find(operands, v);
      if (found == operands.end()) {
        operands.push_back(v);
        found = operands.end() - 1;
      }
      text += "$" + std::to_string(found - operands.begin());
    }
    return text + ")";
  }

  // Puts the fused op where the root was (every operand is defined by then), moves the root's
  // uses to it and gives it the root's name. Returns false, leaving the module as it was, when
  // the fused op's shape rule rejects the operands.
  static bool fuse(ir::Module &module, llvm::ArrayRef<ir::Op *> group) {
    ir::Op *root = group.front();
    ir::Value *rootValue = root->result(0);
    llvm::SmallVector<ir::Value *, 4> operands;
    std::string expr = expression(*root, group, operands);
    ir::AttrMap attrs;
    attrs.set("expr", ir::Attr::string(expr));
    if (const ir::Attr *device = root->attrs.find(ir::kDeviceAttr))
      attrs.set(ir::kDeviceAttr, *device);
    ir::Op *fused = module.createOp(ir::getOp("fused_elementwise"), operands, std::move(attrs),
                                    {rootValue->name() + ".fused"}, root);
    auto types = ir::inferResultTypes(*fused);
    if (!types || (*types)[0] != rootValue->type()) {
      if (!types)
        llvm::consumeError(types.takeError());
      module.eraseOp(fused);
      return false;
    }
    fused->result(0)->setType((*types)[0]);
    // Comments of the fused ops stay, in program order.
    std::vector<ir::Op *> byPosition(group.begin(), group.end());
    llvm::sort(byPosition, [](const ir::Op *a, const ir::Op *b) { return a->isBefore(*b); });
    fused->loc = root->loc;
    for (const ir::Op *op : byPosition)
      llvm::append_range(fused->trivia.leadingComments, op->trivia.leadingComments);
    fused->trivia.trailingComment = root->trivia.trailingComment;

    module.replaceAllUses(rootValue, fused->result(0));
    std::string name = rootValue->name();
    // Consumers first: each op's result has no users left when it goes.
    for (auto it = byPosition.rbegin(); it != byPosition.rend(); ++it)
      module.eraseOp(*it);
    module.renameValue(fused->result(0), name);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createFuseElementwisePass() {
  return std::make_unique<FuseElementwise>();
}

} // namespace prism::passes
