// The synchronization option: names, checks, the run configuration's fields, the dump's line.
#include "plan/Synchronization.h"

#include "ir/Collectives.h"
#include "ir/Diagnostic.h"

namespace prism::plan {

llvm::StringRef syncModeName(SyncMode mode) {
  return mode == SyncMode::Async ? "async" : "sync";
}

llvm::Expected<SyncMode> parseSyncMode(llvm::StringRef text) {
  for (SyncMode mode : {SyncMode::Sync, SyncMode::Async})
    if (text == syncModeName(mode))
      return mode;
  return ir::makeError("option --sync: expected sync or async, got '" + text + "'");
}

llvm::Error checkSynchronization(const Synchronization &sync, int64_t workers) {
  if (sync.maxStaleness) {
    const std::string flag = "option --max-staleness " + std::to_string(*sync.maxStaleness);
    if (*sync.maxStaleness < 0)
      return ir::makeError(flag + ": expected a number of steps, 0 or more");
    if (sync.mode != SyncMode::Async)
      return ir::makeError(flag + ": it bounds how far asynchronous workers run apart; it needs "
                                  "--sync async");
  }
  if (sync.backupWorkers == 0)
    return llvm::Error::success();
  const std::string flag = "option --backup-workers " + std::to_string(sync.backupWorkers);
  if (sync.backupWorkers < 0)
    return ir::makeError(flag + ": expected a number of workers, 0 or more");
  if (sync.mode == SyncMode::Async)
    return ir::makeError(flag + ": backup workers make synchronous steps wait for fewer workers; "
                                "--sync async waits for none (leave out one of them)");
  if (sync.backupWorkers >= workers)
    return ir::makeError(flag +
                         ": each step needs the gradient of at least one worker, and the "
                         "job has " +
                         std::to_string(workers) + " worker" + (workers == 1 ? "" : "s") +
                         (workers > 1 ? " (use at most " + std::to_string(workers - 1) + ")"
                                      : " (backup workers need at least 2)"));
  return llvm::Error::success();
}

void writeSynchronization(const Synchronization &sync, RunConfig &run) {
  if (sync.exact())
    return;
  run.set_sync(syncModeName(sync.mode).str());
  if (sync.mode == SyncMode::Async)
    run.set_max_staleness(sync.maxStaleness.value_or(-1));
  run.set_backup_workers(static_cast<int32_t>(sync.backupWorkers));
}

Synchronization readSynchronization(const RunConfig &run) {
  Synchronization sync;
  if (run.sync() == syncModeName(SyncMode::Async)) {
    sync.mode = SyncMode::Async;
    if (run.max_staleness() >= 0)
      sync.maxStaleness = run.max_staleness();
  }
  sync.backupWorkers = run.backup_workers();
  return sync;
}

llvm::Error verifySynchronization(const RunConfig &run, int64_t workers) {
  if (!run.sync().empty() && run.sync() != syncModeName(SyncMode::Sync) &&
      run.sync() != syncModeName(SyncMode::Async))
    return ir::makeError("run.sync: expected sync or async (or empty), got '" + run.sync() + "'");
  const bool async = run.sync() == syncModeName(SyncMode::Async);
  if (!async && run.max_staleness() != 0)
    return ir::makeError("run.max_staleness: set in a plan whose run.sync is not async");
  if (async && run.max_staleness() < -1)
    return ir::makeError("run.max_staleness: expected -1 (unbounded) or 0 or more, got " +
                         std::to_string(run.max_staleness()));
  if (run.backup_workers() < 0 ||
      (run.backup_workers() > 0 && (async || run.backup_workers() >= workers)))
    return ir::makeError("run.backup_workers: " + std::to_string(run.backup_workers()) +
                         " for a synchronous plan of " + std::to_string(workers) +
                         " workers (expected 0 to workers - 1, and 0 with run.sync async)");
  return llvm::Error::success();
}

bool allReducesGradients(const Plan &plan) {
  for (const CollectiveGroup &group : plan.groups())
    for (const Bucket &bucket : group.buckets())
      if (bucket.id() != ir::kLossBucket)
        return true;
  return false;
}

std::string synchronizationFlag(const Synchronization &sync) {
  if (sync.mode == SyncMode::Async)
    return "--sync async";
  return sync.backupWorkers > 0 ? "--backup-workers " + std::to_string(sync.backupWorkers) : "";
}

std::string describeSynchronization(const Synchronization &sync, int64_t workers) {
  if (sync.mode == SyncMode::Async)
    return "async: parameter servers apply each worker's push on arrival (all-reduce variables "
           "stay synchronous); " +
           (sync.maxStaleness
                ? "a worker runs at most " + std::to_string(*sync.maxStaleness) + " step" +
                      (*sync.maxStaleness == 1 ? "" : "s") + " ahead of the slowest"
                : std::string("no bound on how far workers run apart"));
  if (sync.backupWorkers > 0)
    return "sync with " + std::to_string(sync.backupWorkers) + " backup worker" +
           (sync.backupWorkers == 1 ? "" : "s") + ": each step applies the first " +
           std::to_string(workers - sync.backupWorkers) + " of " + std::to_string(workers) +
           " workers' gradients, late ones are dropped; every trained variable is on the "
           "parameter servers (a ring all-reduce needs every worker)";
  return "";
}

} // namespace prism::plan
