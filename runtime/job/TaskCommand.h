// The command line of one task, `prism task PLAN --task T --coordinator HOST:PORT ...`: the
// launcher writes it (toArgs) and the task's process reads it back (parse), so its flags are
// defined here once. mpirun, srun and people start tasks with the same line.
#pragma once

#include <string>
#include <vector>

#include "runtime/job/JobOptions.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::job {

// The `prism` subcommand that runs one task.
constexpr const char *kTaskSubcommand = "task";
// Where the launcher leaves the job's task flags (toArgs, a line each) in the coordinator's
// store, for workers that join an elastic job.
constexpr const char *kTaskArgsKey = "job/task-args";

struct TaskCommand {
  std::string plan;        // the plan file
  std::string task;        // "worker:1"; empty: from the rank variables (mpirun, srun)
  std::string coordinator; // host:port; empty: the plan's coordinator
  // Of these a task takes the data, steps or epochs, threads, metrics file, heartbeat timeout,
  // variables directory, checkpoint directories, quiet and evaluate; the rest stay defaults.
  JobOptions options;

  // The arguments after `prism task`: the plan, then only the flags that differ from the
  // defaults.
  std::vector<std::string> toArgs() const;
  // The inverse of toArgs, and what a person types: `--flag value` or `--flag=value`. An
  // unknown flag, a missing or bad value is an error naming the flag.
  static llvm::Expected<TaskCommand> parse(llvm::ArrayRef<std::string> args);
  // The flags, one a line, for `prism task --help`.
  static std::string usage();
};

// Runs the task `command` names: reads the plan, takes the task from the rank variables when
// none is named, and under mpirun or srun (no launcher, no --coordinator) lets worker:0 serve
// the coordinator at the plan's address. The task's exit status; errors before it runs are
// errors.
llvm::Expected<int> runTaskCommand(const TaskCommand &command);

} // namespace prism::runtime::job
