// The command line of one task, written and read in one place (see TaskCommand.h).
#include "runtime/job/TaskCommand.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>

#include "ir/Diagnostic.h"
#include "plan/PlanFile.h"
#include "plan/PlanTasks.h"
#include "runtime/dist/Coordinator.h"
#include "runtime/job/InjectedFault.h"
#include "runtime/job/Task.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::runtime::job {
namespace {

// One flag: how it is written, read back and shown.
struct Flag {
  const char *name;  // "--steps"
  const char *value; // "N" for a flag with a value; null for a switch
  const char *help;
  // Sets the flag's value (a switch gets ""); an error says what was expected.
  std::function<llvm::Error(TaskCommand &, llvm::StringRef)> read;
  // The flag's value in a command (a switch: ""), or none when it is left out.
  std::function<std::optional<std::string>(const TaskCommand &)> write;
};

llvm::Error expected(const char *flag, const char *what, llvm::StringRef got) {
  return ir::makeError(std::string("option ") + flag + ": expected " + what + ", got '" + got +
                       "'");
}

std::optional<std::string> unlessEmpty(const std::string &text) {
  return text.empty() ? std::nullopt : std::optional<std::string>(text);
}

// A text flag kept in `field`.
Flag textFlag(const char *name, const char *value, const char *help,
              std::string TaskCommand::*field) {
  return {name, value, help,
          [field](TaskCommand &c, llvm::StringRef v) {
            c.*field = v.str();
            return llvm::Error::success();
          },
          [field](const TaskCommand &c) { return unlessEmpty(c.*field); }};
}

// A text option the accessor `field` reaches (a generic lambda: JobOptions, const or not, to
// the string), e.g. [](auto &o) -> auto & { return o.tls.ca; }.
template <typename Field>
Flag optionText(const char *name, const char *value, const char *help, Field field) {
  return {name, value, help,
          [field](TaskCommand &c, llvm::StringRef v) {
            field(c.options) = v.str();
            return llvm::Error::success();
          },
          [field](const TaskCommand &c) { return unlessEmpty(field(c.options)); }};
}

Flag optionTextFlag(const char *name, const char *value, const char *help,
                    std::string JobOptions::*member) {
  return optionText(
      name, value, help, [member](auto &o) -> auto & { return o.*member; });
}

// A flag without a value that sets `member` (written only when set).
Flag switchFlag(const char *name, const char *help, bool JobOptions::*member) {
  return {name, nullptr, help,
          [member](TaskCommand &c, llvm::StringRef) {
            c.options.*member = true;
            return llvm::Error::success();
          },
          [member](const TaskCommand &c) {
            return c.options.*member ? std::optional<std::string>("") : std::nullopt;
          }};
}

// A positive count kept in `field` (steps, epochs).
Flag countFlag(const char *name, const char *help, std::optional<int64_t> JobOptions::*field) {
  return {name, "N", help,
          [name, field](TaskCommand &c, llvm::StringRef v) -> llvm::Error {
            int64_t n = 0;
            if (v.getAsInteger(10, n) || n < 1)
              return expected(name, "a positive integer", v);
            c.options.*field = n;
            return llvm::Error::success();
          },
          [field](const TaskCommand &c) -> std::optional<std::string> {
            if (!(c.options.*field))
              return std::nullopt;
            return std::to_string(*(c.options.*field));
          }};
}

// Seconds with up to millisecond precision, without trailing zeros: "5", "0.75".
std::string secondsText(std::chrono::milliseconds duration) {
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%.3f",
                                                 static_cast<double>(duration.count()) / 1000.0);
  while (text.back() == '0')
    text.pop_back();
  if (text.back() == '.')
    text.pop_back();
  return text;
}

