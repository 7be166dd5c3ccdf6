// `prism verify MODEL --cluster C`: trains the model on one device and as the distributed plan,
// on the same data from the same initial values, and reports how far apart the losses and the
// variables end up. Exit 1 above the tolerance.
#include <cmath>
#include <fstream>
#include <string>

#include "cluster/ClusterParser.h"
#include "nlohmann/json.hpp"
#include "plan/Pipeline.h"
#include "plan/PlanFile.h"
#include "plan/PlanTasks.h"
#include "runtime/job/Launcher.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Trainer.h"
#include "tools/Commands.h"
#include "tools/Partition.h"
#include "tools/Run.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {
namespace {

struct VerifyArgs {
  std::string model;
  std::string data = kDefaultData;
  int threads = 1;
  double tolerance = 1e-5;
  bool keep = false;
  CompileArgs compile;
  RunOptionArgs run;
};

llvm::Expected<std::vector<double>> readLosses(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    return ir::makeError("cannot read the metrics " + path);
  std::vector<double> losses;
  std::string line;
  while (std::getline(in, line)) {
    auto json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (json.is_object() && json.contains("loss"))
      losses.push_back(json["loss"].get<double>());
  }
  return losses;
}

double elementAt(const runtime::Tensor &t, int64_t i) {
  return t.dtype() == ir::DType::F64 ? t.data<double>()[i] : t.data<float>()[i];
}

// ‖a − b‖∞ / ‖b‖∞: how far the distributed value is from the single-device one.
double relativeDifference(const runtime::Tensor &a, const runtime::Tensor &b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < b.numElements(); ++i) {
    diff = std::max(diff, std::fabs(elementAt(a, i) - elementAt(b, i)));
    scale = std::max(scale, std::fabs(elementAt(b, i)));
  }
  return diff / std::max(scale, 1e-30);
}

std::string taskDir(const std::string &root, const std::string &task) {
  return root + "/" + plan::taskFileName(task);
}

// The distributed run's value of every variable: worker:0's replicas, and PS shards put back
// together in row order.
llvm::Expected<std::map<std::string, runtime::Tensor>> collectVariables(const plan::Plan &plan,
                                                                        const std::string &dir) {
  auto worker = runtime::train::loadCheckpoint(taskDir(dir, "worker:0"));
  if (!worker)
    return worker.takeError();
  std::map<std::string, runtime::Tensor> values = worker->variables;
  std::map<std::string, runtime::train::Checkpoint> shards;
  for (const plan::Variable &v : plan.variables()) {
    if (v.placement() != "ps")
      continue;
    std::vector<int64_t> shape(v.shape().begin(), v.shape().end());
    runtime::Tensor whole(*ir::parseDType(v.dtype()), shape);
    int64_t rowBytes = shape.empty() ? whole.numBytes() : whole.numBytes() / shape[0];
    for (const plan::Shard &s : v.shards()) {
      if (!shards.count(s.task())) {
        auto loaded = runtime::train::loadCheckpoint(taskDir(dir, s.task()));
        if (!loaded)
          return loaded.takeError();
        shards[s.task()] = std::move(*loaded);
      }
      auto part = shards[s.task()].variables.find(v.name());
      if (part == shards[s.task()].variables.end())
        return ir::makeError(s.task() + " wrote no value of '" + v.name() + "'");
      std::memcpy(static_cast<char *>(whole.raw()) + s.row_begin() * rowBytes, part->second.raw(),
                  static_cast<size_t>((s.row_end() - s.row_begin()) * rowBytes));
    }
    values[v.name()] = whole;
  }
  return values;
}

