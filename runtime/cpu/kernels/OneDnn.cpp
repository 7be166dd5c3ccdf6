// The CPU engine and streams of the oneDNN kernels, and their shared helpers.
#include "runtime/cpu/kernels/OneDnn.h"

#include <omp.h>

#include "ir/Diagnostic.h"

namespace prism::runtime::cpu::onednn {

dnnl::engine &engine() {
  static dnnl::engine cpu(dnnl::engine::kind::cpu, 0);
  return cpu;
}

dnnl::stream &stream() {
  thread_local dnnl::stream perThread(engine());
  return perThread;
}

llvm::Error toError(const dnnl::error &e, llvm::StringRef opName, llvm::StringRef what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "oneDNN could not %s for '%s': %s (status %d)", what.str().c_str(),
                                 opName.str().c_str(), e.what(), static_cast<int>(e.status));
}

ScopedOmpThreads::ScopedOmpThreads(int threads) : previous_(omp_get_max_threads()) {
  if (threads > 0)
    omp_set_num_threads(threads);
}

ScopedOmpThreads::~ScopedOmpThreads() {
  omp_set_num_threads(previous_);
}

dnnl::primitive_attr primitiveAttr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::memory ownedMemory(const dnnl::memory::desc &desc) {
  return dnnl::memory(desc, engine());
}

dnnl::memory unboundMemory(const dnnl::memory::desc &desc) {
  return dnnl::memory(desc, engine(), DNNL_MEMORY_NONE);
}

} // namespace prism::runtime::cpu::onednn
