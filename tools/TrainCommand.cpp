// `prism train MODEL --data D`: compile the model's training step and train it on one device,
// or, with --cluster, data-parallel over the cluster's tasks; through the library (prism/Prism.h).
#include <string>

#include "api/Internal.h"
#include "ir/Device.h"
#include "ir/Diagnostic.h"
#include "plan/AutoParallel.h"
#include "prism/Prism.h"
#include "runtime/data/DataSpec.h"
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
  std::string data; // empty: the model's, else kDefaultData (dataFor)
  int64_t epochs = 0;
  int64_t steps = 0;
  int64_t batch = runtime::train::TrainOptions().batchSize;
  int threads = runtime::train::TrainOptions().threads;
  std::string device; // one device: cpu:0 (default) or gpu:N
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
int runDistributedTrain(const TrainArgs &args, const api::Model &model) {
  CompileArgs compile = args.compile;
  compile.options.globalBatch = args.batch;
  compile.options.seed = args.seed;
  auto options = compile.toApiOptions();
  if (!options)
    return reportError(options.takeError());
  options->data = args.data;
  auto plan = api::compile(model, *options);
  if (!plan.ok())
    return reportStatus(plan.status());
  llvm::SmallString<128> planPath;
  if (auto ec = llvm::sys::fs::createTemporaryFile("prism-train", "pb", planPath))
    return reportError(ir::makeError("cannot make a temporary plan file: " + ec.message()));
  api::Status saved = plan->save(std::string(planPath));
  if (!saved.ok())
    return reportStatus(saved);
  if (!args.quiet) {
    llvm::outs() << "training " << model.name() << " (" << args.model << ") on " << args.data
                 << ": global batch " << args.batch
                 << (compile.options.accumulate > 1
                         ? ", " + std::to_string(compile.options.accumulate) +
                               " micro-batches per step on each worker"
                         : "")
                 << ", seed " << args.seed << "\n";
    printPlanSummary(api::PlanAccess::plan(*plan), planPath, llvm::outs(), /*temporary=*/true);
    if (compile.explain)
      plan::printDecisions(api::PlanAccess::plan(*plan), llvm::outs());
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
  run.save = args.save;
  run.restore = args.restore;
  // The plan holds the job's token: it goes when the job ends, however it ends.
  api::Status ran = api::run(*plan, run.toApiOptions());
  llvm::sys::fs::remove(planPath);
  return ran.ok() ? 0 : reportStatus(ran);
}

// The flags that need a job's tasks (--cluster), each an error naming it on one device.
llvm::Error checkOneDevice(const TrainArgs &args, const plan::PartitionOptions &options) {
  if (!args.run.traceDir.empty())
    return ir::makeError("--trace " + args.run.traceDir +
                         " records the timelines of a job's tasks: it needs --cluster "
                         "(`--cluster local:1` traces one worker)");
  if (args.run.maxRestarts > 0)
    return ir::makeError("--max-restarts " + std::to_string(args.run.maxRestarts) +
                         " restarts the tasks of a job: it needs --cluster (one "
                         "device resumes from --checkpoint-dir when run again)");
  if (options.compress != ir::ComputePrecision::F32)
    return ir::makeError("--compress " + args.compile.compress +
                         " compresses what the tasks of a job send each other: it "
                         "needs --cluster");
  if (!options.synchronization.exact())
    return ir::makeError(plan::synchronizationFlag(options.synchronization) +
                         " changes how the workers of a job wait for each other: "
                         "it needs --cluster");
  if (options.elasticMax > 0)
    return ir::makeError("--elastic " + args.compile.elastic +
                         " lets a job's workers come and go: it needs --cluster");
  return llvm::Error::success();
}

// What one-device training reached: steps, loss, speed, accuracy, loss scale, what a GPU's
// memory and copies were, checkpoint.
void printSummary(const api::TrainSummary &result, const std::string &saveDir) {
  if (!result.restoredFrom.empty())
    llvm::outs() << "resumed from " << result.restoredFrom << "\n";
  llvm::outs() << "trained " << result.steps << " steps (" << result.globalStep
               << " in all): final loss " << llvm::format("%.4f", result.lastLoss) << ", "
               << llvm::format("%.0f", result.samplesPerSec) << " samples/s";
  if (result.testAccuracy)
    llvm::outs() << ", test accuracy " << llvm::format("%.4f", *result.testAccuracy);
  if (result.lossScale)
    llvm::outs() << ", loss scale " << llvm::format("%g", *result.lossScale) << " ("
                 << result.skippedSteps << (result.skippedSteps == 1 ? " step" : " steps")
                 << " skipped)";
  llvm::outs() << "\n";
  if (!result.deviceReport.empty())
    llvm::outs() << "on " << result.deviceReport << "\n";
  if (!saveDir.empty())
    llvm::outs() << "checkpoint saved in " << saveDir << "\n";
}

// --device: a device name, and only without --cluster.
llvm::Error checkDevice(const TrainArgs &args) {
  if (args.device.empty())
    return llvm::Error::success();
  if (auto device = ir::DeviceId::parse(args.device); !device)
    return ir::withContext(device.takeError(), "option --device");
  if (!args.compile.cluster.empty())
    return ir::makeError("--device " + args.device +
                         " picks the device of one-device training; with --cluster the cluster "
                         "gives each worker its devices (`local:N,devices=gpu`, or `devices:` of "
                         "a host)");
  return llvm::Error::success();
}

int runTrain(const TrainArgs &given) {
  auto model = api::Model::load(given.model);
  if (!model.ok())
    return reportStatus(model.status());
  TrainArgs args = given;
  auto data = api::dataFor(given.data, api::ModelAccess::module(*model));
  if (!data)
    return reportError(data.takeError());
  args.data = *data;
  if (auto e = checkDevice(args))
    return reportError(std::move(e));
  if (!args.compile.cluster.empty())
    return runDistributedTrain(args, *model);
  auto compileOptions = args.compile.toOptions();
  if (!compileOptions)
    return reportError(compileOptions.takeError());
  if (auto e = checkOneDevice(args, *compileOptions))
    return reportError(std::move(e));
  auto scaled =
      model->scaledLearningRate(plan::lrScaleRuleName(compileOptions->lrScaling.rule).str(),
                                compileOptions->lrScaling.baseBatch, args.batch);
  if (!scaled.ok())
    return reportStatus(scaled.status());
  std::string optimizer = scaled->optimizer();
  ir::ComputePrecision precision = compileOptions->precision;
  auto step = scaled->trainingStep(compileOptions->fuse, ir::precisionName(precision).str());
  if (!step.ok())
    return reportStatus(step.status());

  api::TrainOptions options;
  auto spec = runtime::data::parseDataSpec(args.data);
  if (!spec)
    return reportError(spec.takeError());
  options.data = args.data;
  if (args.epochs > 0)
    options.epochs = args.epochs;
  if (args.steps > 0)
    options.steps = args.steps;
  options.batch = args.batch;
  options.accumulate = args.compile.options.accumulate;
  options.threads = args.threads;
  options.device = args.device;
  options.tf32 = args.run.tf32;
  options.cudaGraphs = args.run.cudaGraphs;
  options.seed = args.seed;
  options.metricsOut = args.metricsOut;
  options.saveDir = args.save;
  options.restoreDir = args.restore;
  options.checkpointDir = args.run.checkpointDir;
  options.checkpointEvery = args.run.checkpointEvery;
  options.keepCheckpoints = args.run.keepCheckpoints;
  options.evaluate = !args.noEval;
  options.quiet = args.quiet;
  if (!args.quiet)
    llvm::outs() << "training " << model->name() << " (" << args.model << ") on " << spec->str()
                 << ": batch " << args.batch
                 << (args.compile.options.accumulate > 1
                         ? " in " + std::to_string(args.compile.options.accumulate) +
                               " micro-batches"
                         : "")
                 << ", " << args.threads << (args.threads == 1 ? " thread" : " threads")
                 << (args.device.empty() ? "" : ", on " + args.device) << ", seed " << args.seed
                 << (optimizer.empty() ? "" : ", " + optimizer)
                 << (precision == ir::ComputePrecision::F32
                         ? ""
                         : ", " + ir::precisionName(precision).str() + " compute")
                 << "\n";
  llvm::outs().flush();
  auto result = api::train(*step, options);
  if (!result.ok())
    return reportStatus(result.status());
  if (!args.quiet)
    printSummary(*result, args.save);
  return 0;
}

} // namespace

