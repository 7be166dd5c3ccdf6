// Elastic membership's keys in the coordinator's store: the coordinator publishes each
// membership there (an epoch, its workers in rank order, why it changed), and the tasks meet
// there to re-form the worker group (runtime/job/ElasticWorker.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

namespace prism::runtime::dist {

// Set by rank 0 when training is done (the parameter servers then end): no worker joins after.
inline constexpr const char *kJobDoneKey = "job/done";

// The newest membership's epoch ("0" when the job starts).
inline constexpr const char *kMembershipEpochKey = "membership/epoch";

// Membership `epoch`'s workers, comma-separated in rank order.
inline std::string membershipKey(int64_t epoch) {
  return "membership/" + std::to_string(epoch);
}
// Why membership `epoch` began ("worker:1 was lost: it was killed by signal Killed").
inline std::string membershipReasonKey(int64_t epoch) {
  return membershipKey(epoch) + "/why";
}
// A member's steps done when it stopped for membership `epoch` ("join" for a new worker).
inline std::string membershipReadyKey(int64_t epoch, llvm::StringRef task) {
  return membershipKey(epoch) + "/ready/" + task.str();
}
// A parameter server's version when it moved to membership `epoch`.
inline std::string membershipVersionKey(int64_t epoch, llvm::StringRef task) {
  return membershipKey(epoch) + "/version/" + task.str();
}
// The Gloo group of membership `epoch` (epoch 0 is the plan's worker group).
inline std::string membershipGroup(llvm::StringRef workerGroup, int64_t epoch) {
  return epoch == 0 ? workerGroup.str() : workerGroup.str() + "/e" + std::to_string(epoch);
}

inline std::vector<std::string> splitMembers(llvm::StringRef text) {
  llvm::SmallVector<llvm::StringRef, 8> parts;
  text.split(parts, ',', -1, /*KeepEmpty=*/false);
  return std::vector<std::string>(parts.begin(), parts.end());
}

} // namespace prism::runtime::dist
