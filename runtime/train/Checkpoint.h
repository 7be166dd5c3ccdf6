// Checkpoints: every variable (weights and optimizer state) and the training position, written
// atomically (a temporary file renamed into place), so a crash mid-write never leaves a broken
// checkpoint and a restored run continues bit for bit.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "runtime/Tensor.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::train {

// Where training stands: the next step to run.
struct TrainingPosition {
  int64_t globalStep = 0; // steps done
  int64_t epoch = 0;      // the epoch of the next step
  int64_t batchInEpoch = 0;
  uint64_t seed = 0;
  int64_t batchSize = 0;
  std::string model; // the model's name, checked on restore
  std::string data;  // the data spec, checked on restore
};

struct Checkpoint {
  TrainingPosition position;
  std::map<std::string, Tensor> variables;
};

// The checkpoint file inside a checkpoint directory.
std::string checkpointPath(llvm::StringRef dir);

// Writes DIR/checkpoint.prism (creating DIR) through a temporary file and a rename.
llvm::Error saveCheckpoint(llvm::StringRef dir, const TrainingPosition &position,
                           const llvm::StringMap<Tensor> &variables);
// Reads and validates DIR/checkpoint.prism; a truncated or corrupt file is an error naming it.
llvm::Expected<Checkpoint> loadCheckpoint(llvm::StringRef dir);

} // namespace prism::runtime::train
