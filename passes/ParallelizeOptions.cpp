// The options of the parallelizing passes: parsing `--key=value` text into the typed structs
// (each error names the option and the text) and writing the structs back as text.
#include "passes/ParallelizeOptions.h"

#include <string>

#include "ir/Attribute.h"
#include "ir/Diagnostic.h"

namespace prism::passes {
namespace {

constexpr Strategy kStrategies[] = {Strategy::Hybrid, Strategy::AllReduce,
                                    Strategy::ParameterServer};

// The text an option was given as, for errors (the value itself when it was not given).
std::string textOf(const PassOptions &options, llvm::StringRef key, const std::string &value) {
  return options.has(key) ? options.get(key) : value;
}

llvm::Error badOption(llvm::StringRef key, llvm::StringRef expected, llvm::StringRef text) {
  return ir::makeError("option --" + key + ": expected " + expected + ", got '" + text + "'");
}

// A comma-separated list of names; empty text: none.
std::vector<std::string> splitNames(llvm::StringRef text) {
  llvm::SmallVector<llvm::StringRef, 8> parts;
  text.split(parts, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  std::vector<std::string> names;
  for (llvm::StringRef part : parts)
    names.push_back(part.trim().str());
  return names;
}

std::string joinNames(const std::vector<std::string> &names) {
  std::string text;
  for (const std::string &name : names)
    text += (text.empty() ? "" : ",") + name;
  return text;
}

} // namespace

llvm::StringRef strategyName(Strategy strategy) {
  switch (strategy) {
  case Strategy::Hybrid:
    return "hybrid";
  case Strategy::AllReduce:
    return "allreduce";
  case Strategy::ParameterServer:
    return "ps";
  }
  return "hybrid";
}

llvm::Expected<Strategy> parseStrategy(llvm::StringRef text) {
  for (Strategy strategy : kStrategies)
    if (strategyName(strategy) == text)
      return strategy;
  return badOption("strategy", "hybrid, allreduce or ps", text);
}

llvm::Expected<PlaceVariablesOptions>
PlaceVariablesOptions::fromPassOptions(const PassOptions &options) {
  PlaceVariablesOptions result;
  if (options.has("strategy")) {
    auto strategy = parseStrategy(options.get("strategy"));
    if (!strategy)
      return strategy.takeError();
    result.strategy = *strategy;
  }
  auto psTasks = options.getInt("ps", result.psTasks);
  if (!psTasks)
    return psTasks.takeError();
  if (*psTasks < 0)
    return badOption("ps", "0 or more parameter-server tasks", options.get("ps"));
  result.psTasks = *psTasks;
  auto partitions = options.getInt("partitions", result.partitions);
  if (!partitions)
    return partitions.takeError();
  if (*partitions < 0)
    return badOption("partitions", "0 (automatic) or more", options.get("partitions"));
  result.partitions = *partitions;
  auto thresholdMb = options.getFloat("partition-threshold-mb", result.partitionThresholdMb);
  if (!thresholdMb)
    return thresholdMb.takeError();
  if (!(*thresholdMb > 0))
    return badOption("partition-threshold-mb", "a positive number",
                     textOf(options, "partition-threshold-mb", ir::formatDouble(*thresholdMb)));
  result.partitionThresholdMb = *thresholdMb;
  if (options.has("ps-variables"))
    result.psVariables = splitNames(options.get("ps-variables"));
  if (options.has("allreduce-variables"))
    result.allReduceVariables = splitNames(options.get("allreduce-variables"));
  return result;
}

void PlaceVariablesOptions::addTo(PassOptions &options) const {
  options.set("strategy", strategyName(strategy));
  options.set("ps", std::to_string(psTasks));
  options.set("partitions", std::to_string(partitions));
  options.set("partition-threshold-mb", ir::formatDouble(partitionThresholdMb));
  if (!psVariables.empty())
    options.set("ps-variables", joinNames(psVariables));
  if (!allReduceVariables.empty())
    options.set("allreduce-variables", joinNames(allReduceVariables));
}

llvm::Expected<RouteGradientsOptions>
RouteGradientsOptions::fromPassOptions(const PassOptions &options) {
  RouteGradientsOptions result;
  auto bucketMb = options.getFloat("bucket-mb", result.bucketMb);
  if (!bucketMb)
    return bucketMb.takeError();
  if (!(*bucketMb > 0))
    return badOption("bucket-mb", "a positive size in MiB",
                     textOf(options, "bucket-mb", ir::formatDouble(*bucketMb)));
  result.bucketMb = *bucketMb;
  return result;
}

void RouteGradientsOptions::addTo(PassOptions &options) const {
  options.set("bucket-mb", ir::formatDouble(bucketMb));
}

llvm::Expected<ReplicateOptions> ReplicateOptions::fromPassOptions(const PassOptions &options) {
  ReplicateOptions result;
  auto workers = options.getInt("workers", result.workers);
  if (!workers)
    return workers.takeError();
  if (*workers < 1)
    return badOption("workers", "at least 1 worker", options.get("workers"));
  result.workers = *workers;
  auto devices = options.getInt("devices", result.devices);
  if (!devices)
    return devices.takeError();
  if (*devices < 1 || *devices > 1024)
    return badOption("devices", "1 to 1024 towers", options.get("devices"));
  result.devices = *devices;
  return result;
}

void ReplicateOptions::addTo(PassOptions &options) const {
  options.set("workers", std::to_string(workers));
  options.set("devices", std::to_string(devices));
}

} // namespace prism::passes
