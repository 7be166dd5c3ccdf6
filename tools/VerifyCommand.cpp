// `prism verify MODEL --cluster C`: trains the model on one device and as the distributed plan,
// on the same data from the same initial values, and reports how far apart the losses and the
// variables end up. Exit 1 above the tolerance. Without --cluster, `--accumulate K` compares K
// micro-batches per step with whole batches on one device.
#include <string>

#include "cluster/ClusterParser.h"
#include "ir/Diagnostic.h"
#include "plan/AutoParallel.h"
#include "runtime/job/VerifyRun.h"
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
  std::string data; // empty: the model's, else kDefaultData (dataFor)
  int threads = runtime::job::JobOptions().threads;
  double tolerance = runtime::job::kDefaultVerifyTolerance;
  bool keep = false;
  CompileArgs compile;
  RunOptionArgs run;
};

std::string accumulationText(int64_t accumulate) {
  return accumulate > 1 ? ", " + std::to_string(accumulate) + " micro-batches per step" : "";
}

void printHeader(const ir::Module &model, const plan::Plan &plan, const VerifyArgs &args) {
  llvm::outs() << "verify " << model.name() << ": " << plan.run().steps() << " steps, batch "
               << plan.run().global_batch() << accumulationText(plan.run().accumulate()) << ", "
               << args.data << ", " << plan.strategy() << " " << plan.replication() << " on "
               << args.compile.cluster << "\n";
  llvm::outs().flush();
}

void printResult(const runtime::job::VerifyResult &result, double tolerance,
                 llvm::StringRef reference) {
  llvm::outs() << "  losses     largest relative difference "
               << llvm::format("%.3g", result.losses.largest) << " (step " << result.losses.step
               << " of " << result.losses.steps << ")\n"
               << "  variables  largest relative difference "
               << llvm::format("%.3g", result.variables.largest) << " ('"
               << result.variables.variable << "', " << result.variables.variables
               << " variables)\n"
               << (result.within(tolerance) ? "  equal to " + reference + " within "
                                            : std::string("  NOT equal: above "))
               << llvm::format("%.1g", tolerance) << "\n";
  llvm::outs().flush();
}

llvm::Expected<std::string> makeWorkDir() {
  llvm::SmallString<128> dir;
  if (auto ec = llvm::sys::fs::createUniqueDirectory("prism-verify", dir))
    return ir::makeError("cannot make a scratch directory: " + ec.message());
  return std::string(dir);
}

int finishVerify(const runtime::job::VerifyResult &result, const VerifyArgs &args,
                 const std::string &workDir, llvm::StringRef reference) {
  printResult(result, args.tolerance, reference);
  if (!args.keep)
    llvm::sys::fs::remove_directories(workDir);
  else
    llvm::outs() << "  kept " << workDir << "\n";
  return result.within(args.tolerance) ? 0 : 1;
}

// Without --cluster: K micro-batches per step on one device against whole batches.
int runAccumulationVerify(const VerifyArgs &args, const ir::Module &model,
                          const plan::PartitionOptions &options) {
  runtime::job::AccumulationVerifyOptions run;
  run.data = args.data;
  run.threads = args.threads;
  run.steps = options.steps;
  run.batch = options.globalBatch;
  run.accumulate = options.accumulate;
  run.seed = options.seed;
  run.fuse = options.fuse;
  run.precision = options.precision;
  if (auto e = runtime::train::checkAccumulation(run.accumulate, run.batch))
    return reportError(std::move(e));
  auto dir = makeWorkDir();
  if (!dir)
    return reportError(dir.takeError());
  run.workDir = *dir;
  llvm::outs() << "verify " << model.name() << ": " << run.steps << " steps, batch " << run.batch
               << accumulationText(run.accumulate) << ", " << args.data << ", on one device\n";
  llvm::outs().flush();
  auto result = runtime::job::verifyAccumulation(model, run);
  if (!result)
    return reportError(result.takeError());
  return finishVerify(*result, args, run.workDir, "training with whole batches");
}

int runVerify(const VerifyArgs &given) {
  auto model = loadModule(given.model, /*inferShapes=*/false);
  if (!model)
    return reportError(model.takeError());
  VerifyArgs args = given;
  auto data = api::dataFor(given.data, **model);
  if (!data)
    return reportError(data.takeError());
  args.data = *data;
  auto partitionOptions = args.compile.toOptions();
  if (!partitionOptions)
    return reportError(partitionOptions.takeError());
  if (partitionOptions->compress != ir::ComputePrecision::F32)
    return reportError(ir::makeError(
        "prism verify checks that a plan trains exactly like one device, and --compress " +
        args.compile.compress +
        " rounds every gradient a worker sends: compressed training is close to, not equal to, "
        "single-device training (docs/distributed.md, \"Compressed communication\")"));
  if (!partitionOptions->synchronization.exact())
    return reportError(ir::makeError(
        "prism verify checks that a plan trains exactly like one device, and " +
        plan::synchronizationFlag(partitionOptions->synchronization) +
        " lets steps use fewer than every worker's gradient of the global batch, or gradients "
        "of older parameters: it leaves exact single-device equivalence (docs/distributed.md, "
        "\"Asynchronous training and backup workers\")"));
  if (partitionOptions->elasticMax > 0)
    return reportError(ir::makeError(
        "prism verify checks that a plan trains exactly like one device, and --elastic " +
        args.compile.elastic +
        " lets the set of workers change during the run, which splits later batches "
        "differently, so the run leaves exact equivalence (docs/distributed.md, \"Elastic "
        "membership\")"));
  if (partitionOptions->steps == 0)
    partitionOptions->steps = runtime::job::kDefaultVerifySteps;
  if (args.compile.cluster.empty()) {
    if (partitionOptions->accumulate < 2)
      return reportError(ir::makeError("prism verify compares a distributed plan (--cluster C) "
                                       "or gradient accumulation (--accumulate K, K >= 2) with "
                                       "single-device training: give one of them"));
    return runAccumulationVerify(args, **model, *partitionOptions);
  }
  auto cluster = cluster::loadCluster(args.compile.cluster, args.compile.replicationKind());
  if (!cluster)
    return reportError(cluster.takeError());
  auto partitioned = plan::partition(**model, *cluster, *partitionOptions);
  if (!partitioned)
    return reportError(partitioned.takeError());

  runtime::job::VerifyRunOptions options;
  auto job = args.run.toJobOptions();
  if (!job)
    return reportError(job.takeError());
  options.job = *job;
  options.job.data = args.data;
  options.job.threads = args.threads;
  options.fuse = partitionOptions->fuse;
  options.precision = partitionOptions->precision;
  auto dir = makeWorkDir();
  if (!dir)
    return reportError(dir.takeError());
  options.workDir = *dir;

  printHeader(**model, partitioned->plan, args);
  if (args.compile.explain)
    plan::printDecisions(partitioned->plan, llvm::outs());
  auto result = runtime::job::verifyRun(**model, partitioned->plan, options);
  if (!result)
    return reportError(result.takeError());
  return finishVerify(*result, args, options.workDir, "single-device training");
}

} // namespace

void registerVerifyCommand(CLI::App &app) {
  auto args = std::make_shared<VerifyArgs>();
  auto *cmd = app.add_subcommand("verify",
                                 "Check that the distributed plan trains exactly like one device");
  cmd->add_option("model", args->model, "Model file (.prism)")->required();
  args->compile.addOptions(*cmd, /*runOptions=*/true, /*clusterRequired=*/false);
  cmd->add_option("--data", args->data,
                  "Data set (as for prism train; default: the one the model names, else " +
                      std::string(kDefaultData) + ")");
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
