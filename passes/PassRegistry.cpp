// The registry of passes, generated from Passes.def.
#include "passes/Passes.h"

namespace prism::passes {

const std::vector<PassInfo> &allPasses() {
  static const std::vector<PassInfo> passes = {
#define PRISM_PASS(NAME, FACTORY) {NAME, &FACTORY},
#include "passes/Passes.def"
#undef PRISM_PASS
  };
  return passes;
}

std::unique_ptr<Pass> createPass(llvm::StringRef name) {
  for (const PassInfo &info : allPasses())
    if (info.name == name)
      return info.create();
  return nullptr;
}

} // namespace prism::passes
