// Writing a command's output file: all or nothing (a temporary file renamed into place).
#pragma once

#include <string>

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::tools {

// Writes `contents` to `path` ('-': standard output). A file is written beside its final name and
// renamed over it, so a failure never leaves a half-written or emptied file.
llvm::Error writeOutput(llvm::StringRef path, llvm::StringRef contents);

} // namespace prism::tools
