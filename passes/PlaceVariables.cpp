// place-variables: decides for each trainable variable whether it is replicated and kept equal
// by all-reduce or held by parameter-server tasks (split into row ranges when it is a large
// table), balancing bytes over the PS tasks; optimizer state follows its variable.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "ir/VariablePlacement.h"
#include "passes/ParallelizeOptions.h"
#include "passes/Pass.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"

namespace prism::passes {
namespace {

using Placements = llvm::DenseMap<const ir::Variable *, ir::VariablePlacement>;

int64_t variableBytes(const ir::Variable &variable) {
  return variable.type().numElements() * ir::dtypeBytes(variable.type().dtype);
}

// The rows a placement splits: the first dimension, or one row for a scalar.
int64_t variableRows(const ir::Variable &variable) {
  return variable.type().isScalar() ? 1 : variable.type().dims[0];
}

// The trainable variables, by where the strategy sends them.
struct StrategySplit {
  std::vector<ir::Variable *> onPs, onAllReduce;
};

struct PsLoads {
  std::vector<int64_t> bytes; // held by each PS task
  int64_t tablesPartitioned = 0;
};

// The state variables of `variable`: what its update ops write besides it.
std::vector<const ir::Variable *> optimizerState(const ir::Variable &variable) {
  std::vector<const ir::Variable *> state;
  for (const ir::OpUse &use : variable.value->uses()) {
    const ir::Op &op = *use.op;
    if (use.operand != 0 || !op.def().has(ir::kOptimizerUpdate))
      continue;
    for (unsigned i = 1; i < op.numOperands(); ++i)
      if (op.def().writes(i) && op.operand(i)->variable())
        state.push_back(op.operand(i)->variable());
  }
  return state;
}

class PlaceVariables : public Pass {
public:
  llvm::StringRef name() const override { return "place-variables"; }
  llvm::StringRef summary() const override {
    return "places variables on all-reduce or on parameter-server tasks (row-range shards)";
  }
  std::vector<std::string> optionKeys() const override {
    return {"strategy",           "ps", "partitions", "partition-threshold-mb", "ps-variables",
            "allreduce-variables"};
  }

  llvm::Expected<bool> run(ir::Module &module, const PassOptions &passOptions) override {
    auto options = PlaceVariablesOptions::fromPassOptions(passOptions);
    if (!options)
      return options.takeError();
    // Decide all-reduce or PS for every trainable variable before changing anything, so an
    // error leaves the module as it was.
    auto split = splitByStrategy(module, *options);
    if (!split)
      return split.takeError();
    if (!split->onPs.empty() && options->psTasks < 1)
      return ir::makeError("option --ps: expected at least 1 parameter-server task, got '" +
                           std::to_string(options->psTasks) + "'");

    Placements placements;
    for (ir::Variable *variable : split->onAllReduce)
      placements[variable].where = ir::Placement::AllReduce;
    PsLoads loads = placeOnParameterServers(split->onPs, *options, placements);
    placeUntrained(module, placements);
    bool changed = apply(module, placements);

    count("variables on all-reduce", static_cast<int64_t>(split->onAllReduce.size()));
    count("variables on PS", static_cast<int64_t>(split->onPs.size()));
    count("tables partitioned", loads.tablesPartitioned);
    for (size_t task = 0; task < loads.bytes.size(); ++task)
      count("bytes on ps:" + std::to_string(task), loads.bytes[task]);
    return changed;
  }

private:
  static llvm::Expected<StrategySplit> splitByStrategy(const ir::Module &module,
                                                       const PlaceVariablesOptions &options) {
    llvm::StringSet<> toPsByName, toAllReduceByName;
    if (auto e = namedVariables(module, options.psVariables, "ps-variables", toPsByName))
      return std::move(e);
    if (auto e = namedVariables(module, options.allReduceVariables, "allreduce-variables",
                                toAllReduceByName))
      return std::move(e);
    for (const auto &name : toPsByName.keys())
      if (toAllReduceByName.contains(name))
        return ir::makeError("option --ps-variables: '" + name.str() +
                             "' is also in --allreduce-variables");
    const Strategy strategy = options.strategy;
    StrategySplit split;
    for (const auto &variable : module.variables()) {
      if (!variable->trainable())
        continue;
      std::optional<ir::VariableUsage> kind = ir::variableKind(*variable);
      if (!kind)
        return ir::makeError(module.sourceFile(), variable->loc,
                             "variable '" + variable->name() +
                                 "' has no kind; run classify-variables first");
      bool toPs = strategy == Strategy::ParameterServer ||
                  (strategy == Strategy::Hybrid && *kind == ir::VariableUsage::Sparse);
      if (toPsByName.contains(variable->name()))
        toPs = true;
      else if (toAllReduceByName.contains(variable->name()))
        toPs = false;
      (toPs ? split.onPs : split.onAllReduce).push_back(variable.get());
    }
    return split;
  }

