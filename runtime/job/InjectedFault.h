// Faults a test injects into a job to prove that recovery works on real failures: a task kills
// or stops itself at a step, or dies while it writes its part of a checkpoint; or, to test that
// one slow worker does not set the pace (asynchronous training, backup workers), a worker sleeps
// before every step ("worker:2:slow@40": 40 ms). The launcher reads
// PRISM_INJECT_FAULTS ("ps:0:kill@37,worker:1:stop@80"): the k-th fault is armed in the k-th
// run of the job (the first run, then each restart), so every fault fires once. Tasks get theirs
// as `prism task --inject-fault KIND@STEP`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::job {

struct InjectedFault {
  enum class Kind {
    Kill,           // SIGKILL when `step` steps are done (a worker: before step `step`)
    Stop,           // SIGSTOP there: a task that hangs
    KillCheckpoint, // SIGKILL after writing the checkpoint of step `step`, before reporting it
    Slow,           // a worker sleeps `step` milliseconds before each of its steps
  };
  std::string task; // in a job's list; empty in a task's own
  Kind kind = Kind::Kill;
  int64_t step = 0;

  // "kill@37"; with the task: "ps:0:kill@37".
  std::string str(bool withTask = false) const;
  // Sends the fault's signal to this process (Slow: sleeps its delay).
  void fire() const;
};

// "KIND@STEP" (a task's own), KIND one of kill, stop, kill-in-checkpoint; or "slow@MS".
llvm::Expected<InjectedFault> parseInjectedFault(llvm::StringRef spec);
// "TASK:KIND@STEP,..." (the environment variable's value).
llvm::Expected<std::vector<InjectedFault>> parseInjectedFaults(llvm::StringRef spec);

// The faults of PRISM_INJECT_FAULTS; none when it is unset.
llvm::Expected<std::vector<InjectedFault>> injectedFaultsFromEnvironment();

} // namespace prism::runtime::job
