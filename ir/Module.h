// The module: inputs, variables, ops over SSA values, the loss and optimizer, the gradients.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/Attribute.h"
#include "ir/Diagnostic.h"
#include "ir/Type.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

namespace prism::ir {

struct OpDef;
class Op;
class Module;
struct Input;
struct Variable;

// Comments and spacing attached to a statement, so that printing a parsed file gives it back.
struct Trivia {
  std::vector<std::string> leadingComments; // full-line comments above, without `//`
  bool blankLineBefore = false;
  std::string trailingComment; // a `// ...` comment at the end of the statement's line
};

enum class ValueKind : uint8_t { Input, Variable, OpResult };

class Value;

// A read of a value by an op: its operand number `operand`.
struct OpUse {
  Op *op;
  unsigned operand;
};

// A read of a value from outside the ops: the loss, a gradient. While it points at a value it is
// registered with it, so the value counts it among its uses and Module::replaceAllUses moves
// it. Copies register too; one whose value is destroyed becomes null.
class ValueUse {
public:
  ValueUse() = default;
  ValueUse(Value *value) { reset(value); } // implicit: `gradient.value = v` reads as before
  ValueUse(const ValueUse &other) { reset(other.value_); }
  ValueUse &operator=(const ValueUse &other) {
    reset(other.value_);
    return *this;
  }
  ValueUse &operator=(Value *value) {
    reset(value);
    return *this;
  }
  ~ValueUse() { reset(nullptr); }

  Value *get() const { return value_; }
  operator Value *() const { return value_; }
  Value *operator->() const { return value_; }

private:
  friend class Value;
  void reset(Value *value);
  Value *value_ = nullptr;
};

// An SSA value: a data feed, a variable's value at step start, or an op result. It knows every
// read of it (its use-list), kept up to date by every change to the module.
class Value {
public:
  Value() = default;
  Value(const Value &) = delete;
  Value &operator=(const Value &) = delete;
  ~Value();

  ValueKind kind() const { return kind_; }
  const std::string &name() const { return name_; }
  void setName(std::string name) { name_ = std::move(name); }
  bool hasType() const { return type_.has_value(); }
  const TensorType &type() const { return *type_; }
  const std::optional<TensorType> &maybeType() const { return type_; }
  void setType(std::optional<TensorType> type) { type_ = std::move(type); }

  // Exactly one of these is set, by kind.
  Input *input() const { return input_; }
  Variable *variable() const { return variable_; }
  Op *definingOp() const { return op_; }
  unsigned resultIndex() const { return resultIndex_; }

  // How the value prints as an operand: `x`, `w1`, `%h`.
  std::string ref() const { return kind_ == ValueKind::OpResult ? "%" + name_ : name_; }

  // Every operand that reads this value (an op reading it twice appears twice), in no
  // particular order.
  llvm::ArrayRef<OpUse> uses() const { return uses_; }
  // The ops that read this value, each once, in program order.
  llvm::SmallVector<Op *, 2> users() const;
  // The loss or a gradient is this value.
  bool readOutsideOps() const { return !outsideUses_.empty(); }
  // Anything reads it: an op, the loss, a gradient.
  bool hasUses() const { return !uses_.empty() || !outsideUses_.empty(); }
  // Reads by ops (operands) and from outside the ops (the loss, gradients).
  size_t numUses() const { return uses_.size() + outsideUses_.size(); }

private:
  friend class Module;
  friend class Op;
  friend class ValueUse;
  ValueKind kind_ = ValueKind::OpResult;
  std::string name_;
  std::optional<TensorType> type_;
  Input *input_ = nullptr;
  Variable *variable_ = nullptr;
  Op *op_ = nullptr;
  unsigned resultIndex_ = 0;
  // Unordered; each op remembers where its operands' entries are, so a use is removed in O(1).
  llvm::SmallVector<OpUse, 2> uses_;
  llvm::SmallVector<ValueUse *, 1> outsideUses_;
};

// `input x : f32[B, 784]`
struct Input {
  std::unique_ptr<Value> value;
  SourceLoc loc;
  Trivia trivia;
  const std::string &name() const { return value->name(); }
  const TensorType &type() const { return value->type(); }
};

// How a variable gets its first value: `zeros`, `glorot_uniform`, `normal(stddev = 0.01)`.
struct Initializer {
  std::string kind;
  AttrMap params;
  bool operator==(const Initializer &o) const { return kind == o.kind && params == o.params; }
};

// `var w1 : f32[784, 256] = glorot_uniform {trainable = false}`
struct Variable {
  std::unique_ptr<Value> value;
  Initializer init;
  AttrMap attrs; // `trainable` (default true), `grad` (dense|sparse|mixed, set by autodiff), ...
  SourceLoc loc;
  Trivia trivia;
  const std::string &name() const { return value->name(); }
  const TensorType &type() const { return value->type(); }
  bool trainable() const { return attrs.getBool("trainable", true); }
};

// One operation. Operands point at values; results are owned here. Ops are made by the
// module (Module::createOp) and live in its op list.
class Op {
public:
  Op(const Op &) = delete;
  Op &operator=(const Op &) = delete;

