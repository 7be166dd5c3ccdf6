// The reference interpreter: executes any module one step at a time with plain loops in
// float64. It is the oracle for gradient checks and for optimized kernels and distributed runs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/Module.h"
#include "runtime/StepContext.h"
#include "runtime/reference/Tensor.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::reference {

// Input name -> the tensor fed for it in one step.
using Feeds = std::map<std::string, Tensor>;

struct StepResult {
  int64_t batch = -1;         // B as bound from the feeds; -1 when no input has B
  std::optional<double> loss; // the loss value, when the module declares a loss
};

// One step (see docs/runtime.md): the feeds bind B; every variable is read once at the start;
// ops run in program order; the writes of side-effect ops (assign, apply_*) are stored at the
// end, in program order, so no read of the step sees them. A failed step changes no variable.
// The module must outlive the interpreter and keep its ops while the interpreter is used.
class ReferenceInterpreter {
public:
  // `context`: training or evaluation, the seed and the first step's number and example
  // offset that random ops (dropout) draw by; each training step moves the step number on.
  explicit ReferenceInterpreter(const ir::Module &module, StepContext context = {});

  // The mode, seed, step number and example offset of the next step.
  const StepContext &context() const { return context_; }
  void setContext(const StepContext &context) { context_ = context; }

  // Gives every variable its initializer's value; random draws depend only on (seed, name).
  llvm::Error initializeVariables(uint64_t seed);
  // The current value of a variable (after the updates of the last step); null if unknown
  // or not yet set.
  const Tensor *variable(llvm::StringRef name) const;
  // Replaces a variable's value; it must match the variable's type.
  llvm::Error setVariable(llvm::StringRef name, Tensor value);

  llvm::Expected<StepResult> step(const Feeds &feeds);

  // A value of the last step by name: an input as fed, a variable as read at step start, or
  // an op result. Null when the name is unknown or the value was not computed.
  const Tensor *value(llvm::StringRef name) const;
  // The last step's value of the gradient the module records for a variable
  // (`gradient w = %d.w`); null when it records none.
  const Tensor *gradient(llvm::StringRef variable) const;

private:
  llvm::Error resolveTypes();
  llvm::Expected<int64_t> bindFeeds(const Feeds &feeds);
  llvm::Error runOp(const ir::Op &op, int64_t batch,
                    std::vector<std::pair<const ir::Variable *, Tensor>> &writes);

  const ir::Module &module_;
  StepContext context_;
  llvm::DenseMap<const ir::Value *, ir::TensorType> types_;
  llvm::StringMap<Tensor> variables_;
  llvm::DenseMap<const ir::Value *, Tensor> values_;
};

} // namespace prism::runtime::reference
