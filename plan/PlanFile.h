// Reading and writing plan files: binary protobuf, written atomically, verified on both ways.
#pragma once

#include <cstdint>

#include "plan/plan.pb.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::plan {

// The plan format this build writes, and the oldest it reads. Version 2 added
// run.accumulate (gradient accumulation); a version-1 plan runs one micro-batch per step.
// Version 3 added run.compress and run.error_feedback (an older runtime would ignore them).
// Version 4 added host_aggregation and run.local_aggregation (local aggregation per host),
// run.sync, run.max_staleness and run.backup_workers, run.elastic_min and run.elastic_max.
// Version 5 added partition_search (--partitions search): an older runtime would train with the
// first candidate without searching.
constexpr uint32_t kPlanVersion = 5;
constexpr uint32_t kOldestPlanVersion = 1;

// Whether writePlan verifies the plan first: a plan partition() just made (and verified) need
// not be verified again.
enum class PlanCheck { Verify, AlreadyVerified };

// Verifies the plan, then writes it (temporary file + rename).
llvm::Error writePlan(const Plan &plan, llvm::StringRef path, PlanCheck check = PlanCheck::Verify);
// Reads, checks the version, and verifies; every error names the file.
llvm::Expected<Plan> readPlan(llvm::StringRef path);

} // namespace prism::plan
