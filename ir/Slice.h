// Dependency slices: the ops a set of values depends on (walking operands backwards), and the
// ops that depend on a set of values (walking uses forwards). One walk, shared by the passes,
// the partitioner and the executor.
#pragma once

#include <vector>

#include "ir/Module.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace prism::ir {

using OpSet = llvm::DenseSet<const Op *>;
// Which ops a walk may take: an op it rejects is left out and not walked through. Null: every
// op.
using SliceFilter = llvm::function_ref<bool(const Op &)>;

// Adds to `slice` the ops defining `roots` and, transitively, the ops defining their operands.
// Ops already in `slice` are not walked again, so a slice can grow over several calls.
// O(ops added + their operands).
void addBackwardSlice(llvm::ArrayRef<const Value *> roots, OpSet &slice,
                      SliceFilter filter = nullptr);
// The same from ops: each root op (that `filter` takes) joins the slice with what it depends on.
void addBackwardSlice(llvm::ArrayRef<const Op *> roots, OpSet &slice, SliceFilter filter = nullptr);
OpSet backwardSlice(llvm::ArrayRef<const Value *> roots, SliceFilter filter = nullptr);

// The ops that read `roots` and, transitively, the ops that read their results.
OpSet forwardSlice(llvm::ArrayRef<const Value *> roots, SliceFilter filter = nullptr);

// The loss and every gradient: what a training step computes for its caller.
std::vector<const Value *> stepOutputs(const Module &module);

// The ops of `slice` in program order. O(ops in the module).
std::vector<Op *> inProgramOrder(const Module &module, const OpSet &slice);

} // namespace prism::ir
