// autodiff: reverse-mode differentiation of the loss with respect to every trainable variable,
// using the op table's gradient rules. Gathers give sparse gradients; a variable read both by
// gathers and densely gets a dense gradient and is marked `grad = mixed`.
#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "ir/Slice.h"
#include "passes/Pass.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace prism::passes {
namespace {

using ir::Module;
using ir::Op;
using ir::Value;

class Autodiff : public Pass {
public:
  llvm::StringRef name() const override { return "autodiff"; }
  llvm::StringRef summary() const override {
    return "reverse-mode gradients of the loss for every trainable variable";
  }

  llvm::Expected<bool> run(Module &m, const PassOptions &) override {
    if (!m.loss || !m.loss->value)
      return ir::makeError(m.sourceFile(), {}, "autodiff: the module has no loss");
    if (!m.gradients.empty())
      return ir::makeError(m.sourceFile(), {}, "autodiff: the module already has gradients");
    for (const auto &op : m.ops())
      for (unsigned i = 0; i < op->numResults(); ++i)
        if (!op->result(i)->hasType())
          return ir::makeError(m.sourceFile(), op->loc,
                               "autodiff needs types: run infer-shapes first");

    std::vector<Op *> forward;
    for (const auto &op : m.ops())
      forward.push_back(op.get());
    size_t firstNew = forward.size();
    markNeeded(m, forward);

    Value *loss = m.loss->value;
    ir::AttrMap one;
    one.set("value", ir::Attr::real(1.0));
    one.set("dtype", ir::Attr::string(ir::dtypeName(loss->type().dtype).str()));
    Op *seed = m.createOp(ir::getOp("constant"), {}, one, {"d.loss"});
    seed->result()->setType(ir::TensorType(loss->type().dtype, {}));
    grads_[loss] = seed->result();

    for (auto it = forward.rbegin(); it != forward.rend(); ++it)
      if (auto err = differentiate(m, **it))
        return std::move(err);
    int64_t sparseCount = recordGradients(m);
    size_t removed = removeUnusedBackwardOps(m, forward.empty() ? nullptr : forward.back());
    count("gradients", static_cast<int64_t>(m.gradients.size()));
    count("sparse gradients", sparseCount);
    count("backward ops", static_cast<int64_t>(m.ops().size() - firstNew));
    count("unused backward ops removed", static_cast<int64_t>(removed));
    return true;
  }

private:
  // Emits the gradients of `op`'s operands from those of its results (if any reach it) and
  // adds them to what each operand has gathered.
  llvm::Error differentiate(Module &m, Op &op) {
    llvm::SmallVector<Value *, 2> resultGrads;
    bool any = false;
    for (unsigned i = 0; i < op.numResults(); ++i) {
      Value *g = grads_.lookup(op.result(i));
      resultGrads.push_back(g);
      any |= g != nullptr;
    }
    if (!any)
      return llvm::Error::success();
    if (!op.def().differentiable())
      return ir::makeError(m.sourceFile(), op.loc,
                           "'" + op.name() + "' (" + op.result(0)->ref() +
                               ") is not differentiable, but a trainable variable reaches "
                               "the loss through it");
    ir::GradientContext ctx(m, op, resultGrads);
    op.def().gradient(ctx);
    if (auto err = ctx.takeError())
      return err;
    for (unsigned i = 0; i < op.numOperands(); ++i) {
      Value *operand = op.operand(i);
      Value *g = ctx.operandGrads()[i];
      if (!g || !needed_.count(operand))
        continue;
      if (auto err = accumulate(m, op, operand, g))
        return err;
    }
    return llvm::Error::success();
  }

