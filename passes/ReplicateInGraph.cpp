// replicate-in-graph: copies the per-example part of a training step into one tower per local
// device (tower i's ops are pinned to CPU device i, ir/Device.h), each reading its slice of the
// task's batch, and joins the towers' losses and gradients (and per-channel statistics that
// variable writes read) with combine_towers, so the task pushes or all-reduces once (local
// aggregation) and its update ops run once. A replica_mean (synchronized batch statistics) is one
// shared op between two segments of the towers, over the towers' combined operands.
#include <string>
#include <vector>

#include "ir/Device.h"
#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "ir/Slice.h"
#include "passes/ParallelizeOptions.h"
#include "passes/Pass.h"
#include "llvm/ADT/DenseMap.h"

namespace prism::passes {
namespace {

using ir::Attr;
using ir::AttrMap;
using ir::Op;
using ir::OpSet;
using ir::Value;

// Each tower's copy of every value the towers compute (and of every input: its slice).
using TowerValues = std::vector<llvm::DenseMap<const Value *, Value *>>;

bool readsTowerValue(const Op &op, const OpSet &inTower) {
  for (const Value *v : op.operands())
    if (v->definingOp() && inTower.count(v->definingOp()))
      return true;
  return false;
}

class ReplicateInGraph : public Pass {
public:
  llvm::StringRef name() const override { return "replicate-in-graph"; }
  llvm::StringRef summary() const override {
    return "one tower per local device over slices of the batch; tower gradients combined";
  }
  std::vector<std::string> optionKeys() const override { return {"devices"}; }

  llvm::Expected<bool> run(ir::Module &module, const PassOptions &passOptions) override {
    auto options = ReplicateOptions::fromPassOptions(passOptions);
    if (!options)
      return options.takeError();
    if (!module.loss || module.gradients.empty())
      return ir::makeError(module.sourceFile(), {},
                           "replicate-in-graph needs a training step: run autodiff first");
    count("towers", options->devices);
    if (options->devices == 1)
      return false;
    const int64_t towers = options->devices;

    auto inTower = findTowerOps(module);
    if (!inTower)
      return inTower.takeError();
    // The first op that reads a tower value without being in a tower: towers and combines go
    // just before it; everything before it that no tower needs stays where it is.
    Op *firstAfter = nullptr;
    for (const auto &op : module.ops())
      if (!inTower->count(op.get()) && readsTowerValue(*op, *inTower)) {
        firstAfter = op.get();
        break;
      }
    if (auto err = checkSharedOpsAfter(module, *inTower, firstAfter))
      return std::move(err);
    if (auto err = checkNoExamplesLeave(module, *inTower))
      return std::move(err);

    std::vector<Op *> original = ir::inProgramOrder(module, *inTower);
    TowerValues towerValues(towers);
    // The towers are copied in segments split at each replica_mean: every tower's copy of a
    // segment (the first after the tower's slices of the inputs), then one shared mean of the
    // towers' operands, which the next segments read.
    llvm::ArrayRef<Op *> ops = original;
    int64_t shared = 0;
    for (size_t begin = 0, i = 0; i <= ops.size(); ++i) {
      if (i < ops.size() && !ops[i]->def().has(ir::kReplicaMean))
        continue;
      for (int64_t t = 0; t < towers; ++t) {
        if (begin == 0)
          sliceInputs(module, t, towers, towerValues[t], firstAfter);
        copyOps(module, ops.slice(begin, i - begin), t, towerValues[t], firstAfter);
      }
      if (i < ops.size()) {
        shareReplicaMean(module, *ops[i], towerValues, firstAfter);
        ++shared;
      }
      begin = i + 1;
    }
    int64_t combined = combineLeavingValues(module, original, *inTower, towerValues, firstAfter);
    // Last first, so every reader is gone before what it reads.
    for (auto it = original.rbegin(); it != original.rend(); ++it)
      module.eraseOp(*it);
    count("ops per tower", static_cast<int64_t>(original.size()));
    count("values combined", combined);
    count("replica means shared", shared);
    return true;
  }

private:
  // A tower computes what depends on the batch and leads to the loss, a gradient, or a variable
  // write straight from the forward pass (batch_norm's moments for its running averages). What
  // reads no input (constants, the step counter) is computed once and shared; what consumes
  // gradients (clipping, updates) runs once on the combined gradients.
  static llvm::Expected<OpSet> findTowerOps(const ir::Module &module) {
    std::vector<const Value *> inputs;
    for (const auto &input : module.inputs())
      inputs.push_back(input->value.get());
    OpSet batchDependent = ir::forwardSlice(inputs);
    std::vector<const Value *> roots = ir::stepOutputs(module);
    OpSet afterOutputs = ir::forwardSlice(roots);
    for (const auto &op : module.ops())
      if (op->def().has(ir::kSideEffect))
        for (const Value *v : op->operands())
          if (const Op *producer = v->definingOp();
              producer && batchDependent.count(producer) && !afterOutputs.count(producer))
            roots.push_back(v);
    OpSet inTower =
        ir::backwardSlice(roots, [&](const Op &op) { return batchDependent.count(&op) != 0; });
    for (const Op *op : ir::inProgramOrder(module, inTower))
      if (op->def().has(ir::kSideEffect) || op->def().has(ir::kCommunication))
        return ir::makeError(module.sourceFile(), op->loc,
                             "op '" + std::string(op->name()) +
                                 "' cannot be copied into towers: it writes state or communicates");
    return inTower;
  }

