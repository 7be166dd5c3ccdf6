// The launcher (`prism run`): the coordinator in this process, every other task a child process
// (local, or through a command prefix such as ssh or `ip netns exec`), watched until all end.
#include "runtime/job/Launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <mutex>
#include <thread>

#include "ir/Diagnostic.h"
#include "plan/PlanTasks.h"
#include "runtime/dist/Coordinator.h"
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

std::string selfExecutable() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : std::string("prism");
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
        llvm::errs() << "[" << child.task << "] " << line << "\n";
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

} // namespace

llvm::Error runPlan(const plan::Plan &plan, const std::string &planPath,
                    const JobOptions &options) {
  llvm::SmallString<256> absolutePlan(planPath);
  llvm::sys::fs::make_absolute(absolutePlan);
  std::string token = plan::jobToken(plan);

  // On loopback every task takes a free port (several jobs may share the machine); across hosts
  // the plan's ports are used.
  const plan::Task *coordinatorTask = nullptr;
  std::vector<const plan::Task *> tasks;
  for (const plan::Task &t : plan.cluster().tasks()) {
    if (t.role() == "coordinator")
      coordinatorTask = &t;
    else
      tasks.push_back(&t);
  }
  dist::CoordinatorOptions coordinatorOptions;
  coordinatorOptions.listenAddress =
      coordinatorTask->address() + ":" +
      (plan::onLoopback(plan) ? "0" : std::to_string(coordinatorTask->port()));
  coordinatorOptions.jobToken = token;
  for (const plan::Task *t : tasks)
    coordinatorOptions.expectedTasks.push_back(t->name());
  coordinatorOptions.heartbeatTimeout = options.heartbeatTimeout;
  auto coordinator = dist::Coordinator::start(coordinatorOptions);
  if (!coordinator)
    return coordinator.takeError();

  std::vector<std::unique_ptr<Child>> children;
  auto stopAll = [&](std::chrono::seconds grace) {
    auto deadline = Clock::now() + grace;
    for (;;) {
      bool running = false;
      for (auto &c : children)
        if (!c->exited) {
          int status = 0;
          if (waitpid(c->pid, &status, WNOHANG) == c->pid) {
            c->exited = true;
            c->status = status;
          } else {
            running = true;
          }
        }
      if (!running)
        break;
      if (Clock::now() > deadline) {
        for (auto &c : children)
          if (!c->exited)
            kill(c->pid, SIGKILL);
        for (auto &c : children)
          if (!c->exited) {
            waitpid(c->pid, &c->status, 0);
            c->exited = true;
          }
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (auto &c : children)
      if (c->reader.joinable())
        c->reader.join();
  };

  // A checkpoint is written beside its place and moved there once every task wrote its part,
  // so a failed job never leaves half a checkpoint where a good one stood.
  std::string partialSave =
      options.saveDir.empty() ? "" : options.saveDir + ".partial-" + std::to_string(getpid());
  if (!partialSave.empty())
    if (auto ec = llvm::sys::fs::create_directories(partialSave))
      return ir::makeError("cannot create " + partialSave + ": " + ec.message());
  std::string self = selfExecutable();
  for (const plan::Task *t : tasks) {
    std::vector<std::string> argv = {self,
                                     "task",
                                     std::string(absolutePlan),
                                     "--task",
                                     t->name(),
                                     "--coordinator",
                                     (*coordinator)->address(),
                                     "--threads",
                                     std::to_string(options.threads),
                                     "--heartbeat-timeout",
                                     std::to_string(options.heartbeatTimeout.count() / 1000.0)};
    if (!options.data.empty())
      argv.insert(argv.end(), {"--data", options.data});
    if (options.steps)
      argv.insert(argv.end(), {"--steps", std::to_string(*options.steps)});
    if (options.epochs)
      argv.insert(argv.end(), {"--epochs", std::to_string(*options.epochs)});
    if (!options.metricsOut.empty())
      argv.insert(argv.end(), {"--metrics-out", options.metricsOut});
    if (!options.variablesDir.empty())
      argv.insert(argv.end(), {"--variables-out", options.variablesDir});
    if (!options.saveDir.empty())
      argv.insert(argv.end(), {"--save", partialSave});
    if (!options.restoreDir.empty())
      argv.insert(argv.end(), {"--restore", options.restoreDir});
    if (options.quiet)
      argv.push_back("--quiet");
    if (!options.evaluate)
      argv.push_back("--no-eval");
    if (!options.launcher.empty()) {
      const plan::Host &host = plan.cluster().hosts(t->host());
      std::string command = replaceAll(replaceAll(options.launcher, "{host}", host.name()),
                                       "{address}", host.address());
      for (const std::string &a : argv)
        command += " " + shellQuote(a);
      argv = {"/bin/sh", "-c", command};
    }
    auto child = std::make_unique<Child>();
    child->task = t->name();
    if (auto e = spawn(*child, argv)) {
      children.push_back(std::move(child));
      (*coordinator)->abort("the launcher could not start every task");
      stopAll(std::chrono::seconds(10));
      return e;
    }
    children.push_back(std::move(child));
  }

  // Watch: the first task to fail, or the coordinator's verdict (a silent task), ends the job.
  std::string failure;
  for (;;) {
    bool running = false;
    for (auto &c : children) {
      if (c->exited)
        continue;
      int status = 0;
      pid_t done = waitpid(c->pid, &status, WNOHANG);
      if (done != c->pid) {
        running = true;
        continue;
      }
      c->exited = true;
      c->status = status;
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && failure.empty()) {
        if (c->reader.joinable())
          c->reader.join();
        failure = c->task + " " + describeStatus(status);
        std::string words = c->lastWords();
        if (!words.empty())
          failure += "; its last words:" + words;
      }
    }
    if (failure.empty())
      if (auto reason = (*coordinator)->abortReason())
        failure = *reason;
    if (!failure.empty() || !running)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!failure.empty()) {
    // Every task hears of the abort within a heartbeat; one that cannot (stopped, hung) is killed.
    (*coordinator)->abort(failure);
    stopAll(std::chrono::seconds(3));
    (*coordinator)->shutdown();
    if (!partialSave.empty())
      llvm::sys::fs::remove_directories(partialSave);
    return ir::makeError("the job failed: " + failure);
  }
  stopAll(std::chrono::seconds(15));
  (*coordinator)->shutdown();
  if (!partialSave.empty()) {
    std::string old = options.saveDir + ".old-" + std::to_string(getpid());
    bool hadOld = llvm::sys::fs::exists(options.saveDir);
    if (hadOld)
      if (auto ec = llvm::sys::fs::rename(options.saveDir, old))
        return ir::makeError("cannot move the old checkpoint " + options.saveDir + " aside: " +
                             ec.message() + " (the new one is in " + partialSave + ")");
    if (auto ec = llvm::sys::fs::rename(partialSave, options.saveDir))
      return ir::makeError("cannot move the checkpoint into " + options.saveDir + ": " +
                           ec.message() + " (it is in " + partialSave + ")");
    if (hadOld)
      llvm::sys::fs::remove_directories(old);
  }
  return llvm::Error::success();
}

} // namespace prism::runtime::job