  // Declares the gradient of every trainable variable the loss reaches, marks how it is read
  // (`grad = dense | sparse | mixed`) and names it `d.<variable>`; returns how many are sparse.
  int64_t recordGradients(Module &m) {
    int64_t sparseCount = 0;
    for (const auto &var : m.variables()) {
      Value *g = grads_.lookup(var->value.get());
      if (!g || !var->trainable())
        continue;
      m.gradients.push_back(ir::Gradient{var.get(), g, {}, {}});
      llvm::StringRef kind = g->type().sparse ? "sparse" : sawSparse_.count(g) ? "mixed" : "dense";
      var->attrs.set("grad", ir::Attr::string(kind.str()));
      sparseCount += g->type().sparse;
      if (g->kind() == ir::ValueKind::OpResult && !named_.count(g)) {
        m.renameValue(g, "d." + var->name());
        named_.insert(g);
      }
    }
    return sparseCount;
  }

  // Values on some path from a trainable variable to the loss.
  void markNeeded(Module &m, const std::vector<Op *> &forward) {
    llvm::DenseSet<const Value *> fromVars;
    for (const auto &var : m.variables())
      if (var->trainable() && ir::isFloat(var->type().dtype))
        fromVars.insert(var->value.get());
    for (Op *op : forward) {
      bool reached = false;
      for (Value *v : op->operands())
        reached |= fromVars.count(v) != 0;
      if (reached)
        for (unsigned i = 0; i < op->numResults(); ++i)
          if (ir::isFloat(op->result(i)->type().dtype))
            fromVars.insert(op->result(i));
    }
    // What the loss depends on: itself and the operands of the ops in its slice.
    ir::OpSet toLoss = ir::backwardSlice({m.loss->value.get()});
    auto feedsLoss = [&](const Value *v) {
      if (v == m.loss->value)
        return true;
      for (const ir::OpUse &use : v->uses())
        if (toLoss.count(use.op))
          return true;
      return false;
    };
    for (const Value *v : fromVars)
      if (feedsLoss(v))
        needed_.insert(v);
  }

  // grads[v] += g, keeping sparse + sparse sparse and densifying a sparse + dense sum.
  llvm::Error accumulate(Module &m, const Op &anchor, Value *v, Value *g) {
    Value *&slot = grads_[v];
    if (g->type().sparse)
      sawSparse_.insert(g);
    if (!slot) {
      slot = g;
      return llvm::Error::success();
    }
    // Accumulation is no op's gradient rule: a context of `anchor` with no result gradients.
    ir::GradientContext ctx(m, anchor, {});
    Value *sum;
    bool anySparse = slot->type().sparse || g->type().sparse || sawSparse_.count(slot);
    if (slot->type().sparse && g->type().sparse) {
      sum = ctx.emit("sparse_add", {slot, g});
    } else {
      Value *a = slot->type().sparse ? ctx.emit("sparse_to_dense", {slot}) : slot;
      Value *b = g->type().sparse ? ctx.emit("sparse_to_dense", {g}) : g;
      sum = ctx.emit("add", {a, b});
    }
    if (auto err = ctx.takeError())
      return err;
    if (anySparse)
      sawSparse_.insert(sum);
    slot = sum;
    return llvm::Error::success();
  }

  // Gradient rules emit gradients for every operand; drop the ones nothing uses (the gradient
  // declarations are uses). Readers come after what they read, so one sweep from the end
  // removes every op that only dropped ops read.
  size_t removeUnusedBackwardOps(Module &m, Op *lastForward) {
    std::vector<Op *> backward;
    for (Op *op = lastForward ? lastForward->next() : m.ops().front().get(); op; op = op->next())
      backward.push_back(op);
    size_t removed = 0;
    for (auto it = backward.rbegin(); it != backward.rend(); ++it) {
      bool used = false;
      for (unsigned r = 0; r < (*it)->numResults(); ++r)
        used |= (*it)->result(r)->hasUses();
      if (!used) {
        m.eraseOp(*it);
        ++removed;
      }
    }
    return removed;
  }

  llvm::DenseSet<const Value *> needed_;
  llvm::DenseMap<const Value *, Value *> grads_;
  llvm::DenseSet<const Value *> sawSparse_;
  llvm::DenseSet<const Value *> named_;
};

} // namespace

std::unique_ptr<Pass> createAutodiffPass() {
  return std::make_unique<Autodiff>();
}

} // namespace prism::passes