  // The names of `names`, each a trainable variable of the module (the error names `option`).
  static llvm::Error namedVariables(const ir::Module &module, const std::vector<std::string> &names,
                                    llvm::StringRef option, llvm::StringSet<> &out) {
    for (const std::string &name : names) {
      const ir::Variable *variable = module.findVariable(name);
      if (!variable || !variable->trainable())
        return ir::makeError("option --" + option + ": '" + name +
                             "' is not a trainable variable of the model");
      out.insert(name);
    }
    return llvm::Error::success();
  }

  // How many row ranges a PS variable is split into. Only tables (read through gathers) are
  // split: a gather then asks only the shards that own its rows, while a dense read would need
  // every shard anyway.
  static int64_t rangeCount(const ir::Variable &variable, const PlaceVariablesOptions &options) {
    std::optional<ir::VariableUsage> kind = ir::variableKind(variable);
    if (kind != ir::VariableUsage::Sparse && kind != ir::VariableUsage::Mixed)
      return 1;
    const double thresholdBytes = options.partitionThresholdMb * 1024 * 1024;
    int64_t parts =
        options.partitions > 0
            ? options.partitions
            : std::min<int64_t>(options.psTasks, static_cast<int64_t>(std::ceil(
                                                     variableBytes(variable) / thresholdBytes)));
    return std::clamp<int64_t>(parts, 1, std::max<int64_t>(variableRows(variable), 1));
  }

  // Largest first onto the least-loaded task keeps loads within the largest item of each
  // other; the name breaks ties so the placement does not depend on declaration order.
  static PsLoads placeOnParameterServers(std::vector<ir::Variable *> onPs,
                                         const PlaceVariablesOptions &options,
                                         Placements &placements) {
    std::stable_sort(onPs.begin(), onPs.end(), [](ir::Variable *a, ir::Variable *b) {
      int64_t bytesA = variableBytes(*a), bytesB = variableBytes(*b);
      return bytesA != bytesB ? bytesA > bytesB : a->name() < b->name();
    });
    PsLoads loads;
    loads.bytes.assign(onPs.empty() ? 0 : static_cast<size_t>(options.psTasks), 0);
    for (ir::Variable *variable : onPs) {
      int64_t bytes = variableBytes(*variable);
      int64_t rows = variableRows(*variable);
      int64_t parts = rangeCount(*variable, options);
      loads.tablesPartitioned += parts > 1;
      ir::VariablePlacement &placement = placements[variable];
      placement.where = ir::Placement::ParameterServer;
      int64_t baseRows = rows / parts, longer = rows % parts, begin = 0;
      for (int64_t part = 0; part < parts; ++part) {
        int64_t partRows = baseRows + (part < longer ? 1 : 0);
        int64_t task =
            std::min_element(loads.bytes.begin(), loads.bytes.end()) - loads.bytes.begin();
        loads.bytes[task] += rows > 0 ? bytes / rows * partRows : bytes;
        placement.shards.push_back({task, {begin, begin + partRows}});
        begin += partRows;
      }
    }
    return loads;
  }

  // Optimizer state lives wherever its variable is updated; other untrained variables (the
  // shared adam.step) are the same on every task.
  static void placeUntrained(const ir::Module &module, Placements &placements) {
    for (const auto &variable : module.variables())
      if (!variable->trainable())
        placements[variable.get()].where = ir::Placement::Replicated;
    for (const auto &variable : module.variables()) {
      auto owner = placements.find(variable.get());
      if (!variable->trainable() || owner == placements.end())
        continue;
      ir::VariablePlacement placement = owner->second;
      for (const ir::Variable *state : optimizerState(*variable))
        if (!state->trainable())
          placements[state] = placement;
    }
  }

  // Writes the placements (every variable has one); returns whether any changed.
  static bool apply(ir::Module &module, const Placements &placements) {
    bool changed = false;
    for (const auto &variable : module.variables()) {
      ir::VariablePlacement placement = placements.lookup(variable.get());
      if (ir::placementOf(*variable) == placement)
        continue;
      ir::setPlacement(*variable, placement);
      changed = true;
    }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createPlaceVariablesPass() {
  return std::make_unique<PlaceVariables>();
}

} // namespace prism::passes
