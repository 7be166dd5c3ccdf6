// The registry of passes: each pass is listed once in Passes.def.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "passes/Pass.h"

namespace prism::passes {

#define PRISM_PASS(NAME, FACTORY) std::unique_ptr<Pass> FACTORY();
#include "passes/Passes.def"
#undef PRISM_PASS

struct PassInfo {
  std::string name;
  std::unique_ptr<Pass> (*create)();
};

// Every pass, in Passes.def order.
const std::vector<PassInfo> &allPasses();
// A new instance of the named pass, or null.
std::unique_ptr<Pass> createPass(llvm::StringRef name);

} // namespace prism::passes
