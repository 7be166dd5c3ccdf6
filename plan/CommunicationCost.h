// What one communication op moves per step, written once for the estimate (Estimate.cpp) and
// for the dump's per-op view (PlanDump.cpp); docs/plan-dump.md gives the table.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/Precision.h"
#include "plan/plan.pb.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::plan {

// Bytes of one row index on the wire.
constexpr double kIndexBytes = 8;

// A variable's rows (its first dimension; 1 for a scalar), and the bytes of one row.
double tableRows(const Variable &v);
double rowBytes(const Variable &v);
// The part of `v`'s rows that `shard` holds, and its bytes.
double shardFraction(const Variable &v, const Shard &shard);
double shardBytes(const Variable &v, const Shard &shard);
// The part of a step's distinct rows of `v` that `shard` holds: by `rowShares` (the rows' shares
// of equal ranges of the table's rows, TableEstimate.row_shares; uniform within a range) where
// given, else its part of the table's rows (shardFraction).
double shardRowFraction(const Variable &v, const Shard &shard, llvm::ArrayRef<double> rowShares);
// A table estimate's row_shares, as shardRowFraction takes them.
inline llvm::ArrayRef<double> rowSharesOf(const TableEstimate &t) {
  return {t.row_shares().data(), static_cast<size_t>(t.row_shares_size())};
}
// By PS table: its row_shares (above), as sampled from data.
using RowShares = std::map<std::string, std::vector<double>>;

// Compressed communication (--compress, run.compress): "fp16" or "bf16", or "none" (also
// empty) for float32 on the wire. The error names the text and the choices.
llvm::Expected<ir::ComputePrecision> parseCompression(llvm::StringRef text);
llvm::StringRef compressionName(ir::ComputePrecision compress); // "none", "fp16", "bf16"
// The size of a `dtype` value on the wire relative to its size in memory: 0.5 for f32 values of
// a compressed plan, 1 otherwise.
double wireScale(const RunConfig &run, llvm::StringRef dtype);

// A bucket's bytes on the wire: gradient buckets as wireScale says for their variables' dtype;
// the loss (bucket -1) always in float32.
double bucketWireBytes(const Plan &plan, const Bucket &bucket);

// A ring all-reduce of `bytes` over `ranks` tasks: what each rank sends to the next (and
// receives from the previous) per step, 2(N−1)/N of the bytes; nothing for one rank.
double ringAllReduceBytes(double bytes, int64_t ranks);

// The worker ops that talk to parameter servers.
enum class PsTransfer { Pull, Push, PullRows, PushRows };
// ps_pull, ps_push, ps_pull_rows, ps_push_rows; none for other ops.
std::optional<PsTransfer> psTransferOf(llvm::StringRef op);
bool movesRows(PsTransfer transfer);

// What one worker's PS op moves to and from one shard's task per step. `rows` is the distinct
// rows the op moves in all (row ops only); the shard takes its part of them (shardRowFraction,
// by `rowShares`). Gradients and pulled rows are compressed as the plan says (wireScale); dense
// pulls never are.
struct ShardTraffic {
  double toPs = 0;
  double fromPs = 0;
  double rows = 0; // row ops: the shard's part of the rows
};
ShardTraffic psShardTraffic(const RunConfig &run, PsTransfer transfer, const Variable &v,
                            const Shard &shard, double rows = 0,
                            llvm::ArrayRef<double> rowShares = {});

// How often a worker runs the op per optimizer step: a `ps_pull` runs once per micro-batch with
// gradient accumulation (run.accumulate); row pulls count their micro-batches in their rows.
double timesPerStep(const Plan &plan, PsTransfer transfer);

} // namespace prism::plan
