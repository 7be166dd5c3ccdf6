// Training on real Fashion-MNIST: accuracy within a CI budget, and bit-for-bit continuation
// across a checkpoint (N steps, save, restore, M steps equals N + M steps in one run).
#include <gtest/gtest.h>

#include <cstring>

#include "frontends/text/Parser.h"
#include "passes/PassManager.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Trainer.h"
#include "llvm/Support/FileSystem.h"

using namespace prism;
using namespace prism::runtime;

namespace {

std::unique_ptr<ir::Module> compiledModule(llvm::Expected<std::unique_ptr<ir::Module>> module) {
  EXPECT_TRUE(bool(module)) << llvm::toString(module.takeError());
  if (!module)
    return nullptr;
  auto pm = passes::PassManager::fromPipeline(
      "infer-shapes,autodiff,lower-optimizer,cse,dce,fuse-bias-activation,fuse-elementwise");
  EXPECT_TRUE(bool(pm));
  auto changed = pm->run(**module, passes::PassOptions());
  EXPECT_TRUE(bool(changed)) << llvm::toString(changed.takeError());
  return std::move(*module);
}

// A model of models/, or of tests/models/ ("../tests/models/NAME").
std::unique_ptr<ir::Module> trainingModule(const std::string &model) {
  return compiledModule(
      frontends::parseModuleFile(std::string(PRISM_SOURCE_DIR) + "/models/" + model));
}

train::TrainOptions fashionOptions() {
  train::TrainOptions options;
  auto spec = data::parseDataSpec("fashion-mnist");
  EXPECT_TRUE(bool(spec));
  options.data = *spec;
  options.quiet = true;
  options.seed = 7;
  return options;
}

std::string scratchDir() {
  llvm::SmallString<128> dir;
  llvm::sys::fs::createUniqueDirectory("train", dir);
  return std::string(dir);
}

TEST(Train, MlpReachesEightyFivePercentInOneEpoch) {
  auto module = trainingModule("mlp.prism");
  ASSERT_TRUE(module);
  train::TrainOptions options = fashionOptions();
  options.epochs = 1;
  options.threads = 2;
  auto result = train::train(*module, options);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  ASSERT_TRUE(result->testAccuracy.has_value());
  EXPECT_GE(*result->testAccuracy, 0.85);
  EXPECT_EQ(result->steps, 469); // ceil(60000 / 128)
}

TEST(Train, CnnReachesEightyFourPercentInOneEpoch) {
  auto module = trainingModule("cnn.prism");
  ASSERT_TRUE(module);
  train::TrainOptions options = fashionOptions();
  options.epochs = 1;
  options.threads = 2;
  auto result = train::train(*module, options);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  ASSERT_TRUE(result->testAccuracy.has_value());
  EXPECT_GE(*result->testAccuracy, 0.84);
}

void expectRestoreContinuesBitForBit(const std::string &model) {
  SCOPED_TRACE(model);
  auto module = trainingModule(model);
  ASSERT_TRUE(module);
  train::TrainOptions straight = fashionOptions();
  straight.batchSize = 32;
  straight.evaluate = false;
  straight.steps = 7;
  std::string straightDir = scratchDir();
  straight.saveDir = straightDir;
  ASSERT_TRUE(bool(train::train(*module, straight)));

  train::TrainOptions first = straight;
  std::string splitDir = scratchDir();
  first.steps = 4;
  first.saveDir = splitDir;
  ASSERT_TRUE(bool(train::train(*module, first)));
  train::TrainOptions second = straight;
  second.restoreDir = splitDir;
  second.saveDir = splitDir;
  auto resumed = train::train(*module, second);
  ASSERT_TRUE(bool(resumed)) << llvm::toString(resumed.takeError());
  EXPECT_EQ(resumed->steps, 3);
  EXPECT_EQ(resumed->globalStep, 7);

  auto a = train::loadCheckpoint(straightDir);
  auto b = train::loadCheckpoint(splitDir);
  ASSERT_TRUE(bool(a) && bool(b));
  ASSERT_EQ(a->variables.size(), b->variables.size());
  for (const auto &[name, t] : a->variables) {
    const Tensor &u = b->variables.at(name);
    ASSERT_EQ(t.numBytes(), u.numBytes()) << name;
    EXPECT_EQ(std::memcmp(t.raw(), u.raw(), static_cast<size_t>(t.numBytes())), 0) << name;
  }
  EXPECT_EQ(a->position.globalStep, b->position.globalStep);
}

TEST(Train, RestoreContinuesBitForBit) {
  expectRestoreContinuesBitForBit("mlp.prism");
}

// The restored run draws the dropout masks of the steps it continues, not those of steps 0...
TEST(Train, RestoreContinuesDropoutMasksBitForBit) {
  expectRestoreContinuesBitForBit("../tests/models/dropout_mlp.prism");
}

// Test accuracy and loss come from evaluation steps, in which dropout is the identity: a model
// whose logits go through dropout at rate 0.9 evaluates like the same model without it (the
// step itself, at a negligible rate, changes nothing measurable).
TEST(Train, EvaluationStepsDoNotDrop) {
  auto withText = [](const std::string &loss) {
    return "model linear {\n  input x : f32[B, 784]\n  input y : i32[B]\n"
           "  var w : f32[784, 10] = glorot_uniform\n  %logits = matmul(x, w)\n  " +
           loss + "\n  minimize %loss with sgd(lr = 1e-30)\n}\n";
  };
  std::vector<double> losses;
  for (const char *tail : {"%loss = softmax_cross_entropy(%logits, y)",
                           "%loss = softmax_cross_entropy(dropout(%logits, rate = 0.9), y)"}) {
    auto module = compiledModule(frontends::parseModule(withText(tail), "linear.prism"));
    ASSERT_TRUE(module);
    train::TrainOptions options = fashionOptions();
    options.steps = 1;
    options.batchSize = 32;
    auto result = train::train(*module, options);
    ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
    ASSERT_TRUE(result->testLoss.has_value());
    losses.push_back(*result->testLoss);
  }
  EXPECT_NEAR(losses[1], losses[0], 1e-6 * losses[0]);
}

TEST(Train, RestoreRefusesAnotherRun) {
  auto module = trainingModule("mlp.prism");
  ASSERT_TRUE(module);
  train::TrainOptions options = fashionOptions();
  options.evaluate = false;
  options.steps = 1;
  std::string dir = scratchDir();
  options.saveDir = dir;
  ASSERT_TRUE(bool(train::train(*module, options)));
  options.restoreDir = dir;
  options.seed = 8;
  auto result = train::train(*module, options);
  ASSERT_FALSE(bool(result));
  EXPECT_NE(llvm::toString(result.takeError()).find("was made for"), std::string::npos);
}

TEST(Train, MissingDataNamesThePackage) {
  auto module = trainingModule("mlp.prism");
  ASSERT_TRUE(module);
  train::TrainOptions options = fashionOptions();
  auto spec = data::parseDataSpec("fashion-mnist:/nonexistent");
  ASSERT_TRUE(bool(spec));
  options.data = *spec;
  auto result = train::train(*module, options);
  ASSERT_FALSE(bool(result));
  EXPECT_NE(llvm::toString(result.takeError()).find("dataset-fashion-mnist"), std::string::npos);
}

} // namespace
