// A calibration's parameter server in a child process (CalibrateServer.h).
#include "tools/CalibrateServer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <optional>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ir/Diagnostic.h"

namespace prism::tools {
namespace {

std::string systemError(const std::string &what) {
  return what + ": " + std::strerror(errno);
}

bool writeAll(int fd, const std::string &text) {
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Reads one byte; false at the end of the pipe (its writer closed it) or on an error.
bool readByte(int fd) {
  for (;;) {
    char c = 0;
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR)
      continue;
    return n == 1;
  }
}

// A line from `fd` up to its newline (left out), or none at the end of the pipe or on an error.
std::optional<std::string> readLine(int fd) {
  std::string line;
  for (;;) {
    char c = 0;
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n != 1)
      return std::nullopt;
    if (c == '\n')
      return line;
    line += c;
  }
}

// A line from `fd` within `timeout` (its newline left out); `what` names the other side in
// errors.
llvm::Expected<std::string> readLine(int fd, std::chrono::milliseconds timeout,
                                     const std::string &what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string line;
  while (line.empty() || line.back() != '\n') {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return ir::makeError(what + " did not answer within " + std::to_string(timeout.count()) +
                           " ms");
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready < 0)
      return ir::makeError(systemError("waiting for " + what));
    if (ready == 0)
      continue;
    // One byte at a time: nothing past the line is taken from the pipe.
    char c = 0;
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return ir::makeError(what + " exited before it answered");
    line += c;
  }
  line.pop_back();
  return line;
}

// In a child just forked from `parent`: killed when the parent dies, its stdin and stdout
// /dev/null (not the caller's), and no file of the parent's open but stderr and its own pipes'
// ends `command` and `reply` (a pipe end of another child's held here would keep that child from
// seeing its pipe close).
void becomeChild(pid_t parent, int command, int reply) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) // the parent left before the line above
    ::_exit(1);
  const int highest = std::max(command, reply);
  ::close_range(static_cast<unsigned>(highest) + 1, ~0U, 0);
  for (int fd = STDERR_FILENO + 1; fd < highest; ++fd)
    if (fd != command && fd != reply)
      ::close(fd);
  if (const int null = ::open("/dev/null", O_RDWR); null >= 0) {
    ::dup2(null, STDIN_FILENO);
    ::dup2(null, STDOUT_FILENO);
    ::close(null);
  }
}

// The child: waits for the parent's word, starts the server, answers "ok ENDPOINT" or "error
// MESSAGE" on one line, and serves until the parent closes `command` (or exits: then the kernel
// closes it, and kills this process besides). Leaves by _exit, running none of the parent's
// destructors or exit handlers.
[[noreturn]] void serve(pid_t parent, int command, int reply, UpdateTimes &updates,
                        const ServerProcess::Options &options) {
  becomeChild(parent, command, reply);
  if (!readByte(command))
    ::_exit(0);
  auto server = runtime::ps::ParameterServer::start(options(updates));
  std::string line =
      server ? "ok " + (*server)->endpoint() : "error " + llvm::toString(server.takeError());
  std::replace(line.begin(), line.end(), '\n', ' ');
  if (!writeAll(reply, line + "\n") || !server)
    ::_exit(1);
  while (readByte(command)) {
  }
  ::_exit(0);
}

// Closes the child's command pipe (it leaves at its end) and waits for it, at most 10 s, then
// kills it; closes the reply pipe.
void stopChild(pid_t child, int command, int reply) {
  ::close(command);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(child, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (done == 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
  }
  ::close(reply);
}

// Closes the ends of both pipes that are open (-1: not).
void closePipes(const int command[2], const int reply[2]) {
  for (int fd : {command[0], command[1], reply[0], reply[1]})
    if (fd >= 0)
      ::close(fd);
}

// Two close-on-exec pipes: `command` (the parent writes, the child reads) and `reply`; an error
// closes what was opened.
llvm::Error openPipes(int command[2], int reply[2], const std::string &what) {
  if (::pipe2(command, O_CLOEXEC) == 0 && ::pipe2(reply, O_CLOEXEC) == 0)
    return llvm::Error::success();
  llvm::Error error = ir::makeError(systemError(what));
  closePipes(command, reply);
  return error;
}

} // namespace

