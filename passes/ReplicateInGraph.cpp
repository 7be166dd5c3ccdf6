// replicate-in-graph: copies the per-example part of a training step into one tower per local
// device (`device = "cpu:i"`), each reading its slice of the task's batch, and joins the towers'
// losses and gradients with combine_towers, so the task pushes or all-reduces once (local
// aggregation) and its update ops run once.
#include <string>
#include <vector>

#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "passes/Pass.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace prism::passes {
namespace {

using ir::Attr;
using ir::AttrMap;
using ir::Op;
using ir::Value;

class ReplicateInGraph : public Pass {
public:
  llvm::StringRef name() const override { return "replicate-in-graph"; }
  llvm::StringRef summary() const override {
    return "one tower per local device over slices of the batch; tower gradients combined";
  }
  std::vector<std::string> optionKeys() const override { return {"devices"}; }

  llvm::Expected<bool> run(ir::Module &module, const PassOptions &options) override {
    auto devices = options.getInt("devices", 1);
    if (!devices)
      return devices.takeError();
    if (*devices < 1 || *devices > 1024)
      return ir::makeError("option --devices: expected 1 to 1024 towers, got '" +
                           options.get("devices") + "'");
    if (!module.loss || module.gradients.empty())
      return ir::makeError(module.sourceFile(), {},
                           "replicate-in-graph needs a training step: run autodiff first");
    count("towers", *devices);
    if (*devices == 1)
      return false;
    const int64_t towers = *devices;

    // A tower computes what depends on the batch and leads to the loss or a gradient. What
    // reads no input (constants, the step counter) is computed once and shared; what consumes
    // gradients (clipping, updates) runs once on the combined gradients.
    llvm::DenseSet<const Value *> batchDependent;
    for (const auto &input : module.inputs())
      batchDependent.insert(input->value.get());
    for (const auto &op : module.ops())
      for (Value *v : op->operands())
        if (batchDependent.count(v)) {
          for (unsigned i = 0; i < op->numResults(); ++i)
            batchDependent.insert(op->result(i));
          break;
        }
    llvm::DenseSet<const Value *> needed;
    needed.insert(module.loss->value);
    for (const ir::Gradient &g : module.gradients)
      needed.insert(g.value);
    llvm::DenseSet<const Op *> inTower;
    for (auto it = module.ops().rbegin(); it != module.ops().rend(); ++it) {
      Op *op = it->get();
      bool leadsToStep = false;
      for (unsigned i = 0; i < op->numResults(); ++i)
        leadsToStep |= needed.count(op->result(i)) != 0;
      if (!leadsToStep || !batchDependent.count(op->result(0)))
        continue;
      if (op->def().has(ir::kSideEffect) || op->def().has(ir::kCommunication))
        return ir::makeError(module.sourceFile(), op->loc,
                             "op '" + std::string(op->name()) +
                                 "' cannot be copied into towers: it writes state or communicates");
      inTower.insert(op);
      for (Value *v : op->operands())
        needed.insert(v);
    }

    // Values a tower computes that something outside the towers reads.
    llvm::DenseSet<const Value *> leaving{module.loss->value};
    for (const ir::Gradient &g : module.gradients)
      leaving.insert(g.value);
    for (const auto &op : module.ops())
      if (!inTower.count(op.get()))
        for (Value *v : op->operands())
          leaving.insert(v);

    std::vector<Op *> original;
    for (const auto &op : module.ops())
      original.push_back(op.get());
    // The first op that reads a tower value without being in a tower: towers and combines go
    // just before it; everything before it that no tower needs stays where it is.
    Op *firstAfter = nullptr;
    for (Op *op : original) {
      if (inTower.count(op))
        continue;
      bool readsTower = false;
      for (Value *v : op->operands())
        readsTower |= v->kind() == ir::ValueKind::OpResult && inTower.count(v->definingOp());
      if (readsTower) {
        firstAfter = op;
        break;
      }
    }
    // Shared ops after that point that towers read (none in a lowered step, but a hand-written
    // module may order them so) move up before the towers.
    if (firstAfter) {
      bool afterTowers = false;
      llvm::DenseSet<const Value *> towerReads;
      for (Op *op : original)
        if (inTower.count(op))
          for (Value *v : op->operands())
            towerReads.insert(v);
      for (Op *op : original) {
        afterTowers |= op == firstAfter;
        if (!afterTowers || inTower.count(op))
          continue;
        bool readByTower = false;
        for (unsigned i = 0; i < op->numResults(); ++i)
          readByTower |= towerReads.count(op->result(i)) != 0;
        if (readByTower)
          return ir::makeError(module.sourceFile(), op->loc,
                               "op '" + std::string(op->name()) +
                                   "' both reads the towers' values and is read by them");
      }
    }

    // Copy the towers, tower by tower, each reading its slice of every input.
    std::vector<llvm::DenseMap<const Value *, Value *>> towerValue(towers);
    int64_t copied = 0;
    for (int64_t t = 0; t < towers; ++t) {
      std::string device = "cpu:" + std::to_string(t);
      std::string suffix = ".t" + std::to_string(t);
      for (const auto &input : module.inputs()) {
        AttrMap attrs;
        attrs.set("tower", Attr::integer(t));
        attrs.set("towers", Attr::integer(towers));
        attrs.set("device", Attr::string(device));
        Op *slice =
            module.createOp(ir::getOp("tower_slice"), {input->value.get()}, std::move(attrs),
                            {module.uniqueName(input->name() + suffix)}, firstAfter);
        slice->result()->setType(input->value->maybeType());
        towerValue[t][input->value.get()] = slice->result();
      }
      for (Op *op : original) {
        if (!inTower.count(op))
          continue;
        llvm::SmallVector<Value *, 4> operands;
        for (Value *v : op->operands()) {
          Value *mapped = towerValue[t].lookup(v);
          operands.push_back(mapped ? mapped : v);
        }
        std::vector<std::string> names;
        for (unsigned i = 0; i < op->numResults(); ++i)
          names.push_back(module.uniqueName(op->result(i)->name() + suffix));
        AttrMap attrs = op->attrs;
        attrs.set("device", Attr::string(device));
        Op *copy = module.createOp(op->def(), operands, std::move(attrs), names, firstAfter);
        copy->loc = op->loc;
        if (t == 0)
          copy->trivia = op->trivia;
        for (unsigned i = 0; i < op->numResults(); ++i) {
          copy->result(i)->setType(op->result(i)->maybeType());
          towerValue[t][op->result(i)] = copy->result(i);
        }
        ++copied;
      }
    }

    // Join every value that leaves the towers, then drop the originals (last first, so every
    // reader is gone before what it reads).
    int64_t combined = 0;
    for (Op *op : original) {
      if (!inTower.count(op))
        continue;
      for (unsigned i = 0; i < op->numResults(); ++i) {
        Value *v = op->result(i);
        if (!leaving.count(v))
          continue;
        llvm::SmallVector<Value *, 8> parts;
        for (int64_t t = 0; t < towers; ++t)
          parts.push_back(towerValue[t][v]);
        std::string name = v->name();
        module.renameValue(v, module.uniqueName(name + ".original"));
        Op *combine = module.createOp(ir::getOp("combine_towers"), parts, {}, {name}, firstAfter);
        combine->result()->setType(v->maybeType());
        module.replaceAllUses(v, combine->result());
        ++combined;
      }
    }
    for (auto it = original.rbegin(); it != original.rend(); ++it)
      if (inTower.count(*it))
        module.eraseOp(*it);
    count("ops per tower", copied / towers);
    count("values combined", combined);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createReplicateInGraphPass() {
  return std::make_unique<ReplicateInGraph>();
}

} // namespace prism::passes
