// What the oneDNN-backed kernels share: the CPU engine and streams, error conversion, primitive
// attributes, and the thread count in force while primitives are made.
#pragma once

#include "oneapi/dnnl/dnnl.hpp"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::cpu::onednn {

// The process's CPU engine: one for all kernels, made on first use.
dnnl::engine &engine();
// A CPU stream of the calling thread. A CPU stream holds no queue of its own, but executors of
// several in-process devices may step on separate threads, so each thread gets its own.
dnnl::stream &stream();

// `what` failed inside oneDNN: an llvm::Error that says which op and why.
llvm::Error toError(const dnnl::error &e, llvm::StringRef opName, llvm::StringRef what);

// oneDNN sizes its thread decomposition when a primitive is created and runs exactly that many
// OpenMP threads afterwards; kernels are built before the executor sets the step's thread
// count, so each factory makes its primitives under the count the kernel will run with.
class ScopedOmpThreads {
public:
  explicit ScopedOmpThreads(int threads);
  ~ScopedOmpThreads();
  ScopedOmpThreads(const ScopedOmpThreads &) = delete;
  ScopedOmpThreads &operator=(const ScopedOmpThreads &) = delete;

private:
  int previous_;
};

// The attributes every primitive is made with: user scratchpad mode, so each kernel owns its
// temporary buffers. oneDNN's default scratchpad is shared between primitives and would race
// when two executors step at the same time.
dnnl::primitive_attr primitiveAttr();

// A buffer of oneDNN layout `desc` that the kernel owns (a blocked copy of weights, a pooling
// workspace): allocated by oneDNN, once.
dnnl::memory ownedMemory(const dnnl::memory::desc &desc);
// A memory object over user data whose pointer is bound at run time with set_data_handle.
dnnl::memory unboundMemory(const dnnl::memory::desc &desc);

} // namespace prism::runtime::cpu::onednn
