// The CPU executor: runs a module one training (or evaluation) step at a time with the CPU
// kernels. Per batch size it builds a program once: kernels with concrete shapes, and one arena
// whose offsets are planned from value lifetimes (a buffer is reused once its last reader ran).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/Module.h"
#include "runtime/Tensor.h"
#include "runtime/cpu/Communication.h"
#include "runtime/cpu/Kernel.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::cpu {

// Variables (weights and optimizer state) by name. Shared by the executors of one model, e.g.
// the training step and the evaluation step.
class VariableStore {
public:
  // Allocates every variable of the module that the store lacks and gives it its initial
  // value (the seed rule of docs/runtime.md, identical to the reference interpreter's).
  llvm::Error initialize(const ir::Module &module, uint64_t seed);
  Tensor *find(llvm::StringRef name);
  const Tensor *find(llvm::StringRef name) const;
  void set(llvm::StringRef name, Tensor value) { values_[name] = std::move(value); }
  const llvm::StringMap<Tensor> &all() const { return values_; }

private:
  llvm::StringMap<Tensor> values_;
};

struct ExecutorOptions {
  int threads = 1;
  // Values to compute and keep after a step (e.g. `logits` for evaluation). When non-empty,
  // only the ops these need run, and no variable is written.
  std::vector<std::string> outputs;
  // The task's links to other tasks, for communication ops (runtime/job); must outlive the
  // executor.
  Communication *communication = nullptr;
};

using Feeds = std::map<std::string, Tensor>;

class Executor {
public:
  // The module must outlive the executor.
  static llvm::Expected<std::unique_ptr<Executor>> create(const ir::Module &module,
                                                          std::shared_ptr<VariableStore> variables,
                                                          ExecutorOptions options = {});
  ~Executor();

  // One step: binds B from the feeds, runs the ops, applies variable updates at the end.
  llvm::Error step(const Feeds &feeds);

  // The loss of the last step (modules with a loss).
  std::optional<double> loss() const { return loss_; }
  // A kept output (ExecutorOptions::outputs) of the last step.
  const RuntimeValue *output(llvm::StringRef name) const;
  // The largest arena planned so far, in bytes (activations and gradients of one step).
  size_t arenaBytes() const;
  VariableStore &variables() { return *variables_; }

private:
  struct Program;
  Executor(const ir::Module &module, std::shared_ptr<VariableStore> variables,
           ExecutorOptions options);
  llvm::Error selectOps();
  void markSynchronization();
  llvm::Expected<Program *> programFor(int64_t batch);

  const ir::Module &module_;
  std::shared_ptr<VariableStore> variables_;
  ExecutorOptions options_;
  std::vector<const ir::Op *> order_; // ops to run: compute first, then variable writes
  int64_t towers_ = 1;                // in-graph towers: ops with `device = "cpu:i"`
  std::vector<bool> syncBefore_;      // parallel to order_: reads an all-reduce's results
  std::map<int64_t, std::unique_ptr<Program>> programs_;
  std::optional<double> loss_;
  llvm::StringMap<const ir::Value *> outputValues_;
  Program *last_ = nullptr;
};

} // namespace prism::runtime::cpu
