// Whole runs, as the `prism` command does them: training with Prism's loop, and plans' jobs.
#include "api/Internal.h"
#include "ir/Diagnostic.h"
#include "plan/LearningRateScaling.h"
#include "plan/PlanFile.h"
#include "plan/PlanVerifier.h"
#include "runtime/data/DataSpec.h"
#include "runtime/job/JobOptions.h"
#include "runtime/job/Launcher.h"
#include "runtime/job/Task.h"
#include "runtime/job/TaskCommand.h"
#include "runtime/train/CheckpointDir.h"
#include "runtime/train/Trainer.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"

#ifndef PRISM_VERSION
#define PRISM_VERSION "unknown"
#endif

namespace prism::api {
namespace {

llvm::Expected<runtime::train::TrainOptions> trainOptions(const TrainOptions &options) {
  runtime::train::TrainOptions result;
  auto spec = runtime::data::parseDataSpec(options.data);
  if (!spec)
    return spec.takeError();
  result.data = *spec;
  result.epochs = options.epochs;
  result.steps = options.steps;
  if (options.batch)
    result.batchSize = *options.batch;
  if (options.accumulate)
    result.accumulate = *options.accumulate;
  if (options.threads)
    result.threads = *options.threads;
  if (!options.device.empty()) {
    auto device = ir::DeviceId::parse(options.device);
    if (!device)
      return device.takeError();
    result.device = *device;
  }
  result.tf32 = options.tf32;
  result.cudaGraphs = options.cudaGraphs;
  result.seed = options.seed;
  result.metricsOut = options.metricsOut;
  result.saveDir = options.saveDir;
  result.restoreDir = options.restoreDir;
  result.evaluate = options.evaluate;
  result.quiet = options.quiet;
  return result;
}

// Periodic checkpoints on one device: each written as a partial directory, then moved into
// place; with no restore given, training resumes from the newest complete one.
llvm::Error addPeriodicCheckpoints(runtime::train::TrainOptions &train,
                                   const TrainOptions &options) {
  runtime::train::PeriodicCheckpoints checkpoints;
  checkpoints.dir = options.checkpointDir;
  checkpoints.every = options.checkpointEvery;
  checkpoints.keep = options.keepCheckpoints.value_or(checkpoints.keep);
  if (auto e = runtime::train::checkPeriodicCheckpoints(checkpoints))
    return e;
  if (checkpoints.dir.empty())
    return llvm::Error::success();
  if (train.restoreDir.empty()) {
    auto latest = runtime::train::latestCheckpoint(checkpoints.dir);
    if (!latest)
      return latest.takeError();
    if (*latest)
      train.restoreDir = (*latest)->path;
  }
  train.checkpointEvery = checkpoints.every;
  train.checkpoint = [checkpoints](const runtime::train::TrainingPosition &position,
                                   const llvm::StringMap<runtime::Tensor> &variables) {
    int64_t step = position.globalStep;
    if (auto e = runtime::train::saveCheckpoint(
            runtime::train::partialCheckpointDir(checkpoints.dir, step), position, variables))
      return e;
    return runtime::train::completeCheckpoint(checkpoints.dir, step, checkpoints.keep);
  };
  return llvm::Error::success();
}

} // namespace

runtime::job::JobOptions toJobOptions(const RunOptions &options) {
  runtime::job::JobOptions result;
  result.data = options.data;
  result.steps = options.steps;
  result.epochs = options.epochs;
  if (options.threads)
    result.threads = *options.threads;
  result.metricsOut = options.metricsOut;
  result.quiet = options.quiet;
  result.evaluate = options.evaluate;
  result.launcher = options.launcher;
  result.taskProgram = options.taskProgram;
  if (options.heartbeatTimeoutMs)
    result.heartbeatTimeout = std::chrono::milliseconds(*options.heartbeatTimeoutMs);
  result.variablesDir = options.variablesDir;
  result.saveDir = options.saveDir;
  result.restoreDir = options.restoreDir;
  result.traceDir = options.traceDir;
  result.tf32 = options.tf32;
  result.cudaGraphs = options.cudaGraphs;
  result.jobToken = options.jobToken;
  result.checkpoints.dir = options.checkpointDir;
  result.checkpoints.every = options.checkpointEvery;
  result.checkpoints.keep = options.keepCheckpoints.value_or(result.checkpoints.keep);
  result.maxRestarts = options.maxRestarts;
  result.generateTls = options.tls;
  result.tls = {options.tlsCa, options.tlsCert, options.tlsKey};
  return result;
}

llvm::Expected<std::string> dataFor(llvm::StringRef given, const ir::Module &model) {
  if (!given.empty())
    return given.str();
  if (!model.data)
    return std::string(kDefaultData);
  if (auto spec = runtime::data::parseDataSpec(model.data->spec); !spec)
    return ir::withLocation(ir::withContext(spec.takeError(), "data"), model.sourceFile(),
                            model.data->loc);
  return model.data->spec;
}

llvm::Expected<std::string> dataFor(llvm::StringRef given, const plan::Plan &plan) {
  if (!given.empty())
    return given.str();
  for (const plan::Task &task : plan.cluster().tasks()) {
    if (task.role() != "worker")
      continue;
    const plan::Program *program = plan::findProgram(plan, task.name());
    if (!program)
      break;
    auto module = plan::parseProgram(*program);
    if (!module)
      return module.takeError();
    return dataFor("", **module);
  }
  return std::string(kDefaultData);
}

namespace {

// `options` with its data resolved against the plan (dataFor).
llvm::Expected<RunOptions> withData(const RunOptions &options, const Plan &plan) {
  auto data = dataFor(options.data, PlanAccess::plan(plan));
  if (!data)
    return data.takeError();
  RunOptions resolved = options;
  resolved.data = *data;
  return resolved;
}

} // namespace

const char *version() {
  return PRISM_VERSION;
}

Result<TrainSummary> train(const Model &model, const TrainOptions &options) {
  Model scaled = model;
  if (!options.lrScaleRule.empty() && !model.isTrainingStep()) {
    auto rescaled = model.scaledLearningRate(
        options.lrScaleRule, options.lrBaseBatch.value_or(plan::LearningRateScaling().baseBatch),
        options.batch.value_or(runtime::train::TrainOptions().batchSize));
    if (!rescaled.ok())
      return rescaled.status();
    scaled = *rescaled;
  }
  auto step = scaled.trainingStep(true, options.precision.empty() ? "f32" : options.precision);
  if (!step.ok())
    return step.status();
  TrainOptions resolved = options;
  auto data = dataFor(options.data, ModelAccess::module(model));
  if (!data)
    return toStatus(data.takeError());
  resolved.data = *data;
  auto converted = trainOptions(resolved);
  if (!converted)
    return toStatus(converted.takeError());
  if (auto e = addPeriodicCheckpoints(*converted, resolved))
    return toStatus(std::move(e));
  auto result = runtime::train::train(ModelAccess::module(*step), *converted);
  if (!result)
    return toStatus(result.takeError());
  TrainSummary summary;
  summary.steps = result->steps;
  summary.globalStep = result->globalStep;
  summary.restoredFrom = converted->restoreDir;
  summary.lastLoss = result->lastLoss;
  summary.samplesPerSec = result->samplesPerSec;
  summary.testAccuracy = result->testAccuracy;
  summary.testLoss = result->testLoss;
  const runtime::train::DeviceUse &use = result->device;
  summary.device = use.device.str();
  summary.arenaBytes = static_cast<int64_t>(use.arenaBytes);
  summary.workspaceBytes = static_cast<int64_t>(use.workspaceBytes);
  summary.copiesToDevice = use.copies.toDeviceCopies;
  summary.bytesToDevice = use.copies.toDeviceBytes;
  summary.copiesToHost = use.copies.toHostCopies;
  summary.bytesToHost = use.copies.toHostBytes;
  summary.deviceReport = llvm::join(runtime::train::describeDevices(*result), "; ");
  // The scale and the skipped steps are the operands update_loss_scale writes (f32 scalars).
  auto scalar = [](const runtime::Tensor &t) {
    return t.dtype() == ir::DType::F64 ? *t.data<double>() : double(*t.data<float>());
  };
  for (const auto &op : ModelAccess::module(*step).ops()) {
    if (op->name() != "update_loss_scale" || !result->store)
      continue;
    const runtime::Tensor *scale = result->store->find(op->operand(0)->name());
    const runtime::Tensor *skipped = result->store->find(op->operand(2)->name());
    if (scale && skipped) {
      summary.lossScale = scalar(*scale);
      summary.skippedSteps = static_cast<int64_t>(scalar(*skipped));
    }
  }
  return summary;
}

Status run(const Plan &plan, const RunOptions &options) {
  std::string path = plan.path();
  bool temporary = path.empty();
  if (temporary) {
    llvm::SmallString<128> file;
    if (auto ec = llvm::sys::fs::createTemporaryFile("prism-plan", "pb", file))
      return toStatus(ir::makeError("cannot make a temporary plan file: " + ec.message()));
    Status saved = plan.save(std::string(file));
    if (!saved.ok()) {
      llvm::sys::fs::remove(file);
      return saved;
    }
    path = std::string(file);
  }
  auto resolved = withData(options, plan);
  if (!resolved) {
    if (temporary)
      llvm::sys::fs::remove(path);
    return toStatus(resolved.takeError());
  }
  auto ran = runtime::job::runPlan(PlanAccess::plan(plan), path, toJobOptions(*resolved));
  // A plan of ours holds the job's token: it goes with the job.
  if (temporary)
    llvm::sys::fs::remove(path);
  return toStatus(std::move(ran));
}

Result<int> runTask(const Plan &plan, const std::string &task, const std::string &coordinator,
                    const RunOptions &options) {
  if (coordinator.empty())
    return toStatus(ir::makeError("runTask: name the coordinator (host:port)"));
  auto resolved = withData(options, plan);
  if (!resolved)
    return toStatus(resolved.takeError());
  return runtime::job::runTask(PlanAccess::plan(plan), task, coordinator, toJobOptions(*resolved));
}

Result<int> runTaskCommand(const std::vector<std::string> &args) {
  auto command = runtime::job::TaskCommand::parse(args);
  if (!command)
    return toStatus(command.takeError());
  return toResult(runtime::job::runTaskCommand(*command));
}

} // namespace prism::api
