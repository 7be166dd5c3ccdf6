// libFuzzer target: ONNX import. Any bytes give a module or an error, never a crash, a hang, a
// leak or a sanitizer report; a module that imports is printed, and the text parses back.
#include <cstddef>
#include <cstdint>

#include "frontends/onnx/OnnxImport.h"
#include "frontends/text/Parser.h"
#include "ir/Printer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  auto imported = prism::frontends::onnx::importOnnx(bytes, "fuzz.onnx", {});
  if (!imported) {
    llvm::consumeError(imported.takeError());
    return 0;
  }
  std::string text = prism::ir::printModule(*imported->module);
  auto reparsed = prism::frontends::parseModule(text, "fuzz.prism");
  // The import wrote a module its own parser refuses: a bug worth a crash report.
  if (!reparsed) {
    llvm::consumeError(reparsed.takeError());
    __builtin_trap();
  }
  return 0;
}