  // Shared ops after `firstAfter` that towers read (none in a lowered step, but a hand-written
  // module may order them so) would have to move up before the towers; one that also reads the
  // towers' values cannot.
  static llvm::Error checkSharedOpsAfter(const ir::Module &module, const OpSet &inTower,
                                         const Op *firstAfter) {
    for (const Op *op = firstAfter; op; op = op->next()) {
      if (inTower.count(op))
        continue;
      for (unsigned i = 0; i < op->numResults(); ++i)
        for (const ir::OpUse &use : op->result(i)->uses())
          if (inTower.count(use.op))
            return ir::makeError(module.sourceFile(), op->loc,
                                 "op '" + std::string(op->name()) +
                                     "' both reads the towers' values and is read by them");
    }
    return llvm::Error::success();
  }

  // combine_towers joins values by their batch-weighted mean: right for losses and gradients,
  // meaningless for a value with a row per example (batch_norm_update's x, which would need the
  // towers' rows, not their mean). A shared op reading one is refused.
  static llvm::Error checkNoExamplesLeave(const ir::Module &module, const OpSet &inTower) {
    for (const auto &op : module.ops()) {
      if (inTower.count(op.get()))
        continue;
      for (const Value *v : op->operands())
        if (v->definingOp() && inTower.count(v->definingOp()) && v->hasType() &&
            v->type().hasBatchDim())
          return ir::makeError(module.sourceFile(), op->loc,
                               "op '" + std::string(op->name()) + "' reads " + v->ref() + " (" +
                                   v->type().str() +
                                   ", a row per example) outside the towers, which combine only "
                                   "values without a batch dimension: replicate between graphs "
                                   "instead (one worker per device)");
    }
    return llvm::Error::success();
  }

  static ir::DeviceId towerDevice(int64_t t) {
    return ir::DeviceId{ir::DeviceKind::Cpu, static_cast<int>(t)};
  }

  static std::string towerSuffix(int64_t t) { return ".t" + std::to_string(t); }

  // Tower `t` of `towers` reads its slice of every input (on device cpu:t).
  static void sliceInputs(ir::Module &module, int64_t t, int64_t towers,
                          llvm::DenseMap<const Value *, Value *> &towerValue, Op *before) {
    const ir::DeviceId device = towerDevice(t);
    const std::string suffix = towerSuffix(t);
    for (const auto &input : module.inputs()) {
      AttrMap attrs;
      attrs.set("tower", Attr::integer(t));
      attrs.set("towers", Attr::integer(towers));
      Op *slice = module.createOp(ir::getOp("tower_slice"), {input->value.get()}, std::move(attrs),
                                  {module.uniqueName(input->name() + suffix)}, before);
      ir::setOpDevice(*slice, device);
      slice->result()->setType(input->value->maybeType());
      towerValue[input->value.get()] = slice->result();
    }
  }

