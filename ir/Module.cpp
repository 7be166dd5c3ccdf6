// The module and its values and ops.
#include "ir/Module.h"

#include <algorithm>
#include <cassert>

#include "ir/OpTable.h"

namespace prism::ir {

llvm::StringRef Op::name() const {
  return def_->name;
}

Value *Op::addResult(std::string name, std::optional<TensorType> type) {
  auto v = std::make_unique<Value>();
  v->kind_ = ValueKind::OpResult;
  v->op_ = this;
  v->resultIndex_ = static_cast<unsigned>(results_.size());
  v->type_ = std::move(type);
  Value *raw = v.get();
  results_.push_back(std::move(v));
  raw->name_ = parent_->uniqueName(name.empty() ? llvm::StringRef("t") : llvm::StringRef(name));
  parent_->registerName(raw);
  return raw;
}

Input *Module::addInput(llvm::StringRef name, TensorType type) {
  auto in = std::make_unique<Input>();
  in->value = std::make_unique<Value>();
  in->value->kind_ = ValueKind::Input;
  in->value->input_ = in.get();
  in->value->name_ = name.str();
  in->value->type_ = std::move(type);
  registerName(in->value.get());
  inputs_.push_back(std::move(in));
  return inputs_.back().get();
}

Variable *Module::addVariable(llvm::StringRef name, TensorType type, Initializer init) {
  auto var = std::make_unique<Variable>();
  var->value = std::make_unique<Value>();
  var->value->kind_ = ValueKind::Variable;
  var->value->variable_ = var.get();
  var->value->name_ = name.str();
  var->value->type_ = std::move(type);
  var->init = std::move(init);
  registerName(var->value.get());
  variables_.push_back(std::move(var));
  return variables_.back().get();
}

Op *Module::createOp(const OpDef &def, llvm::ArrayRef<Value *> operands, AttrMap attrs,
                     llvm::ArrayRef<std::string> resultNames, Op *before) {
  auto op = std::make_unique<Op>(&def, this);
  op->setOperands(operands);
  op->attrs = std::move(attrs);
  unsigned n = def.resultCount(static_cast<unsigned>(operands.size()));
  for (unsigned i = 0; i < n; ++i)
    op->addResult(i < resultNames.size() ? resultNames[i] : std::string());
  Op *raw = op.get();
  if (before) {
    auto it = std::find_if(ops_.begin(), ops_.end(),
                           [&](const std::unique_ptr<Op> &o) { return o.get() == before; });
    ops_.insert(it, std::move(op));
  } else {
    ops_.push_back(std::move(op));
  }
  return raw;
}

void Module::eraseOp(Op *op) {
  for (unsigned i = 0; i < op->numResults(); ++i)
    unregisterName(op->result(i));
  ops_.erase(std::remove_if(ops_.begin(), ops_.end(),
                            [&](const std::unique_ptr<Op> &o) { return o.get() == op; }),
             ops_.end());
}

void Module::eraseVariable(Variable *variable) {
  unregisterName(variable->value.get());
  variables_.erase(
      std::remove_if(variables_.begin(), variables_.end(),
                     [&](const std::unique_ptr<Variable> &v) { return v.get() == variable; }),
      variables_.end());
}

void Module::eraseInput(Input *input) {
  unregisterName(input->value.get());
  inputs_.erase(std::remove_if(inputs_.begin(), inputs_.end(),
                               [&](const std::unique_ptr<Input> &i) { return i.get() == input; }),
                inputs_.end());
}

void Module::moveOp(Op *op, Op *before) {
  auto it = std::find_if(ops_.begin(), ops_.end(),
                         [&](const std::unique_ptr<Op> &o) { return o.get() == op; });
  assert(it != ops_.end());
  std::unique_ptr<Op> owned = std::move(*it);
  ops_.erase(it);
  if (!before) {
    ops_.push_back(std::move(owned));
    return;
  }
  auto pos = std::find_if(ops_.begin(), ops_.end(),
                          [&](const std::unique_ptr<Op> &o) { return o.get() == before; });
  ops_.insert(pos, std::move(owned));
}

size_t Module::indexOf(const Op *op) const {
  for (size_t i = 0; i < ops_.size(); ++i)
    if (ops_[i].get() == op)
      return i;
  return ops_.size();
}

const Gradient *Module::gradientOf(const Variable *var) const {
  for (const Gradient &g : gradients)
    if (g.variable == var)
      return &g;
  return nullptr;
}

Value *Module::lookup(llvm::StringRef name) const {
  auto it = names_.find(name);
  return it == names_.end() ? nullptr : it->second;
}

Input *Module::findInput(llvm::StringRef name) const {
  Value *v = lookup(name);
  return v ? v->input() : nullptr;
}

Variable *Module::findVariable(llvm::StringRef name) const {
  Value *v = lookup(name);
  return v ? v->variable() : nullptr;
}

std::string Module::uniqueName(llvm::StringRef base) const {
  if (!names_.count(base))
    return base.str();
  for (unsigned i = 1;; ++i) {
    std::string candidate = (base + "." + llvm::Twine(i)).str();
    if (!names_.count(candidate))
      return candidate;
  }
}

void Module::renameValue(Value *v, llvm::StringRef newName) {
  unregisterName(v);
  v->name_ = uniqueName(newName);
  registerName(v);
}

void Module::registerName(Value *v) {
  names_[v->name_] = v;
}

void Module::unregisterName(const Value *v) {
  auto it = names_.find(v->name_);
  if (it != names_.end() && it->second == v)
    names_.erase(it);
}

llvm::DenseMap<const Value *, llvm::SmallVector<Op *, 2>> Module::users() const {
  llvm::DenseMap<const Value *, llvm::SmallVector<Op *, 2>> result;
  for (const auto &op : ops_)
    for (Value *v : op->operands())
      result[v].push_back(op.get());
  return result;
}

void Module::replaceAllUses(Value *from, Value *to) {
  for (const auto &op : ops_)
    for (unsigned i = 0; i < op->numOperands(); ++i)
      if (op->operand(i) == from)
        op->setOperand(i, to);
  if (loss && loss->value == from)
    loss->value = to;
  for (Gradient &g : gradients)
    if (g.value == from)
      g.value = to;
}

std::unique_ptr<Module> Module::clone(llvm::DenseMap<const Value *, Value *> *valueMap) const {
  auto out = std::make_unique<Module>(name_);
  out->sourceFile_ = sourceFile_;
  out->headerTrivia = headerTrivia;
  out->footerComments = footerComments;
  llvm::DenseMap<const Value *, Value *> map;
  llvm::DenseMap<const Variable *, Variable *> varMap;
  for (const auto &in : inputs_) {
    Input *copy = out->addInput(in->name(), in->value->hasType() ? in->type() : TensorType());
    copy->value->setType(in->value->maybeType());
    copy->loc = in->loc;
    copy->trivia = in->trivia;
    map[in->value.get()] = copy->value.get();
  }
  for (const auto &var : variables_) {
    Variable *copy = out->addVariable(var->name(), TensorType(), var->init);
    copy->value->setType(var->value->maybeType());
    copy->attrs = var->attrs;
    copy->loc = var->loc;
    copy->trivia = var->trivia;
    map[var->value.get()] = copy->value.get();
    varMap[var.get()] = copy;
  }
  for (const auto &op : ops_) {
    auto copy = std::make_unique<Op>(op->def_, out.get());
    for (Value *v : op->operands()) {
      auto it = map.find(v);
      assert(it != map.end() && "operand defined after its use");
      copy->operands_.push_back(it->second);
    }
    copy->attrs = op->attrs;
    copy->loc = op->loc;
    copy->trivia = op->trivia;
    for (unsigned i = 0; i < op->numResults(); ++i) {
      Value *r = copy->addResult(op->result(i)->name(), op->result(i)->maybeType());
      map[op->result(i)] = r;
    }
    out->ops_.push_back(std::move(copy));
  }
  out->optimizer = optimizer;
  if (loss) {
    out->loss = *loss;
    out->loss->value = loss->value ? map.lookup(loss->value) : nullptr;
  }
  for (const Gradient &g : gradients) {
    Gradient copy = g;
    copy.variable = varMap.lookup(g.variable);
    copy.value = map.lookup(g.value);
    out->gradients.push_back(copy);
  }
  if (valueMap)
    *valueMap = std::move(map);
  return out;
}

} // namespace prism::ir
