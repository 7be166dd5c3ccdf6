// What one communication op moves per step, written once for the estimate (Estimate.cpp) and
// for the dump's per-op view (PlanDump.cpp); docs/plan-dump.md gives the table.
#pragma once

#include <cstdint>
#include <optional>

#include "plan/plan.pb.h"
#include "llvm/ADT/StringRef.h"

namespace prism::plan {

// Bytes of one row index on the wire.
constexpr double kIndexBytes = 8;

// A variable's rows (its first dimension; 1 for a scalar), and the bytes of one row.
double tableRows(const Variable &v);
double rowBytes(const Variable &v);
// The part of `v`'s rows that `shard` holds, and its bytes.
double shardFraction(const Variable &v, const Shard &shard);
double shardBytes(const Variable &v, const Shard &shard);

// A ring all-reduce of `bytes` over `ranks` tasks: what each rank sends to the next (and
// receives from the previous) per step, 2(N−1)/N of the bytes; nothing for one rank.
double ringAllReduceBytes(double bytes, int64_t ranks);

// The worker ops that talk to parameter servers.
enum class PsTransfer { Pull, Push, PullRows, PushRows };
// ps_pull, ps_push, ps_pull_rows, ps_push_rows; none for other ops.
std::optional<PsTransfer> psTransferOf(llvm::StringRef op);
bool movesRows(PsTransfer transfer);

// What one worker's PS op moves to and from one shard's task per step. `rows` is the distinct
// rows the op moves in all (row ops only); the shard takes its fraction of them.
struct ShardTraffic {
  double toPs = 0;
  double fromPs = 0;
};
ShardTraffic psShardTraffic(PsTransfer transfer, const Variable &v, const Shard &shard,
                            double rows = 0);

// How often a worker runs the op per optimizer step: a `ps_pull` runs once per micro-batch with
// gradient accumulation (run.accumulate); row pulls count their micro-batches in their rows.
double timesPerStep(const Plan &plan, PsTransfer transfer);

} // namespace prism::plan
