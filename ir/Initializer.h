// The variable initializers the IR knows (zeros, ones, constant, glorot_uniform, normal,
// uniform, values), their parameters with defaults, and the check every variable's initializer
// passes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/Module.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

namespace prism::ir {

struct InitializerParam {
  std::string name;
  bool required = false;
  double dflt = 0;   // used when not required and absent
  bool text = false; // a string (a file name) rather than a number
};

struct InitializerDef {
  std::string kind;
  std::vector<InitializerParam> params;
  std::string summary;
  // `normal(mean = 0, stddev = 1)`, `constant(value)`, `zeros`
  std::string signature() const;
  const InitializerParam *param(llvm::StringRef name) const;
};

const InitializerDef *lookupInitializer(llvm::StringRef kind);
// "zeros, ones, constant, glorot_uniform, normal, uniform", for messages.
std::string initializerNames();

// Checks the kind, the parameter names and kinds (numbers), required parameters and value
// ranges. The error has no location: callers place it.
llvm::Error checkInitializer(const Initializer &init);

// A parameter's value, its default when absent (for an initializer that passed the check).
double initializerParam(const Initializer &init, llvm::StringRef name);

// `values(file = "m.weights", offset = N)`: the file, as written (relative to the model file's
// directory unless absolute), and where the variable's record starts.
struct ValuesSource {
  std::string file;
  uint64_t offset = 0;
};
// The values file and offset of a `values` initializer; nullopt for other kinds.
std::optional<ValuesSource> valuesSource(const Initializer &init);
// The path of a values file named in a model read from `modelFile`: `file` itself when absolute
// or when the model has no file of its own (empty, or a name in angle brackets such as
// `<stdin>`), else `file` in the model file's directory.
std::string resolveValuesFile(llvm::StringRef file, llvm::StringRef modelFile);
// Rewrites every `values` initializer's file into its resolved absolute path, for a module whose
// text leaves its file behind (a plan's programs).
void makeValuesFilesAbsolute(Module &module);

} // namespace prism::ir
