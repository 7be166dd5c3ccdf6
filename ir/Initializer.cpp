// The table of variable initializers and their check.
#include "ir/Initializer.h"

#include <cmath>

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

namespace prism::ir {
namespace {

// Defaults print as written in docs: `0`, `1`, `-0.05`.
std::string formatDefault(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    return std::to_string(static_cast<long long>(v));
  return formatDouble(v);
}

const std::vector<InitializerDef> &table() {
  static const std::vector<InitializerDef> defs = {
      {"zeros", {}, "every element 0"},
      {"ones", {}, "every element 1"},
      {"constant", {{"value", true, 0}}, "every element `value`"},
      {"glorot_uniform", {}, "uniform in ±sqrt(6 / (fan_in + fan_out)) (Glorot and Bengio, 2010)"},
      {"normal", {{"mean", false, 0}, {"stddev", false, 1}}, "normal with mean and stddev"},
      {"uniform", {{"min", false, -0.05}, {"max", false, 0.05}}, "uniform in [min, max)"},
      {"values",
       {{"file", true, 0, /*text=*/true}, {"offset", false, 0}},
       "float32 values read from a values file (docs/import.md) at a byte offset"},
  };
  return defs;
}

} // namespace

std::string InitializerDef::signature() const {
  if (params.empty())
    return kind;
  std::string s = kind + "(";
  for (size_t i = 0; i < params.size(); ++i) {
    if (i)
      s += ", ";
    s += params[i].name;
    if (!params[i].required && !params[i].text)
      s += " = " + formatDefault(params[i].dflt);
  }
  return s + ")";
}

const InitializerParam *InitializerDef::param(llvm::StringRef name) const {
  for (const InitializerParam &p : params)
    if (p.name == name)
      return &p;
  return nullptr;
}

const InitializerDef *lookupInitializer(llvm::StringRef kind) {
  for (const InitializerDef &def : table())
    if (def.kind == kind)
      return &def;
  return nullptr;
}

std::string initializerNames() {
  std::string names;
  for (const InitializerDef &def : table())
    names += (names.empty() ? "" : ", ") + def.kind;
  return names;
}

llvm::Error checkInitializer(const Initializer &init) {
  const InitializerDef *def = lookupInitializer(init.kind);
  if (!def) {
    std::string accepted;
    for (const InitializerDef &d : table())
      accepted += (accepted.empty() ? "" : ", ") + d.signature();
    return makeError("unknown initializer '" + init.kind + "'; accepted: " + accepted);
  }
  for (const auto &[name, value] : init.params) {
    if (!def->param(name)) {
      if (def->params.empty())
        return makeError("initializer '" + def->kind + "' takes no parameters, got '" + name + "'");
      return makeError("initializer '" + def->kind + "' has no parameter '" + name +
                       "'; accepted: " + def->signature());
    }
    if (def->param(name)->text) {
      if (value.kind() != AttrKind::String || value.getString().empty())
        return makeError("parameter '" + name + "' of initializer '" + def->kind +
                         "' must be a file name in quotes, got " + value.str());
      continue;
    }
    if (value.kind() != AttrKind::Int && value.kind() != AttrKind::Float)
      return makeError("parameter '" + name + "' of initializer '" + def->kind +
                       "' must be a number, got " + value.str());
    if (!std::isfinite(value.getFloat()))
      return makeError("parameter '" + name + "' of initializer '" + def->kind +
                       "' must be finite, got " + value.str());
  }
  for (const InitializerParam &p : def->params)
    if (p.required && !init.params.has(p.name))
      return makeError("initializer '" + def->kind + "' needs parameter '" + p.name +
                       "': " + def->signature());
  if (def->kind == "normal" && initializerParam(init, "stddev") < 0)
    return makeError("parameter 'stddev' of initializer 'normal' cannot be negative, got " +
                     init.params.find("stddev")->str());
  if (def->kind == "uniform" && initializerParam(init, "min") > initializerParam(init, "max"))
    return makeError("initializer 'uniform' needs min <= max, got min = " +
                     formatDouble(initializerParam(init, "min")) +
                     ", max = " + formatDouble(initializerParam(init, "max")));
  if (def->kind == "values") {
    const Attr *offset = init.params.find("offset");
    if (offset && (offset->kind() != AttrKind::Int || offset->getInt() < 0))
      return makeError("parameter 'offset' of initializer 'values' must be an integer >= 0, got " +
                       offset->str());
  }
  return llvm::Error::success();
}

double initializerParam(const Initializer &init, llvm::StringRef name) {
  if (const Attr *a = init.params.find(name))
    return a->getFloat();
  if (const InitializerDef *def = lookupInitializer(init.kind))
    if (const InitializerParam *p = def->param(name))
      return p->dflt;
  return 0;
}

std::optional<ValuesSource> valuesSource(const Initializer &init) {
  if (init.kind != "values")
    return std::nullopt;
  ValuesSource source;
  source.file = init.params.getString("file");
  source.offset = static_cast<uint64_t>(std::max<int64_t>(init.params.getInt("offset"), 0));
  return source;
}

std::string resolveValuesFile(llvm::StringRef file, llvm::StringRef modelFile) {
  if (llvm::sys::path::is_absolute(file) || modelFile.empty() || modelFile.startswith("<"))
    return file.str();
  llvm::SmallString<256> path(llvm::sys::path::parent_path(modelFile));
  llvm::sys::path::append(path, file);
  return std::string(path);
}

void makeValuesFilesAbsolute(Module &module) {
  for (const auto &var : module.variables()) {
    std::optional<ValuesSource> source = valuesSource(var->init);
    if (!source)
      continue;
    llvm::SmallString<256> path(resolveValuesFile(source->file, module.sourceFile()));
    llvm::sys::fs::make_absolute(path);
    llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
    var->init.params.set("file", Attr::string(std::string(path)));
  }
}

} // namespace prism::ir
