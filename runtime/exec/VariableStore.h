// Variables (weights and optimizer state) by name, shared by the executors of one model (the
// training step and the evaluation step).
#pragma once

#include <cstdint>

#include "ir/Module.h"
#include "runtime/Tensor.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

namespace prism::runtime {

class VariableStore {
public:
  // Allocates every variable of the module that the store lacks and gives it its initial
  // value (the seed rule of docs/runtime.md, identical to the reference interpreter's). A
  // variable held by parameter servers gets an empty tensor (the task reads it through
  // communication ops); a PS task's share of a table gets its rows of the whole table's value.
  llvm::Error initialize(const ir::Module &module, uint64_t seed);
  Tensor *find(llvm::StringRef name);
  const Tensor *find(llvm::StringRef name) const;
  void set(llvm::StringRef name, Tensor value) { values_[name] = std::move(value); }
  const llvm::StringMap<Tensor> &all() const { return values_; }

private:
  llvm::StringMap<Tensor> values_;
};

} // namespace prism::runtime
