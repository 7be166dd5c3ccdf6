// How workers wait for each other (--sync, --max-staleness, --backup-workers): the typed option,
// its checks (naming the flag and value), its place in the plan's run configuration and its
// one-line description. Defined once here for the CLI, the library, the partitioner, the plan
// verifier, the dump and the runtime.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "plan/plan.pb.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::plan {

enum class SyncMode : uint8_t {
  Sync,  // every step combines every worker's gradient (or the first N − K with backup workers)
  Async, // parameter servers apply each worker's push on arrival
};
llvm::StringRef syncModeName(SyncMode mode); // "sync", "async"
// The error names `--sync` and the text.
llvm::Expected<SyncMode> parseSyncMode(llvm::StringRef text);

struct Synchronization {
  SyncMode mode = SyncMode::Sync;
  // Async: how many steps a worker may run ahead of the slowest one; none: unbounded.
  std::optional<int64_t> maxStaleness;
  // Sync: each step applies the first workers − backupWorkers gradients to arrive (0: all).
  int64_t backupWorkers = 0;

  bool exact() const { return mode == SyncMode::Sync && backupWorkers == 0; }
};

// The values and their combinations, for a job of `workers` workers: each error names the flag
// and its value.
llvm::Error checkSynchronization(const Synchronization &sync, int64_t workers);

// run.sync (17), run.max_staleness (18: -1 unbounded), run.backup_workers (19). A synchronous
// plan without backup workers leaves them unset, as plans before version 4 did.
void writeSynchronization(const Synchronization &sync, RunConfig &run);
// Of a verified plan; fields out of range are the verifier's to report (checkSynchronization).
Synchronization readSynchronization(const RunConfig &run);
// The fields' values, checked for a plan of `workers` workers.
llvm::Error verifySynchronization(const RunConfig &run, int64_t workers);

// Whether the workers all-reduce more than the loss each step (gradients of all-reduce
// variables, replica means): then they run in lockstep whatever the synchronization.
bool allReducesGradients(const Plan &plan);

// The flag that asks for it, for messages: "--sync async", "--backup-workers 1"; empty when exact.
std::string synchronizationFlag(const Synchronization &sync);

// `prism dump`'s line: "async: parameter servers apply each push on arrival; a worker runs at
// most 2 steps ahead of the slowest", or empty for plain synchronous training.
std::string describeSynchronization(const Synchronization &sync, int64_t workers);

} // namespace prism::plan
