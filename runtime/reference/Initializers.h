// First values of variables: the initializer kinds and the seed rule that makes every random
// draw a pure function of (global seed, variable name).
#pragma once

#include <cstdint>

#include "ir/Module.h"
#include "runtime/SeedRule.h"
#include "runtime/reference/Tensor.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::reference {

using runtime::fnv1a64;
using runtime::splitmix64;
// 64-bit FNV-1a of the bytes of `text`.
// The seed of one variable's generator: splitmix64(globalSeed ^ fnv1a64(name)).
uint64_t variableSeed(uint64_t globalSeed, llvm::StringRef name);

// Fan-in and fan-out of a weight shape, as glorot_uniform uses them.
struct Fans {
  double in = 1;
  double out = 1;
};
Fans computeFans(llvm::ArrayRef<int64_t> shape);

// The first value of a variable with the given initializer, type and name. Errors for unknown
// kinds or parameters, for types that are not static and dense, and for values files that cannot
// give the variable its values. `modelFile`, the file the module was read from, is where a
// relative values file is found (ir::resolveValuesFile).
llvm::Expected<Tensor> initialValue(const ir::Initializer &init, const ir::TensorType &type,
                                    llvm::StringRef name, uint64_t globalSeed,
                                    llvm::StringRef modelFile = {});
llvm::Expected<Tensor> initialValue(const ir::Variable &variable, uint64_t globalSeed,
                                    llvm::StringRef modelFile = {});

} // namespace prism::runtime::reference
