// The CPU kernel interface: a kernel is built once per op and batch size (shapes are then
// concrete, so it can plan primitives and scratch), and run once per step.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/Module.h"
#include "ir/Type.h"
#include "runtime/Tensor.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::cpu {

class Communication;

// A value at run time: a dense tensor, or a sparse value of dense shape [V, D...] carried as
// indices i64[n] and rows [n, D...] (n varies from step to step).
struct RuntimeValue {
  Tensor dense; // the value, or the rows of a sparse value
  Tensor indices;
  bool sparse = false;

  Tensor &rows() { return dense; }
  const Tensor &rows() const { return dense; }
  int64_t numRows() const { return sparse ? indices.numElements() : 0; }
};

// What a kernel is built from. Types have B bound to the batch size; a sparse type keeps `?`.
struct KernelSpec {
  const ir::Op *op = nullptr;
  ir::AttrMap attrs; // with the op table's defaults applied
  std::vector<ir::TensorType> inputTypes;
  std::vector<ir::TensorType> outputTypes;
  int threads = 1;
  int64_t batch = 0; // the task's batch this step (towers each take their slice of it)
  Communication *communication = nullptr; // null outside the distributed runtime
};

class Kernel {
public:
  virtual ~Kernel() = default;
  // `outputs` of dense type arrive allocated with their shapes (their storage may be reused
  // memory: write every element). Sparse outputs are filled by the kernel (indices and rows).
  // Ops that write variables get the variable's tensor as inputs[i] and update it in place.
  virtual llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                          llvm::ArrayRef<RuntimeValue *> outputs) = 0;
};

using KernelFactory = llvm::Expected<std::unique_ptr<Kernel>> (*)(const KernelSpec &spec);

// The CPU kernel of an op, or null when there is none.
KernelFactory findKernel(llvm::StringRef opName);
// Every op with a CPU kernel (for tests and `prism ops`).
std::vector<std::string> kernelOpNames();

// Each kernel family registers its kernels here (called once, from KernelRegistry.cpp).
class KernelRegistry {
public:
  void add(llvm::StringRef opName, KernelFactory factory);
};
void registerElementwiseKernels(KernelRegistry &registry);
void registerDenseKernels(KernelRegistry &registry); // matmul, conv, pools (oneDNN)
void registerShapeKernels(
    KernelRegistry &registry);                      // reshape, transpose, concat, slice, reductions
void registerLossKernels(KernelRegistry &registry); // softmax, log_softmax, cross-entropy
void registerSparseKernels(KernelRegistry &registry);        // gather, gather_grad, sparse_*
void registerOptimizerKernels(KernelRegistry &registry);     // apply_*, assign, clipping
void registerCommunicationKernels(KernelRegistry &registry); // all_reduce, ps_*, towers
void registerFusedKernels(
    KernelRegistry &registry); // fused_matmul, fused_conv2d, fused_elementwise

} // namespace prism::runtime::cpu
