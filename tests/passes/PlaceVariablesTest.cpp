// place-variables on every model in models/: each trainable variable is placed exactly once,
// row ranges cover the table without overlap, and PS loads stay balanced.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "frontends/text/Parser.h"
#include "passes/PassManager.h"

using namespace prism;

namespace {

const char *const kModels[] = {"mlp", "cnn", "resnet", "lstm_lm", "embedding_classifier"};
const char *const kStrategies[] = {"hybrid", "allreduce", "ps"};
const int kPsTasks[] = {1, 2, 3, 8};

int64_t bytesOf(const ir::Variable &variable) {
  return variable.type().numElements() * ir::dtypeBytes(variable.type().dtype);
}

std::unique_ptr<ir::Module> placeModel(const std::string &model, const std::string &strategy,
                                       int psTasks) {
  auto module =
      frontends::parseModuleFile(std::string(PRISM_SOURCE_DIR) + "/models/" + model + ".prism");
  EXPECT_TRUE(static_cast<bool>(module)) << llvm::toString(module.takeError());
  auto manager = passes::PassManager::fromPipeline(
      "inline,infer-shapes,autodiff,lower-optimizer,classify-variables,place-variables");
  EXPECT_TRUE(static_cast<bool>(manager)) << llvm::toString(manager.takeError());
  passes::PassOptions options;
  options.set("strategy", strategy);
  options.set("ps", std::to_string(psTasks));
  auto changed = manager->run(**module, options);
  EXPECT_TRUE(static_cast<bool>(changed)) << llvm::toString(changed.takeError());
  return std::move(*module);
}

TEST(PlaceVariablesTest, EveryModelEveryStrategyIsPlacedAndBalanced) {
  for (const char *model : kModels)
    for (const char *strategy : kStrategies)
      for (int psTasks : kPsTasks) {
        SCOPED_TRACE(std::string(model) + " --strategy=" + strategy +
                     " --ps=" + std::to_string(psTasks));
        std::unique_ptr<ir::Module> module = placeModel(model, strategy, psTasks);
        std::vector<int64_t> loads(psTasks, 0);
        int64_t largest = 0;
        bool anyOnPs = false;
        for (const auto &variable : module->variables()) {
          std::string placement = variable->attrs.getString("placement");
          if (!variable->trainable()) {
            EXPECT_TRUE(placement == "replicated" || placement == "allreduce" || placement == "ps")
                << variable->name();
            continue;
          }
          std::string kind = variable->attrs.getString("kind");
          bool expectPs = std::string(strategy) == "ps" ||
                          (std::string(strategy) == "hybrid" && kind == "sparse");
          ASSERT_EQ(placement, expectPs ? "ps" : "allreduce") << variable->name();
          if (!expectPs) {
            EXPECT_FALSE(variable->attrs.has("shards")) << variable->name();
            continue;
          }
          anyOnPs = true;
          int64_t bytes = bytesOf(*variable);
          largest = std::max(largest, bytes);
          auto shards = variable->attrs.getInts("shards");
          auto rows = variable->attrs.getInts("rows");
          ASSERT_FALSE(shards.empty()) << variable->name();
          ASSERT_EQ(rows.size(), shards.size() + 1) << variable->name();
          int64_t totalRows = variable->type().isScalar() ? 1 : variable->type().dims[0];
          EXPECT_EQ(rows.front(), 0);
          EXPECT_EQ(rows.back(), totalRows);
          for (size_t part = 0; part < shards.size(); ++part) {
            int64_t partRows = rows[part + 1] - rows[part];
            EXPECT_GT(partRows, 0) << variable->name();
            // Nearly equal: the first ranges are at most one row longer.
            EXPECT_LE(partRows - (rows[1] - rows[0]), 0);
            EXPECT_GE(partRows - (rows[1] - rows[0]), -1);
            ASSERT_GE(shards[part], 0);
            ASSERT_LT(shards[part], psTasks);
            loads[shards[part]] += bytes / totalRows * partRows;
          }
        }
        if (!anyOnPs)
          continue;
        auto [lightest, heaviest] = std::minmax_element(loads.begin(), loads.end());
        EXPECT_LE(*heaviest - *lightest, largest);
        // Optimizer state follows the placement of its variable.
        for (const auto &variable : module->variables()) {
          llvm::StringRef name = variable->name();
          if (!name.endswith(".adam_m") && !name.endswith(".momentum"))
            continue;
          const ir::Variable *owner = nullptr;
          for (const auto &candidate : module->variables())
            if (name.startswith(candidate->name() + ".") && candidate->trainable())
              owner = candidate.get();
          ASSERT_NE(owner, nullptr) << name.str();
          for (const char *key : {"placement", "shards", "rows"}) {
            const ir::Attr *ownerAttr = owner->attrs.find(key);
            const ir::Attr *stateAttr = variable->attrs.find(key);
            ASSERT_EQ(ownerAttr == nullptr, stateAttr == nullptr) << name.str() << " " << key;
            if (ownerAttr) {
              EXPECT_EQ(*ownerAttr, *stateAttr) << name.str() << " " << key;
            }
          }
        }
      }
}

TEST(PlaceVariablesTest, ExplicitPartitionsSplitTheTableIntoNearlyEqualRanges) {
  auto module = frontends::parseModuleFile(std::string(PRISM_SOURCE_DIR) +
                                           "/models/embedding_classifier.prism");
  ASSERT_TRUE(static_cast<bool>(module)) << llvm::toString(module.takeError());
  auto manager =
      passes::PassManager::fromPipeline("infer-shapes,classify-variables,place-variables");
  ASSERT_TRUE(static_cast<bool>(manager)) << llvm::toString(manager.takeError());
  passes::PassOptions options;
  options.set("ps", "2");
  options.set("partitions", "3");
  auto changed = manager->run(**module, options);
  ASSERT_TRUE(static_cast<bool>(changed)) << llvm::toString(changed.takeError());
  for (const auto &variable : (*module)->variables())
    if (variable->name() == "emb") {
      EXPECT_EQ(variable->attrs.getString("placement"), "ps");
      EXPECT_EQ(variable->attrs.getInts("rows"),
                (llvm::SmallVector<int64_t, 4>{0, 33334, 66667, 100000}));
      // The first range is one row longer, so ps:0 is the heavier task when the third comes.
      EXPECT_EQ(variable->attrs.getInts("shards"), (llvm::SmallVector<int64_t, 4>{0, 1, 1}));
    }
}

} // namespace
