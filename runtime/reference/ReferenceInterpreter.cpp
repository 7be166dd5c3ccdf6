// The reference interpreter: feeds, step semantics, and running the reference kernels.
#include "runtime/reference/ReferenceInterpreter.h"

#include "ir/Precision.h"

#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "runtime/reference/Initializers.h"
#include "runtime/reference/Kernels.h"

namespace prism::runtime::reference {

namespace {

// The type with B bound; `?` stays (only the row count of a sparse value is dynamic).
ir::TensorType bindBatch(ir::TensorType type, int64_t batch) {
  for (int64_t &d : type.dims)
    if (d == ir::kBatchDim)
      d = batch;
  return type;
}

std::string describe(const ir::Op &op) {
  std::string s = "'" + op.name().str() + "'";
  if (op.numResults())
    s += " defining " + op.result(0)->ref();
  return s;
}

} // namespace

ReferenceInterpreter::ReferenceInterpreter(const ir::Module &module, StepContext context)
    : module_(module), context_(context) {}

llvm::Error ReferenceInterpreter::initializeVariables(uint64_t seed) {
  llvm::StringMap<Tensor> fresh;
  for (const auto &var : module_.variables()) {
    auto value = initialValue(*var, seed, module_.sourceFile());
    if (!value)
      return value.takeError();
    fresh[var->name()] = std::move(*value);
  }
  variables_ = std::move(fresh);
  return llvm::Error::success();
}

const Tensor *ReferenceInterpreter::variable(llvm::StringRef name) const {
  auto it = variables_.find(name);
  return it == variables_.end() ? nullptr : &it->second;
}

llvm::Error ReferenceInterpreter::setVariable(llvm::StringRef name, Tensor value) {
  const ir::Variable *var = module_.findVariable(name);
  if (!var)
    return ir::makeError("'" + name + "' is not a variable of module '" + module_.name() + "'");
  if (auto e = value.validate())
    return ir::makeError("variable '" + name + "': " + ir::messageOf(std::move(e)));
  if (!var->value->hasType() || !value.matches(var->type(), -1))
    return ir::makeError("variable '" + name + "' is " +
                         (var->value->hasType() ? var->type().str() : std::string("untyped")) +
                         ", got a value " + value.typeString());
  variables_[name] = std::move(value);
  return llvm::Error::success();
}

const Tensor *ReferenceInterpreter::value(llvm::StringRef name) const {
  const ir::Value *v = module_.lookup(name);
  if (!v)
    return nullptr;
  auto it = values_.find(v);
  return it == values_.end() ? nullptr : &it->second;
}

const Tensor *ReferenceInterpreter::gradient(llvm::StringRef variable) const {
  const ir::Variable *var = module_.findVariable(variable);
  const ir::Gradient *g = var ? module_.gradientOf(var) : nullptr;
  if (!g || !g->value)
    return nullptr;
  auto it = values_.find(g->value);
  return it == values_.end() ? nullptr : &it->second;
}

// Every op's result types come from the op table's shape rule, so a module fresh from the
// parser runs without a shape-inference pass, and no kernel sees operands or attributes that
// its shape rule would reject. Types the module declares must agree.
llvm::Error ReferenceInterpreter::resolveTypes() {
  types_.clear();
  for (const auto &in : module_.inputs()) {
    if (!in->value->hasType())
      return ir::makeError("input '" + in->name() + "' has no type");
    types_[in->value.get()] = in->type();
  }
  for (const auto &var : module_.variables()) {
    if (!var->value->hasType())
      return ir::makeError("variable '" + var->name() + "' has no type");
    types_[var->value.get()] = var->type();
  }
  for (const auto &op : module_.ops()) {
    auto fail = [&](const llvm::Twine &message) {
      return ir::makeError(module_.sourceFile(), op->loc, describe(*op) + ": " + message);
    };
    llvm::SmallVector<ir::TensorType, 4> operandTypes;
    for (const ir::Value *v : op->operands()) {
      auto it = v ? types_.find(v) : types_.end();
      if (it == types_.end())
        return fail("an operand is not defined before the op");
      operandTypes.push_back(it->second);
    }
    if (auto e = ir::checkSignature(op->def(), op->numOperands(), op->attrs))
      return fail(ir::messageOf(std::move(e)));
    auto inferred = op->def().shape(operandTypes, ir::withDefaults(op->def(), op->attrs));
    if (!inferred)
      return fail(ir::messageOf(inferred.takeError()));
    if (inferred->size() != op->numResults())
      return fail("has " + llvm::Twine(op->numResults()) + " results, expected " +
                  llvm::Twine(inferred->size()));
    for (unsigned i = 0; i < op->numResults(); ++i) {
      const ir::Value *r = op->result(i);
      if (r->hasType() && r->type() != (*inferred)[i])
        return fail("result " + r->ref() + " is declared " + r->type().str() +
                    " but the op gives " + (*inferred)[i].str());
      types_[r] = (*inferred)[i];
    }
  }
  return llvm::Error::success();
}

llvm::Expected<int64_t> ReferenceInterpreter::bindFeeds(const Feeds &feeds) {
  for (const auto &[name, tensor] : feeds)
    if (!module_.findInput(name))
      return ir::makeError("feed '" + name + "' names no input of module '" + module_.name() + "'");
  int64_t batch = -1;
  std::string batchFrom;
  for (const auto &in : module_.inputs()) {
    auto it = feeds.find(in->name());
    const ir::TensorType &type = in->type();
    if (it == feeds.end())
      return ir::makeError("no feed for input '" + in->name() + "' (" + type.str() + ")");
    const Tensor &t = it->second;
    if (auto e = t.validate())
      return ir::makeError("feed '" + in->name() + "': " + ir::messageOf(std::move(e)));
    auto mismatch = [&] {
      return ir::makeError("feed '" + in->name() + "' is " + t.typeString() +
                           ", but the input is " + type.str());
    };
    if (t.dtype() != type.dtype || t.isSparse() != type.sparse || t.rank() != type.rank())
      return mismatch();
    for (int64_t i = 0; i < type.rank(); ++i) {
      if (type.dims[i] != ir::kBatchDim)
        continue;
      if (batch < 0) {
        batch = t.shape()[i];
        batchFrom = in->name();
      } else if (t.shape()[i] != batch) {
        return ir::makeError("feed '" + in->name() + "' has B = " + llvm::Twine(t.shape()[i]) +
                             ", but feed '" + batchFrom + "' has B = " + llvm::Twine(batch));
      }
    }
    if (!t.matches(type, batch))
      return mismatch();
  }
  return batch;
}

llvm::Expected<StepResult> ReferenceInterpreter::step(const Feeds &feeds) {
  if (auto e = resolveTypes())
    return std::move(e);
  auto batch = bindFeeds(feeds);
  if (!batch)
    return batch.takeError();
  for (const auto &var : module_.variables())
    if (!variables_.count(var->name()))
      return ir::makeError("variable '" + var->name() +
                           "' has no value: initialize the variables or set it first");

  values_.clear();
  for (const auto &in : module_.inputs())
    values_[in->value.get()] = feeds.at(in->name());
  // The one read of every variable in this step.
  for (const auto &var : module_.variables())
    values_[var->value.get()] = variables_[var->name()];

  std::vector<std::pair<const ir::Variable *, Tensor>> writes;
  for (const auto &op : module_.ops())
    if (auto e = runOp(*op, *batch, writes))
      return std::move(e);
  for (auto &[var, tensor] : writes)
    variables_[var->name()] = std::move(tensor);
  if (context_.training())
    ++context_.step;

  StepResult result;
  result.batch = *batch;
  if (module_.loss && module_.loss->value) {
    auto it = values_.find(module_.loss->value);
    if (it != values_.end() && it->second.numElements() == 1 && !it->second.isSparse())
      result.loss = it->second.data()[0];
  }
  return result;
}

llvm::Error
ReferenceInterpreter::runOp(const ir::Op &op, int64_t batch,
                            std::vector<std::pair<const ir::Variable *, Tensor>> &writes) {
  const ir::OpDef &def = op.def();
  auto fail = [&](const llvm::Twine &message) {
    return ir::makeError(module_.sourceFile(), op.loc, describe(op) + ": " + message);
  };
  const Kernel *kernel = lookupKernel(def.name);
  if (!kernel || !kernel->run)
    return fail("no reference kernel for op '" + def.name + "'");
  if (def.writtenOperands && op.numResults())
    return fail("an op that both writes variables and has results is not supported");

  KernelArgs args{op, ir::withDefaults(def, op.attrs), {}, {}, batch, &context_, {}};
  // Operands read in reduced precision are rounded to it first: the reference of what a bf16
  // kernel computes (rounded inputs, exact products, sums in float64 here).
  ir::ComputePrecision precision = ir::computePrecision(op);
  std::vector<Tensor> rounded;
  rounded.reserve(op.numOperands());
  for (unsigned i = 0; i < op.numOperands(); ++i) {
    auto it = values_.find(op.operand(i));
    if (it == values_.end())
      return fail("operand " + op.operand(i)->ref() + " has no value");
    if (it->second.isSparse() && !kernel->acceptsSparse(i))
      return fail("operand " + op.operand(i)->ref() + " is sparse, which the kernel does not take");
    if (precision == ir::ComputePrecision::F32 || !def.readsInComputePrecision(i)) {
      args.operands.push_back(&it->second);
      continue;
    }
    rounded.push_back(it->second);
    for (double &x : rounded.back().data())
      x = ir::roundToPrecision(static_cast<float>(x), precision);
    args.operands.push_back(&rounded.back());
  }
  // Results are checked against their types; written operands against the variables'.
  llvm::SmallVector<const ir::Value *, 3> targets;
  if (def.writtenOperands) {
    for (unsigned i = 0; i < op.numOperands(); ++i) {
      if (!def.writes(i))
        continue;
      if (!op.operand(i)->variable())
        return fail("operand " + op.operand(i)->ref() + " is written, so it must be a variable");
      targets.push_back(op.operand(i));
    }
  } else {
    for (unsigned i = 0; i < op.numResults(); ++i)
      targets.push_back(op.result(i));
  }
  for (const ir::Value *target : targets) {
    const ir::TensorType &declared = types_[target];
    args.batchRows.push_back(declared.rank() > 0 && declared.dims[0] == ir::kBatchDim);
    ir::TensorType type = bindBatch(declared, batch);
    for (int64_t d : type.dims)
      if (d == ir::kBatchDim)
        return fail(target->ref() + " has type " + types_[target].str() + " but no feed binds B");
    args.results.push_back(std::move(type));
  }

  auto outputs = kernel->run(args);
  if (!outputs)
    return fail(ir::messageOf(outputs.takeError()));
  if (outputs->size() != targets.size())
    return fail("the kernel gave " + llvm::Twine(outputs->size()) + " values, expected " +
                llvm::Twine(targets.size()));
  for (size_t i = 0; i < targets.size(); ++i) {
    Tensor &out = (*outputs)[i];
    conformToDType(out);
    if (auto e = out.validate())
      return fail("the kernel gave an invalid value for " + targets[i]->ref() + ": " +
                  ir::messageOf(std::move(e)));
    if (!out.matches(args.results[i], batch))
      return fail("the kernel gave " + out.typeString() + " for " + targets[i]->ref() +
                  ", expected " + args.results[i].str());
    if (def.writtenOperands)
      writes.emplace_back(targets[i]->variable(), std::move(out));
    else
      values_[targets[i]] = std::move(out);
  }
  return llvm::Error::success();
}

} // namespace prism::runtime::reference
