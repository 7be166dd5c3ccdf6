// The C++ builder API.
#include "ir/Builder.h"

#include "ir/OpTable.h"
#include "ir/Verifier.h"

namespace prism::ir {

ModuleBuilder::ModuleBuilder(std::string name)
    : module_(std::make_unique<Module>(std::move(name))) {}

void ModuleBuilder::fail(llvm::Error e) {
  if (error_)
    llvm::consumeError(std::move(e));
  else
    error_ = std::move(e);
}

Value *ModuleBuilder::input(llvm::StringRef name, TensorType type) {
  if (module_->lookup(name))
    fail(makeError("'" + name + "' is defined twice"));
  return module_->addInput(name, std::move(type))->value.get();
}

Value *ModuleBuilder::variable(llvm::StringRef name, TensorType type, Initializer init,
                               AttrMap attrs) {
  if (module_->lookup(name))
    fail(makeError("'" + name + "' is defined twice"));
  Variable *v = module_->addVariable(name, std::move(type), std::move(init));
  v->attrs = std::move(attrs);
  return v->value.get();
}

Op *ModuleBuilder::opWithResults(llvm::StringRef opName, llvm::ArrayRef<Value *> operands,
                                 AttrMap attrs, llvm::ArrayRef<std::string> names) {
  const OpDef *def = lookupOp(opName);
  if (!def) {
    fail(makeError("unknown op '" + opName + "'"));
    return nullptr;
  }
  for (Value *v : operands)
    if (!v) {
      fail(makeError("'" + opName + "' got a null operand"));
      return nullptr;
    }
  for (const std::string &n : names)
    if (!n.empty() && module_->lookup(n))
      fail(makeError("'" + n + "' is defined twice"));
  Op *op = module_->createOp(*def, operands, std::move(attrs), names);
  auto types = inferResultTypes(*op);
  if (!types) {
    fail(types.takeError());
    return op;
  }
  for (unsigned i = 0; i < op->numResults(); ++i)
    op->result(i)->setType((*types)[i]);
  return op;
}

Value *ModuleBuilder::op(llvm::StringRef opName, llvm::ArrayRef<Value *> operands, AttrMap attrs,
                         llvm::StringRef name) {
  std::string n = name.str();
  Op *op = opWithResults(opName, operands, std::move(attrs), {n});
  return op && op->numResults() ? op->result(0) : nullptr;
}

void ModuleBuilder::minimize(Value *loss, llvm::StringRef optimizer, AttrMap params) {
  Optimizer opt;
  opt.kind = optimizer.str();
  opt.params = std::move(params);
  module_->optimizer = std::move(opt);
  Loss l;
  l.value = loss;
  module_->loss = l;
}

llvm::Expected<std::unique_ptr<Module>> ModuleBuilder::finish() {
  if (error_)
    return std::move(error_);
  if (auto e = verify(*module_))
    return std::move(e);
  return std::move(module_);
}

AttrMap attrs(std::initializer_list<std::pair<const char *, Attr>> entries) {
  AttrMap m;
  for (const auto &[k, v] : entries)
    m.set(k, v);
  return m;
}

} // namespace prism::ir
