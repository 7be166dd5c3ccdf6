// Reads the text format of the IR (docs/ir.md) into an ir::Module, with located errors.
#pragma once

#include <memory>

#include "ir/Module.h"
#include "ir/Type.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::frontends {

// Parses and verifies (types not required) a whole module. Every error reads
// `fileName:line:column: error: ...`; bad input gives an error, never a crash.
llvm::Expected<std::unique_ptr<ir::Module>> parseModule(llvm::StringRef text,
                                                        llvm::StringRef fileName);

// Reads PATH and parses it ("cannot read PATH: reason" when it cannot be read); "-" reads
// standard input, named `<stdin>` in errors.
llvm::Expected<std::unique_ptr<ir::Module>> parseModuleFile(llvm::StringRef path);

// One type on its own, as on the command line: `f32[B, 784]`, `sparse f32[1000, 64]`.
llvm::Expected<ir::TensorType> parseType(llvm::StringRef text);

} // namespace prism::frontends
