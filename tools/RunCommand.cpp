// `prism run plan.pb`: run a plan's tasks and watch them; `prism task plan.pb --task T`: one task
// of a plan (what `prism run` starts, and what mpirun, srun or ssh can start by hand); both
// through the library (prism/Prism.h).
#include <string>
#include <vector>

#include "prism/Prism.h"
#include "runtime/job/TaskCommand.h"
#include "tools/Commands.h"
#include "tools/Run.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {
namespace {

struct RunArgs {
  std::string plan;
  RunOptionArgs run;
};

int runRun(const RunArgs &args) {
  auto plan = api::Plan::load(args.plan);
  if (!plan.ok())
    return reportStatus(plan.status());
  api::Status ran = api::run(*plan, args.run.toApiOptions());
  return ran.ok() ? 0 : reportStatus(ran);
}

int runTask(const std::vector<std::string> &args) {
  auto status = api::runTaskCommand(args);
  if (!status.ok())
    return reportStatus(status.status());
  return *status;
}

} // namespace

void registerRunCommand(CLI::App &app) {
  auto args = std::make_shared<RunArgs>();
  auto *cmd = app.add_subcommand("run", "Run a plan: every task, local or on its hosts");
  cmd->add_option("plan", args->plan, "Plan file (prism partition -o)")->required();
  args->run.addOptions(*cmd);
  args->run.addRecoveryOptions(*cmd);
  cmd->callback([args]() {
    if (int status = runRun(*args))
      throw CLI::RuntimeError(status);
  });

  // The task's flags are runtime::job::TaskCommand's (the launcher writes the same line), so
  // CLI11 hands everything after `prism task` over to it.
  auto *task = app.add_subcommand(runtime::job::kTaskSubcommand,
                                  "Run one task of a plan (prism run starts these)");
  task->prefix_command();
  task->footer("Usage: prism task PLAN [OPTIONS]\n" + runtime::job::TaskCommand::usage());
  task->callback([task]() {
    if (int status = runTask(task->remaining()))
      throw CLI::RuntimeError(status);
  });
}

} // namespace prism::tools
