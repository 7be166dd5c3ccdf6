// place-variables: decides for each trainable variable whether it is replicated and kept equal
// by all-reduce or held by parameter-server tasks (split into row ranges when it is a large
// table), balancing bytes over the PS tasks; optimizer state follows its variable.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ir/Diagnostic.h"
#include "passes/Pass.h"
#include "llvm/ADT/StringMap.h"

namespace prism::passes {
namespace {

enum class Strategy { Hybrid, AllReduce, ParameterServer };

// Suffixes lower-optimizer gives the state variables of a trained variable.
constexpr const char *kStateSuffixes[] = {".adam_m", ".adam_v", ".momentum"};

int64_t variableBytes(const ir::Variable &variable) {
  return variable.type().numElements() * ir::dtypeBytes(variable.type().dtype);
}

// The rows a placement splits: the first dimension, or one row for a scalar.
int64_t variableRows(const ir::Variable &variable) {
  return variable.type().isScalar() ? 1 : variable.type().dims[0];
}

class PlaceVariables : public Pass {
public:
  llvm::StringRef name() const override { return "place-variables"; }
  llvm::StringRef summary() const override {
    return "places variables on all-reduce or on parameter-server tasks (row-range shards)";
  }
  std::vector<std::string> optionKeys() const override {
    return {"strategy", "ps", "partitions", "partition-threshold-mb"};
  }

  llvm::Expected<bool> run(ir::Module &module, const PassOptions &options) override {
    std::string strategyName = options.get("strategy", "hybrid");
    Strategy strategy;
    if (strategyName == "hybrid")
      strategy = Strategy::Hybrid;
    else if (strategyName == "allreduce")
      strategy = Strategy::AllReduce;
    else if (strategyName == "ps")
      strategy = Strategy::ParameterServer;
    else
      return ir::makeError("option --strategy: expected hybrid, allreduce or ps, got '" +
                           strategyName + "'");
    auto psTasks = options.getInt("ps", 1);
    if (!psTasks)
      return psTasks.takeError();
    auto partitions = options.getInt("partitions", 0);
    if (!partitions)
      return partitions.takeError();
    if (*partitions < 0)
      return ir::makeError("option --partitions: expected 0 (automatic) or more, got '" +
                           options.get("partitions") + "'");
    auto thresholdMb = options.getFloat("partition-threshold-mb", 64);
    if (!thresholdMb)
      return thresholdMb.takeError();
    if (!(*thresholdMb > 0))
      return ir::makeError("option --partition-threshold-mb: expected a positive number, got '" +
                           options.get("partition-threshold-mb") + "'");

    // Decide all-reduce or PS for every trainable variable before changing anything, so an
    // error leaves the module as it was.
    std::vector<ir::Variable *> onPs, onAllReduce;
    for (const auto &variable : module.variables()) {
      if (!variable->trainable())
        continue;
      const ir::Attr *kind = variable->attrs.find("kind");
      if (!kind || kind->kind() != ir::AttrKind::String)
        return ir::makeError(module.sourceFile(), variable->loc,
                             "variable '" + variable->name() +
                                 "' has no kind; run classify-variables first");
      bool toPs = strategy == Strategy::ParameterServer ||
                  (strategy == Strategy::Hybrid && kind->getString() == "sparse");
      (toPs ? onPs : onAllReduce).push_back(variable.get());
    }
    if (!onPs.empty() && *psTasks < 1)
      return ir::makeError("option --ps: expected at least 1 parameter-server task, got '" +
                           options.get("ps") + "'");

    llvm::StringMap<ir::AttrMap> placements;
    for (ir::Variable *variable : onAllReduce)
      placements[variable->name()].set("placement", ir::Attr::string("allreduce"));

    // Largest first onto the least-loaded task keeps loads within the largest item of each
    // other; the name breaks ties so the placement does not depend on declaration order.
    std::stable_sort(onPs.begin(), onPs.end(), [](ir::Variable *a, ir::Variable *b) {
      int64_t bytesA = variableBytes(*a), bytesB = variableBytes(*b);
      return bytesA != bytesB ? bytesA > bytesB : a->name() < b->name();
    });
    std::vector<int64_t> loads(onPs.empty() ? 0 : static_cast<size_t>(*psTasks), 0);
    auto leastLoaded = [&] {
      return static_cast<int64_t>(std::min_element(loads.begin(), loads.end()) - loads.begin());
    };
    const double thresholdBytes = *thresholdMb * 1024 * 1024;
    int64_t tablesPartitioned = 0;
    for (ir::Variable *variable : onPs) {
      int64_t bytes = variableBytes(*variable);
      int64_t rows = variableRows(*variable);
      std::string kind = variable->attrs.getString("kind");
      // Only tables (read through gathers) are split: a gather then asks only the shards that
      // own its rows, while a dense read would need every shard anyway.
      int64_t parts = 1;
      if (kind == "sparse" || kind == "mixed") {
        parts = *partitions > 0
                    ? *partitions
                    : std::min<int64_t>(*psTasks,
                                        static_cast<int64_t>(std::ceil(bytes / thresholdBytes)));
        parts = std::clamp<int64_t>(parts, 1, std::max<int64_t>(rows, 1));
      }
      tablesPartitioned += parts > 1;
      llvm::SmallVector<int64_t, 4> shards, boundaries{0};
      int64_t baseRows = rows / parts, longer = rows % parts;
      for (int64_t part = 0; part < parts; ++part) {
        int64_t partRows = baseRows + (part < longer ? 1 : 0);
        boundaries.push_back(boundaries.back() + partRows);
        int64_t task = leastLoaded();
        loads[task] += rows > 0 ? bytes / rows * partRows : bytes;
        shards.push_back(task);
      }
      ir::AttrMap &placement = placements[variable->name()];
      placement.set("placement", ir::Attr::string("ps"));
      placement.set("shards", ir::Attr::ints(shards));
      placement.set("rows", ir::Attr::ints(boundaries));
    }

    // Optimizer state lives wherever its variable is updated; other untrained variables (the
    // shared adam.step) are the same on every task.
    for (const auto &variable : module.variables()) {
      if (variable->trainable())
        continue;
      ir::AttrMap placement;
      placement.set("placement", ir::Attr::string("replicated"));
      llvm::StringRef name = variable->name();
      for (const char *suffix : kStateSuffixes)
        if (name.endswith(suffix)) {
          auto owner = placements.find(name.drop_back(llvm::StringRef(suffix).size()));
          if (owner != placements.end())
            placement = owner->second;
        }
      placements[name] = placement;
    }

    bool changed = false;
    for (const auto &variable : module.variables()) {
      ir::AttrMap attrs = variable->attrs;
      for (const char *key : {"placement", "shards", "rows"})
        attrs.erase(key);
      for (const auto &[key, value] : placements[variable->name()])
        attrs.set(key, value);
      if (attrs != variable->attrs) {
        variable->attrs = std::move(attrs);
        changed = true;
      }
    }

    count("variables on all-reduce", static_cast<int64_t>(onAllReduce.size()));
    count("variables on PS", static_cast<int64_t>(onPs.size()));
    count("tables partitioned", tablesPartitioned);
    for (size_t task = 0; task < loads.size(); ++task)
      count("bytes on ps:" + std::to_string(task), loads[task]);
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createPlaceVariablesPass() {
  return std::make_unique<PlaceVariables>();
}

} // namespace prism::passes
