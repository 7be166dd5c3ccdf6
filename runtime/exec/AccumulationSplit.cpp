// The micro-step / step split of a training step (see AccumulationSplit.h).
#include "runtime/exec/AccumulationSplit.h"

#include <algorithm>

#include "ir/Collectives.h"
#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "llvm/ADT/DenseSet.h"

namespace prism::runtime {
namespace {

// Ops that run once per optimizer step whatever they read: variable writes and all-reduces
// (their results are means over the workers' whole steps).
bool runsOncePerStep(const ir::Op &op) {
  const ir::OpDef &def = op.def();
  return def.has(ir::kSideEffect) || (def.has(ir::kCommunication) && def.resultPerOperand);
}

bool hasBatchDim(const ir::TensorType &t) {
  return std::find(t.dims.begin(), t.dims.end(), ir::kBatchDim) != t.dims.end();
}

// replica_mean, or the all_reduce a worker program has in its place: statistics of the step's
// whole batch, which micro-batches, running one after another, cannot give each other.
bool meansOverReplicas(const ir::Op &op) {
  return op.def().has(ir::kReplicaMean) ||
         (op.def().has(ir::kCommunication) && op.def().resultPerOperand && op.attrs.has("bucket") &&
          op.attrs.getInt("bucket") <= ir::kFirstReplicaMeanBucket);
}

} // namespace

llvm::Expected<AccumulationSplit> splitForAccumulation(const ir::Module &module) {
  for (const auto &op : module.ops())
    if (meansOverReplicas(*op))
      return ir::makeError(module.sourceFile(), op->loc,
                           "gradient accumulation: " + op->result(0)->ref() +
                               " is a mean over every part of the step's batch (batch_norm with "
                               "sync = true), but micro-batches run one after another and "
                               "cannot see each other's statistics: use sync = false or train "
                               "without --accumulate");
  // What the step part reads by name: the loss and the gradients.
  llvm::DenseSet<const ir::Value *> declared;
  if (module.loss)
    declared.insert(module.loss->value);
  for (const ir::Gradient &g : module.gradients)
    declared.insert(g.value);

  AccumulationSplit split;
  llvm::DenseSet<const ir::Op *> step;
  llvm::DenseSet<const ir::Value *> batchDependent;
  for (const auto &in : module.inputs())
    batchDependent.insert(in->value.get());
  for (const auto &owned : module.ops()) {
    const ir::Op *op = owned.get();
    bool inStep = runsOncePerStep(*op);
    bool dependent = false;
    for (const ir::Value *v : op->operands()) {
      const ir::Op *producer = v->definingOp();
      inStep |= declared.count(v) != 0 || (producer && step.count(producer));
      dependent |= batchDependent.count(v) != 0;
    }
    if (dependent)
      for (unsigned r = 0; r < op->numResults(); ++r)
        batchDependent.insert(op->result(r));
    if (inStep) {
      step.insert(op);
      split.stepOps.push_back(op);
    } else {
      split.microOps.push_back(op);
    }
  }

  // The values that cross: read by the step part, or read by name after the step.
  llvm::DenseSet<const ir::Value *> crossing;
  std::vector<const ir::Value *> ordered;
  auto cross = [&](const ir::Value *v) {
    const ir::Op *producer = v->definingOp();
    if (producer && !step.count(producer) && crossing.insert(v).second)
      ordered.push_back(v);
  };
  for (const ir::Op *op : split.stepOps)
    for (const ir::Value *v : op->operands()) {
      if (v->kind() == ir::ValueKind::Input)
        return ir::makeError(module.sourceFile(), op->loc,
                             "gradient accumulation: '" + op->name() +
                                 "', which runs once per optimizer step, reads the input '" +
                                 v->name() + "' of one micro-batch");
      cross(v);
    }
  for (const ir::Value *v : declared)
    cross(v);
  // In program order, for a stable layout.
  std::sort(ordered.begin(), ordered.end(), [](const ir::Value *a, const ir::Value *b) {
    if (a->definingOp() != b->definingOp())
      return a->definingOp()->isBefore(*b->definingOp());
    return a->name() < b->name();
  });
  for (const ir::Value *v : ordered) {
    if (!batchDependent.count(v)) {
      split.kept.push_back(v);
      continue;
    }
    const ir::TensorType &t = v->type();
    if (!ir::isFloat(t.dtype) || (!t.sparse && hasBatchDim(t)))
      return ir::makeError(module.sourceFile(), v->definingOp()->loc,
                           "gradient accumulation: " + v->ref() + " : " + t.str() +
                               " is read once per optimizer step but computed per micro-batch, "
                               "and only float values without the batch dimension can be "
                               "averaged over micro-batches");
    split.accumulated.push_back(v);
  }
  return split;
}

} // namespace prism::runtime
