// Shared by the pass tests: parse and differentiate a model, feed it random data, and check
// that two modules give the same loss and gradients on the float64 reference interpreter.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>

#include "frontends/text/Parser.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"
#include "runtime/reference/ReferenceInterpreter.h"

namespace prism::testing {

// `text` parsed and run through infer-shapes and autodiff; null (with a test failure) on error.
inline std::unique_ptr<ir::Module> differentiated(const char *text, const std::string &name) {
  auto module = frontends::parseModule(text, name + ".prism");
  EXPECT_TRUE(bool(module)) << llvm::toString(module.takeError());
  if (!module)
    return nullptr;
  auto pm = passes::PassManager::fromPipeline("infer-shapes,autodiff");
  EXPECT_TRUE(bool(pm)) << llvm::toString(pm.takeError());
  auto changed = pm->run(**module, passes::PassOptions());
  EXPECT_TRUE(bool(changed)) << llvm::toString(changed.takeError());
  return std::move(*module);
}

// Uniform floats in [-1, 1); integers (labels) 0 or 1, valid for every class count used.
inline runtime::reference::Feeds randomFeeds(const ir::Module &m, int64_t batch,
                                             std::mt19937_64 &rng) {
  runtime::reference::Feeds feeds;
  for (const auto &in : m.inputs()) {
    std::vector<int64_t> shape;
    for (int64_t d : in->type().dims)
      shape.push_back(d == ir::kBatchDim ? batch : d);
    runtime::reference::Tensor t(in->type().dtype, shape);
    for (double &v : t.data())
      v = ir::isFloat(in->type().dtype)
              ? std::uniform_real_distribution<double>(-1, 1)(rng)
              : static_cast<double>(std::uniform_int_distribution<int64_t>(0, 1)(rng));
    feeds[in->name()] = t;
  }
  return feeds;
}

inline double relativeError(const runtime::reference::Tensor &a,
                            const runtime::reference::Tensor &b) {
  double diff = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.data().size(); ++i) {
    diff += (a.data()[i] - b.data()[i]) * (a.data()[i] - b.data()[i]);
    na += a.data()[i] * a.data()[i];
    nb += b.data()[i] * b.data()[i];
  }
  return std::sqrt(diff) / std::max({std::sqrt(na), std::sqrt(nb), 1e-12});
}

// One step of both modules on the same fresh random feeds and initial values: equal losses and
// equal gradients for every variable (relative error below `tolerance`).
inline void expectSameLossAndGradients(const ir::Module &before, const ir::Module &after,
                                       double tolerance = 1e-12) {
  uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  runtime::reference::Feeds feeds = randomFeeds(before, /*batch=*/3, rng);
  runtime::reference::ReferenceInterpreter original(before), transformed(after);
  ASSERT_FALSE(bool(original.initializeVariables(seed)));
  ASSERT_FALSE(bool(transformed.initializeVariables(seed)));
  auto a = original.step(feeds);
  ASSERT_TRUE(bool(a)) << llvm::toString(a.takeError());
  auto b = transformed.step(feeds);
  ASSERT_TRUE(bool(b)) << llvm::toString(b.takeError());
  ASSERT_TRUE(a->loss && b->loss);
  EXPECT_LE(std::abs(*a->loss - *b->loss), tolerance * std::max(std::abs(*a->loss), 1e-12));
  ASSERT_EQ(before.gradients.size(), after.gradients.size());
  for (const ir::Gradient &g : before.gradients) {
    const std::string &var = g.variable->name();
    const runtime::reference::Tensor *expected = original.gradient(var);
    const runtime::reference::Tensor *actual = transformed.gradient(var);
    ASSERT_TRUE(expected && actual) << "variable " << var;
    EXPECT_LT(relativeError(expected->toDense(), actual->toDense()), tolerance)
        << "variable " << var;
  }
}

// A pass run a second time over its own output finds nothing more to do.
inline void expectSecondRunChangesNothing(ir::Module &module, llvm::StringRef passName) {
  ASSERT_TRUE(bool(passes::createPass(passName)->run(module, {})));
  auto again = passes::createPass(passName)->run(module, {});
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
  EXPECT_FALSE(*again);
}

} // namespace prism::testing
