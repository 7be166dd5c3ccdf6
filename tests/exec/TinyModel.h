// A model of one matrix product and a softmax cross-entropy, trained by sgd: the executor tests'
// smallest training step.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "frontends/text/Parser.h"
#include "passes/PassManager.h"

namespace prism::testing {

inline constexpr const char *kTinyModel = R"(model tiny {
  input x : f32[B, 3]
  input y : i32[B]
  var w : f32[3, 4] = glorot_uniform
  %logits = matmul(x, w)
  %loss = softmax_cross_entropy(%logits, y)
  minimize %loss with sgd(lr = 0.1)
}
)";

// `text` (as `file`) after `pipeline` (its training step by default) with `options`.
inline std::unique_ptr<ir::Module>
compiledModule(const char *text, const char *file,
               const char *pipeline = "infer-shapes,autodiff,lower-optimizer",
               const passes::PassOptions &options = {}) {
  auto module = frontends::parseModule(text, file);
  EXPECT_TRUE(bool(module)) << llvm::toString(module.takeError());
  if (!module)
    return nullptr;
  auto pm = passes::PassManager::fromPipeline(pipeline);
  EXPECT_TRUE(bool(pm)) << llvm::toString(pm.takeError());
  if (!pm)
    return nullptr;
  auto changed = pm->run(**module, options);
  EXPECT_TRUE(bool(changed)) << llvm::toString(changed.takeError());
  return std::move(*module);
}

// kTinyModel after `pipeline` (its training step by default), as tiny.prism.
inline std::unique_ptr<ir::Module>
tinyModule(const char *pipeline = "infer-shapes,autodiff,lower-optimizer") {
  return compiledModule(kTinyModel, "tiny.prism", pipeline);
}

} // namespace prism::testing
