// Reading a module for a command: parse, then expand calls and infer types.
#include "frontends/text/Parser.h"
#include "passes/Passes.h"
#include "tools/Commands.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {

llvm::Expected<std::unique_ptr<ir::Module>> loadModule(const std::string &path, bool inferShapes) {
  auto module = frontends::parseModuleFile(path);
  if (!module || !inferShapes)
    return module;
  // Calls have types once expanded.
  for (const char *name : {"inline", "infer-shapes"}) {
    auto changed = passes::createPass(name)->run(**module, passes::PassOptions());
    if (!changed)
      return changed.takeError();
  }
  return module;
}

int reportError(llvm::Error err) {
  llvm::errs() << llvm::toString(std::move(err)) << "\n";
  return 1;
}

int reportStatus(const api::Status &status) {
  llvm::errs() << status.message() << "\n";
  return 1;
}

} // namespace prism::tools
