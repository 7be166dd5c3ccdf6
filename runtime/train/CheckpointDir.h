// Periodic checkpoints (`--checkpoint-dir DIR --checkpoint-every N`): DIR holds one directory
// per checkpoint, named by its step (DIR/step-00000040). A checkpoint is written into
// DIR/step-00000040.partial and renamed into place once every part of it is written (one
// device: its checkpoint file; a job: worker:0's state and every PS shard), so a directory
// without the suffix is always complete. The newest `keep` complete ones are kept.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::train {

struct PeriodicCheckpoints {
  std::string dir;   // empty: none
  int64_t every = 0; // steps between checkpoints
  int64_t keep = 3;  // complete checkpoints kept, the newest
};

// An error naming the flag when the settings are unusable (every < 1, keep < 1, every without
// a directory).
llvm::Error checkPeriodicCheckpoints(const PeriodicCheckpoints &checkpoints);

// DIR/step-00000040, and the same with ".partial" while it is written.
std::string checkpointStepDir(llvm::StringRef dir, int64_t step);
std::string partialCheckpointDir(llvm::StringRef dir, int64_t step);

struct CompleteCheckpoint {
  int64_t step = 0;
  std::string path;
};

// The newest complete checkpoint in `dir`; none when `dir` does not exist or holds none.
llvm::Expected<std::optional<CompleteCheckpoint>> latestCheckpoint(llvm::StringRef dir);

// Renames the partial checkpoint of `step` into place, then removes the complete checkpoints
// beyond the newest `keep` and the partial ones of earlier steps.
llvm::Error completeCheckpoint(llvm::StringRef dir, int64_t step, int64_t keep);

// Removes every partial checkpoint in `dir` (after a failure: their writers are gone).
void removePartialCheckpoints(llvm::StringRef dir);

} // namespace prism::runtime::train
