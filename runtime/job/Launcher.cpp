// The launcher (`prism run`): the coordinator in this process, every other task a child process
// (local, or through a command prefix such as ssh or `ip netns exec`), watched until all end.
#include "runtime/job/Launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "ir/Diagnostic.h"
#include "plan/PlanTasks.h"
#include "plan/Synchronization.h"
#include "runtime/dist/Coordinator.h"
#include "runtime/job/InjectedFault.h"
#include "runtime/job/JobCheckpoints.h"
#include "runtime/job/Task.h"
#include "runtime/job/TaskCommand.h"
#include "runtime/train/CheckpointDir.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

extern char **environ;

namespace prism::runtime::job {
namespace {

using Clock = std::chrono::steady_clock;

// Lines a task wrote last on stderr: its last words when it fails.
constexpr size_t kLastWords = 8;

struct Child {
  std::string task;
  pid_t pid = -1;
  int stderrFd = -1;
  std::thread reader;
  std::mutex mutex;
  std::deque<std::string> lastLines;
  bool exited = false;
  int status = 0;

  std::string lastWords() {
    std::lock_guard<std::mutex> lock(mutex);
    std::string words;
    for (const std::string &line : lastLines)
      words += "\n    " + line;
    return words;
  }
};

std::string shellQuote(const std::string &s) {
  std::string quoted = "'";
  for (char c : s)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string replaceAll(std::string text, const std::string &from, const std::string &to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

std::string describeStatus(int status) {
  if (WIFEXITED(status))
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("was killed by signal ") + strsignal(WTERMSIG(status));
  return "stopped";
}

llvm::Error spawn(Child &child, const std::vector<std::string> &argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return ir::makeError("cannot make a pipe for " + child.task + ": " + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  std::vector<char *> args;
  for (const std::string &a : argv)
    args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  int rc = posix_spawn(&child.pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return ir::makeError("cannot start " + child.task + " (" + argv[0] + "): " + std::strerror(rc));
  }
  child.stderrFd = fds[0];
  child.reader = std::thread([&child] {
    std::string pending;
    char buffer[4096];
    for (;;) {
      ssize_t n = read(child.stderrFd, buffer, sizeof buffer);
      if (n <= 0)
        break;
      pending.append(buffer, static_cast<size_t>(n));
      for (size_t nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n')) {
        std::string line = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        // One write a line: the readers of every task share the terminal.
        llvm::errs() << "[" + child.task + "] " + line + "\n";
        std::lock_guard<std::mutex> lock(child.mutex);
        child.lastLines.push_back(line);
        if (child.lastLines.size() > kLastWords)
          child.lastLines.pop_front();
      }
    }
    close(child.stderrFd);
  });
  return llvm::Error::success();
}

// Reaps `child` when it has exited (`options`: WNOHANG to only look); whether it has.
bool reap(Child &child, int options) {
  if (child.exited)
    return true;
  int status = 0;
  if (waitpid(child.pid, &status, options) != child.pid)
    return false;
  child.exited = true;
  child.status = status;
  return true;
}

// Waits up to `grace` for every child to end, then kills those left; joins their readers.
void stopChildren(std::vector<std::unique_ptr<Child>> &children, std::chrono::seconds grace) {
  auto deadline = Clock::now() + grace;
  for (;;) {
    bool running = false;
    for (auto &c : children)
      running |= !reap(*c, WNOHANG);
    if (!running)
      break;
    if (Clock::now() > deadline) {
      for (auto &c : children)
        if (!c->exited)
          kill(c->pid, SIGKILL);
      for (auto &c : children)
        reap(*c, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (auto &c : children)
    if (c->reader.joinable())
      c->reader.join();
}

// A job in flight: the coordinator in this process, and a child process per other task.
struct RunningJob {
  std::unique_ptr<dist::Coordinator> coordinator;
  std::vector<std::unique_ptr<Child>> children;
  bool elastic = false; // run.elastic_max > 0: lost workers do not end the job
};

std::vector<const plan::Task *> tasksToStart(const plan::Plan &plan) {
  std::vector<const plan::Task *> tasks;
  for (const plan::Task &t : plan.cluster().tasks())
    if (t.role() != "coordinator")
      tasks.push_back(&t);
  return tasks;
}

// On loopback every task takes a free port (several jobs may share the machine); across hosts
// the plan's ports are used.
llvm::Expected<std::unique_ptr<dist::Coordinator>> startCoordinator(const plan::Plan &plan,
                                                                    const JobOptions &options) {
  const plan::Task *coordinatorTask = nullptr;
  for (const plan::Task &t : plan.cluster().tasks())
    if (t.role() == "coordinator")
      coordinatorTask = &t;
  dist::CoordinatorOptions coordinatorOptions;
  coordinatorOptions.listenAddress =
      coordinatorTask->address() + ":" +
      (plan::onLoopback(plan) ? "0" : std::to_string(coordinatorTask->port()));
  coordinatorOptions.jobToken = plan::jobToken(plan);
  for (const plan::Task *t : tasksToStart(plan))
    coordinatorOptions.expectedTasks.push_back(t->name());
  coordinatorOptions.heartbeatTimeout = options.heartbeatTimeout;
  coordinatorOptions.elasticMin = plan.run().elastic_min();
  coordinatorOptions.elasticMax = plan.run().elastic_max();
  auto tls = dist::readTlsFiles(options.tls.forTask(coordinatorTask->name()));
  if (!tls)
    return tls.takeError();
  coordinatorOptions.tls = std::move(*tls);
  return dist::Coordinator::start(coordinatorOptions);
}

// The process of `task`: `prism task ...`, local or through the launcher prefix.
std::vector<std::string> taskArgv(const plan::Plan &plan, const plan::Task &task,
                                  const TaskCommand &command, const JobOptions &options) {
  std::vector<std::string> argv = {
      options.taskProgram.empty() ? taskProgram() : options.taskProgram, kTaskSubcommand};
  for (std::string &arg : command.toArgs())
    argv.push_back(std::move(arg));
  const plan::Host &host = plan.cluster().hosts(task.host());
  return onHost(options.launcher, host.name(), host.address(), std::move(argv));
}

// Starts every task but the coordinator (the one `fault` names injects it); when one cannot
// start, the job is stopped.
llvm::Error startTasks(RunningJob &job, const plan::Plan &plan, const TaskCommand &common,
                       const JobOptions &options, const InjectedFault *fault) {
  for (const plan::Task *t : tasksToStart(plan)) {
    TaskCommand command = common;
    command.task = t->name();
    if (fault && fault->task == t->name())
      command.options.injectFault = fault->str();
    command.options.tls = options.tls.forTask(t->name());
    auto child = std::make_unique<Child>();
    child->task = t->name();
    llvm::Error e = spawn(*child, taskArgv(plan, *t, command, options));
    job.children.push_back(std::move(child));
    if (e) {
      job.coordinator->abort("the launcher could not start every task");
      stopChildren(job.children, std::chrono::seconds(10));
      return e;
    }
  }
  return llvm::Error::success();
}

// "worker:1 exited with status 1; its last words: ..."
std::string failureOf(Child &child) {
  if (child.reader.joinable())
    child.reader.join();
  std::string failure = child.task + " " + describeStatus(child.status);
  std::string words = child.lastWords();
  if (!words.empty())
    failure += "; its last words:" + words;
  return failure;
}

// Elastic membership: a worker that ended without finishing is lost, not the job's failure
// (the coordinator drops it, or aborts saying that too few remain: the abort names the cause);
// one the coordinator dropped (it stopped answering) is killed, so that it cannot come back.
// Whether `child` is taken care of.
bool loseElasticWorker(RunningJob &job, Child &child, bool exited) {
  if (!job.elastic || !llvm::StringRef(child.task).startswith("worker:"))
    return false;
  if (!exited) {
    if (job.coordinator->dropped(child.task))
      kill(child.pid, SIGKILL);
    return false;
  }
  if (job.coordinator->dropped(child.task))
    return true;
  if (WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0)
    return false;
  if (job.coordinator->abortReason())
    return false;
  job.coordinator->loseWorker(child.task, describeStatus(child.status));
  return true;
}

// A task killed by a signal closes its sockets before it can be reaped, so a peer's report of
// the closed connection can reach the coordinator first (worker:0 was once named for a killed
// worker:1): the coordinator's verdict stands once this long passed without a task seen killed.
constexpr std::chrono::milliseconds kVerdictGrace(500);

// Watches until every task ended (""), or the first failure, the cause before its consequences:
// a task killed by a signal (nothing here kills tasks before this returns); else the
// coordinator's verdict (a silent task, or a failure a task reported), after kVerdictGrace;
// else a task that exited badly. A task that exits because the job was aborted is not the cause
// (a stopped ps:0 used to be reported as ps:1 exiting with status 1).
std::string watch(RunningJob &job, const std::function<void()> &poll) {
  std::optional<Clock::time_point> verdictSeen;
  for (;;) {
    poll();
    bool running = false;
    Child *failed = nullptr, *killed = nullptr;
    for (auto &c : job.children) {
      if (c->exited)
        continue;
      if (!reap(*c, WNOHANG)) {
        loseElasticWorker(job, *c, /*exited=*/false);
        running = true;
        continue;
      }
      if (loseElasticWorker(job, *c, /*exited=*/true))
        continue;
      if (!killed && WIFSIGNALED(c->status))
        killed = c.get();
      if (!failed && !(WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0))
        failed = c.get();
    }
    if (killed)
      return failureOf(*killed);
    if (auto reason = job.coordinator->abortReason()) {
      if (!verdictSeen)
        verdictSeen = Clock::now();
      if (!running || Clock::now() - *verdictSeen >= kVerdictGrace)
        return *reason;
    } else if (failed) {
      return failureOf(*failed);
    } else if (!running) {
      return "";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// A checkpoint is written beside its place and moved there once every task wrote its part, so
// a failed job never leaves half a checkpoint where a good one stood.
llvm::Error moveCheckpointIntoPlace(const std::string &partial, const std::string &saveDir) {
  std::string old = saveDir + ".old-" + std::to_string(getpid());
  bool hadOld = llvm::sys::fs::exists(saveDir);
  if (hadOld)
    if (auto ec = llvm::sys::fs::rename(saveDir, old))
      return ir::makeError("cannot move the old checkpoint " + saveDir + " aside: " + ec.message() +
                           " (the new one is in " + partial + ")");
  if (auto ec = llvm::sys::fs::rename(partial, saveDir))
    return ir::makeError("cannot move the checkpoint into " + saveDir + ": " + ec.message() +
                         " (it is in " + partial + ")");
  if (hadOld)
    llvm::sys::fs::remove_directories(old);
  return llvm::Error::success();
}

// Completes the job's periodic checkpoints: once every writer reported a step, its partial
// directory is moved into place (and the oldest beyond --keep-checkpoints go).
class CheckpointCompleter {
public:
  CheckpointCompleter(const plan::Plan &plan, const train::PeriodicCheckpoints &checkpoints)
      : checkpoints_(checkpoints), writers_(checkpointWriters(plan)) {}

  // Looks at what the tasks reported; an error when a checkpoint cannot be moved into place.
  llvm::Error poll(const dist::Coordinator &coordinator) {
    if (checkpoints_.dir.empty())
      return llvm::Error::success();
    std::optional<int64_t> reported;
    for (const std::string &writer : writers_) {
      std::optional<std::string> value = coordinator.value(checkpointReportKey(writer));
      int64_t step = 0;
      if (!value || llvm::StringRef(*value).getAsInteger(10, step))
        return llvm::Error::success();
      reported = std::min(reported.value_or(step), step);
    }
    if (*reported <= completed_)
      return llvm::Error::success();
    completed_ = *reported;
    return train::completeCheckpoint(checkpoints_.dir, completed_, checkpoints_.keep);
  }

private:
  const train::PeriodicCheckpoints &checkpoints_;
  std::vector<std::string> writers_;
  int64_t completed_ = 0;
};

// One run of the job: the failure that ended it ("" when it succeeded), or an error when it
// could not start or a checkpoint could not be kept.
llvm::Expected<std::string> runOnce(const plan::Plan &plan, const TaskCommand &common,
                                    const JobOptions &options, const InjectedFault *fault) {
  RunningJob job;
  auto coordinator = startCoordinator(plan, options);
  if (!coordinator)
    return coordinator.takeError();
  job.coordinator = std::move(*coordinator);
  job.elastic = plan.run().elastic_max() > 0;
  TaskCommand command = common;
  command.coordinator = job.coordinator->address();
  // A worker joining the job (`prism task PLAN --join`) runs with the job's flags.
  job.coordinator->set(kTaskArgsKey, llvm::join(command.toArgs(), "\n"));
  if (job.elastic && !options.quiet)
    llvm::errs() << "prism: elastic job (" << plan.run().elastic_min() << " to "
                 << plan.run().elastic_max() << " workers): more join with `prism task "
                 << common.plan << " --join --coordinator " << job.coordinator->address() << "`\n";
  if (auto e = startTasks(job, plan, command, options, fault))
    return std::move(e);

  CheckpointCompleter completer(plan, options.checkpoints);
  llvm::Error keepError = llvm::Error::success();
  std::string failure = watch(job, [&] {
    if (keepError)
      return;
    if (auto e = completer.poll(*job.coordinator)) {
      keepError = std::move(e);
      job.coordinator->abort("the launcher could not keep a checkpoint");
    }
  });
  if (!failure.empty()) {
    // Every task hears of the abort within a heartbeat; one that cannot (stopped, hung) is killed.
    job.coordinator->abort(failure);
    stopChildren(job.children, std::chrono::seconds(3));
    // A checkpoint whose last part arrived as the job failed is still complete.
    if (!keepError)
      keepError = completer.poll(*job.coordinator);
    job.coordinator->shutdown();
    if (keepError)
      return std::move(keepError);
    return failure;
  }
  stopChildren(job.children, std::chrono::seconds(15));
  job.coordinator->shutdown();
  if (keepError)
    return std::move(keepError);
  return "";
}

// TLS for the job: with --tls, a new CA and a certificate per task in a private temporary
// directory (returned, for removal), which `options.tls` then names; with files given, each
// task must have its own. Empty: no directory made.
llvm::Expected<std::string> prepareTls(const plan::Plan &plan, JobOptions &options) {
  if (options.generateTls && !options.tls.empty())
    return ir::makeError("--tls makes the job's certificates and --tls-ca, --tls-cert and "
                         "--tls-key give them: use one or the other");
  if (!options.tls.empty()) {
    bool shared = llvm::StringRef(options.tls.cert).find("{task}") == llvm::StringRef::npos ||
                  llvm::StringRef(options.tls.key).find("{task}") == llvm::StringRef::npos;
    if (shared)
      return ir::makeError("--tls-cert " + options.tls.cert + " --tls-key " + options.tls.key +
                           ": each task needs its own certificate; put {task} in both paths "
                           "(certs/{task}.pem: worker-0, ps-0, coordinator-0)");
    for (const plan::Task &t : plan.cluster().tasks()) {
      dist::TlsFiles files = options.tls.forTask(t.name());
      for (const std::string &path : {files.ca, files.cert, files.key})
        if (!llvm::sys::fs::exists(path))
          return ir::makeError("TLS: " + path + " (for " + t.name() + ") does not exist");
    }
    return std::string();
  }
  if (!options.generateTls)
    return std::string();
  llvm::SmallString<256> dir;
  if (auto ec = llvm::sys::fs::createUniqueDirectory("prism-tls", dir))
    return ir::makeError("cannot make a directory for the job's certificates: " + ec.message());
  std::vector<std::string> tasks;
  for (const plan::Task &t : plan.cluster().tasks())
    tasks.push_back(t.name());
  if (auto e = dist::writeJobCertificates(dir, tasks)) {
    llvm::sys::fs::remove_directories(dir);
    return std::move(e);
  }
  options.tls = dist::jobCertificateFiles(dir);
  return std::string(dir);
}

// A fault that could never fire is a mistake in the test that injects it.
llvm::Error checkFaults(const plan::Plan &plan, const JobOptions &options,
                        const std::vector<InjectedFault> &faults) {
  std::vector<std::string> writers = checkpointWriters(plan);
  for (const InjectedFault &fault : faults) {
    const plan::Task *task = plan::findTask(plan, fault.task);
    if (!task || task->role() == "coordinator")
      return ir::makeError("injected fault " + fault.str(true) +
                           ": the plan has no worker or PS task '" + fault.task + "'");
    if (fault.kind == InjectedFault::Kind::Slow && task->role() != "worker")
      return ir::makeError("injected fault " + fault.str(true) + ": " + fault.task +
                           " is not a worker (slow@MS delays a worker's steps)");
    if (fault.kind == InjectedFault::Kind::KillCheckpoint &&
        (options.checkpoints.dir.empty() ||
         std::find(writers.begin(), writers.end(), fault.task) == writers.end()))
      return ir::makeError("injected fault " + fault.str(true) + ": " + fault.task +
                           " writes no part of a checkpoint (worker:0 and the parameter servers "
                           "do, with --checkpoint-dir)");
  }
  return llvm::Error::success();
}

// What elastic membership does not combine with: restarts and checkpoints (the job goes on
// instead; rank 0 writes them and changes), and TLS (each joining worker would need a
// certificate of its own).
llvm::Error checkElasticOptions(const plan::Plan &plan, const JobOptions &options) {
  if (plan.run().elastic_max() == 0)
    return llvm::Error::success();
  const std::string elastic = "the plan's --elastic " + std::to_string(plan.run().elastic_min()) +
                              ":" + std::to_string(plan.run().elastic_max());
  auto refuse = [&](const std::string &flag) {
    return ir::makeError(flag + " and " + elastic +
                         " do not go together: an elastic job goes on without a lost worker "
                         "instead of restarting from checkpoints (docs/distributed.md, \"Elastic "
                         "membership\")");
  };
  if (options.maxRestarts > 0)
    return refuse("--max-restarts " + std::to_string(options.maxRestarts));
  if (!options.checkpoints.dir.empty())
    return refuse("--checkpoint-dir " + options.checkpoints.dir);
  if (!options.saveDir.empty())
    return refuse("--save " + options.saveDir);
  if (!options.restoreDir.empty())
    return refuse("--restore " + options.restoreDir);
  if (options.generateTls || !options.tls.empty())
    return ir::makeError("TLS and " + elastic +
                         " do not go together yet: a joining worker has no certificate of its own");
  return llvm::Error::success();
}

// Where a run of the job starts: --restore for the first (else the newest complete periodic
// checkpoint, when there is one), the newest complete checkpoint for a restart (else where the
// first run started). Empty: from the start.
llvm::Expected<std::string> restorePoint(const JobOptions &options, int run,
                                         std::optional<int64_t> &step) {
  step.reset();
  if (run == 0 && !options.restoreDir.empty())
    return options.restoreDir;
  if (!options.checkpoints.dir.empty()) {
    auto latest = train::latestCheckpoint(options.checkpoints.dir);
    if (!latest)
      return latest.takeError();
    if (*latest) {
      step = (*latest)->step;
      return (*latest)->path;
    }
  }
  return options.restoreDir;
}

} // namespace

// Checkpoints are of one step of every task; workers that run apart have none in common.
llvm::Error checkSynchronizedCheckpoints(const plan::Plan &plan, const JobOptions &options) {
  const plan::Synchronization sync = plan::readSynchronization(plan.run());
  if (sync.exact())
    return llvm::Error::success();
  const std::string flag = !options.checkpoints.dir.empty() ? "--checkpoint-dir"
                           : !options.restoreDir.empty()    ? "--restore"
                                                            : "";
  if (flag.empty())
    return llvm::Error::success();
  return ir::makeError(flag + ": the plan trains with " + plan::synchronizationFlag(sync) +
                       ", where workers are at different steps and a parameter server's version "
                       "is no step of theirs; checkpoints and restores need synchronous training "
                       "(--save writes the final variables)");
}

llvm::Error runPlan(const plan::Plan &plan, const std::string &planPath,
                    const JobOptions &options) {
  if (auto e = train::checkPeriodicCheckpoints(options.checkpoints))
    return e;
  if (auto e = checkSynchronizedCheckpoints(plan, options))
    return e;
  if (options.maxRestarts < 0)
    return ir::makeError("--max-restarts " + std::to_string(options.maxRestarts) +
                         ": expected a number of restarts, 0 or more");
  if (auto e = checkElasticOptions(plan, options))
    return e;
  if (auto e = checkPartitionSearchRun(plan, options))
    return e;
  auto faults = injectedFaultsFromEnvironment();
  if (!faults)
    return faults.takeError();
  if (auto e = checkFaults(plan, options, *faults))
    return e;

  // The job's own CA and certificates, when asked for: in a private directory, removed when
  // the job ends however it ends.
  JobOptions jobOptions = options;
  auto tlsDir = prepareTls(plan, jobOptions);
  if (!tlsDir)
    return tlsDir.takeError();
  auto removeTls = llvm::make_scope_exit([&] {
    if (!tlsDir->empty())
      llvm::sys::fs::remove_directories(*tlsDir);
  });

  TaskCommand common;
  llvm::SmallString<256> absolutePlan(planPath);
  llvm::sys::fs::make_absolute(absolutePlan);
  common.plan = std::string(absolutePlan);
  common.options = jobOptions;
  std::string partialSave =
      options.saveDir.empty() ? "" : options.saveDir + ".partial-" + std::to_string(getpid());
  common.options.saveDir = partialSave;
  if (!options.checkpoints.dir.empty())
    if (auto ec = llvm::sys::fs::create_directories(options.checkpoints.dir))
      return ir::makeError("cannot create the checkpoint directory " + options.checkpoints.dir +
                           ": " + ec.message());

  for (int run = 0;; ++run) {
    std::optional<int64_t> restoredStep;
    auto restore = restorePoint(options, run, restoredStep);
    if (!restore)
      return restore.takeError();
    common.options.restoreDir = *restore;
    if (run == 0 && restoredStep && !options.quiet)
      llvm::outs() << "resuming from the checkpoint of step " << *restoredStep << " in " << *restore
                   << "\n";
    llvm::outs().flush();
    if (!partialSave.empty())
      if (auto ec = llvm::sys::fs::create_directories(partialSave))
        return ir::makeError("cannot create " + partialSave + ": " + ec.message());
    const InjectedFault *fault =
        static_cast<size_t>(run) < faults->size() ? &(*faults)[static_cast<size_t>(run)] : nullptr;
    auto failure = runOnce(plan, common, common.options, fault);
    if (failure && failure->empty()) {
      if (!options.checkpoints.dir.empty())
        train::removePartialCheckpoints(options.checkpoints.dir);
      if (!partialSave.empty())
        return moveCheckpointIntoPlace(partialSave, options.saveDir);
      return llvm::Error::success();
    }
    if (!partialSave.empty())
      llvm::sys::fs::remove_directories(partialSave);
    if (!options.checkpoints.dir.empty())
      train::removePartialCheckpoints(options.checkpoints.dir);
    if (!failure)
      return failure.takeError();
    if (run >= options.maxRestarts)
      return ir::makeError(
          ir::ErrorCode::Aborted,
          "the job failed: " + *failure +
              (run > 0 ? " (after " + std::to_string(run) + (run == 1 ? " restart)" : " restarts)")
                       : std::string()));
    // Where the next run starts, for the log.
    auto next = restorePoint(options, run + 1, restoredStep);
    if (!next)
      return next.takeError();
    llvm::errs() << "prism: the job lost a task: " << *failure << "\nprism: restarting every task ("
                 << "restart " << run + 1 << " of " << options.maxRestarts << ") from "
                 << (restoredStep ? "the checkpoint of step " + std::to_string(*restoredStep) +
                                        " in " + *next
                     : next->empty() ? std::string("the start")
                                     : "the checkpoint in " + *next)
                 << "\n";
  }
}

std::string taskProgram() {
  if (const char *program = std::getenv("PRISM_TASK_PROGRAM"); program && *program)
    return program;
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : std::string("prism");
}

std::vector<std::string> onHost(const std::string &launcher, const std::string &hostName,
                                const std::string &address, std::vector<std::string> argv) {
  if (launcher.empty())
    return argv;
  std::string shell = replaceAll(replaceAll(launcher, "{host}", hostName), "{address}", address);
  for (const std::string &a : argv)
    shell += " " + shellQuote(a);
  return {"/bin/sh", "-c", shell};
}

} // namespace prism::runtime::job
