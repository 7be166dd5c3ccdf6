// cse: merges ops that compute the same thing (same op, same operands, equal attributes) into
// the first of them. Ops with side effects, randomness or communication are never merged.
#include "ir/OpTable.h"
#include "passes/Pass.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Hashing.h"

namespace prism::passes {
namespace {

// Attributes as the op sees them: defaults filled in, and integers written where the table
// wants a float read as floats, so that `lr = 1` and `lr = 1.0` compare equal.
ir::AttrMap canonicalAttrs(const ir::Op &op) {
  ir::AttrMap attrs = ir::withDefaults(op.def(), op.attrs);
  for (const ir::AttrSpec &spec : op.def().attrs) {
    const ir::Attr *value = attrs.find(spec.name);
    if (value && spec.kind == ir::AttrKind::Float && value->kind() == ir::AttrKind::Int)
      attrs.set(spec.name, ir::Attr::real(value->getFloat()));
  }
  return attrs;
}

// Communication ops are left alone too: each is matched with its peers on other tasks, so
// removing one would leave a peer waiting.
bool mergeable(const ir::Op &op) {
  const ir::OpDef &def = op.def();
  return op.numResults() > 0 && !def.has(ir::kSideEffect) && !def.has(ir::kRandom) &&
         !def.has(ir::kCommunication);
}

// The operands in a canonical order: a commutative op's first two sorted, so that add(a, b)
// and add(b, a) hash alike.
llvm::SmallVector<const ir::Value *, 4> canonicalOperands(const ir::Op &op) {
  llvm::SmallVector<const ir::Value *, 4> operands(op.operands().begin(), op.operands().end());
  if (op.def().has(ir::kCommutative) && operands.size() >= 2 && operands[1] < operands[0])
    std::swap(operands[0], operands[1]);
  return operands;
}

struct Candidate {
  ir::Op *op;
  ir::AttrMap attrs;
};

bool equivalent(const ir::Op &a, const ir::AttrMap &aAttrs, const ir::Op &b,
                const ir::AttrMap &bAttrs) {
  if (&a.def() != &b.def() || a.numOperands() != b.numOperands() ||
      a.numResults() != b.numResults())
    return false;
  if (canonicalOperands(a) != canonicalOperands(b))
    return false;
  for (unsigned i = 0; i < a.numResults(); ++i)
    if (a.result(i)->maybeType() != b.result(i)->maybeType())
      return false;
  return aAttrs == bAttrs;
}

class CommonSubexpressionElimination : public Pass {
public:
  llvm::StringRef name() const override { return "cse"; }
  llvm::StringRef summary() const override {
    return "merges ops with the same operands and attributes into the first of them";
  }

  llvm::Expected<bool> run(ir::Module &module, const PassOptions &) override {
    // In program order, the earlier op of a pair survives and dominates every use of the later
    // one. Uses are rewritten before their readers are visited, so chains of duplicates merge
    // in one sweep.
    llvm::DenseMap<llvm::hash_code, llvm::SmallVector<Candidate, 1>> seen;
    std::vector<ir::Op *> order;
    for (const auto &op : module.ops())
      order.push_back(op.get());
    int64_t merged = 0;
    for (ir::Op *op : order) {
      if (!mergeable(*op))
        continue;
      auto operands = canonicalOperands(*op);
      llvm::hash_code key = llvm::hash_combine(
          &op->def(), llvm::hash_combine_range(operands.begin(), operands.end()));
      ir::AttrMap attrs = canonicalAttrs(*op);
      auto &bucket = seen[key];
      ir::Op *original = nullptr;
      for (const Candidate &c : bucket)
        if (equivalent(*c.op, c.attrs, *op, attrs)) {
          original = c.op;
          break;
        }
      if (!original) {
        bucket.push_back({op, std::move(attrs)});
        continue;
      }
      for (unsigned i = 0; i < op->numResults(); ++i)
        module.replaceAllUses(op->result(i), original->result(i));
      module.eraseOp(op);
      ++merged;
    }
    count("ops merged", merged);
    return merged > 0;
  }
};

} // namespace

std::unique_ptr<Pass> createCommonSubexpressionEliminationPass() {
  return std::make_unique<CommonSubexpressionElimination>();
}

} // namespace prism::passes
