// The memory a task may use, checked before anything large is allocated: this machine's physical
// memory, or less when the user says so (`prism --memory-limit 8G`, which the tasks of a job
// inherit as PRISM_MEMORY_LIMIT). A request beyond it is an error naming what asked and how much,
// never a std::bad_alloc or the kernel's OOM killer halfway through a step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::support {

// The environment variable that carries --memory-limit to every task of a job.
constexpr const char *kMemoryLimitEnv = "PRISM_MEMORY_LIMIT";

// "123" (bytes), "64k", "512M", "8G", "1.5T" (powers of 1000, as Prism prints bytes), "8Gi"
// (powers of 1024); an optional trailing "B". The error names the text.
llvm::Expected<uint64_t> parseByteSize(llvm::StringRef text);

// This machine's physical memory.
uint64_t machineMemoryBytes();

struct MemoryLimit {
  uint64_t bytes = 0;
  bool fromUser = false; // --memory-limit (PRISM_MEMORY_LIMIT) set it below the machine's memory
  std::string describe() const; // "23.4 GB (this machine's memory)" or "8.6 GB (--memory-limit)"
};

// The limit on this machine: its memory, lowered by PRISM_MEMORY_LIMIT when set (an unreadable
// value is an error naming it).
llvm::Expected<MemoryLimit> memoryLimit();
// PRISM_MEMORY_LIMIT alone, as given (for tasks on other machines); none when unset.
llvm::Expected<std::optional<MemoryLimit>> userMemoryLimit();

// An error (ResourceExhausted) when `bytes` do not fit `limit` (default: memoryLimit()):
// "WHAT: 512.0 GB needed, more than the 23.4 GB (this machine's memory) Prism may use".
llvm::Error checkFits(double bytes, const llvm::Twine &what);
llvm::Error checkFits(double bytes, const llvm::Twine &what, const MemoryLimit &limit);

// "512 B", "636.5 kB", "25.6 MB", "1.1 TB": decimal units, one decimal.
std::string formatBytes(double bytes);

// Tunes malloc for building large IR modules, about `expectedBytes` of them: every allocation
// comes from the heap (none from fresh mappings), freed memory stays with the process, and the
// heap's first `expectedBytes` (at most 1.75 GiB) are advised to use transparent huge pages. A
// million ops allocate millions of small objects and some very large tables; with 4 KiB pages
// faulted in one by one (and every growth of a table mapped anew), a 500,000-op model spent a fifth
// of `prism partition` in the kernel. `prism partition` calls it before it loads the model.
void tuneAllocatorForLargeModules(uint64_t expectedBytes);

} // namespace prism::support
