// `prism simulate PLAN|MODEL [--profile P] [--trace-out FILE]`: a plan's predicted step from a
// cost profile (plan/Simulator.h; docs/simulate.md); with `--scale`, a model's steps on growing
// clusters of GPU hosts (tools/SimulateScale.h).
#include <algorithm>
#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "api/Internal.h"
#include "cluster/ClusterParser.h"
#include "ir/Diagnostic.h"
#include "plan/AutoParallel.h"
#include "plan/CostProfile.h"
#include "plan/Partitioner.h"
#include "plan/PlanFile.h"
#include "plan/Simulator.h"
#include "runtime/exec/Trace.h"
#include "runtime/job/RowsPerStep.h"
#include "tools/Commands.h"
#include "tools/OutputFile.h"
#include "tools/Partition.h"
#include "tools/SimulateScale.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {
namespace {

struct SimulateArgs {
  std::string file;
  std::string traceOut;
  std::string data; // a model's; empty: its data statement's, if it has one
  bool json = false;
  CompileArgs compile;
  ScaleArgs scale;
};

bool isModelFile(llvm::StringRef path) {
  return path.endswith(".prism") || path.endswith(".onnx");
}

// The plan to simulate: read, or compiled from a model as `prism train` compiles it: with the
// flags of `prism partition`, and the rows its steps read sampled from its data.
llvm::Expected<plan::Plan> planOf(const SimulateArgs &args) {
  if (!isModelFile(args.file)) {
    if (!args.compile.cluster.empty())
      return ir::makeError("option --cluster: applies to a model (.prism), and " + args.file +
                           " is a plan: its cluster is in it");
    if (!args.data.empty())
      return ir::makeError("option --data: applies to a model (.prism), and " + args.file +
                           " is a plan: its estimate holds the rows its steps read");
    return plan::readPlan(args.file);
  }
  if (args.compile.cluster.empty())
    return ir::makeError("option --cluster: required to simulate a model (" + args.file + ")");
  auto model = loadModule(args.file, /*inferShapes=*/false);
  if (!model)
    return model.takeError();
  auto options = args.compile.toOptions();
  if (!options)
    return options.takeError();
  auto cluster = cluster::loadCluster(args.compile.cluster, args.compile.replicationKind());
  if (!cluster)
    return cluster.takeError();
  // A model without a data statement trains on what `prism train --data` names; without it
  // the rows are uniform draws.
  std::string data = args.data;
  if (data.empty() && (*model)->data) {
    auto named = api::dataFor("", **model);
    if (!named)
      return named.takeError();
    data = *named;
  }
  auto result = runtime::job::partitionWithData(std::move(*model), *cluster, *options, data);
  if (!result)
    return result.takeError();
  return std::move(result->plan);
}

llvm::Expected<plan::CostProfile> profileOf(const SimulateArgs &args, std::string &source) {
  if (args.compile.profile.empty())
    return plan::cachedOrDefaultProfile(source);
  source = args.compile.profile;
  return plan::readProfile(args.compile.profile);
}

// The predicted step as the measured traces write it: a file per task (runtime/exec/Trace.h),
// merged into one.
llvm::Error writeTrace(const plan::Prediction &prediction, const std::string &path) {
  llvm::SmallString<128> dir;
  if (auto ec = llvm::sys::fs::createUniqueDirectory("prism-simulate", dir))
    return ir::makeError("cannot make a scratch directory: " + ec.message());
  std::map<std::string, std::unique_ptr<runtime::TraceRecorder>> recorders;
  const auto start = runtime::TraceRecorder::Clock::now();
  auto at = [&](double seconds) {
    return start + std::chrono::duration_cast<runtime::TraceRecorder::Clock::duration>(
                       std::chrono::duration<double>(seconds));
  };
  for (const plan::TaskPrediction &task : prediction.tasks)
    recorders[task.task] = std::make_unique<runtime::TraceRecorder>(task.task);
  // Each recorder pairs its clocks when it is made, microseconds apart (more on a busy
  // machine): one offset each puts every task's step start at the same instant.
  if (!recorders.empty()) {
    const int64_t reference = recorders.begin()->second->unixMicros(start);
    for (const auto &[task, recorder] : recorders)
      recorder->setClockOffset(reference - recorder->unixMicros(start));
  }
  for (const plan::SimulatedSpan &s : prediction.spans) {
    runtime::TraceRecorder::Args spanArgs;
    if (s.bytes > 0)
      spanArgs.emplace_back("bytes", s.bytes);
    // Categories are kept by pointer: the prediction outlives the recorders.
    recorders[s.task]->span(s.track, s.name, s.category.c_str(), at(s.begin), at(s.end),
                            std::move(spanArgs));
  }
  std::vector<std::string> files;
  for (const auto &[task, recorder] : recorders) {
    llvm::SmallString<128> file(dir);
    std::string name = task;
    std::replace(name.begin(), name.end(), ':', '-');
    llvm::sys::path::append(file, name + ".json");
    if (auto e = recorder->write(file))
      return e;
    files.push_back(std::string(file));
  }
  auto merged = runtime::mergeTraceFiles(files);
  llvm::sys::fs::remove_directories(dir);
  if (!merged)
    return merged.takeError();
  return writeOutput(path, *merged);
}

void printText(const plan::Prediction &p, const std::string &source, llvm::raw_ostream &os) {
  os << "predicted step (profile: " << source << ")\n"
     << llvm::format("  step %.3f ms, %.1f samples/s (global batch %lld)\n", p.stepSeconds * 1e3,
                     p.samplesPerSecond, static_cast<long long>(p.globalBatch));
  if (p.slowestWorkerRatio != 1)
    os << llvm::format("  the slowest worker's kernels at %.2fx a median step's (the profile's "
                       "step spread)\n",
                       p.slowestWorkerRatio);
  os << "  task         compute ms      comm ms      idle ms       sent B   received B\n";
  for (const plan::TaskPrediction &t : p.tasks)
    os << llvm::format("  %-10s %12.3f %12.3f %12.3f %12.0f %12.0f\n", t.task.c_str(),
                       t.computeSeconds * 1e3, t.communicationSeconds * 1e3, t.idleSeconds * 1e3,
                       t.bytesSent, t.bytesReceived);
  os << "  host              out B         in B      link ms\n";
  for (const plan::LinkPrediction &l : p.links)
    os << llvm::format("  %-10s %12.0f %12.0f %12.3f\n", l.host.c_str(), l.bytesOut, l.bytesIn,
                       l.busySeconds * 1e3);
}

std::string toJson(const plan::Prediction &p, const std::string &source) {
  nlohmann::ordered_json tasks = nlohmann::ordered_json::array(),
                         links = nlohmann::ordered_json::array();
  for (const plan::TaskPrediction &t : p.tasks)
    tasks.push_back({{"task", t.task},
                     {"compute_seconds", t.computeSeconds},
                     {"communication_seconds", t.communicationSeconds},
                     {"idle_seconds", t.idleSeconds},
                     {"bytes_sent", t.bytesSent},
                     {"bytes_received", t.bytesReceived}});
  for (const plan::LinkPrediction &l : p.links)
    links.push_back({{"host", l.host},
                     {"bytes_out", l.bytesOut},
                     {"bytes_in", l.bytesIn},
                     {"busy_seconds", l.busySeconds}});
  nlohmann::ordered_json root = {{"profile", source},
                                 {"step_seconds", p.stepSeconds},
                                 {"samples_per_second", p.samplesPerSecond},
                                 {"global_batch", p.globalBatch},
                                 {"slowest_worker_ratio", p.slowestWorkerRatio},
                                 {"tasks", tasks},
                                 {"links", links}};
  return root.dump(2) + "\n";
}

int runSimulate(const SimulateArgs &args) {
  if (auto e = args.scale.checkMode())
    return reportError(std::move(e));
  if (args.scale.enabled()) {
    if (!isModelFile(args.file))
      return reportError(ir::makeError("option --scale: applies to a model (.prism, .onnx), and " +
                                       args.file + " is a plan"));
    if (!args.data.empty())
      return reportError(ir::makeError("option --data: not with --scale, whose clusters' plans "
                                       "take the rows a step reads as uniform draws"));
    std::string source;
    auto profile = profileOf(args, source);
    if (!profile)
      return reportError(profile.takeError());
    return runScale(args.scale, args.file, args.compile, *profile, source, args.json);
  }
  auto plan = planOf(args);
  if (!plan)
    return reportError(plan.takeError());
  std::string source;
  auto profile = profileOf(args, source);
  if (!profile)
    return reportError(profile.takeError());
  auto prediction = plan::simulateStep(*plan, *profile);
  if (!prediction)
    return reportError(prediction.takeError());
  if (!args.traceOut.empty())
    if (auto e = writeTrace(*prediction, args.traceOut))
      return reportError(std::move(e));
  if (args.json)
    llvm::outs() << toJson(*prediction, source);
  else
    printText(*prediction, source, llvm::outs());
  if (args.compile.explain && !args.json)
    plan::printDecisions(*plan, llvm::outs());
  return 0;
}

} // namespace

void registerSimulateCommand(CLI::App &app) {
  auto args = std::make_shared<SimulateArgs>();
  auto *cmd = app.add_subcommand("simulate", "Predict a plan's step time from a cost profile");
  cmd->add_option("file", args->file, "Plan file (plan.pb), or a model (.prism) to partition")
      ->required();
  args->compile.addOptions(*cmd, /*runOptions=*/true, /*clusterRequired=*/false);
  cmd->add_option("--trace-out", args->traceOut,
                  "Write the predicted step as a Chrome trace (as `--trace` and `prism trace "
                  "merge` write measured ones)");
  cmd->add_option("--data", args->data,
                  "A model's data set, whose batches give the rows its steps read from tables, "
                  "as prism train samples them (default: the one the model names; without one, "
                  "uniform draws): fashion-mnist[:DIR], zipf:VOCAB[,tokens=T,classes=C], "
                  "text:FILE, npy:DIR");
  cmd->add_flag("--json", args->json, "Print the prediction as JSON");
  args->scale.addOptions(*cmd);
  cmd->callback([args]() {
    if (int status = runSimulate(*args))
      throw CLI::RuntimeError(status);
  });
}

} // namespace prism::tools
