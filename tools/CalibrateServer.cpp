// A calibration's parameter server in a child process (CalibrateServer.h).
#include "tools/CalibrateServer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
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

// The child: waits for the parent's word, starts the server, answers "ok ENDPOINT" or "error
// MESSAGE" on one line, and serves until the parent closes `command` (or exits: then the kernel
// closes it, and kills this process besides). Leaves by _exit, running none of the parent's
// destructors or exit handlers.
[[noreturn]] void serve(pid_t parent, int command, int reply, UpdateTimes &updates,
                        const ServerProcess::Options &options) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) // the parent left before the line above
    ::_exit(1);
  if (const int null = ::open("/dev/null", O_RDWR); null >= 0) { // not the caller's stdout
    ::dup2(null, STDIN_FILENO);
    ::dup2(null, STDOUT_FILENO);
    ::close(null);
  }
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

} // namespace

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
    for (int fd : {command[0], command[1], reply[0], reply[1]})
      if (fd >= 0)
        ::close(fd);
    if (shared != MAP_FAILED)
      ::munmap(shared, sizeof(UpdateTimes));
    return error;
  };
  if (::pipe2(command, O_CLOEXEC) != 0 || ::pipe2(reply, O_CLOEXEC) != 0)
    return failed("a pipe to the calibration's parameter server");
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
  ::close(command_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(child_, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (done == 0) {
    ::kill(child_, SIGKILL);
    ::waitpid(child_, &status, 0);
  }
  ::close(reply_);
  updates_->~UpdateTimes();
  ::munmap(updates_, sizeof(UpdateTimes));
}

llvm::Expected<std::string> ServerProcess::start(std::chrono::milliseconds timeout) {
  const std::string what = "the calibration's parameter server";
  if (!writeAll(command_, "s"))
    return ir::makeError(systemError("starting " + what));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string line;
  while (line.empty() || line.back() != '\n') {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return ir::makeError(what + " did not answer within " + std::to_string(timeout.count()) +
                           " ms");
    pollfd p{reply_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready < 0)
      return ir::makeError(systemError("waiting for " + what));
    if (ready == 0)
      continue;
    char buffer[512];
    const ssize_t n = ::read(reply_, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return ir::makeError(what + " exited before it started");
    line.append(buffer, static_cast<size_t>(n));
  }
  line.pop_back();
  if (line.rfind("ok ", 0) == 0)
    return line.substr(3);
  return ir::makeError(what + ": " + (line.rfind("error ", 0) == 0 ? line.substr(6) : line));
}

} // namespace prism::tools
