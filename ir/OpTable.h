// The op table: every op is declared once, as data: operands, attributes, shape rule, gradient
// rule, which operand gradients are sparse, cost, traits. Passes ask the table; they do not
// switch on op names.
#pragma once

#include <string>
#include <vector>

#include "ir/Attribute.h"
#include "ir/Module.h"
#include "ir/Type.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::ir {

class GradientContext;

struct AttrSpec {
  std::string name;
  AttrKind kind;
  bool required = false;
  Attr dflt; // used when not required and absent
  std::string doc;
  // False for an optional attribute whose absence is a case of its own (no label ignored):
  // withDefaults leaves it out, and the signature writes `name?`.
  bool hasDefault = true;
};

enum OpTrait : uint32_t {
  kElementwise = 1u << 0,   // result[i] depends on operand[i] only (after broadcasting)
  kCommutative = 1u << 1,   // operands 0 and 1 may be swapped
  kSideEffect = 1u << 2,    // writes state at step end (assign, apply_*): never removed or merged
  kCommunication = 1u << 3, // moves data between tasks (or a task's devices)
  kOptimizerUpdate = 1u << 4,
  kRandom = 1u << 5,            // draws random numbers: never merged
  kGradientOnly = 1u << 6,      // exists to express a gradient rule
  kOnParameterServer = 1u << 7, // runs on the PS task that holds its variable operand
  // Calls a function of the module (`callee`): as many results as the function has, no shape
  // rule of its own; the inline pass replaces it with the function's body.
  kCall = 1u << 8,
  // Its result for one example depends on the other examples of its batch (batch_norm's
  // statistics): each worker, tower and micro-batch computes it over its own part of a split
  // batch, which differs from one device's result over the whole batch.
  kBatchStatistics = 1u << 9,
  // Its result is the batch-weighted mean of its operand over every part of the step's batch
  // (replica_mean): the replicating passes join the towers' operands and all-reduce over the
  // workers; on one device it is its operand. Micro-batches, which run one after another, cannot
  // take part (gradient accumulation refuses it).
  kReplicaMean = 1u << 10
};

struct OpCost {
  double flops = 0; // floating-point operations per step
  double bytes = 0; // bytes read + written per step
};

using ShapeRule = llvm::Expected<llvm::SmallVector<TensorType, 1>> (*)(
    llvm::ArrayRef<TensorType> operands, const AttrMap &attrs);
using GradRule = void (*)(GradientContext &ctx);
using StateUpdateRule = llvm::Error (*)(Module &module, const Op &op);
// Replaces `op` by ops that compute it when its attributes ask for it (batch_norm with sync =
// true: its statistics through replica_mean); returns whether it did.
using ExpandRule = llvm::Expected<bool> (*)(Module &module, Op &op);
using CostRule = OpCost (*)(llvm::ArrayRef<TensorType> operands, llvm::ArrayRef<TensorType> results,
                            const AttrMap &attrs, int64_t batch);

struct OpDef {
  std::string name;
  std::string summary;               // one line, for docs and `--help`
  std::vector<std::string> operands; // names, for docs and arity errors
  bool variadic = false;             // the last operand repeats (one or more times)
  unsigned optionalOperands = 0;     // the last ones may be left out (not with variadic)
  unsigned numResults = 1;
  bool resultPerOperand = false; // one result per operand (all_reduce); numResults is unused
  std::vector<AttrSpec> attrs;
  ShapeRule shape = nullptr;
  GradRule gradient = nullptr;     // null: not differentiable
  uint32_t sparseGradOperands = 0; // bit i: the gradient for operand i is sparse
  uint32_t writtenOperands = 0;    // bit i: operand i must be a variable; written at step end
  // Bit i: float operand i gets no gradient from the rule: state the op reads, not a function
  // of the parameters (batch_norm's running averages).
  uint32_t noGradientOperands = 0;
  // Emits the ops that write the state the op keeps in variables at step end (batch_norm's
  // running averages); lower-optimizer calls it for every op that has one. Null: no state.
  StateUpdateRule stateUpdate = nullptr;
  // Called by the expand pass before autodiff for every op that has one. Null: never expanded.
  ExpandRule expand = nullptr;
  CostRule cost = nullptr; // null: elementwise-like default
  uint32_t traits = 0;
  // Bit i: operand i is read in the op's compute precision (ir/Precision.h). Non-zero for the
  // ops that may compute in bf16/fp16 (matrix products, convolutions); every other op keeps
  // float32 (softmax, losses, norms, reductions, updates, communication).
  uint32_t reducedPrecisionOperands = 0;

