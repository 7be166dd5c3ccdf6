// Memory limits: the machine's memory, --memory-limit, and the check before large allocations.
#include "support/Memory.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "ir/Diagnostic.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::support {

llvm::Expected<uint64_t> parseByteSize(llvm::StringRef text) {
  llvm::StringRef rest = text.trim();
  auto bad = [&]() {
    return ir::makeError("bad byte size '" + text +
                         "': expected a number of bytes with an optional k, M, G or T (powers "
                         "of 1000) or Ki, Mi, Gi or Ti (powers of 1024), e.g. 8G");
  };
  rest.consume_back("B");
  double base = rest.consume_back("i") ? 1024.0 : 1000.0;
  double unit = 1;
  if (!rest.empty()) {
    const char prefixes[] = "kMGT";
    for (int i = 0; i < 4; ++i)
      if (std::tolower(static_cast<unsigned char>(rest.back())) ==
          std::tolower(static_cast<unsigned char>(prefixes[i])))
        unit = std::pow(base, i + 1);
    if (unit != 1)
      rest = rest.drop_back();
    else if (base == 1024.0)
      return bad(); // "i" without a prefix
  }
  double value;
  if (rest.empty() || rest.getAsDouble(value) || !(value > 0) || !std::isfinite(value))
    return bad();
  double bytes = value * unit;
  if (bytes >= 1.8e19)
    return bad();
  return static_cast<uint64_t>(bytes);
}

uint64_t machineMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || pageSize <= 0)
    return UINT64_MAX;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageSize);
}

std::string MemoryLimit::describe() const {
  return formatBytes(static_cast<double>(bytes)) +
         (fromUser ? " (--memory-limit)" : " (this machine's memory)");
}

llvm::Expected<std::optional<MemoryLimit>> userMemoryLimit() {
  const char *env = std::getenv(kMemoryLimitEnv);
  if (!env || !*env)
    return std::nullopt;
  auto bytes = parseByteSize(env);
  if (!bytes)
    return ir::withContext(bytes.takeError(), llvm::Twine(kMemoryLimitEnv));
  MemoryLimit limit;
  limit.bytes = *bytes;
  limit.fromUser = true;
  return limit;
}

llvm::Expected<MemoryLimit> memoryLimit() {
  MemoryLimit machine;
  machine.bytes = machineMemoryBytes();
  auto user = userMemoryLimit();
  if (!user)
    return user.takeError();
  return *user && (*user)->bytes < machine.bytes ? **user : machine;
}

llvm::Error checkFits(double bytes, const llvm::Twine &what, const MemoryLimit &limit) {
  if (bytes <= static_cast<double>(limit.bytes))
    return llvm::Error::success();
  return ir::makeError(ir::ErrorCode::ResourceExhausted, what + ": " + formatBytes(bytes) +
                                                             " needed, more than the " +
                                                             limit.describe() + " Prism may use");
}

llvm::Error checkFits(double bytes, const llvm::Twine &what) {
  auto limit = memoryLimit();
  if (!limit)
    return limit.takeError();
  return checkFits(bytes, what, *limit);
}

std::string formatBytes(double bytes) {
  const char *units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  int u = 0;
  for (; bytes >= 1000 && u < 5; ++u)
    bytes /= 1000;
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format(u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return s;
}

void tuneAllocatorForLargeModules(uint64_t expectedBytes) {
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  mallopt(M_TOP_PAD, 64 << 20);
  // The heap grows to `expectedBytes` once, advised for huge pages, and is handed back to malloc
  // (not to the system): later allocations carve it. Nothing is touched here, so nothing is
  // committed before it is used.
  constexpr uintptr_t kHugePage = 2 << 20;
  if (expectedBytes < 2 * kHugePage || expectedBytes > machineMemoryBytes() / 2)
    return;
  // Below the trim threshold (an int), or freeing the block would hand it back to the system
  // and the advice with it.
  expectedBytes = std::min<uint64_t>(expectedBytes, (uint64_t(1) << 31) - (256 << 20));
  void *block = std::malloc(static_cast<size_t>(expectedBytes));
  if (!block)
    return;
  uintptr_t begin = (reinterpret_cast<uintptr_t>(block) + kHugePage - 1) & ~(kHugePage - 1);
  uintptr_t end = (reinterpret_cast<uintptr_t>(block) + expectedBytes) & ~(kHugePage - 1);
  if (end > begin)
    madvise(reinterpret_cast<void *>(begin), end - begin, MADV_HUGEPAGE);
  std::free(block);
}

} // namespace prism::support
