// The table of kernels by (op, device kind): the CPU families are built in, other devices add
// theirs with registerKernelFamily.
#include <array>
#include <mutex>

#include "ir/Diagnostic.h"
#include "runtime/cpu/Kernel.h"
#include "llvm/ADT/StringMap.h"

namespace prism::runtime {

using KernelMap = llvm::StringMap<KernelFactory>;

struct KernelTable {
  std::mutex mutex;                 // guards kernels once the table is built
  std::array<KernelMap, 2> kernels; // by ir::DeviceKind

  KernelMap &of(ir::DeviceKind kind) { return kernels[static_cast<size_t>(kind)]; }
  static KernelRegistry registryFor(KernelMap &map) { return KernelRegistry(&map); }
};

namespace {

KernelTable &table() {
  static KernelTable *table = [] {
    auto *t = new KernelTable;
    KernelRegistry cpu = KernelTable::registryFor(t->of(ir::DeviceKind::Cpu));
    cpu::registerElementwiseKernels(cpu);
    cpu::registerDenseKernels(cpu);
    cpu::registerShapeKernels(cpu);
    cpu::registerLossKernels(cpu);
    cpu::registerSparseKernels(cpu);
    cpu::registerOptimizerKernels(cpu);
    cpu::registerFusedKernels(cpu);
    cpu::registerCommunicationKernels(cpu);
    cpu::registerTrainingModeKernels(cpu);
    return t;
  }();
  return *table;
}

} // namespace

void registerKernelFamily(ir::DeviceKind kind, void (*registerFamily)(KernelRegistry &)) {
  KernelTable &t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  KernelRegistry registry = KernelTable::registryFor(t.of(kind));
  registerFamily(registry);
}

KernelFactory findKernel(llvm::StringRef opName, ir::DeviceKind kind) {
  KernelTable &t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  const KernelMap &kernels = t.of(kind);
  auto it = kernels.find(opName);
  return it == kernels.end() ? nullptr : it->second;
}

llvm::Error checkKernels(const ir::Module &module, ir::DeviceKind kind) {
  for (const auto &op : module.ops())
    if (!findKernel(op->name(), kind))
      return ir::withLocation(ir::makeError(ir::ErrorCode::Unsupported,
                                            "no " + ir::deviceKindName(kind) + " kernel for '" +
                                                op->name() + "' in model '" + module.name() + "'"),
                              module.sourceFile(), op->loc);
  return llvm::Error::success();
}

llvm::Error noCommunication(const KernelSpec &spec) {
  return ir::makeError("'" + spec.op->name().str() +
                       "' needs the distributed runtime: run the plan with `prism run`, not as a "
                       "single-device model");
}

} // namespace prism::runtime