int runVerify(const VerifyArgs &args) {
  auto model = loadModule(args.model, /*inferShapes=*/false);
  if (!model)
    return reportError(model.takeError());
  auto parsedOptions = args.compile.toOptions();
  if (!parsedOptions)
    return reportError(parsedOptions.takeError());
  plan::PartitionOptions partitionOptions = *parsedOptions;
  if (partitionOptions.steps == 0)
    partitionOptions.steps = 20;
  auto cluster = cluster::loadCluster(args.compile.cluster, args.compile.replicationKind());
  if (!cluster)
    return reportError(cluster.takeError());
  auto partitioned = plan::partition(**model, *cluster, partitionOptions);
  if (!partitioned)
    return reportError(partitioned.takeError());
  const plan::Plan &plan = partitioned->plan;

  llvm::SmallString<128> dir;
  if (auto ec = llvm::sys::fs::createUniqueDirectory("prism-verify", dir))
    return reportError(ir::makeError("cannot make a scratch directory: " + ec.message()));
  std::string root(dir);
  std::string planPath = root + "/plan.pb";
  if (auto e = plan::writePlan(plan, planPath))
    return reportError(std::move(e));

  const int64_t steps = partitionOptions.steps;
  llvm::outs() << "verify " << (*model)->name() << ": " << steps << " steps, batch "
               << partitionOptions.globalBatch << ", " << args.data << ", " << plan.strategy()
               << " " << plan.replication() << " on " << args.compile.cluster << "\n";
  llvm::outs().flush();

  // The distributed run.
  auto jobOptions = args.run.toJobOptions();
  if (!jobOptions)
    return reportError(jobOptions.takeError());
  jobOptions->data = args.data;
  jobOptions->steps = steps;
  jobOptions->threads = args.threads;
  jobOptions->quiet = true;
  jobOptions->evaluate = false;
  jobOptions->metricsOut = root + "/distributed.jsonl";
  jobOptions->variablesDir = root + "/variables";
  if (auto ec = llvm::sys::fs::create_directories(jobOptions->variablesDir))
    return reportError(ir::makeError("cannot make " + jobOptions->variablesDir));
  if (auto e = runtime::job::runPlan(plan, planPath, *jobOptions))
    return reportError(std::move(e));

  // The same steps on one device, with the same passes.
  auto single = (*model)->clone();
  single->setSourceFile((*model)->sourceFile());
  if (auto e = plan::compileTrainingStep(*single, partitionOptions.fuse))
    return reportError(std::move(e));
  runtime::train::TrainOptions trainOptions;
  auto spec = runtime::data::parseDataSpec(args.data);
  if (!spec)
    return reportError(spec.takeError());
  trainOptions.data = *spec;
  trainOptions.steps = steps;
  trainOptions.batchSize = partitionOptions.globalBatch;
  trainOptions.seed = partitionOptions.seed;
  trainOptions.threads = args.threads;
  trainOptions.quiet = true;
  trainOptions.evaluate = false;
  trainOptions.metricsOut = root + "/single.jsonl";
  auto trained = runtime::train::train(*single, trainOptions);
  if (!trained)
    return reportError(trained.takeError());

  auto distributedLosses = readLosses(root + "/distributed.jsonl");
  auto singleLosses = readLosses(root + "/single.jsonl");
  if (!distributedLosses)
    return reportError(distributedLosses.takeError());
  if (!singleLosses)
    return reportError(singleLosses.takeError());
  if (distributedLosses->size() != singleLosses->size())
    return reportError(
        ir::makeError("the distributed run logged " + std::to_string(distributedLosses->size()) +
                      " steps, the single-device run " + std::to_string(singleLosses->size())));
  double worstLoss = 0;
  size_t worstStep = 0;
  for (size_t i = 0; i < singleLosses->size(); ++i) {
    double d = std::fabs((*distributedLosses)[i] - (*singleLosses)[i]) /
               std::max(std::fabs((*singleLosses)[i]), 1e-30);
    if (d > worstLoss) {
      worstLoss = d;
      worstStep = i + 1;
    }
  }
  auto distributed = collectVariables(plan, jobOptions->variablesDir);
  if (!distributed)
    return reportError(distributed.takeError());
  double worstVariable = 0;
  std::string worstName;
  for (const auto &entry : trained->store->all()) {
    auto it = distributed->find(entry.getKey().str());
    if (it == distributed->end())
      return reportError(
          ir::makeError("the distributed run has no value of '" + entry.getKey().str() + "'"));
    if (it->second.numElements() != entry.getValue().numElements())
      return reportError(ir::makeError(
          "'" + entry.getKey().str() + "' has " + std::to_string(it->second.numElements()) +
          " elements in the distributed run, " + std::to_string(entry.getValue().numElements()) +
          " on one device"));
    double d = relativeDifference(it->second, entry.getValue());
    if (d >= worstVariable) {
      worstVariable = d;
      worstName = entry.getKey().str();
    }
  }
  bool ok = worstLoss <= args.tolerance && worstVariable <= args.tolerance;
  llvm::outs() << "  losses     largest relative difference " << llvm::format("%.3g", worstLoss)
               << " (step " << worstStep << " of " << singleLosses->size() << ")\n"
               << "  variables  largest relative difference " << llvm::format("%.3g", worstVariable)
               << " ('" << worstName << "', " << distributed->size() << " variables)\n"
               << (ok ? "  equal to single-device training within " : "  NOT equal: above ")
               << llvm::format("%.1g", args.tolerance) << "\n";
  llvm::outs().flush();
  if (!args.keep)
    llvm::sys::fs::remove_directories(root);
  else
    llvm::outs() << "  kept " << root << "\n";
  return ok ? 0 : 1;
}

} // namespace

void registerVerifyCommand(CLI::App &app) {
  auto args = std::make_shared<VerifyArgs>();
  auto *cmd = app.add_subcommand("verify",
                                 "Check that the distributed plan trains exactly like one device");
  cmd->add_option("model", args->model, "Model file (.prism)")->required();
  args->compile.addOptions(*cmd);
  cmd->add_option("--data", args->data, "Data set (as for prism train)")->capture_default_str();
  cmd->add_option("--threads", args->threads, "CPU threads per task")->capture_default_str();
  cmd->add_option("--tolerance", args->tolerance,
                  "Largest relative difference accepted (losses and variables)")
      ->capture_default_str();
  cmd->add_flag("--keep", args->keep, "Keep the plan, metrics and variables of both runs");
  args->run.addOptions(*cmd, /*all=*/false);
  cmd->callback([args]() {
    if (int status = runVerify(*args))
      throw CLI::RuntimeError(status);
  });
}

} // namespace prism::tools
