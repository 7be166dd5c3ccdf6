// The module and its values and ops.
#include "ir/Module.h"

#include <algorithm>
#include <cassert>

#include "ir/OpTable.h"
#include "llvm/ADT/STLExtras.h"

namespace prism::ir {

namespace {
// Room between the order numbers of neighbouring ops after a renumbering: about 32 insertions
// at one place before the numbers go stale.
constexpr uint64_t kOrderGap = uint64_t(1) << 32;
} // namespace

void ValueUse::reset(Value *value) {
  if (value == value_)
    return;
  if (value_) {
    auto &uses = value_->outsideUses_;
    auto it = std::find(uses.begin(), uses.end(), this);
    assert(it != uses.end() && "a ValueUse missing from its value's list");
    *it = uses.back();
    uses.pop_back();
  }
  value_ = value;
  if (value_)
    value_->outsideUses_.push_back(this);
}

Value::~Value() {
  // The loss or a gradient outliving its value (a module torn down) is left null, not dangling.
  for (ValueUse *use : outsideUses_)
    use->value_ = nullptr;
}

llvm::SmallVector<Op *, 2> Value::users() const {
  llvm::SmallVector<Op *, 2> ops;
  for (const OpUse &use : uses_)
    ops.push_back(use.op);
  llvm::sort(ops, [](const Op *a, const Op *b) { return a->isBefore(*b); });
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
  return ops;
}

llvm::StringRef Op::name() const {
  return def_->name;
}

void Op::addUse(unsigned i) {
  Value *v = operands_[i];
  if (!v)
    return;
  useSlots_[i] = static_cast<unsigned>(v->uses_.size());
  v->uses_.push_back({this, i});
}

void Op::removeUse(unsigned i) {
  Value *v = operands_[i];
  if (!v)
    return;
  // Swap with the last entry, whose op learns its new place.
  unsigned slot = useSlots_[i];
  OpUse last = v->uses_.back();
  v->uses_[slot] = last;
  last.op->useSlots_[last.operand] = slot;
  v->uses_.pop_back();
}

void Op::setOperand(unsigned i, Value *v) {
  if (operands_[i] == v)
    return;
  removeUse(i);
  operands_[i] = v;
  addUse(i);
}

void Op::setOperands(llvm::ArrayRef<Value *> vs) {
  for (unsigned i = 0; i < numOperands(); ++i)
    removeUse(i);
  operands_.assign(vs.begin(), vs.end());
  useSlots_.assign(vs.size(), 0);
  for (unsigned i = 0; i < numOperands(); ++i)
    addUse(i);
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

Op *Op::prev() const {
  return position_ == parent_->ops_.begin() ? nullptr : std::prev(position_)->get();
}

Op *Op::next() const {
  auto after = std::next(position_);
  return after == parent_->ops_.end() ? nullptr : after->get();
}

bool Op::isBefore(const Op &other) const {
  assert(parent_ == other.parent_ && "ops of different modules");
  parent_->ensureOrder();
  return order_ < other.order_;
}

Module::~Module() {
  // The loss and gradients unregister from values that still exist.
  gradients.clear();
  loss.reset();
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
  std::unique_ptr<Op> op(new Op(&def, this));
  op->attrs = std::move(attrs);
  op->operands_.assign(operands.begin(), operands.end());
  // A call has its function's results, as many as the caller names.
  unsigned n = def.has(kCall) ? static_cast<unsigned>(resultNames.size())
                              : def.resultCount(static_cast<unsigned>(operands.size()));
  for (unsigned i = 0; i < n; ++i)
    op->addResult(i < resultNames.size() ? resultNames[i] : std::string());
  return insertOp(std::move(op), before);
}

Op *Module::insertOp(std::unique_ptr<Op> op, Op *before) {
  Op *raw = op.get();
  raw->useSlots_.assign(raw->operands_.size(), 0);
  for (unsigned i = 0; i < raw->numOperands(); ++i)
    raw->addUse(i);
  raw->position_ = ops_.insert(before ? before->position_ : ops_.end(), std::move(op));
  placeOrder(raw);
  return raw;
}

void Module::placeOrder(Op *op) {
  if (orderStale_)
    return;
  Op *prev = op->prev();
  Op *next = op->next();
  uint64_t low = prev ? prev->order_ : 0;
  if (!next) {
    op->order_ = low + kOrderGap;
    return;
  }
  if (next->order_ - low < 2) {
    orderStale_ = true;
    return;
  }
  op->order_ = low + (next->order_ - low) / 2;
}

void Module::ensureOrder() const {
  if (!orderStale_)
    return;
  uint64_t order = 0;
  for (const auto &op : ops_)
    op->order_ = order += kOrderGap;
  orderStale_ = false;
}

void Module::eraseOp(Op *op) {
  for (unsigned i = 0; i < op->numResults(); ++i) {
    assert(!op->result(i)->hasUses() && "erasing an op whose result is still read");
    unregisterName(op->result(i));
  }
  for (unsigned i = 0; i < op->numOperands(); ++i)
    op->removeUse(i);
  ops_.erase(op->position_);
}

void Module::eraseVariable(Variable *variable) {
  assert(!variable->value->hasUses() && "erasing a variable that is still read");
  unregisterName(variable->value.get());
  variables_.erase(
      std::remove_if(variables_.begin(), variables_.end(),
                     [&](const std::unique_ptr<Variable> &v) { return v.get() == variable; }),
      variables_.end());
}

void Module::eraseInput(Input *input) {
  assert(!input->value->hasUses() && "erasing an input that is still read");
  unregisterName(input->value.get());
  inputs_.erase(std::remove_if(inputs_.begin(), inputs_.end(),
                               [&](const std::unique_ptr<Input> &i) { return i.get() == input; }),
                inputs_.end());
}

namespace {
// Erases the variables or inputs `doomed` picks (each unread) in one pass, unregistering names.
template <typename T, typename Unregister>
void eraseEach(std::vector<std::unique_ptr<T>> &items, llvm::function_ref<bool(const T &)> doomed,
               Unregister unregister) {
  llvm::erase_if(items, [&](const std::unique_ptr<T> &item) {
    if (!doomed(*item))
      return false;
    assert(!item->value->hasUses() && "erasing a value that is still read");
    unregister(item->value.get());
    return true;
  });
}
} // namespace

void Module::eraseVariablesIf(llvm::function_ref<bool(const Variable &)> doomed) {
  eraseEach(variables_, doomed, [&](Value *v) { unregisterName(v); });
}

void Module::eraseInputsIf(llvm::function_ref<bool(const Input &)> doomed) {
  eraseEach(inputs_, doomed, [&](Value *v) { unregisterName(v); });
}

void Module::moveOp(Op *op, Op *before) {
  ops_.splice(before ? before->position_ : ops_.end(), ops_, op->position_);
  placeOrder(op);
}

Function::Function() = default;
Function::~Function() = default;
Function::Function(Function &&) noexcept = default;
Function &Function::operator=(Function &&) noexcept = default;

Function Function::clone() const {
  Function copy;
  copy.name = name;
  llvm::DenseMap<const Value *, Value *> map;
  copy.body = body->clone(&map);
  copy.params = params;
  for (const ValueUse &result : results)
    copy.results.emplace_back(map.lookup(result.get()));
  copy.loc = loc;
  copy.trivia = trivia;
  copy.closing = closing;
  return copy;
}

const Function *Module::findFunction(llvm::StringRef name) const {
  for (const Function &f : functions)
    if (f.name == name)
      return &f;
  return nullptr;
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
  // The lowest free suffix, searched from where the last search for `base` ended.
  unsigned &from = freeSuffixFrom_[base];
  for (unsigned i = std::max(from, 1u);; ++i) {
    std::string candidate = (base + "." + llvm::Twine(i)).str();
    if (!names_.count(candidate)) {
      from = i;
      return candidate;
    }
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
  if (it == names_.end() || it->second != v)
    return;
  names_.erase(it);
  // `base.N` is free again: uniqueName(base) must look from N on.
  llvm::StringRef name = v->name_;
  auto [base, suffix] = name.rsplit('.');
  unsigned n;
  if (!suffix.empty() && base.size() < name.size() && !suffix.getAsInteger(10, n)) {
    auto hint = freeSuffixFrom_.find(base);
    if (hint != freeSuffixFrom_.end() && n < hint->second)
      hint->second = n;
  }
}

void Module::replaceAllUses(Value *from, Value *to) {
  if (from == to)
    return;
  // Each step takes the last entry off `from`'s lists.
  while (!from->uses_.empty()) {
    OpUse use = from->uses_.back();
    use.op->setOperand(use.operand, to);
  }
  while (!from->outsideUses_.empty())
    *from->outsideUses_.back() = to;
}

void Module::replaceUsesIf(Value *from, Value *to, llvm::function_ref<bool(const OpUse &)> which) {
  if (from == to)
    return;
  // setOperand reorders `from`'s list: pick the uses first.
  llvm::SmallVector<OpUse, 4> chosen;
  for (const OpUse &use : from->uses_)
    if (which(use))
      chosen.push_back(use);
  for (const OpUse &use : chosen)
    use.op->setOperand(use.operand, to);
}

std::unique_ptr<Module> Module::clone(llvm::DenseMap<const Value *, Value *> *valueMap) const {
  return cloneSelected(valueMap, nullptr);
}

std::unique_ptr<Module> Module::cloneOps(const llvm::DenseSet<const Op *> &keep) const {
  return cloneSelected(nullptr, &keep);
}

std::unique_ptr<Module> Module::cloneSelected(llvm::DenseMap<const Value *, Value *> *valueMap,
                                              const llvm::DenseSet<const Op *> *keep) const {
  auto out = std::make_unique<Module>(name_);
  out->sourceFile_ = sourceFile_;
  out->headerTrivia = headerTrivia;
  out->footerComments = footerComments;
  llvm::DenseMap<const Value *, Value *> map;
  llvm::DenseMap<const Variable *, Variable *> varMap;
  // With `keep`, only the inputs and variables the kept ops read.
  llvm::DenseSet<const Value *> read;
  if (keep)
    for (const Op *op : *keep)
      for (Value *v : op->operands())
        read.insert(v);
  auto wanted = [&](const Value *v) { return !keep || read.count(v); };
  for (const auto &in : inputs_) {
    if (!wanted(in->value.get()))
      continue;
    Input *copy = out->addInput(in->name(), in->value->hasType() ? in->type() : TensorType());
    copy->value->setType(in->value->maybeType());
    copy->loc = in->loc;
    copy->trivia = in->trivia;
    map[in->value.get()] = copy->value.get();
  }
  for (const auto &var : variables_) {
    if (!wanted(var->value.get()))
      continue;
    Variable *copy = out->addVariable(var->name(), TensorType(), var->init);
    copy->value->setType(var->value->maybeType());
    copy->attrs = var->attrs;
    copy->loc = var->loc;
    copy->trivia = var->trivia;
    map[var->value.get()] = copy->value.get();
    varMap[var.get()] = copy;
  }
  for (const auto &op : ops_) {
    if (keep && !keep->count(op.get()))
      continue;
    std::unique_ptr<Op> copy(new Op(op->def_, out.get()));
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
    out->insertOp(std::move(copy), nullptr);
  }
  out->data = data;
  if (keep)
    return out;
  for (const Function &f : functions)
    out->functions.push_back(f.clone());
  out->optimizer = optimizer;
  if (loss) {
    out->loss = Loss{loss->value ? map.lookup(loss->value) : nullptr, loss->loc, loss->trivia};
  }
  for (const Gradient &g : gradients)
    out->gradients.push_back(
        Gradient{varMap.lookup(g.variable), map.lookup(g.value), g.loc, g.trivia});
  if (valueMap)
    *valueMap = std::move(map);
  return out;
}

std::string opSpanName(const Op &op) {
  std::string name = op.name().str();
  if (op.numResults() > 0)
    name += " %" + op.result(0)->name();
  else if (op.numOperands() > 0)
    name += " " + op.operand(0)->name();
  return name;
}

} // namespace prism::ir