  const OpDef &def() const { return *def_; }
  llvm::StringRef name() const;
  Module *parent() const { return parent_; }

  llvm::ArrayRef<Value *> operands() const { return operands_; }
  Value *operand(unsigned i) const { return operands_[i]; }
  unsigned numOperands() const { return static_cast<unsigned>(operands_.size()); }
  // Both keep the use-lists of the old and new operands up to date.
  void setOperand(unsigned i, Value *v);
  void setOperands(llvm::ArrayRef<Value *> vs);

  unsigned numResults() const { return static_cast<unsigned>(results_.size()); }
  Value *result(unsigned i = 0) const { return results_[i].get(); }
  Value *addResult(std::string name, std::optional<TensorType> type = std::nullopt);

  // The ops just before and after this one in program order; null at the ends.
  Op *prev() const;
  Op *next() const;
  // Whether this op comes before `other` in program order (both in one module). O(1), after a
  // renumbering of the module's ops when insertions have used up the room between numbers (so
  // even on a const module it may write: not for concurrent use).
  bool isBefore(const Op &other) const;

  AttrMap attrs;
  SourceLoc loc;
  Trivia trivia;

private:
  friend class Module;
  Op(const OpDef *def, Module *parent) : def_(def), parent_(parent) {}
  void addUse(unsigned i);
  void removeUse(unsigned i);

  const OpDef *def_;
  Module *parent_;
  llvm::SmallVector<Value *, 4> operands_;
  // useSlots_[i]: where operand i's entry is in operands_[i]->uses_.
  llvm::SmallVector<unsigned, 4> useSlots_;
  llvm::SmallVector<std::unique_ptr<Value>, 1> results_;
  std::list<std::unique_ptr<Op>>::iterator position_; // in the module's op list
  uint64_t order_ = 0; // increases along the op list (see Module::ensureOrder)
};

// The name of an op's span in a trace, measured (runtime::ExecutorOptions::trace) or predicted
// (plan::simulateStep): the op and what it computes, "matmul %h1", "all_reduce %loss", or for an
// op without results what it updates, "apply_adam w1".
std::string opSpanName(const Op &op);

// `minimize %loss with adam(lr = 0.001)`: declares the loss and the optimizer together. Once
// lower-optimizer has turned the optimizer into update ops, the module keeps only the loss and
// prints `loss %loss`.
// One phase of a learning-rate schedule as written: `cosine(total = 10000, final = 0.0)`.
// ir/LearningRateSchedule.h knows the kinds, checks them and evaluates the schedule.
struct SchedulePhase {
  std::string kind; // constant | warmup_linear | step_decay | exponential | cosine
  AttrMap params;
  SourceLoc loc;
};

struct Optimizer {
  std::string kind; // sgd | momentum | adam
  AttrMap params;   // lr, beta1, ..., and clip_norm for global-norm clipping
  // `schedule = PHASE` or `schedule = [PHASE, PHASE]`: the factor lr is multiplied by at each
  // step; empty: lr is constant.
  std::vector<SchedulePhase> schedule;
  SourceLoc loc;
};

struct Loss {
  ValueUse value;
  SourceLoc loc;
  Trivia trivia;
};

// `gradient w1 = %d.w1`: the gradient of the loss with respect to a variable (set by autodiff).
struct Gradient {
  Variable *variable = nullptr;
  ValueUse value;
  SourceLoc loc;
  Trivia trivia;
};

// `data "zipf:100000,tokens=20,classes=10"`: the data set the model is written for, in the syntax
// of `--data` (docs/data.md), which `prism train` and `prism verify` use when given none. The IR
// keeps the text; whoever opens the data parses it and places its errors at `loc`.
struct DataDefault {
  std::string spec;
  SourceLoc loc;
  Trivia trivia;
};

// The ops of a module in program order. Iterators stay valid while other ops are inserted or
// erased.
using OpList = std::list<std::unique_ptr<Op>>;

// A parameter of a function: `%x` stands for any value of the caller, a bare `w` for one of its
// inputs or variables (the weights a call shares with the model).
struct FunctionParam {
  bool isValue = true; // written `%x`
  SourceLoc loc;
};

// `func @lstm_cell(%x, %h, %c, w, b) -> (%h2, %c2) { ... }`: ops defined once and called many
// times (`%h1, %c1 = @lstm_cell(...)`). The body is a module of its own whose inputs are the
// parameters (untyped: a body takes the types of each call) and whose ops compute the results.
// The inline pass expands every call before autodiff (docs/ir.md, "Functions").
struct Function {
  std::string name; // without `@`
  std::unique_ptr<Module> body;
  std::vector<FunctionParam> params; // parallel to body->inputs()
  std::vector<ValueUse> results;     // values of the body (a parameter may be one)
  SourceLoc loc;
  Trivia trivia;  // above `func`; its trailing comment ends the header's line
  Trivia closing; // comments before the body's closing `}`, and after it on its line

