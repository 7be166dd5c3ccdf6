// A parameter server's checkpoint file: its shards (with their row ranges) and its version.
// Layout: the magic line `PRISM-PS-CHECKPOINT 1\n`, a JSON header line (version and, per shard,
// name, dtype, rows, full shape, byte offset and size), the raw shard bytes, then an 8-byte
// FNV-1a checksum of everything before it.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "runtime/Tensor.h"
#include "runtime/exec/Executor.h"
#include "runtime/ps/PsShard.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::ps {

struct ShardCheckpoint {
  int64_t version = 0;
  std::map<std::string, Tensor> shards; // by variable name, of the shard's shape
};

// Writes `shards` (their values taken from `variables`) and `version` to `path` atomically.
llvm::Error writeShardCheckpoint(llvm::StringRef path, int64_t version,
                                 llvm::ArrayRef<PsShard> shards,
                                 const runtime::VariableStore &variables);
// Reads `path`, which must hold exactly `shards` (same names, rows, shapes and dtypes); a
// truncated, corrupt or mismatched file is an error naming it.
llvm::Expected<ShardCheckpoint> readShardCheckpoint(llvm::StringRef path,
                                                    llvm::ArrayRef<PsShard> shards);

} // namespace prism::runtime::ps
