// Elastic membership's range of workers (`--elastic MIN:MAX`, run.elastic_min/max): parsing and
// the checks every entry point (the CLI, the partitioner, the plan verifier) shares.
#pragma once

#include <cstdint>
#include <string>

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::plan {

struct ElasticRange {
  int32_t min = 0, max = 0; // both 0: not elastic
  bool enabled() const { return max > 0; }
  std::string str() const; // "2:3"
};

// "MIN:MAX" (or "none"/empty: off); errors name `--elastic TEXT`.
llvm::Expected<ElasticRange> parseElasticRange(llvm::StringRef text);

// 1 <= MIN <= workers <= MAX, or both 0; errors name `--elastic MIN:MAX` and the bound.
llvm::Error checkElasticRange(int32_t min, int32_t max, int64_t workers);

} // namespace prism::plan
