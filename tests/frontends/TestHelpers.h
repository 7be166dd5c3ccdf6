// Helpers shared by the text-format tests: parse and expect success or a given error.
#pragma once

#include <iterator>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "frontends/text/Parser.h"
#include "ir/Printer.h"

namespace prism::frontends::testing {

// Parses `text` as `t.prism`; fails the test (and returns null) on error.
inline std::unique_ptr<ir::Module> parseOk(llvm::StringRef text) {
  auto module = parseModule(text, "t.prism");
  if (!module) {
    ADD_FAILURE() << llvm::toString(module.takeError()) << "\nin:\n" << text.str();
    return nullptr;
  }
  return std::move(*module);
}

// The whole diagnostic of a parse that must fail, or "" (with a test failure) if it succeeds.
inline std::string parseError(llvm::StringRef text) {
  auto module = parseModule(text, "t.prism");
  if (module) {
    ADD_FAILURE() << "parsed without error:\n" << text.str();
    return "";
  }
  return llvm::toString(module.takeError());
}

// The op at position `i` of the module's op list.
inline const std::unique_ptr<ir::Op> &opAt(const ir::Module &module, size_t i) {
  return *std::next(module.ops().begin(), static_cast<std::ptrdiff_t>(i));
}

// print(parse(text)).
inline std::string reprint(llvm::StringRef text) {
  auto module = parseOk(text);
  return module ? ir::printModule(*module) : std::string();
}

} // namespace prism::frontends::testing
