// Initial values of variables, on the host.
#include "runtime/exec/VariableStore.h"

#include <cstring>

#include "ir/Diagnostic.h"
#include "ir/VariablePlacement.h"
#include "runtime/reference/Initializers.h"
#include "support/Memory.h"

namespace prism::runtime {
namespace {

// Whether this task holds the variable's value: not when parameter servers hold it and this task
// only reads it through communication ops.
bool heldHere(const ir::Variable &var) {
  return !ir::onParameterServers(var) || ir::heldRowsOf(var);
}

// The type the initializer makes: the variable's, or for a PS task's share of a table, the whole
// table's (the rows are cut from it, so that every shard draws what one device would).
ir::TensorType initialType(const ir::Variable &var) {
  if (std::optional<ir::HeldRows> held = ir::heldRowsOf(var))
    return ir::TensorType(var.type().dtype, held->tableShape);
  return var.type();
}

// The float64 elements of a variable's initial value: the whole value, or for a PS task's
// share of a table, the rows it holds of the whole table's value.
llvm::Expected<std::vector<double>> initialElements(const ir::Variable &var, uint64_t seed,
                                                    llvm::StringRef modelFile) {
  std::optional<ir::HeldRows> held = ir::heldRowsOf(var);
  const ir::TensorType initType = initialType(var);
  auto value = reference::initialValue(var.init, initType, var.name(), seed, modelFile);
  if (!value)
    return value.takeError();
  if (!held)
    return std::move(value->data());
  const int64_t rows = initType.isScalar() ? 1 : initType.dims[0];
  const int64_t rowElements = rows ? initType.numElements() / rows : 1;
  std::vector<double> elements;
  for (const ir::RowRange &range : held->ranges)
    elements.insert(elements.end(), value->data().begin() + range.begin * rowElements,
                    value->data().begin() + range.end * rowElements);
  if (static_cast<int64_t>(elements.size()) != var.type().numElements())
    return ir::makeError("variable '" + var.name() + "': it holds " + llvm::Twine(held->count()) +
                         " rows, which do not match its type " + var.type().str());
  return elements;
}

void convertInto(Tensor &t, const std::vector<double> &src) {
  switch (t.dtype()) {
  case ir::DType::F32:
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.data<float>()[i] = static_cast<float>(src[i]);
    break;
  case ir::DType::F64:
    std::memcpy(t.raw(), src.data(), src.size() * sizeof(double));
    break;
  case ir::DType::I32:
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.data<int32_t>()[i] = static_cast<int32_t>(src[i]);
    break;
  case ir::DType::I64:
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.data<int64_t>()[i] = static_cast<int64_t>(src[i]);
    break;
  case ir::DType::Bool:
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.data<uint8_t>()[i] = src[i] != 0;
    break;
  }
}

// What initialize() will allocate: every variable this task holds, and while the largest is
// made, its initial value in float64 (of the whole table, for a PS task's rows). Checked
// against the memory limit before anything is allocated.
llvm::Error checkVariableMemory(const ir::Module &module, const llvm::StringMap<Tensor> &existing) {
  double held = 0, transient = 0;
  const ir::Variable *largest = nullptr;
  for (const auto &var : module.variables()) {
    if (existing.count(var->name()) || !heldHere(*var))
      continue;
    held += static_cast<double>(var->type().numElements()) *
            static_cast<double>(ir::dtypeBytes(var->type().dtype));
    double made = static_cast<double>(initialType(*var).numElements()) * sizeof(double);
    if (!largest || made > transient) {
      transient = made;
      largest = var.get();
    }
  }
  if (!largest)
    return llvm::Error::success();
  return support::checkFits(held + transient, "the variables (" + support::formatBytes(held) +
                                                  ", the largest '" + largest->name() + "' " +
                                                  largest->type().str() +
                                                  ", made through a float64 copy of " +
                                                  support::formatBytes(transient) + ")");
}

} // namespace

llvm::Error VariableStore::initialize(const ir::Module &module, uint64_t seed) {
  if (auto err = checkVariableMemory(module, values_))
    return err;
  for (const auto &var : module.variables()) {
    if (values_.count(var->name()))
      continue;
    if (!heldHere(*var)) {
      values_[var->name()] = Tensor();
      continue;
    }
    auto elements = initialElements(*var, seed, module.sourceFile());
    if (!elements)
      return ir::withLocation(elements.takeError(), module.sourceFile(), var->loc);
    Tensor t(var->type().dtype,
             std::vector<int64_t>(var->type().dims.begin(), var->type().dims.end()));
    convertInto(t, *elements);
    values_[var->name()] = std::move(t);
  }
  return llvm::Error::success();
}

Tensor *VariableStore::find(llvm::StringRef name) {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

const Tensor *VariableStore::find(llvm::StringRef name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

} // namespace prism::runtime
