// `prism verify MODEL --cluster C`: trains the model on one device and as the distributed plan,
// on the same data from the same initial values, and reports how far apart the losses and the
// variables end up. Exit 1 above the tolerance.
#include <string>

#include "cluster/ClusterParser.h"
#include "ir/Diagnostic.h"
#include "runtime/job/VerifyRun.h"
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
  int threads = runtime::job::JobOptions().threads;
  double tolerance = runtime::job::kDefaultVerifyTolerance;
  bool keep = false;
  CompileArgs compile;
  RunOptionArgs run;
};

void printHeader(const ir::Module &model, const plan::Plan &plan, const VerifyArgs &args) {
  llvm::outs() << "verify " << model.name() << ": " << plan.run().steps() << " steps, batch "
               << plan.run().global_batch() << ", " << args.data << ", " << plan.strategy() << " "
               << plan.replication() << " on " << args.compile.cluster << "\n";
  llvm::outs().flush();
}

void printResult(const runtime::job::VerifyResult &result, double tolerance) {
  llvm::outs() << "  losses     largest relative difference "
               << llvm::format("%.3g", result.losses.largest) << " (step " << result.losses.step
               << " of " << result.losses.steps << ")\n"
               << "  variables  largest relative difference "
               << llvm::format("%.3g", result.variables.largest) << " ('"
               << result.variables.variable << "', " << result.variables.variables
               << " variables)\n"
               << (result.within(tolerance) ? "  equal to single-device training within "
                                            : "  NOT equal: above ")
               << llvm::format("%.1g", tolerance) << "\n";
  llvm::outs().flush();
}

int runVerify(const VerifyArgs &args) {
  auto model = loadModule(args.model, /*inferShapes=*/false);
  if (!model)
    return reportError(model.takeError());
  auto partitionOptions = args.compile.toOptions();
  if (!partitionOptions)
    return reportError(partitionOptions.takeError());
  if (partitionOptions->steps == 0)
    partitionOptions->steps = runtime::job::kDefaultVerifySteps;
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
  llvm::SmallString<128> dir;
  if (auto ec = llvm::sys::fs::createUniqueDirectory("prism-verify", dir))
    return reportError(ir::makeError("cannot make a scratch directory: " + ec.message()));
  options.workDir = std::string(dir);

  printHeader(**model, partitioned->plan, args);
  auto result = runtime::job::verifyRun(**model, partitioned->plan, options);
  if (!result)
    return reportError(result.takeError());
  printResult(*result, args.tolerance);
  if (!args.keep)
    llvm::sys::fs::remove_directories(options.workDir);
  else
    llvm::outs() << "  kept " << options.workDir << "\n";
  return result->within(args.tolerance) ? 0 : 1;
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
