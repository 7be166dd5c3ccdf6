// What the plan tests share: a reference model from models/, parsed (a failure is reported to
// the running test).
#pragma once

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "frontends/text/Parser.h"

namespace prism::plan::testing {

inline std::unique_ptr<ir::Module> loadModel(const std::string &name) {
  auto module =
      frontends::parseModuleFile(std::string(PRISM_SOURCE_DIR) + "/models/" + name + ".prism");
  EXPECT_TRUE(static_cast<bool>(module)) << llvm::toString(module.takeError());
  return module ? std::move(*module) : nullptr;
}

} // namespace prism::plan::testing