  Function();
  ~Function();
  Function(Function &&) noexcept;
  Function &operator=(Function &&) noexcept;
  // A copy whose body and results are new values.
  Function clone() const;
};

class Module {
public:
  explicit Module(std::string name = "model") : name_(std::move(name)) {}
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;
  ~Module();

  const std::string &name() const { return name_; }
  void setName(std::string name) { name_ = std::move(name); }
  // The file the module was read from (for diagnostics); empty for built modules.
  const std::string &sourceFile() const { return sourceFile_; }
  void setSourceFile(std::string file) { sourceFile_ = std::move(file); }

  Trivia headerTrivia;                     // comments above `model`
  std::vector<std::string> footerComments; // comments before the closing `}`

  Input *addInput(llvm::StringRef name, TensorType type);
  Variable *addVariable(llvm::StringRef name, TensorType type, Initializer init);
  // Creates an op at the end, or before `before`; results are named from the hints (made unique).
  Op *createOp(const OpDef &def, llvm::ArrayRef<Value *> operands, AttrMap attrs,
               llvm::ArrayRef<std::string> resultNames, Op *before = nullptr);
  // Removes an op; its results must have no uses left. O(operands).
  void eraseOp(Op *op);
  // Removes a variable (or an input) no op, gradient or loss reads. O(variables).
  void eraseVariable(Variable *variable);
  void eraseInput(Input *input);
  // Removes every variable (input) `doomed` picks, each unread, in one pass: O(variables).
  void eraseVariablesIf(llvm::function_ref<bool(const Variable &)> doomed);
  void eraseInputsIf(llvm::function_ref<bool(const Input &)> doomed);
  // Moves `op` to just before `before` (or to the end when null).
  void moveOp(Op *op, Op *before);

  const std::vector<std::unique_ptr<Input>> &inputs() const { return inputs_; }
  const std::vector<std::unique_ptr<Variable>> &variables() const { return variables_; }
  const OpList &ops() const { return ops_; }

  std::optional<DataDefault> data;
  // In definition order; a body may call only functions defined before it, so calls never
  // recurse.
  std::vector<Function> functions;
  const Function *findFunction(llvm::StringRef name) const;
  std::optional<Loss> loss;
  std::optional<Optimizer> optimizer; // set only together with `loss`
  std::vector<Gradient> gradients;
  const Gradient *gradientOf(const Variable *var) const;

  Value *lookup(llvm::StringRef name) const;
  Input *findInput(llvm::StringRef name) const;
  Variable *findVariable(llvm::StringRef name) const;
  // `base` if free, else `base.1`, `base.2`, ...
  std::string uniqueName(llvm::StringRef base) const;
  // Records a rename (values keep their names unique through this).
  void renameValue(Value *v, llvm::StringRef newName);

  // Replaces every use of `from` (operands, the loss, gradients) with `to`; O(uses of `from`).
  // The readers of a value are Value::uses() and Value::users().
  void replaceAllUses(Value *from, Value *to);
  // Replaces the operand uses of `from` that `which` selects (not the loss or gradients) with
  // `to`; O(uses of `from`).
  void replaceUsesIf(Value *from, Value *to, llvm::function_ref<bool(const OpUse &)> which);

  // A deep copy; `valueMap`, when given, receives old → new for every value.
  std::unique_ptr<Module> clone(llvm::DenseMap<const Value *, Value *> *valueMap = nullptr) const;
  // A copy with only the ops `keep` selects (which must hold the defining op of every operand of
  // each op it holds), the inputs and variables they read, and no loss, optimizer or gradients: a
  // part of a large module without copying the rest first.
  std::unique_ptr<Module> cloneOps(const llvm::DenseSet<const Op *> &keep) const;

private:
  friend class Op;
  // clone (every op) and cloneOps (those in `keep`).
  std::unique_ptr<Module> cloneSelected(llvm::DenseMap<const Value *, Value *> *valueMap,
                                        const llvm::DenseSet<const Op *> *keep) const;
  void registerName(Value *v);
  void unregisterName(const Value *v);
  // Puts a new op into the list before `before` (at the end when null) with its uses.
  Op *insertOp(std::unique_ptr<Op> op, Op *before);
  // Gives `op`, just placed, an order number between its neighbours', or marks the numbers
  // stale when there is no room.
  void placeOrder(Op *op);
  // Renumbers every op when the numbers are stale.
  void ensureOrder() const;

  std::string name_;
  std::string sourceFile_;
  std::vector<std::unique_ptr<Input>> inputs_;
  std::vector<std::unique_ptr<Variable>> variables_;
  OpList ops_;
  llvm::StringMap<Value *> names_;
  // For each base of uniqueName: every `base.N` below this number is taken.
  mutable llvm::StringMap<unsigned> freeSuffixFrom_;
  mutable bool orderStale_ = false;
};

} // namespace prism::ir
