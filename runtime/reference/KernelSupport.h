// Shared pieces of the reference kernels: errors, result allocation, index walking,
// broadcasting, and the registration function of each kernel family. Only the Kernels*.cpp
// files include this.
#pragma once

#include "ir/Diagnostic.h"
#include "runtime/reference/Kernels.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"

namespace prism::runtime::reference::kernels {

using KernelTable = llvm::StringMap<Kernel>;

inline llvm::Error kernelError(const llvm::Twine &message) {
  return ir::makeError(message);
}

// A zero tensor of result i's dtype and (dense) shape.
inline Tensor zeroResult(const KernelArgs &args, unsigned i = 0) {
  return Tensor(args.resultDType(i), args.resultShape(i));
}

inline KernelResults single(Tensor t) {
  KernelResults r;
  r.push_back(std::move(t));
  return r;
}

// Calls fn(index) for every index of `shape` in row-major order.
void forEachIndex(llvm::ArrayRef<int64_t> shape,
                  llvm::function_ref<void(llvm::ArrayRef<int64_t>)> fn);

// sum(index[i] * strides[i])
int64_t offsetOf(llvm::ArrayRef<int64_t> index, llvm::ArrayRef<int64_t> strides);

// Strides of an operand of shape `operand` read at indices of the broadcast shape `out`
// (numpy rules, aligned at the last dimension): 0 along dimensions the operand repeats.
Shape broadcastStrides(llvm::ArrayRef<int64_t> operand, llvm::ArrayRef<int64_t> out);

// `axis` made non-negative for a rank (the shape rule has already range-checked it).
inline int64_t normalizedAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

void registerElementwiseKernels(KernelTable &table);
void registerNeuralNetKernels(KernelTable &table);
void registerConvKernels(KernelTable &table);
void registerShapeKernels(KernelTable &table);
void registerSparseKernels(KernelTable &table);
void registerOptimizerKernels(KernelTable &table);
void registerFusedKernels(KernelTable &table);
void registerTrainingModeKernels(KernelTable &table); // dropout

} // namespace prism::runtime::reference::kernels
