// The module: inputs, variables, ops over SSA values, the loss and optimizer, the gradients.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/Attribute.h"
#include "ir/Diagnostic.h"
#include "ir/Type.h"
#include "llvm/ADT/DenseMap.h"
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

// An SSA value: a data feed, a variable's value at step start, or an op result.
class Value {
public:
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

private:
  friend class Module;
  friend class Op;
  ValueKind kind_ = ValueKind::OpResult;
  std::string name_;
  std::optional<TensorType> type_;
  Input *input_ = nullptr;
  Variable *variable_ = nullptr;
  Op *op_ = nullptr;
  unsigned resultIndex_ = 0;
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

// One operation. Operands point at values; results are owned here.
class Op {
public:
  Op(const OpDef *def, Module *parent) : def_(def), parent_(parent) {}

  const OpDef &def() const { return *def_; }
  llvm::StringRef name() const;
  Module *parent() const { return parent_; }

  llvm::ArrayRef<Value *> operands() const { return operands_; }
  Value *operand(unsigned i) const { return operands_[i]; }
  unsigned numOperands() const { return static_cast<unsigned>(operands_.size()); }
  void setOperand(unsigned i, Value *v) { operands_[i] = v; }
  void setOperands(llvm::ArrayRef<Value *> vs) { operands_.assign(vs.begin(), vs.end()); }

  unsigned numResults() const { return static_cast<unsigned>(results_.size()); }
  Value *result(unsigned i = 0) const { return results_[i].get(); }
  Value *addResult(std::string name, std::optional<TensorType> type = std::nullopt);

  AttrMap attrs;
  SourceLoc loc;
  Trivia trivia;

private:
  friend class Module;
  const OpDef *def_;
  Module *parent_;
  llvm::SmallVector<Value *, 4> operands_;
  llvm::SmallVector<std::unique_ptr<Value>, 1> results_;
};

// `minimize %loss with adam(lr = 0.001)`: declares the loss and the optimizer together. Once
// lower-optimizer has turned the optimizer into update ops, the module keeps only the loss and
// prints `loss %loss`.
struct Optimizer {
  std::string kind; // sgd | momentum | adam
  AttrMap params;   // lr, beta1, ..., and clip_norm for global-norm clipping
  SourceLoc loc;
};

struct Loss {
  Value *value = nullptr;
  SourceLoc loc;
  Trivia trivia;
};

// `gradient w1 = %d.w1`: the gradient of the loss with respect to a variable (set by autodiff).
struct Gradient {
  Variable *variable = nullptr;
  Value *value = nullptr;
  SourceLoc loc;
  Trivia trivia;
};

class Module {
public:
  explicit Module(std::string name = "model") : name_(std::move(name)) {}
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;

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
  // Removes an op; its results must have no users left.
  void eraseOp(Op *op);
  // Removes a variable (or an input) no op, gradient or loss reads.
  void eraseVariable(Variable *variable);
  void eraseInput(Input *input);
  // Moves `op` to just before `before` (or to the end when null).
  void moveOp(Op *op, Op *before);

  const std::vector<std::unique_ptr<Input>> &inputs() const { return inputs_; }
  const std::vector<std::unique_ptr<Variable>> &variables() const { return variables_; }
  const std::vector<std::unique_ptr<Op>> &ops() const { return ops_; }
  size_t indexOf(const Op *op) const;

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

  // Every op that reads each value, in program order.
  llvm::DenseMap<const Value *, llvm::SmallVector<Op *, 2>> users() const;
  // Replaces every operand use of `from` (ops, loss, gradients) with `to`.
  void replaceAllUses(Value *from, Value *to);

  // A deep copy; `valueMap`, when given, receives old → new for every value.
  std::unique_ptr<Module> clone(llvm::DenseMap<const Value *, Value *> *valueMap = nullptr) const;

private:
  friend class Op;
  void registerName(Value *v);
  void unregisterName(const Value *v);

  std::string name_;
  std::string sourceFile_;
  std::vector<std::unique_ptr<Input>> inputs_;
  std::vector<std::unique_ptr<Variable>> variables_;
  std::vector<std::unique_ptr<Op>> ops_;
  llvm::StringMap<Value *> names_;
};

} // namespace prism::ir
