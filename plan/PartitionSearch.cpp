// --partitions search: parsing its options, fitting and choosing, candidates in the plan (see
// PartitionSearch.h).
#include "plan/PartitionSearch.h"

#include <algorithm>
#include <set>

#include "ir/Diagnostic.h"
#include "plan/ProfileFit.h"

namespace prism::plan {

llvm::Expected<PartitionsOption> parsePartitions(llvm::StringRef text) {
  PartitionsOption result;
  result.automatic = text.trim() == "auto";
  result.search = text.trim() == "search";
  if (result.automatic || result.search)
    return result;
  if (text.trim().getAsInteger(10, result.count) || result.count < 0)
    return ir::makeError("option --partitions: expected auto, search, or 0 or more row ranges "
                         "per PS table (0: by size), got '" +
                         text.str() + "'");
  return result;
}

llvm::Expected<std::vector<int64_t>> parseSearchPartitions(llvm::StringRef text) {
  llvm::SmallVector<llvm::StringRef, 8> parts;
  text.split(parts, ',');
  std::set<int64_t> counts;
  for (llvm::StringRef part : parts) {
    int64_t count = 0;
    if (part.trim().getAsInteger(10, count) || count < 1)
      return ir::makeError("option --search-partitions: expected partition counts of at least 1 "
                           "separated by commas (e.g. 1,2,4,8), got '" +
                           text.str() + "'");
    if (!counts.insert(count).second)
      return ir::makeError("option --search-partitions: " + std::to_string(count) +
                           " is named twice in '" + text.str() + "'");
  }
  return std::vector<int64_t>(counts.begin(), counts.end());
}

llvm::Expected<std::vector<int64_t>> searchCandidates(const PartitionSearchOptions &options,
                                                      int64_t limit, llvm::StringRef limitReason) {
  std::vector<int64_t> result;
  if (options.candidates.empty()) {
    for (int64_t count : kDefaultSearchPartitions)
      if (count <= limit)
        result.push_back(count);
    return result;
  }
  for (int64_t count : options.candidates)
    if (count > limit)
      return ir::makeError("option --search-partitions: " + std::to_string(count) +
                           " partitions is more than " + std::to_string(limit) + " (" +
                           limitReason.str() + ")");
  return options.candidates;
}

double PartitionCurve::at(int64_t partitions) const {
  const double p = static_cast<double>(partitions);
  return a * (p - 1) + b / p + c;
}

std::optional<PartitionCurve> fitPartitionCurve(llvm::ArrayRef<int64_t> partitions,
                                                llvm::ArrayRef<double> seconds) {
  if (std::set<int64_t>(partitions.begin(), partitions.end()).size() < 3)
    return std::nullopt;
  // The profile fit's columns (1, flops, bytes) carry the curve's (1, P - 1, 1 / P).
  std::vector<TimingSample> samples;
  for (size_t i = 0; i < partitions.size(); ++i) {
    const double p = static_cast<double>(partitions[i]);
    samples.push_back({p - 1, 1 / p, seconds[i]});
  }
  const std::array<double, 3> c = fitNonNegative(samples);
  return PartitionCurve{c[1], c[2], c[0]};
}

size_t choosePartitions(llvm::ArrayRef<int64_t> partitions, llvm::ArrayRef<double> seconds,
                        const std::optional<PartitionCurve> &curve) {
  size_t best = 0;
  for (size_t i = 1; i < partitions.size(); ++i) {
    const double time = curve ? curve->at(partitions[i]) : seconds[i];
    const double bestTime = curve ? curve->at(partitions[best]) : seconds[best];
    if (time < bestTime)
      best = i;
  }
  return best;
}

double medianOf(std::vector<double> values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

llvm::Error checkSameGroups(const Plan &first, const Plan &compiled, int64_t partitions) {
  bool same = first.groups_size() == compiled.groups_size();
  for (int i = 0; same && i < first.groups_size(); ++i)
    same = first.groups(i).SerializeAsString() == compiled.groups(i).SerializeAsString();
  if (!same)
    return ir::makeError(ir::ErrorCode::Internal,
                         "--partitions search: the collective groups with " +
                             std::to_string(partitions) +
                             " partitions differ from the first candidate's (the count changes "
                             "only where variables live)");
  return llvm::Error::success();
}

void addCandidate(const Plan &compiled, int64_t partitions, PartitionSearch &search) {
  PartitionCandidate *candidate = search.add_candidates();
  candidate->set_partitions(partitions);
  for (const Variable &v : compiled.variables()) {
    if (v.shards_size() == 0)
      continue;
    CandidateShards *shards = candidate->add_variables();
    shards->set_variable(v.name());
    *shards->mutable_shards() = v.shards();
  }
  *candidate->mutable_programs() = compiled.programs();
}

Plan candidatePlan(const Plan &plan, size_t index) {
  Plan result = plan;
  result.clear_partition_search();
  const PartitionCandidate &candidate = plan.partition_search().candidates(static_cast<int>(index));
  for (const CandidateShards &shards : candidate.variables())
    for (Variable &v : *result.mutable_variables())
      if (v.name() == shards.variable())
        *v.mutable_shards() = shards.shards();
  *result.mutable_programs() = candidate.programs();
  return result;
}

std::string candidateCounts(const PartitionSearch &search) {
  std::string text;
  for (const PartitionCandidate &candidate : search.candidates())
    text += (text.empty() ? "" : ", ") + std::to_string(candidate.partitions());
  return text;
}

} // namespace prism::plan
