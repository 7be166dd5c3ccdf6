// The op table: registration, lookup, signature checks, type inference, costs.
#include "ir/OpTable.h"

#include "ir/Device.h"
#include "ir/Precision.h"

#include <cassert>
#include <memory>

#include "ir/ops/OpHelpers.h"
#include "llvm/ADT/StringMap.h"

namespace prism::ir {

namespace {
struct Table {
  std::vector<OpDef> defs;
  std::vector<const OpDef *> ordered;
  llvm::StringMap<const OpDef *> byName;

  Table() {
    ops::registerElementwiseOps(defs);
    ops::registerNeuralNetOps(defs);
    ops::registerConvOps(defs);
    ops::registerShapeOps(defs);
    ops::registerSparseOps(defs);
    ops::registerOptimizerOps(defs);
    ops::registerCommunicationOps(defs);
    ops::registerTrainingModeOps(defs);
    ops::registerFusedOps(defs);
    ops::registerCallOps(defs);
    for (const OpDef &d : defs) {
      assert(d.shape && "every op needs a shape rule");
      bool inserted = byName.try_emplace(d.name, &d).second;
      assert(inserted && "op registered twice");
      (void)inserted;
      ordered.push_back(&d);
    }
  }
};

const Table &table() {
  static const Table t;
  return t;
}
} // namespace

llvm::ArrayRef<const OpDef *> allOps() {
  return table().ordered;
}

const OpDef *lookupOp(llvm::StringRef name) {
  auto it = table().byName.find(name);
  return it == table().byName.end() ? nullptr : it->second;
}

std::string randomStreamKey(const Op &op) {
  if (const Attr *key = op.attrs.find(kRandomKeyAttr); key && !key->getString().empty())
    return key->getString();
  return op.numResults() > 0 ? op.result(0)->name() : op.name().str();
}

const OpDef &getOp(llvm::StringRef name) {
  const OpDef *def = lookupOp(name);
  assert(def && "unknown op");
  return *def;
}

const AttrSpec *OpDef::attrSpec(llvm::StringRef attrName) const {
  for (const AttrSpec &s : attrs)
    if (s.name == attrName)
      return &s;
  return nullptr;
}

std::string OpDef::signature() const {
  std::string s = name + "(";
  for (size_t i = 0; i < operands.size(); ++i) {
    if (i)
      s += ", ";
    s += operands[i];
    if (i >= minOperands())
      s += "?";
  }
  if (variadic)
    s += "...";
  for (const AttrSpec &a : attrs) {
    s += (s.back() == '(' ? "" : ", ") + a.name;
    if (!a.required)
      s += a.hasDefault ? " = " + a.dflt.str() : "?";
  }
  return s + ")";
}

AttrMap withDefaults(const OpDef &def, const AttrMap &attrs) {
  AttrMap out = attrs;
  for (const AttrSpec &s : def.attrs)
    if (!s.required && s.hasDefault && !out.has(s.name))
      out.set(s.name, s.dflt);
  return out;
}

namespace {
// `compute = "bf16"`: a known precision, on an op the table lets compute in it.
llvm::Error checkComputeAttr(const OpDef &def, const Attr &value) {
  if (value.kind() != AttrKind::String)
    return makeError("attribute 'compute' must be a string like \"bf16\", got " + value.str());
  auto precision = parsePrecision(value.getString());
  if (!precision)
    return withContext(precision.takeError(), "attribute 'compute'");
  if (*precision == ComputePrecision::F32 || allowsReducedPrecision(def))
    return llvm::Error::success();
  std::string allowed;
  for (const OpDef *op : allOps())
    if (allowsReducedPrecision(*op))
      allowed += (allowed.empty() ? "" : ", ") + op->name;
  return makeError("'" + def.name + "' computes in f32 only; `compute = \"" + value.getString() +
                   "\"` is for " + allowed);
}
} // namespace

llvm::Error checkSignature(const OpDef &def, unsigned numOperands, const AttrMap &attrs) {
  unsigned min = def.minOperands(), max = def.maxOperands();
  bool arityOk = numOperands >= min && (def.variadic || numOperands <= max);
  if (!arityOk) {
    std::string count = def.variadic ? "at least " + std::to_string(min)
                        : min < max  ? std::to_string(min) + " to " + std::to_string(max)
                                     : std::to_string(min);
    return makeError("'" + def.name + "' takes " + count + " operand" +
                     (min == 1 && (def.variadic || max == 1) ? "" : "s") + ", got " +
                     llvm::Twine(numOperands) + ": " + def.signature());
  }
  for (const auto &[name, value] : attrs) {
    // Every op may be pinned to a device of its task (in-graph towers).
    if (name == kDeviceAttr) {
      if (value.kind() != AttrKind::String)
        return makeError("attribute 'device' must be a string like \"cpu:1\", got " + value.str());
      if (auto parsed = DeviceId::parse(value.getString()); !parsed)
        return withContext(parsed.takeError(), "attribute 'device'");
      continue;
    }
    if (name == kComputeAttr) {
      if (auto err = checkComputeAttr(def, value))
        return err;
      continue;
    }
    const AttrSpec *spec = def.attrSpec(name);
    if (!spec)
      return makeError("'" + def.name + "' has no attribute '" + name + "': " + def.signature());
    bool kindOk = value.kind() == spec->kind ||
                  (spec->kind == AttrKind::Float && value.kind() == AttrKind::Int);
    if (!kindOk)
      return makeError("attribute '" + name + "' of '" + def.name + "' must be a " +
                       attrKindName(spec->kind) + ", got " + value.str());
  }
  for (const AttrSpec &spec : def.attrs)
    if (spec.required && !attrs.has(spec.name))
      return makeError("'" + def.name + "' needs attribute '" + spec.name +
                       "': " + def.signature());
  return llvm::Error::success();
}

llvm::Expected<llvm::SmallVector<TensorType, 1>> inferResultTypes(const Op &op) {
  if (auto err = checkSignature(op.def(), op.numOperands(), op.attrs))
    return std::move(err);
  llvm::SmallVector<TensorType, 4> operandTypes;
  for (unsigned i = 0; i < op.numOperands(); ++i) {
    Value *v = op.operand(i);
    if (!v->hasType())
      return makeError("operand " + llvm::Twine(i) + " (" + v->ref() + ") of '" + op.name() +
                       "' has no known type");
    operandTypes.push_back(v->type());
  }
  return op.def().shape(operandTypes, withDefaults(op.def(), op.attrs));
}

OpCost opCost(const Op &op, int64_t batch) {
  llvm::SmallVector<TensorType, 4> in, out;
  for (Value *v : op.operands())
    if (v->hasType())
      in.push_back(v->type());
  for (unsigned i = 0; i < op.numResults(); ++i)
    if (op.result(i)->hasType())
      out.push_back(op.result(i)->type());
  AttrMap attrs = withDefaults(op.def(), op.attrs);
  if (op.def().cost)
    return op.def().cost(in, out, attrs, batch);
  return ops::elementwiseCost(in, out, attrs, batch);
}

bool isRowUpdate(const Op &op) {
  return op.def().has(kOptimizerUpdate) && llvm::any_of(op.operands(), [](const Value *v) {
           return v->hasType() && v->type().sparse;
         });
}

Value *GradientContext::emit(llvm::StringRef opName, llvm::ArrayRef<Value *> operands,
                             AttrMap attrs) {
  const OpDef *def = lookupOp(opName);
  assert(def && "gradient rule names an unknown op");
  std::string hint = "d." + (op_.numResults() ? op_.result(0)->name() : std::string("op"));
  Op *created = module_.createOp(*def, operands, std::move(attrs), {hint});
  auto types = inferResultTypes(*created);
  if (!types) {
    llvm::Error err = types.takeError();
    if (!error_)
      error_ =
          withContext(std::move(err), "gradient of '" + op_.name() + "' (" + op_.result(0)->ref() +
                                          "): emitted '" + opName + "'");
    else
      llvm::consumeError(std::move(err));
    return created->numResults() ? created->result(0) : nullptr;
  }
  for (unsigned i = 0; i < created->numResults() && i < types->size(); ++i)
    created->result(i)->setType((*types)[i]);
  return created->numResults() ? created->result(0) : nullptr;
}

} // namespace prism::ir
