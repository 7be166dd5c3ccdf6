// inline: replaces every call of a function (`%h, %c = @cell(...)`) with a copy of the
// function's body, then drops the functions, so the passes after it see ordinary ops only.
#include "ir/OpTable.h"
#include "passes/Pass.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace prism::passes {
namespace {

class Inline : public Pass {
public:
  llvm::StringRef name() const override { return "inline"; }
  llvm::StringRef summary() const override {
    return "expands every call of a function into a copy of its body";
  }

  llvm::Expected<bool> run(ir::Module &module, const PassOptions &) override {
    std::vector<ir::Op *> calls;
    for (const auto &op : module.ops())
      if (op->def().has(ir::kCall))
        calls.push_back(op.get());
    // A body calls only functions defined before it, so expanding the calls a copy brings
    // (pushed onto the list) ends.
    int64_t expanded = 0;
    while (!calls.empty()) {
      ir::Op *call = calls.back();
      calls.pop_back();
      if (auto e = expand(module, *call, calls))
        return std::move(e);
      ++expanded;
    }
    count("calls inlined", expanded);
    count("functions removed", static_cast<int64_t>(module.functions.size()));
    bool changed = expanded > 0 || !module.functions.empty();
    module.functions.clear();
    return changed;
  }

private:
  // The parser names a nested op with a number.
  static bool isMadeUp(llvm::StringRef name) {
    return !name.empty() && llvm::all_of(name, llvm::isDigit);
  }

  // The body's ops go just before the call, named `<call's first result>.<body name>`; the
  // values the function returns take the call's result names, so later ops read as written.
  static llvm::Error expand(ir::Module &module, ir::Op &call, std::vector<ir::Op *> &calls) {
    std::string callee = call.attrs.getString("callee");
    const ir::Function *f = module.findFunction(callee);
    if (!f || f->params.size() != call.numOperands() || f->results.size() != call.numResults())
      return ir::makeError(module.sourceFile(), call.loc,
                           "call of '@" + callee + "' does not match a function of the module");
    llvm::DenseMap<const ir::Value *, ir::Value *> map;
    for (unsigned i = 0; i < call.numOperands(); ++i)
      map[f->body->inputs()[i]->value.get()] = call.operand(i);
    // A call nested in an expression has a made-up name (`%7`): its copies read better named
    // after the function (`%step_loss.loss`), and so does what it returns.
    std::string prefix = call.numResults() ? call.result(0)->name() : callee;
    bool madeUpName = isMadeUp(prefix);
    if (madeUpName)
      prefix = callee;
    bool first = true;
    for (const auto &bodyOp : f->body->ops()) {
      llvm::SmallVector<ir::Value *, 4> operands;
      for (ir::Value *v : bodyOp->operands())
        operands.push_back(map.lookup(v));
      std::vector<std::string> names;
      for (unsigned i = 0; i < bodyOp->numResults(); ++i) {
        // A nested call in the body is named after its function (`%h.attention`).
        std::string name = bodyOp->result(i)->name();
        if (bodyOp->def().has(ir::kCall) && isMadeUp(name))
          name = bodyOp->attrs.getString("callee");
        names.push_back(module.uniqueName(prefix + "." + name));
      }
      ir::Op *copy = module.createOp(bodyOp->def(), operands, bodyOp->attrs, names, &call);
      copy->loc = bodyOp->loc;
      if (first)
        copy->trivia = call.trivia; // the comments above the call stay above its expansion
      first = false;
      for (unsigned i = 0; i < bodyOp->numResults(); ++i) {
        copy->result(i)->setType(bodyOp->result(i)->maybeType());
        map[bodyOp->result(i)] = copy->result(i);
      }
      if (copy->def().has(ir::kCall))
        calls.push_back(copy);
    }
    std::vector<std::pair<ir::Value *, std::string>> renames;
    llvm::DenseMap<const ir::Value *, bool> renamed;
    for (unsigned i = 0; i < call.numResults(); ++i) {
      ir::Value *value = map.lookup(f->results[i].get());
      module.replaceAllUses(call.result(i), value);
      // A returned parameter is the caller's value and keeps its name.
      bool fromBody =
          value->kind() == ir::ValueKind::OpResult && !llvm::is_contained(call.operands(), value);
      if (fromBody && !madeUpName && !renamed[value]) {
        renamed[value] = true;
        renames.emplace_back(value, call.result(i)->name());
      }
    }
    module.eraseOp(&call);
    for (auto &[value, name] : renames)
      module.renameValue(value, name);
    return llvm::Error::success();
  }
};

} // namespace

std::unique_ptr<Pass> createInlinePass() {
  return std::make_unique<Inline>();
}

} // namespace prism::passes
