// The reference kernels: one per op, in a table keyed by op name. A kernel computes an op's
// results from concrete operands in float64 with plain loops; it is the oracle that optimized
// kernels are compared against, so it favours obviousness over speed.
#pragma once

#include <cstdint>

#include "ir/Attribute.h"
#include "ir/Module.h"
#include "ir/Type.h"
#include "runtime/StepContext.h"
#include "runtime/reference/Tensor.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::reference {

// What a kernel sees of one op execution.
struct KernelArgs {
  const ir::Op &op;
  ir::AttrMap attrs; // the op's attributes with the table's defaults filled in
  llvm::SmallVector<const Tensor *, 4> operands;
  // The op's result types with B bound: concrete dims (a sparse result: its dense shape).
  llvm::SmallVector<ir::TensorType, 1> results;
  int64_t batch = -1;                // the bound batch size; -1 when no feed has B
  const StepContext *step = nullptr; // the step's mode, seed, number and example offset
  // Per result: its first dimension is B, one row per example of the batch.
  llvm::SmallVector<bool, 1> batchRows;

  const Tensor &operand(unsigned i) const { return *operands[i]; }
  unsigned numOperands() const { return static_cast<unsigned>(operands.size()); }
  llvm::ArrayRef<int64_t> resultShape(unsigned i = 0) const { return results[i].dims; }
  ir::DType resultDType(unsigned i = 0) const { return results[i].dtype; }
};

// An op's results, in order. An op with written operands (OpDef::writtenOperands: assign,
// apply_*) instead returns the new values of those operands, in operand order; the interpreter
// stores them at the end of the step.
using KernelResults = llvm::SmallVector<Tensor, 3>;
using KernelFn = llvm::Expected<KernelResults> (*)(const KernelArgs &args);

struct Kernel {
  KernelFn run = nullptr;
  uint32_t sparseOperands = 0; // bit i: operand i may be sparse; others must be dense
  bool acceptsSparse(unsigned operand) const {
    return operand < 32 && ((sparseOperands >> operand) & 1u) != 0;
  }
};

// The kernel of an op, or null when there is none.
const Kernel *lookupKernel(llvm::StringRef opName);

} // namespace prism::runtime::reference
