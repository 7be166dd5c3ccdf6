// Type inference over a whole module, from the op table's shape rules: what infer-shapes does,
// and what a pass that changed some values' types runs to bring their readers up to date.
#pragma once

#include <cstdint>

#include "ir/Module.h"
#include "llvm/Support/Error.h"

namespace prism::ir {

// What happens to a result that already has a type.
enum class DeclaredTypes : uint8_t {
  Check,   // it must be the type the op gives (a declared type in the source)
  Replace, // it takes the type the op gives (an operand's type changed)
};

// Gives every op result its type from the op table's shape rules, in program order. Returns how
// many results got a type or a different one. An error names the op and its place.
llvm::Expected<int64_t> inferTypes(Module &module, DeclaredTypes declared);

} // namespace prism::ir