  bool has(OpTrait t) const { return (traits & t) != 0; }
  bool differentiable() const { return gradient != nullptr; }
  // Operands past the 32 the masks describe (a variadic op's tail) have neither property.
  bool sparseGradient(unsigned operand) const {
    return operand < 32 && ((sparseGradOperands >> operand) & 1u);
  }
  bool writes(unsigned operand) const {
    return operand < 32 && ((writtenOperands >> operand) & 1u);
  }
  bool getsGradient(unsigned operand) const {
    return operand >= 32 || ((noGradientOperands >> operand) & 1u) == 0;
  }
  bool readsInComputePrecision(unsigned operand) const {
    return operand < 32 && ((reducedPrecisionOperands >> operand) & 1u);
  }
  const AttrSpec *attrSpec(llvm::StringRef name) const;
  unsigned minOperands() const { return static_cast<unsigned>(operands.size()) - optionalOperands; }
  unsigned maxOperands() const { return static_cast<unsigned>(operands.size()); }
  unsigned resultCount(unsigned numOperands) const {
    return resultPerOperand ? numOperands : numResults;
  }
  // `matmul(a, b, transpose_a = false, transpose_b = false)`
  std::string signature() const;
};

// Every registered op, in registration order (grouped by family).
llvm::ArrayRef<const OpDef *> allOps();
const OpDef *lookupOp(llvm::StringRef name);
// For code that names an op it knows exists (gradient rules, passes).
const OpDef &getOp(llvm::StringRef name);

// The attributes with defaults filled in for everything the op declares and the map lacks.
AttrMap withDefaults(const OpDef &def, const AttrMap &attrs);

// The attribute every op accepts: the device of its task it runs on (`device = "cpu:1"`).
constexpr const char *kDeviceAttr = "device";

// softmax_cross_entropy's optional label that counts for nothing: read by the kernels, the
// trainer's accuracy, and prism verify (a mean over counted positions does not split exactly).
constexpr const char *kIgnoreIndexAttr = "ignore_index";
// batch_norm's choice of statistics: true, the whole step's batch over every worker and tower
// (its expand rule reduces them with replica_mean); false, each part's own. prism verify reads
// it: only synchronized batch statistics split exactly.
constexpr const char *kSyncAttr = "sync";
// The attribute of the ops that draw random numbers (kRandom) that names their stream of draws;
// empty (the default): the name of the op's first result. Passes that copy or rename such an
// op (in-graph towers) set it, so that the copy draws what the original would.
constexpr const char *kRandomKeyAttr = "key";
// The stream a kRandom op draws from.
std::string randomStreamKey(const Op &op);

// Checks arity and attributes (unknown names, kinds, missing required ones) against the table.
llvm::Error checkSignature(const OpDef &def, unsigned numOperands, const AttrMap &attrs);

// Result types from operand types (which must all be known), with the op's diagnostics.
llvm::Expected<llvm::SmallVector<TensorType, 1>> inferResultTypes(const Op &op);

OpCost opCost(const Op &op, int64_t batch);
// Whether `op` is an optimizer update from a sparse gradient (lazy updates): it touches the rows
// the gradient holds, a step's, where its cost rule (opCost) counts the whole variable.
bool isRowUpdate(const Op &op);

// What a gradient rule sees: the forward op, the gradients flowing into its results, and a way
// to emit backward ops. It records one gradient per operand (or none).
class GradientContext {
public:
  GradientContext(Module &module, const Op &op, llvm::ArrayRef<Value *> resultGrads)
      : module_(module), op_(op), resultGrads_(resultGrads.begin(), resultGrads.end()),
        operandGrads_(op.numOperands(), nullptr) {}

  const Op &op() const { return op_; }
  Value *operand(unsigned i) const { return op_.operand(i); }
  Value *result(unsigned i = 0) const { return op_.result(i); }
  const AttrMap &attrs() const { return op_.attrs; }
  // Attribute values with the table's defaults applied.
  AttrMap resolvedAttrs() const { return withDefaults(op_.def(), op_.attrs); }
  // The gradient flowing into result i; null when nothing downstream needs it.
  Value *resultGrad(unsigned i = 0) const { return resultGrads_[i]; }

  // Emits a one-result backward op (types inferred) and returns its result.
  Value *emit(llvm::StringRef opName, llvm::ArrayRef<Value *> operands, AttrMap attrs = {});
  void setGrad(unsigned operand, Value *grad) { operandGrads_[operand] = grad; }
  llvm::ArrayRef<Value *> operandGrads() const { return operandGrads_; }
  Module &module() { return module_; }

  // Set when an emitted op failed type inference (a bug in a gradient rule).
  llvm::Error takeError() { return std::move(error_); }

private:
  Module &module_;
  const Op &op_;
  llvm::SmallVector<Value *, 2> resultGrads_;
  llvm::SmallVector<Value *, 4> operandGrads_;
  llvm::Error error_ = llvm::Error::success();
};

} // namespace prism::ir
