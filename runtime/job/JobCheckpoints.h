// Periodic checkpoints of a job: which tasks write a part (worker:0, whose state every worker
// shares, and every parameter server) and how each tells the launcher it wrote one.
#pragma once

#include <string>
#include <vector>

#include "plan/plan.pb.h"
#include "llvm/ADT/StringRef.h"

namespace prism::runtime::job {

// The coordinator key a task sets to the step of the newest checkpoint part it wrote.
inline std::string checkpointReportKey(llvm::StringRef task) {
  return "checkpoint/" + task.str();
}

inline std::vector<std::string> checkpointWriters(const plan::Plan &plan) {
  std::vector<std::string> writers;
  for (const plan::Task &t : plan.cluster().tasks())
    if ((t.role() == "worker" && t.index() == 0) || t.role() == "ps")
      writers.push_back(t.name());
  return writers;
}

} // namespace prism::runtime::job