llvm::Expected<std::unique_ptr<ChildProcess>> ChildProcess::fork(std::function<Handler()> handler) {
  int command[2] = {-1, -1}, reply[2] = {-1, -1};
  if (auto e = openPipes(command, reply, "a pipe to a calibration's child process"))
    return std::move(e);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) {
    llvm::Error error = ir::makeError(systemError("starting a calibration's child process"));
    closePipes(command, reply);
    return std::move(error);
  }
  if (child == 0) {
    ::close(command[1]);
    ::close(reply[0]);
    becomeChild(parent, command[0], reply[1]);
    Handler handle = handler();
    while (auto line = readLine(command[0])) {
      std::string answer = handle(*line);
      std::replace(answer.begin(), answer.end(), '\n', ' ');
      if (!writeAll(reply[1], answer + "\n"))
        ::_exit(1);
    }
    ::_exit(0);
  }
  ::close(command[0]);
  ::close(reply[1]);
  return std::unique_ptr<ChildProcess>(new ChildProcess(child, command[1], reply[0]));
}

ChildProcess::~ChildProcess() {
  stopChild(child_, command_, reply_);
}

llvm::Error ChildProcess::send(const std::string &line) {
  if (!writeAll(command_, line + "\n"))
    return ir::makeError(systemError("writing to a calibration's child process"));
  return llvm::Error::success();
}

llvm::Expected<std::string> ChildProcess::answer(std::chrono::milliseconds timeout) {
  return readLine(reply_, timeout, "a calibration's child process");
}

void UpdateTimes::record(double seconds) {
  const int64_t n = count_.load(std::memory_order_relaxed);
  if (n >= kCapacity)
    return;
  seconds_[n] = seconds;
  count_.store(n + 1, std::memory_order_release);
}

llvm::Expected<std::unique_ptr<ServerProcess>> ServerProcess::fork(Options options) {
  // Close-on-exec: a process the calibration starts later (a link's rank) holds no end, so the
  // child sees the end of `command` when this process closes it.
  int command[2] = {-1, -1}, reply[2] = {-1, -1};
  void *shared = MAP_FAILED;
  auto failed = [&](const std::string &what) -> llvm::Error {
    llvm::Error error = ir::makeError(systemError(what));
    closePipes(command, reply);
    if (shared != MAP_FAILED)
      ::munmap(shared, sizeof(UpdateTimes));
    return error;
  };
  if (auto e = openPipes(command, reply, "a pipe to the calibration's parameter server"))
    return std::move(e);
  shared = ::mmap(nullptr, sizeof(UpdateTimes), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                  -1, 0);
  if (shared == MAP_FAILED)
    return failed("mapping the server's update times");
  auto *updates = new (shared) UpdateTimes();
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0)
    return failed("starting the calibration's parameter server");
  if (child == 0) {
    ::close(command[1]);
    ::close(reply[0]);
    serve(parent, command[0], reply[1], *updates, options);
  }
  ::close(command[0]);
  ::close(reply[1]);
  return std::unique_ptr<ServerProcess>(new ServerProcess(child, command[1], reply[0], updates));
}

ServerProcess::~ServerProcess() {
  stopChild(child_, command_, reply_);
  updates_->~UpdateTimes();
  ::munmap(updates_, sizeof(UpdateTimes));
}

llvm::Expected<std::string> ServerProcess::start(std::chrono::milliseconds timeout) {
  const std::string what = "the calibration's parameter server";
  if (!writeAll(command_, "s"))
    return ir::makeError(systemError("starting " + what));
  auto read = readLine(reply_, timeout, what);
  if (!read)
    return read.takeError();
  const std::string &line = *read;
  if (line.rfind("ok ", 0) == 0)
    return line.substr(3);
  return ir::makeError(what + ": " + (line.rfind("error ", 0) == 0 ? line.substr(6) : line));
}

} // namespace prism::tools