// What a task writes and reads besides its training: metrics, variables, checkpoints, traces.
std::vector<Flag> outputFlags() {
  return {
      optionTextFlag("--metrics-out", "F", "Write worker:0's JSON lines of metrics here",
                     &JobOptions::metricsOut),
      optionTextFlag("--variables-out", "DIR", "Write the task's variables to DIR/<task>",
                     &JobOptions::variablesDir),
      optionTextFlag("--save", "DIR", "Write the task's part of a job checkpoint here",
                     &JobOptions::saveDir),
      optionTextFlag("--restore", "DIR", "Start from a job checkpoint", &JobOptions::restoreDir),
      optionText(
          "--checkpoint-dir", "DIR", "Write the task's part of periodic checkpoints under DIR",
          [](auto &o) -> auto & { return o.checkpoints.dir; }),
      {"--checkpoint-every", "N", "Steps between periodic checkpoints",
       [](TaskCommand &c, llvm::StringRef v) -> llvm::Error {
         if (v.getAsInteger(10, c.options.checkpoints.every) || c.options.checkpoints.every < 1)
           return expected("--checkpoint-every", "a positive integer", v);
         return llvm::Error::success();
       },
       [](const TaskCommand &c) -> std::optional<std::string> {
         if (c.options.checkpoints.every == 0)
           return std::nullopt;
         return std::to_string(c.options.checkpoints.every);
       }},
      optionTextFlag("--trace-dir", "DIR", "Write the task's timeline to DIR/<task>.json",
                     &JobOptions::traceDir),
  };
}

const std::vector<Flag> &flags() {
  static const std::vector<Flag> all = [] {
    std::vector<Flag> flags = {
        textFlag("--task", "T",
                 "worker:N or ps:N (default: from OMPI_COMM_WORLD_RANK, PMI_RANK, "
                 "PMIX_RANK, SLURM_PROCID)",
                 &TaskCommand::task),
        textFlag("--coordinator", "HOST:PORT", "The coordinator (default: the plan's)",
                 &TaskCommand::coordinator),
        optionTextFlag("--data", "D",
                       "fashion-mnist[:DIR], zipf:VOCAB[,tokens=T,classes=C], text:FILE",
                       &JobOptions::data),
        countFlag("--steps", "Steps to train", &JobOptions::steps),
        countFlag("--epochs", "Epochs to train (default: the plan's steps, else 1)",
                  &JobOptions::epochs),
        {"--threads", "N", "CPU threads",
         [](TaskCommand &c, llvm::StringRef v) -> llvm::Error {
           int threads = 0;
           if (v.getAsInteger(10, threads) || threads < 1 || threads > 1024)
             return expected("--threads", "an integer in 1..1024", v);
           c.options.threads = threads;
           return llvm::Error::success();
         },
         [](const TaskCommand &c) -> std::optional<std::string> {
           if (c.options.threads == JobOptions().threads)
             return std::nullopt;
           return std::to_string(c.options.threads);
         }},
        {"--heartbeat-timeout", "S", "Seconds without a heartbeat before a task counts as gone",
         [](TaskCommand &c, llvm::StringRef v) -> llvm::Error {
           double seconds = 0;
           if (v.getAsDouble(seconds) || !(seconds >= 0.5 && seconds <= 3600))
             return expected("--heartbeat-timeout", "seconds in 0.5..3600", v);
           c.options.heartbeatTimeout = std::chrono::milliseconds(std::llround(seconds * 1000));
           return llvm::Error::success();
         },
         [](const TaskCommand &c) -> std::optional<std::string> {
           if (c.options.heartbeatTimeout == JobOptions().heartbeatTimeout)
             return std::nullopt;
           return secondsText(c.options.heartbeatTimeout);
         }},
        optionText(
            "--tls-ca", "F", "The job's CA certificate (PEM): TLS on every gRPC channel",
            [](auto &o) -> auto & { return o.tls.ca; }),
        optionText(
            "--tls-cert", "F", "This task's certificate (PEM), signed by the CA",
            [](auto &o) -> auto & { return o.tls.cert; }),
        optionText(
            "--tls-key", "F", "This task's private key (PEM)",
            [](auto &o) -> auto & { return o.tls.key; }),
        {"--inject-fault", "KIND@STEP",
         "Kill (kill), stop (stop) or kill while checkpointing (kill-in-checkpoint) this task at "
         "a step: for recovery tests; or slow@MS: sleep MS ms before each step (tests of "
         "--sync async and --backup-workers)",
         [](TaskCommand &c, llvm::StringRef v) -> llvm::Error {
           auto fault = parseInjectedFault(v);
           if (!fault)
             return fault.takeError();
           c.options.injectFault = v.str();
           return llvm::Error::success();
         },
         [](const TaskCommand &c) { return unlessEmpty(c.options.injectFault); }},
        switchFlag("--tf32", "A GPU's float32 matrix products in TF32", &JobOptions::tf32),
        switchFlag("--cuda-graphs", "A GPU's steps as CUDA graphs", &JobOptions::cudaGraphs),
        switchFlag("--quiet", "Print only errors (also -q)", &JobOptions::quiet),
        {"--no-eval", nullptr, "Skip test-set evaluation",
         [](TaskCommand &c, llvm::StringRef) {
           c.options.evaluate = false;
           return llvm::Error::success();
         },
         [](const TaskCommand &c) {
           return c.options.evaluate ? std::nullopt : std::optional<std::string>("");
         }},
        {"--join", nullptr,
         "Join a running elastic job (--elastic) as a new worker; needs --coordinator",
         [](TaskCommand &c, llvm::StringRef) {
           c.options.join = true;
           return llvm::Error::success();
         },
         [](const TaskCommand &c) {
           return c.options.join ? std::optional<std::string>("") : std::nullopt;
         }},
    };
    std::vector<Flag> outputs = outputFlags();
    // After the seven that say what to run (--task to --heartbeat-timeout), as --help lists them.
    flags.insert(flags.begin() + 7, outputs.begin(), outputs.end());
    return flags;
  }();
  return all;
}

