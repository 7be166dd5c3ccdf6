// The table of CPU kernels, filled once by the kernel families.
#include "runtime/cpu/Kernel.h"
#include "llvm/ADT/StringMap.h"

namespace prism::runtime::cpu {
namespace {

llvm::StringMap<KernelFactory> &table() {
  static llvm::StringMap<KernelFactory> kernels = [] {
    llvm::StringMap<KernelFactory> map;
    return map;
  }();
  return kernels;
}

void fill() {
  static bool done = [] {
    KernelRegistry registry;
    registerElementwiseKernels(registry);
    registerDenseKernels(registry);
    registerShapeKernels(registry);
    registerLossKernels(registry);
    registerSparseKernels(registry);
    registerOptimizerKernels(registry);
    registerFusedKernels(registry);
    registerCommunicationKernels(registry);
    return true;
  }();
  (void)done;
}

} // namespace

void KernelRegistry::add(llvm::StringRef opName, KernelFactory factory) {
  table()[opName] = factory;
}

KernelFactory findKernel(llvm::StringRef opName) {
  fill();
  auto it = table().find(opName);
  return it == table().end() ? nullptr : it->second;
}

std::vector<std::string> kernelOpNames() {
  fill();
  std::vector<std::string> names;
  for (const auto &entry : table())
    names.push_back(entry.getKey().str());
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace prism::runtime::cpu
