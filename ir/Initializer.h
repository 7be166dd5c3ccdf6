// The variable initializers the IR knows (zeros, ones, constant, glorot_uniform, normal,
// uniform), their parameters with defaults, and the check every variable's initializer passes.
#pragma once

#include <string>
#include <vector>

#include "ir/Module.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

namespace prism::ir {

struct InitializerParam {
  std::string name;
  bool required = false;
  double dflt = 0; // used when not required and absent
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

} // namespace prism::ir