const Flag *findFlag(llvm::StringRef name) {
  if (name == "-q")
    name = "--quiet";
  for (const Flag &flag : flags())
    if (name == flag.name)
      return &flag;
  return nullptr;
}

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

std::string coordinatorAddress(const plan::Plan &plan) {
  for (const plan::Task &t : plan.cluster().tasks())
    if (t.role() == "coordinator")
      return t.address() + ":" + std::to_string(t.port());
  return "";
}

// The coordinator, served in this process at `address`.
llvm::Expected<std::unique_ptr<dist::Coordinator>>
serveCoordinator(const plan::Plan &plan, const std::string &address, const JobOptions &options) {
  dist::CoordinatorOptions coordinatorOptions;
  coordinatorOptions.listenAddress = address;
  coordinatorOptions.jobToken = plan::jobToken(plan);
  for (const plan::Task &t : plan.cluster().tasks())
    if (t.role() != "coordinator")
      coordinatorOptions.expectedTasks.push_back(t.name());
  coordinatorOptions.heartbeatTimeout = options.heartbeatTimeout;
  auto tls = dist::readTlsFiles(options.tls);
  if (!tls)
    return tls.takeError();
  coordinatorOptions.tls = std::move(*tls);
  return dist::Coordinator::start(coordinatorOptions);
}

// `prism task PLAN --join --coordinator HOST:PORT`: a new worker of an elastic job, with the
// job's flags (the launcher left them in the coordinator's store).
llvm::Expected<int> joinJob(const plan::Plan &plan, const TaskCommand &command) {
  if (plan.run().elastic_max() == 0)
    return ir::makeError("prism task --join: the plan " + command.plan +
                         " is not elastic (make it with --elastic MIN:MAX)");
  if (command.coordinator.empty())
    return ir::makeError("prism task --join: say where the job's coordinator is with "
                         "--coordinator HOST:PORT (the launcher prints it)");
  if (!command.task.empty())
    return ir::makeError("prism task --join --task " + command.task +
                         ": a joining worker gets its name from the coordinator");
  return runTask(plan, "", command.coordinator, command.options);
}

} // namespace