  // Copies `original` (tower ops, in program order) for tower `t` on device cpu:t.
  static void copyOps(ir::Module &module, llvm::ArrayRef<Op *> original, int64_t t,
                      llvm::DenseMap<const Value *, Value *> &towerValue, Op *before) {
    const ir::DeviceId device = towerDevice(t);
    const std::string suffix = towerSuffix(t);
    for (Op *op : original) {
      llvm::SmallVector<Value *, 4> operands;
      for (Value *v : op->operands()) {
        Value *mapped = towerValue.lookup(v);
        operands.push_back(mapped ? mapped : v);
      }
      std::vector<std::string> names;
      for (unsigned i = 0; i < op->numResults(); ++i)
        names.push_back(module.uniqueName(op->result(i)->name() + suffix));
      AttrMap attrs = op->attrs;
      // A copy draws the original's random numbers (its examples' share of them), not a
      // stream named after the copy.
      if (op->def().has(ir::kRandom))
        attrs.set(ir::kRandomKeyAttr, Attr::string(ir::randomStreamKey(*op)));
      Op *copy = module.createOp(op->def(), operands, std::move(attrs), names, before);
      ir::setOpDevice(*copy, device);
      copy->loc = op->loc;
      if (t == 0)
        copy->trivia = op->trivia;
      for (unsigned i = 0; i < op->numResults(); ++i) {
        copy->result(i)->setType(op->result(i)->maybeType());
        towerValue[op->result(i)] = copy->result(i);
      }
    }
  }

  // One replica_mean for all towers, under the original's name, of the towers' operands joined
  // by combine_towers (their batch-weighted mean, which the workers' all-reduce continues):
  // every tower and every later reader reads it.
  static void shareReplicaMean(ir::Module &module, Op &mean, TowerValues &towerValues, Op *before) {
    Value *operand = mean.operand(0);
    llvm::SmallVector<Value *, 8> parts;
    for (const auto &towerValue : towerValues) {
      Value *part = towerValue.lookup(operand);
      parts.push_back(part ? part : operand);
    }
    Value *result = mean.result();
    std::string name = result->name();
    module.renameValue(result, module.uniqueName(name + ".original"));
    Op *combine = module.createOp(ir::getOp("combine_towers"), parts, {},
                                  {module.uniqueName(name + ".towers")}, before);
    combine->result()->setType(operand->maybeType());
    Op *shared = module.createOp(mean.def(), {combine->result()}, mean.attrs, {name}, before);
    shared->loc = combine->loc = mean.loc;
    shared->result()->setType(result->maybeType());
    for (auto &towerValue : towerValues)
      towerValue[result] = shared->result();
    module.replaceAllUses(result, shared->result());
  }

  // Joins every value that leaves the towers (read by the loss, a gradient or a shared op)
  // with combine_towers under the value's name; returns how many. A replica_mean's result
  // already is one shared value.
  static int64_t combineLeavingValues(ir::Module &module, llvm::ArrayRef<Op *> original,
                                      const OpSet &inTower, const TowerValues &towerValues,
                                      Op *before) {
    int64_t combined = 0;
    for (Op *op : original)
      for (unsigned i = 0; i < op->numResults() && !op->def().has(ir::kReplicaMean); ++i) {
        Value *v = op->result(i);
        bool leaves = v->readOutsideOps();
        for (const ir::OpUse &use : v->uses())
          leaves |= !inTower.count(use.op);
        if (!leaves)
          continue;
        llvm::SmallVector<Value *, 8> parts;
        for (const auto &towerValue : towerValues)
          parts.push_back(towerValue.lookup(v));
        std::string name = v->name();
        module.renameValue(v, module.uniqueName(name + ".original"));
        Op *combine = module.createOp(ir::getOp("combine_towers"), parts, {}, {name}, before);
        combine->result()->setType(v->maybeType());
        module.replaceAllUses(v, combine->result());
        ++combined;
      }
    return combined;
  }
};

} // namespace

std::unique_ptr<Pass> createReplicateInGraphPass() {
  return std::make_unique<ReplicateInGraph>();
}

} // namespace prism::passes
