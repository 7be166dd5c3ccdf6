// The body shared by checkpoint files (a task's, runtime/train/Checkpoint.h, and a parameter
// server's shard file, runtime/ps/ShardCheckpoint.h): a head (magic line and JSON header), the
// tensors' raw bytes, then the 8-byte FNV-1a of everything before it, written atomically and
// readable by the owner alone.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/SeedRule.h"
#include "runtime/Tensor.h"
#include "support/AtomicFile.h"
#include "llvm/ADT/ArrayRef.h"

namespace prism::runtime {

// Writes the file piece by piece, the checksum taken along: the tensors are not copied into one
// buffer first (on a 100 MB checkpoint that copy, its zero-fill and its regrowth were half the
// cost of a checkpoint).
inline llvm::Error writeChecksummedFile(llvm::StringRef path, const std::string &head,
                                        llvm::ArrayRef<const Tensor *> tensors) {
  auto bytesOf = [](const Tensor *t) {
    return llvm::StringRef(static_cast<const char *>(t->raw()), static_cast<size_t>(t->numBytes()));
  };
  uint64_t sum = fnv1a64(head);
  for (const Tensor *t : tensors)
    sum = fnv1a64(bytesOf(t), sum);
  return support::writeFileAtomically(
      path,
      [&](llvm::raw_ostream &os) {
        os << head;
        for (const Tensor *t : tensors)
          os << bytesOf(t);
        os.write(reinterpret_cast<const char *>(&sum), sizeof(sum));
      },
      support::FileAccess::OwnerOnly);
}

} // namespace prism::runtime
