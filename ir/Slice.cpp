// Dependency slices.
#include "ir/Slice.h"

namespace prism::ir {
namespace {

// Walks operands from the ops on `work`, adding what `filter` takes to `slice`.
void walkBackward(std::vector<const Op *> &work, OpSet &slice, SliceFilter filter) {
  while (!work.empty()) {
    const Op *op = work.back();
    work.pop_back();
    if ((filter && !filter(*op)) || !slice.insert(op).second)
      continue;
    for (const Value *v : op->operands())
      if (v && v->definingOp() && !slice.count(v->definingOp()))
        work.push_back(v->definingOp());
  }
}

} // namespace

void addBackwardSlice(llvm::ArrayRef<const Value *> roots, OpSet &slice, SliceFilter filter) {
  std::vector<const Op *> work;
  for (const Value *v : roots)
    if (v && v->definingOp())
      work.push_back(v->definingOp());
  walkBackward(work, slice, filter);
}

void addBackwardSlice(llvm::ArrayRef<const Op *> roots, OpSet &slice, SliceFilter filter) {
  std::vector<const Op *> work(roots.begin(), roots.end());
  walkBackward(work, slice, filter);
}

OpSet backwardSlice(llvm::ArrayRef<const Value *> roots, SliceFilter filter) {
  OpSet slice;
  addBackwardSlice(roots, slice, filter);
  return slice;
}

OpSet forwardSlice(llvm::ArrayRef<const Value *> roots, SliceFilter filter) {
  OpSet slice;
  std::vector<const Value *> work(roots.begin(), roots.end());
  while (!work.empty()) {
    const Value *v = work.back();
    work.pop_back();
    for (const OpUse &use : v->uses()) {
      if ((filter && !filter(*use.op)) || !slice.insert(use.op).second)
        continue;
      for (unsigned i = 0; i < use.op->numResults(); ++i)
        work.push_back(use.op->result(i));
    }
  }
  return slice;
}

std::vector<const Value *> stepOutputs(const Module &module) {
  std::vector<const Value *> outputs;
  if (module.loss && module.loss->value)
    outputs.push_back(module.loss->value);
  for (const Gradient &g : module.gradients)
    outputs.push_back(g.value);
  return outputs;
}

std::vector<Op *> inProgramOrder(const Module &module, const OpSet &slice) {
  std::vector<Op *> ordered;
  ordered.reserve(slice.size());
  for (const auto &op : module.ops())
    if (slice.count(op.get()))
      ordered.push_back(op.get());
  return ordered;
}

} // namespace prism::ir
