// `--partitions search`: the partition counts a job times before it trains, the fit of
// Parallax's t(P) = a(P - 1) + b / P + c to their step times, the choice, and a candidate's plan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plan/plan.pb.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::plan {

// --partitions: row ranges per PS table (0: by size), `auto` (predicted, plan/AutoParallel.h) or
// `search` (measured in the job).
struct PartitionsOption {
  bool automatic = false;
  bool search = false;
  int64_t count = 0; // neither automatic nor search
};
llvm::Expected<PartitionsOption> parsePartitions(llvm::StringRef text);

// The candidates when --search-partitions is not given (capped, see searchCandidates).
inline constexpr int64_t kDefaultSearchPartitions[] = {1, 2, 4, 8};

// How the job searches (--search-partitions, --search-steps).
struct PartitionSearchOptions {
  std::vector<int64_t> candidates; // ascending, distinct; empty: kDefaultSearchPartitions
  int64_t warmupSteps = 2;         // untimed steps of each candidate
  int64_t timedSteps = 5;          // timed steps of each candidate (--search-steps)
};

// --search-partitions "1,2,4": positive, distinct counts (returned ascending).
llvm::Expected<std::vector<int64_t>> parseSearchPartitions(llvm::StringRef text);

// The counts to compile: the defaults up to `limit`, or the requested ones, each at most
// `limit` (an error names --search-partitions and why: `limitReason`).
llvm::Expected<std::vector<int64_t>> searchCandidates(const PartitionSearchOptions &options,
                                                      int64_t limit, llvm::StringRef limitReason);

// t(P) = a (P - 1) + b / P + c: a per-partition overhead, work split P ways, the rest.
struct PartitionCurve {
  double a = 0, b = 0, c = 0;
  double at(int64_t partitions) const;
};

// Non-negative least squares of the curve to (partitions[i], seconds[i]); with fewer than three
// distinct counts the curve is not determined, and none is returned.
std::optional<PartitionCurve> fitPartitionCurve(llvm::ArrayRef<int64_t> partitions,
                                                llvm::ArrayRef<double> seconds);

// The index of the candidate to train with: the fitted curve's least value over the candidates,
// or the fastest measured when there is no curve. `partitions` is not empty.
size_t choosePartitions(llvm::ArrayRef<int64_t> partitions, llvm::ArrayRef<double> seconds,
                        const std::optional<PartitionCurve> &curve);

// The middle of `values` (the mean of the middle two for an even count); 0 when empty.
double medianOf(std::vector<double> values);

// Records `compiled` (a plan made with --partitions `partitions`) as a candidate of `search`:
// its PS-held variables' shards and its programs (the PS tasks' hold their rows; the worker
// program's variables name their shards).
void addCandidate(const Plan &compiled, int64_t partitions, PartitionSearch &search);

// A candidate keeps what the count changes (shards, programs); the collective groups must not
// change: an internal error when `compiled` (made with `partitions`) has other groups than
// `first`.
llvm::Error checkSameGroups(const Plan &first, const Plan &compiled, int64_t partitions);

// `plan` as if compiled with its candidate `index`: that candidate's shards and programs, no
// search.
Plan candidatePlan(const Plan &plan, size_t index);

// The candidates' counts, "1, 2, 4".
std::string candidateCounts(const PartitionSearch &search);

} // namespace prism::plan
