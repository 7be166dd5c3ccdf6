// libFuzzer target: the model text format. Any bytes give a module or an error, never a crash,
// a hang, a leak or a sanitizer report; a module that parses (and so verifies) is printed.
#include <cstddef>
#include <cstdint>

#include "frontends/text/Parser.h"
#include "ir/Printer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  auto module = prism::frontends::parseModule(text, "fuzz.prism");
  if (!module) {
    llvm::consumeError(module.takeError());
    return 0;
  }
  (void)prism::ir::printModule(**module);
  return 0;
}
