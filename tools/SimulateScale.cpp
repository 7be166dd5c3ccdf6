// Scale mode of `prism simulate` (see SimulateScale.h).
#include "tools/SimulateScale.h"

#include "cluster/Cluster.h"
#include "ir/Diagnostic.h"
#include "tools/Commands.h"
#include "tools/ScaleReport.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"

namespace prism::tools {
namespace {

// More workers than a cluster's ports allow (cluster/Cluster.h) cannot be a cluster.
constexpr int kMaxWorkers = 65535;

// The flags of scale mode only.
constexpr const char *kScaleFlags[] = {
    "--gpus-per-host", "--link", "--strategies", "--ps-per-host", "--batch-per-worker", "--plot"};
// The flags scale mode sets itself, per point.
constexpr const char *kPlainFlags[] = {"--cluster", "--strategy", "--batch", "--trace-out"};

llvm::Error scaleError(llvm::StringRef text, const llvm::Twine &why) {
  return ir::makeError("option --scale: '" + text + "': " + why);
}

// "10G", "100G", "1G" (links as they are sold), or a bandwidth as cluster files write it.
llvm::Expected<uint64_t> parseLink(llvm::StringRef text) {
  std::string spelled = text.str();
  if (!text.empty() && llvm::StringRef("kKmMgGtT").contains(text.back()))
    spelled += "bit";
  if (auto bits = cluster::parseBandwidth(spelled))
    return *bits;
  return ir::makeError("option --link: '" + text +
                       "': expected a bandwidth such as 1G, 10G, 100G or 25gbit");
}

llvm::Expected<std::vector<passes::Strategy>> parseStrategies(llvm::StringRef text) {
  llvm::SmallVector<llvm::StringRef, 4> names;
  text.split(names, ',');
  std::vector<passes::Strategy> out;
  for (llvm::StringRef name : names) {
    auto strategy = passes::parseStrategy(name.trim());
    if (!strategy) {
      llvm::consumeError(strategy.takeError());
      return ir::makeError("option --strategies: '" + name +
                           "' is not a strategy (expected hybrid, allreduce or ps)");
    }
    if (std::find(out.begin(), out.end(), *strategy) != out.end())
      return ir::makeError("option --strategies: '" + name + "' is given twice");
    out.push_back(*strategy);
  }
  return out;
}

llvm::Expected<plan::ScaleOptions> scaleOptions(const ScaleArgs &args, const CompileArgs &compile) {
  plan::ScaleOptions options;
  auto workers = parseWorkerCounts(args.scale);
  if (!workers)
    return workers.takeError();
  options.workers = std::move(*workers);
  auto strategies = parseStrategies(args.strategies);
  if (!strategies)
    return strategies.takeError();
  options.strategies = std::move(*strategies);
  auto link = parseLink(args.link);
  if (!link)
    return link.takeError();
  options.linkBitsPerSec = *link;
  if (args.gpusPerHost < 1)
    return ir::makeError("option --gpus-per-host: " + llvm::Twine(args.gpusPerHost) +
                         ": expected at least 1");
  if (args.psPerHost < 0)
    return ir::makeError("option --ps-per-host: " + llvm::Twine(args.psPerHost) +
                         ": expected 0 or more");
  if (args.psPerHost == 0 &&
      std::any_of(options.strategies.begin(), options.strategies.end(),
                  [](passes::Strategy s) { return s != passes::Strategy::AllReduce; }))
    return ir::makeError("option --ps-per-host: 0 leaves no parameter server for hybrid and ps "
                         "(give --strategies allreduce)");
  if (args.batchPerWorker < 1)
    return ir::makeError("option --batch-per-worker: " + llvm::Twine(args.batchPerWorker) +
                         ": expected at least 1");
  options.gpusPerHost = args.gpusPerHost;
  options.psPerHost = args.psPerHost;
  options.batchPerWorker = args.batchPerWorker;
  auto partition = compile.toOptions();
  if (!partition)
    return partition.takeError();
  options.partition = std::move(*partition);
  return options;
}

} // namespace

void ScaleArgs::addOptions(CLI::App &cmd) {
  command = &cmd;
  cmd.add_option("--scale", scale,
                 "Worker counts to simulate a model on GPU hosts, such as 1,2,4,...,1024 "
                 "(scale mode: a cluster per count, a plan per strategy)");
  cmd.add_option("--gpus-per-host", gpusPerHost, "Scale mode: GPUs (workers) per host")
      ->capture_default_str();
  cmd.add_option("--link", link, "Scale mode: each host's link, such as 1G, 10G or 100G")
      ->capture_default_str();
  cmd.add_option("--strategies", strategies, "Scale mode: the strategies to compare")
      ->capture_default_str();
  cmd.add_option("--ps-per-host", psPerHost,
                 "Scale mode: parameter servers per host under hybrid and ps")
      ->capture_default_str();
  cmd.add_option("--batch-per-worker", batchPerWorker,
                 "Scale mode: samples per worker (the global batch grows with the workers)")
      ->capture_default_str();
  cmd.add_option("--plot", plot,
                 "Scale mode: write an SVG of samples/s and scaling efficiency (gnuplot)");
}

bool ScaleArgs::given(const char *flag) const {
  return command && command->get_option(flag)->count() > 0;
}

llvm::Error ScaleArgs::checkMode() const {
  if (!enabled()) {
    for (const char *flag : kScaleFlags)
      if (given(flag))
        return ir::makeError("option " + llvm::Twine(flag) + ": applies with --scale");
    return llvm::Error::success();
  }
  for (const char *flag : kPlainFlags)
    if (given(flag))
      return ir::makeError(
          "option " + llvm::Twine(flag) +
          ": not with --scale, which makes a cluster, a plan and a batch per worker count "
          "(see --gpus-per-host, --link, --strategies, --ps-per-host, --batch-per-worker)");
  return llvm::Error::success();
}

llvm::Expected<std::vector<int>> parseWorkerCounts(llvm::StringRef text) {
  llvm::SmallVector<llvm::StringRef, 16> items;
  text.split(items, ',');
  std::vector<int> out;
  for (size_t i = 0; i < items.size(); ++i) {
    llvm::StringRef item = items[i].trim();
    if (item == "...") {
      if (out.size() < 2 || i + 1 >= items.size() || items[i + 1].trim() == "...")
        return scaleError(text, "'...' needs two counts before it and one after it");
      const int a = out[out.size() - 2], b = out.back();
      if (b % a != 0)
        return scaleError(text, "'...' multiplies: " + llvm::Twine(b) + " is not a multiple of " +
                                    llvm::Twine(a));
      const int ratio = b / a;
      int64_t last = 0;
      if (!llvm::to_integer(items[i + 1].trim(), last, 10) || last <= b)
        return scaleError(text, "'...' must be followed by a count above " + llvm::Twine(b));
      for (int64_t next = int64_t{b} * ratio; next < last; next *= ratio)
        out.push_back(static_cast<int>(next));
      if (static_cast<int64_t>(out.back()) * ratio != last)
        return scaleError(text, "multiplying by " + llvm::Twine(ratio) + " from " + llvm::Twine(b) +
                                    " does not reach " + llvm::Twine(last));
      continue;
    }
    int64_t count = 0;
    if (!llvm::to_integer(item, count, 10) || count < 1 || count > kMaxWorkers)
      return scaleError(text, "'" + item + "' is not a worker count (a whole number from 1 to " +
                                  llvm::Twine(kMaxWorkers) + ")");
    if (!out.empty() && count <= out.back())
      return scaleError(text, "counts must increase, and " + llvm::Twine(count) + " comes after " +
                                  llvm::Twine(out.back()));
    out.push_back(static_cast<int>(count));
  }
  return out;
}

int runScale(const ScaleArgs &args, const std::string &model, const CompileArgs &compile,
             const plan::CostProfile &profile, const std::string &profileSource, bool json) {
  auto options = scaleOptions(args, compile);
  if (!options)
    return reportError(options.takeError());
  auto module = loadModule(model, /*inferShapes=*/false);
  if (!module)
    return reportError(module.takeError());
  auto points = plan::simulateScaling(**module, *options, profile);
  if (!points)
    return reportError(points.takeError());
  ScaleSetting setting{llvm::sys::path::stem(model).str(), profileSource, profile.gpu.name,
                       &*options};
  if (!args.plot.empty())
    if (auto e = writeScalePlot(*points, setting, args.plot))
      return reportError(std::move(e));
  if (json)
    llvm::outs() << scaleToJson(*points, setting);
  else
    printScaleTable(*points, setting, llvm::outs());
  return 0;
}

} // namespace prism::tools
