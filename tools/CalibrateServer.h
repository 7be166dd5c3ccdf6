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

} // namespace prism::tools