void registerTrainCommand(CLI::App &app) {
  auto args = std::make_shared<TrainArgs>();
  auto *cmd = app.add_subcommand(
      "train", "Train a model on one device, or data-parallel with --cluster local:N[,ps=M]");
  cmd->add_option("model", args->model, "Model file (.prism)")->required();
  cmd->add_option("--data", args->data, kDataHelp);
  auto *epochs = cmd->add_option("--epochs", args->epochs, "Epochs to train (default 1)")
                     ->check(CLI::PositiveNumber);
  cmd->add_option("--steps", args->steps, "Steps to train in all (instead of --epochs)")
      ->check(CLI::PositiveNumber)
      ->excludes(epochs);
  cmd->add_option("--batch", args->batch, "Global batch size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--device", args->device,
                  "Device of one-device training: cpu:0 (default) or gpu:N (cuda:N)");
  cmd->add_option("--threads", args->threads, "CPU threads")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of initial values and data order")
      ->capture_default_str();
  cmd->add_option("--metrics-out", args->metricsOut, "Write JSON lines of metrics here");
  cmd->add_option("--save", args->save,
                  "Save a checkpoint in this directory at the end (a job's: every task's part)");
  cmd->add_option("--restore", args->restore, "Continue from the checkpoint in this directory");
  cmd->add_flag("--no-eval", args->noEval, "Skip test-set evaluation");
  cmd->add_flag("--quiet,-q", args->quiet, "Print only errors");
  args->compile.addOptions(*cmd, /*runOptions=*/false, /*clusterRequired=*/false);
  args->run.addOptions(*cmd, /*all=*/false);
  args->run.addRecoveryOptions(*cmd);
  cmd->callback([args]() {
    if (int status = runTrain(*args))
      throw CLI::RuntimeError(status);
  });
}

} // namespace prism::tools
