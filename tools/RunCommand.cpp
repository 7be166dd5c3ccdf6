// `prism run plan.pb`: run a plan's tasks and watch them; `prism task plan.pb --task T`: one task
// of a plan (what `prism run` starts, and what mpirun, srun or ssh can start by hand).
#include <cstdlib>
#include <string>

#include "plan/PlanFile.h"
#include "plan/PlanTasks.h"
#include "runtime/dist/Coordinator.h"
#include "runtime/job/Launcher.h"
#include "runtime/job/Task.h"
#include "tools/Commands.h"
#include "tools/Run.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {
namespace {

struct RunArgs {
  std::string plan;
  RunOptionArgs run;
};

struct TaskArgs {
  std::string plan;
  std::string task;
  std::string coordinator;
  RunOptionArgs run;
};

// Under mpirun or srun each process finds its task from its rank: rank r is the r-th task of
// the plan after the coordinator (workers first, then parameter servers).
std::string taskFromRank(const plan::Plan &plan) {
  for (const char *variable : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    const char *value = std::getenv(variable);
    if (!value || !*value)
      continue;
    int rank = std::atoi(value);
    int index = 0;
    for (const plan::Task &t : plan.cluster().tasks())
      if (t.role() != "coordinator" && index++ == rank)
        return t.name();
  }
  return "";
}

int runRun(const RunArgs &args) {
  auto plan = plan::readPlan(args.plan);
  if (!plan)
    return reportError(plan.takeError());
  auto options = args.run.toJobOptions();
  if (!options)
    return reportError(options.takeError());
  if (auto e = runtime::job::runPlan(*plan, args.plan, *options))
    return reportError(std::move(e));
  return 0;
}

int runTaskCommand(const TaskArgs &args) {
  auto plan = plan::readPlan(args.plan);
  if (!plan)
    return reportError(plan.takeError());
  auto options = args.run.toJobOptions();
  if (!options)
    return reportError(options.takeError());
  bool fromRank = args.task.empty();
  std::string task = fromRank ? taskFromRank(*plan) : args.task;
  if (task.empty())
    return reportError(ir::makeError("prism task: say which task with --task, or start it under "
                                     "mpirun or srun (rank variables)"));
  std::string coordinator = args.coordinator;
  const plan::Task *coordinatorTask = nullptr;
  for (const plan::Task &t : plan->cluster().tasks())
    if (t.role() == "coordinator")
      coordinatorTask = &t;
  if (coordinator.empty())
    coordinator = coordinatorTask->address() + ":" + std::to_string(coordinatorTask->port());
  // Under mpirun or srun no launcher runs the coordinator: worker:0's process does, at the
  // plan's address.
  std::unique_ptr<runtime::dist::Coordinator> served;
  if (fromRank && task == "worker:0" && args.coordinator.empty()) {
    runtime::dist::CoordinatorOptions coordinatorOptions;
    coordinatorOptions.listenAddress = coordinator;
    coordinatorOptions.jobToken = plan::jobToken(*plan);
    for (const plan::Task &t : plan->cluster().tasks())
      if (t.role() != "coordinator")
        coordinatorOptions.expectedTasks.push_back(t.name());
    coordinatorOptions.heartbeatTimeout = options->heartbeatTimeout;
    auto started = runtime::dist::Coordinator::start(coordinatorOptions);
    if (!started)
      return reportError(started.takeError());
    served = std::move(*started);
  }
  int status = runtime::job::runTask(*plan, task, coordinator, *options);
  // The coordinator stays until every task said it finished (or the job failed).
  if (served)
    served->waitUntilAllFinished(std::chrono::seconds(30));
  return status;
}

} // namespace

void registerRunCommand(CLI::App &app) {
  auto args = std::make_shared<RunArgs>();
  auto *cmd = app.add_subcommand("run", "Run a plan: every task, local or on its hosts");
  cmd->add_option("plan", args->plan, "Plan file (prism partition -o)")->required();
  args->run.addOptions(*cmd);
  cmd->callback([args]() {
    if (int status = runRun(*args))
      throw CLI::RuntimeError(status);
  });

  auto taskArgs = std::make_shared<TaskArgs>();
  auto *task = app.add_subcommand("task", "Run one task of a plan (prism run starts these)");
  task->add_option("plan", taskArgs->plan, "Plan file")->required();
  task->add_option("--task", taskArgs->task,
                   "worker:N or ps:N (default: from OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID)");
  task->add_option("--coordinator", taskArgs->coordinator,
                   "host:port of the coordinator (default: the plan's)");
  taskArgs->run.addOptions(*task);
  task->callback([taskArgs]() {
    if (int status = runTaskCommand(*taskArgs))
      throw CLI::RuntimeError(status);
  });
}

} // namespace prism::tools
