// `prism train MODEL --data D`: compile the model's training step and train it on one device,
// or, with --cluster, data-parallel over the cluster's tasks.
#include <string>

#include "cluster/ClusterParser.h"
#include "ir/Printer.h"
#include "plan/Pipeline.h"
#include "plan/PlanFile.h"
#include "runtime/job/Launcher.h"
#include "runtime/train/Trainer.h"
#include "tools/Commands.h"
#include "tools/Partition.h"
#include "tools/Run.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {
namespace {

struct TrainArgs {
  std::string model;
  std::string data = kDefaultData;
  int64_t epochs = 0;
  int64_t steps = 0;
  int64_t batch = runtime::train::TrainOptions().batchSize;
  int threads = runtime::train::TrainOptions().threads;
  uint64_t seed = 0;
  std::string metricsOut;
  std::string save;
  std::string restore;
  bool noEval = false;
  bool quiet = false;
  CompileArgs compile; // with --cluster: data-parallel over the cluster's tasks
  RunOptionArgs run;
};

// `prism train --cluster C`: compile the plan, then run it like `prism run`.
int runDistributedTrain(const TrainArgs &args, const ir::Module &model) {
  CompileArgs compile = args.compile;
  compile.options.globalBatch = args.batch;
  compile.options.seed = args.seed;
  auto partitionOptions = compile.toOptions();
  if (!partitionOptions)
    return reportError(partitionOptions.takeError());
  auto cluster = cluster::loadCluster(compile.cluster, compile.replicationKind());
  if (!cluster)
    return reportError(cluster.takeError());
  auto partitioned = plan::partition(model, *cluster, *partitionOptions);
  if (!partitioned)
    return reportError(partitioned.takeError());
  llvm::SmallString<128> planPath;
  if (auto ec = llvm::sys::fs::createTemporaryFile("prism-train", "pb", planPath))
    return reportError(ir::makeError("cannot make a temporary plan file: " + ec.message()));
  if (auto e = plan::writePlan(partitioned->plan, planPath))
    return reportError(std::move(e));
  if (!args.quiet) {
    llvm::outs() << "training " << model.name() << " (" << args.model << ") on " << args.data
                 << ": global batch " << args.batch << ", seed " << args.seed << "\n";
    printPlanSummary(partitioned->plan, planPath, llvm::outs());
    llvm::outs().flush();
  }
  RunOptionArgs run = args.run;
  run.data = args.data;
  run.steps = args.steps;
  run.epochs = args.epochs;
  run.threads = args.threads;
  run.metricsOut = args.metricsOut;
  run.quiet = args.quiet;
  run.noEval = args.noEval;
  auto options = run.toJobOptions();
  if (!options)
    return reportError(options.takeError());
  // The plan stays where the summary says, for `prism dump` and `prism run`.
  llvm::Error e = runtime::job::runPlan(partitioned->plan, std::string(planPath), *options);
  if (e)
    return reportError(std::move(e));
  return 0;
}

int runTrain(const TrainArgs &args) {
  auto module = loadModule(args.model, /*inferShapes=*/false);
  if (!module)
    return reportError(module.takeError());
  if (!args.compile.cluster.empty()) {
    if (!args.save.empty() || !args.restore.empty())
      return reportError(ir::makeError("--save and --restore are for one device; with --cluster "
                                       "use prism partition and prism run"));
    return runDistributedTrain(args, **module);
  }
  auto scaling = args.compile.lrScaling();
  if (!scaling)
    return reportError(scaling.takeError());
  if (auto e = plan::scaleLearningRate(**module, *scaling, args.batch))
    return reportError(std::move(e));
  std::string optimizer = (*module)->optimizer ? ir::printOptimizer(*(*module)->optimizer) : "";
  if (auto e = plan::compileTrainingStep(**module))
    return reportError(std::move(e));

  runtime::train::TrainOptions options;
  auto spec = runtime::data::parseDataSpec(args.data);
  if (!spec)
    return reportError(spec.takeError());
  options.data = *spec;
  if (args.epochs > 0)
    options.epochs = args.epochs;
  if (args.steps > 0)
    options.steps = args.steps;
  options.batchSize = args.batch;
  options.threads = args.threads;
  options.seed = args.seed;
  options.metricsOut = args.metricsOut;
  options.saveDir = args.save;
  options.restoreDir = args.restore;
  options.evaluate = !args.noEval;
  options.quiet = args.quiet;
  if (!args.quiet)
    llvm::outs() << "training " << (*module)->name() << " (" << args.model << ") on " << spec->str()
                 << ": batch " << args.batch << ", " << args.threads
                 << (args.threads == 1 ? " thread" : " threads") << ", seed " << args.seed
                 << (optimizer.empty() ? "" : ", " + optimizer) << "\n";
  llvm::outs().flush();
  auto result = runtime::train::train(**module, options);
  if (!result)
    return reportError(result.takeError());
  if (!args.quiet) {
    llvm::outs() << "trained " << result->steps << " steps (" << result->globalStep
                 << " in all): final loss " << llvm::format("%.4f", result->lastLoss) << ", "
                 << llvm::format("%.0f", result->samplesPerSec) << " samples/s";
    if (result->testAccuracy)
      llvm::outs() << ", test accuracy " << llvm::format("%.4f", *result->testAccuracy);
    llvm::outs() << "\n";
    if (!args.save.empty())
      llvm::outs() << "checkpoint saved in " << args.save << "\n";
  }
  return 0;
}

} // namespace

void registerTrainCommand(CLI::App &app) {
  auto args = std::make_shared<TrainArgs>();
  auto *cmd = app.add_subcommand(
      "train", "Train a model on one device, or data-parallel with --cluster local:N[,ps=M]");
  cmd->add_option("model", args->model, "Model file (.prism)")->required();
  cmd->add_option("--data", args->data,
                  "fashion-mnist[:DIR], zipf:VOCAB[,tokens=T,classes=C], text:FILE")
      ->capture_default_str();
  auto *epochs = cmd->add_option("--epochs", args->epochs, "Epochs to train (default 1)")
                     ->check(CLI::PositiveNumber);
  cmd->add_option("--steps", args->steps, "Steps to train in all (instead of --epochs)")
      ->check(CLI::PositiveNumber)
      ->excludes(epochs);
  cmd->add_option("--batch", args->batch, "Global batch size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "CPU threads")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of initial values and data order")
      ->capture_default_str();
  cmd->add_option("--metrics-out", args->metricsOut, "Write JSON lines of metrics here");
  cmd->add_option("--save", args->save, "Save a checkpoint in this directory at the end");
  cmd->add_option("--restore", args->restore, "Continue from the checkpoint in this directory");
  cmd->add_flag("--no-eval", args->noEval, "Skip test-set evaluation");
  cmd->add_flag("--quiet,-q", args->quiet, "Print only errors");
  args->compile.addOptions(*cmd, /*runOptions=*/false, /*clusterRequired=*/false);
  args->run.addOptions(*cmd, /*all=*/false);
  cmd->callback([args]() {
    if (int status = runTrain(*args))
      throw CLI::RuntimeError(status);
  });
}

} // namespace prism::tools
