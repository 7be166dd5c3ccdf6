// Parsing and checking `--elastic MIN:MAX` (see ElasticRange.h).
#include "plan/ElasticRange.h"

#include "ir/Diagnostic.h"

namespace prism::plan {

std::string ElasticRange::str() const {
  return std::to_string(min) + ":" + std::to_string(max);
}

llvm::Expected<ElasticRange> parseElasticRange(llvm::StringRef text) {
  ElasticRange range;
  if (text.empty() || text == "none")
    return range;
  auto [first, second] = text.split(':');
  if (second.empty() || first.trim().getAsInteger(10, range.min) ||
      second.trim().getAsInteger(10, range.max))
    return ir::makeError("--elastic " + text.str() +
                         ": expected MIN:MAX, the fewest and most workers the job runs with "
                         "(e.g. 2:4)");
  return range;
}

llvm::Error checkElasticRange(int32_t min, int32_t max, int64_t workers) {
  if (min == 0 && max == 0)
    return llvm::Error::success();
  const std::string flag = "--elastic " + std::to_string(min) + ":" + std::to_string(max);
  if (min < 1)
    return ir::makeError(flag + ": MIN must be at least 1 worker");
  if (min > max)
    return ir::makeError(flag + ": MIN is larger than MAX");
  if (min > workers)
    return ir::makeError(flag + ": MIN is more than the cluster's " + std::to_string(workers) +
                         " workers; the job starts with them");
  if (max < workers)
    return ir::makeError(flag + ": MAX is below the cluster's " + std::to_string(workers) +
                         " workers");
  return llvm::Error::success();
}

} // namespace prism::plan
