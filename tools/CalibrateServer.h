// The parameter server `prism calibrate` times its calls against, in a process of its own as a
// job's servers are. On this 2-core machine a row pull between two processes took 100–250 µs
// more than the same pull within one (64 and 256 rows: medians of 380–648 µs against 217–415
// µs), and a profile measured within one process made the embedding model's pulls and pushes a
// third short of a trace's (docs/simulate.md, "Calibrating").
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <sys/types.h>

#include "runtime/ps/ParameterServer.h"
#include "llvm/Support/Error.h"

namespace prism::tools {

// The server's update times, by step, in memory the calibrating process and the server's share:
// the server records each update's seconds before it answers the push that waits for it, so the
// caller reads a push's update once the push returned.
class UpdateTimes {
public:
  static constexpr int64_t kCapacity = 4096;
  // In the server's process: the next step's update took `seconds` (beyond kCapacity, dropped).
  void record(double seconds);
  // The updates recorded so far, and the seconds of one of them (0 <= step < count()).
  int64_t count() const { return count_.load(std::memory_order_acquire); }
  double at(int64_t step) const { return seconds_[step]; }

private:
  std::atomic<int64_t> count_{0};
  double seconds_[kCapacity] = {};
};

// A child process forked before the calibration starts threads or gRPC (a process forked after
// may not use gRPC), which starts a parameter server when asked and serves until its parent
// closes the pipe between them or exits.
class ServerProcess {
public:
  // The server's options, built in the child from what the parent held when it forked; the
  // apply callback records its update times in the UpdateTimes given.
  using Options = std::function<runtime::ps::ParameterServerOptions(UpdateTimes &)>;

  // Forks the child now; it waits for start().
  static llvm::Expected<std::unique_ptr<ServerProcess>> fork(Options options);
  // Stops the child and waits for it (at most 10 s, then kills it).
  ~ServerProcess();
  ServerProcess(const ServerProcess &) = delete;
  ServerProcess &operator=(const ServerProcess &) = delete;

  // Starts the server in the child; its endpoint (host:port), or the child's error. At most
  // `timeout`.
  llvm::Expected<std::string> start(std::chrono::milliseconds timeout);
  const UpdateTimes &updates() const { return *updates_; }

private:
  ServerProcess(pid_t child, int command, int reply, UpdateTimes *updates)
      : child_(child), command_(command), reply_(reply), updates_(updates) {}

  pid_t child_;
  int command_;          // the parent's end of the pipe the child reads: closing it stops the child
  int reply_;            // the parent's end of the pipe the child answers on
  UpdateTimes *updates_; // shared memory, mapped before the fork
};

// A child process forked before the calibration starts threads or gRPC, which answers each
// line the parent sends with the line `handle` returns (built in the child, where it may hold
// state: a PS client of its own), until the parent closes the pipe between them or exits. Two
// PS clients in one process pulling a 1 MB variable at once took 2.1x one pull (their calls
// share the process's gRPC threads); a second client here meets the server as a second
// worker's process does.
class ChildProcess {
public:
  using Handler = std::function<std::string(const std::string &line)>;
  // Forks the child now; `handler()` builds its handler there, before the first line.
  static llvm::Expected<std::unique_ptr<ChildProcess>> fork(std::function<Handler()> handler);
  // Stops the child and waits for it (at most 10 s, then kills it).
  ~ChildProcess();
  ChildProcess(const ChildProcess &) = delete;
  ChildProcess &operator=(const ChildProcess &) = delete;

  // Sends `line` (no newline in it); send() returns once it is written, answer() reads the
  // child's answer, waiting at most `timeout`.
  llvm::Error send(const std::string &line);
  llvm::Expected<std::string> answer(std::chrono::milliseconds timeout);

private:
  ChildProcess(pid_t child, int command, int reply)
      : child_(child), command_(command), reply_(reply) {}

  pid_t child_;
  int command_; // the parent's end of the pipe the child reads: closing it stops the child
  int reply_;   // the parent's end of the pipe the child answers on
};

} // namespace prism::tools
