// `prism partition MODEL --cluster C -o plan.pb`: compile a single-device model into a plan.
#include <optional>
#include <string>

#include "cluster/ClusterParser.h"
#include "plan/AutoParallel.h"
#include "plan/Partitioner.h"
#include "plan/PlanFile.h"
#include "runtime/job/RowsPerStep.h"
#include "support/Memory.h"
#include "tools/Commands.h"
#include "tools/Partition.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {
namespace {

struct PartitionArgs {
  std::string file;
  std::string output;
  std::string data;
  std::optional<double> rowsPerStep;
  bool stats = false;
  CompileArgs compile;
};

int runPartition(const PartitionArgs &args) {
  // About 90 bytes of IR in memory per byte of model text (500,000 ops: 29 MB, 2.5 GB).
  uint64_t textBytes = 0;
  if (!llvm::sys::fs::file_size(args.file, textBytes))
    support::tuneAllocatorForLargeModules(textBytes * 90);
  auto model = loadModule(args.file, /*inferShapes=*/false);
  if (!model)
    return reportError(model.takeError());
  auto options = args.compile.toOptions();
  if (!options)
    return reportError(options.takeError());
  options->rowsPerStep = args.rowsPerStep;
  auto cluster = cluster::loadCluster(args.compile.cluster, args.compile.replicationKind());
  if (!cluster)
    return reportError(cluster.takeError());
  auto result = runtime::job::partitionWithData(std::move(*model), *cluster, *options, args.data);
  if (!result)
    return reportError(result.takeError());
  plan::Plan &plan = result->plan;
  if (args.stats)
    printPartitionStatistics(*result, llvm::errs());
  // partition() verified the plan it made (the sampled rows change no verified field).
  if (auto e = plan::writePlan(plan, args.output, plan::PlanCheck::AlreadyVerified))
    return reportError(std::move(e));
  printPlanSummary(plan, args.output, llvm::outs());
  if (args.compile.explain)
    plan::printDecisions(plan, llvm::outs());
  // The programs' modules are left to the process's exit, which reclaims them at once: freeing
  // a large model's millions of objects one by one took seconds. (Held from a static, so leak
  // checkers see them reachable.)
  static auto *exitReclaims = new std::vector<std::unique_ptr<ir::Module>>;
  for (auto &program : result->programs)
    exitReclaims->push_back(std::move(program));
  return 0;
}

} // namespace

void registerPartitionCommand(CLI::App &app) {
  auto args = std::make_shared<PartitionArgs>();
  auto *cmd = app.add_subcommand("partition", "Compile a model for a cluster into a plan");
  cmd->add_option("file", args->file, "Model file (.prism)")->required();
  args->compile.addOptions(*cmd);
  cmd->add_option("-o,--output", args->output, "Where to write the plan (plan.pb)")->required();
  cmd->add_option("--rows-per-step", args->rowsPerStep,
                  "Distinct rows a worker reads per step from each PS table (for the estimate)");
  cmd->add_option("--data", args->data,
                  "Sample this data set for the rows read per step (the estimate and the "
                  "automatic choices; see prism train)");
  cmd->add_flag("--stats", args->stats, "Print each pass's statistics on stderr");
  cmd->callback([args]() {
    int status = runPartition(*args);
    if (status)
      throw CLI::RuntimeError(status);
  });
}

} // namespace prism::tools