std::vector<std::string> TaskCommand::toArgs() const {
  std::vector<std::string> args = {plan};
  for (const Flag &flag : flags()) {
    std::optional<std::string> value = flag.write(*this);
    if (!value)
      continue;
    args.push_back(flag.name);
    if (flag.value)
      args.push_back(*value);
  }
  return args;
}

llvm::Expected<TaskCommand> TaskCommand::parse(llvm::ArrayRef<std::string> args) {
  TaskCommand command;
  bool planSeen = false;
  for (size_t i = 0; i < args.size(); ++i) {
    llvm::StringRef arg = args[i];
    if (!arg.startswith("-")) {
      if (planSeen)
        return ir::makeError("prism task: one plan file, got '" + command.plan + "' and '" + arg +
                             "'");
      command.plan = arg.str();
      planSeen = true;
      continue;
    }
    auto [name, inlineValue] = arg.split('=');
    const Flag *flag = findFlag(name);
    if (!flag)
      return ir::makeError("prism task: unknown option '" + name + "' (see prism task --help)");
    std::string value;
    if (flag->value) {
      if (arg.contains('='))
        value = inlineValue.str();
      else if (i + 1 < args.size())
        value = args[++i];
      else
        return ir::makeError(std::string("option ") + flag->name + ": expected a value " +
                             flag->value);
    } else if (arg.contains('=')) {
      return ir::makeError(std::string("option ") + flag->name + " takes no value");
    }
    if (auto e = flag->read(command, value))
      return std::move(e);
  }
  if (!planSeen)
    return ir::makeError("prism task: the plan file is missing");
  if (command.options.steps && command.options.epochs)
    return ir::makeError("options --steps and --epochs exclude each other");
  return std::move(command);
}

std::string TaskCommand::usage() {
  std::string text = "Options:\n";
  size_t width = 0;
  auto heading = [](const Flag &flag) {
    return std::string(flag.name) + (flag.value ? std::string(" ") + flag.value : "");
  };
  for (const Flag &flag : flags())
    width = std::max(width, heading(flag).size());
  for (const Flag &flag : flags())
    text += "  " + heading(flag) + std::string(width - heading(flag).size() + 2, ' ') + flag.help +
            "\n";
  return text;
}

llvm::Expected<int> runTaskCommand(const TaskCommand &command) {
  auto plan = plan::readPlan(command.plan);
  if (!plan)
    return plan.takeError();
  if (command.options.join)
    return joinJob(*plan, command);
  bool fromRank = command.task.empty();
  std::string task = fromRank ? taskFromRank(*plan) : command.task;
  if (task.empty())
    return ir::makeError("prism task: say which task with --task, or start it under mpirun or "
                         "srun (rank variables)");
  std::string coordinator =
      command.coordinator.empty() ? coordinatorAddress(*plan) : command.coordinator;
  // Under mpirun or srun no launcher runs the coordinator: worker:0's process does, at the
  // plan's address.
  std::unique_ptr<dist::Coordinator> served;
  JobOptions options = command.options;
  if (fromRank && command.coordinator.empty())
    options.coordinatorTask = "worker:0";
  // One command line for every rank: {task} in the TLS paths is this task's file name.
  options.tls = options.tls.forTask(task);
  if (fromRank && task == "worker:0" && command.coordinator.empty()) {
    auto started = serveCoordinator(*plan, coordinator, options);
    if (!started)
      return started.takeError();
    served = std::move(*started);
  }
  int status = runTask(*plan, task, coordinator, options);
  // The coordinator stays until every task said it finished (or the job failed).
  if (served)
    served->waitUntilAllFinished(std::chrono::seconds(30));
  return status;
}

} // namespace prism::runtime::job
