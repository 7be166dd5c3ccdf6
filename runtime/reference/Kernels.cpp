// The reference kernel table and the helpers the kernel families share.
#include "runtime/reference/KernelSupport.h"

namespace prism::runtime::reference {

namespace kernels {

void forEachIndex(llvm::ArrayRef<int64_t> shape,
                  llvm::function_ref<void(llvm::ArrayRef<int64_t>)> fn) {
  for (int64_t d : shape)
    if (d <= 0)
      return;
  Shape index(shape.size(), 0);
  while (true) {
    fn(index);
    size_t i = shape.size();
    while (i > 0 && ++index[i - 1] == shape[i - 1]) {
      index[i - 1] = 0;
      --i;
    }
    if (i == 0)
      return;
  }
}

int64_t offsetOf(llvm::ArrayRef<int64_t> index, llvm::ArrayRef<int64_t> strides) {
  int64_t offset = 0;
  for (size_t i = 0; i < index.size(); ++i)
    offset += index[i] * strides[i];
  return offset;
}

Shape broadcastStrides(llvm::ArrayRef<int64_t> operand, llvm::ArrayRef<int64_t> out) {
  Shape own = rowMajorStrides(operand);
  Shape strides(out.size(), 0);
  size_t lead = out.size() - operand.size();
  for (size_t i = 0; i < operand.size(); ++i)
    strides[lead + i] = operand[i] == 1 && out[lead + i] != 1 ? 0 : own[i];
  return strides;
}

} // namespace kernels

namespace {
const kernels::KernelTable &table() {
  static const kernels::KernelTable t = [] {
    kernels::KernelTable t;
    kernels::registerElementwiseKernels(t);
    kernels::registerNeuralNetKernels(t);
    kernels::registerConvKernels(t);
    kernels::registerShapeKernels(t);
    kernels::registerSparseKernels(t);
    kernels::registerOptimizerKernels(t);
    kernels::registerFusedKernels(t);
    kernels::registerTrainingModeKernels(t);
    return t;
  }();
  return t;
}
} // namespace

const Kernel *lookupKernel(llvm::StringRef opName) {
  auto it = table().find(opName);
  return it == table().end() ? nullptr : &it->second;
}

} // namespace prism::runtime::reference
