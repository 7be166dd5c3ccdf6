// What one communication op moves per step (see CommunicationCost.h).
#include "plan/CommunicationCost.h"

#include <algorithm>

#include "ir/Diagnostic.h"

namespace prism::plan {

double tableRows(const Variable &v) {
  return v.shape_size() ? static_cast<double>(v.shape(0)) : 1;
}

double rowBytes(const Variable &v) {
  return static_cast<double>(v.bytes()) / std::max(1.0, tableRows(v));
}

double shardFraction(const Variable &v, const Shard &shard) {
  return static_cast<double>(shard.row_end() - shard.row_begin()) / std::max(1.0, tableRows(v));
}

double shardRowFraction(const Variable &v, const Shard &shard, llvm::ArrayRef<double> rowShares) {
  if (rowShares.empty())
    return shardFraction(v, shard);
  // The shard's rows in units of ranges: [begin, end) of rowShares.size() ranges.
  const double ranges = static_cast<double>(rowShares.size());
  const double rows = std::max(1.0, tableRows(v));
  const double begin = static_cast<double>(shard.row_begin()) / rows * ranges;
  const double end = static_cast<double>(shard.row_end()) / rows * ranges;
  double share = 0;
  for (size_t i = static_cast<size_t>(std::max(0.0, begin)); i < rowShares.size(); ++i) {
    const double from = std::max(begin, static_cast<double>(i));
    const double to = std::min(end, static_cast<double>(i + 1));
    if (to <= from)
      break;
    share += rowShares[i] * (to - from);
  }
  return share;
}

double shardBytes(const Variable &v, const Shard &shard) {
  return static_cast<double>(v.bytes()) * shardFraction(v, shard);
}

llvm::Expected<ir::ComputePrecision> parseCompression(llvm::StringRef text) {
  if (text.empty() || text == "none")
    return ir::ComputePrecision::F32;
  if (text == "fp16")
    return ir::ComputePrecision::FP16;
  if (text == "bf16")
    return ir::ComputePrecision::BF16;
  return ir::makeError("expected none, fp16 or bf16, got '" + text + "'");
}

llvm::StringRef compressionName(ir::ComputePrecision compress) {
  return compress == ir::ComputePrecision::F32 ? "none" : ir::precisionName(compress);
}

double wireScale(const RunConfig &run, llvm::StringRef dtype) {
  return !run.compress().empty() && dtype == "f32" ? 0.5 : 1.0;
}

double bucketWireBytes(const Plan &plan, const Bucket &bucket) {
  const double bytes = static_cast<double>(bucket.bytes());
  if (bucket.id() < 0 || bucket.variables().empty())
    return bytes;
  for (const Variable &v : plan.variables())
    if (v.name() == bucket.variables(0))
      return bytes * wireScale(plan.run(), v.dtype());
  return bytes;
}

double ringAllReduceBytes(double bytes, int64_t ranks) {
  if (ranks < 2)
    return 0;
  return 2.0 * static_cast<double>(ranks - 1) / static_cast<double>(ranks) * bytes;
}

std::optional<PsTransfer> psTransferOf(llvm::StringRef op) {
  if (op == "ps_pull")
    return PsTransfer::Pull;
  if (op == "ps_push")
    return PsTransfer::Push;
  if (op == "ps_pull_rows")
    return PsTransfer::PullRows;
  if (op == "ps_push_rows")
    return PsTransfer::PushRows;
  return std::nullopt;
}

bool movesRows(PsTransfer transfer) {
  return transfer == PsTransfer::PullRows || transfer == PsTransfer::PushRows;
}

ShardTraffic psShardTraffic(const RunConfig &run, PsTransfer transfer, const Variable &v,
                            const Shard &shard, double rows, llvm::ArrayRef<double> rowShares) {
  const double fraction = shardFraction(v, shard);
  const double rowFraction = shardRowFraction(v, shard, rowShares);
  const double scale = wireScale(run, v.dtype());
  ShardTraffic traffic;
  switch (transfer) {
  case PsTransfer::Pull: // the shard's part of the variable, never compressed
    traffic.fromPs = fraction * static_cast<double>(v.bytes());
    break;
  case PsTransfer::Push:
    traffic.toPs = fraction * static_cast<double>(v.bytes()) * scale;
    break;
  case PsTransfer::PullRows: // the indices out, the rows back
    traffic.rows = rows * rowFraction;
    traffic.toPs = traffic.rows * kIndexBytes;
    traffic.fromPs = traffic.rows * rowBytes(v) * scale;
    break;
  case PsTransfer::PushRows: // the rows with their indices
    traffic.rows = rows * rowFraction;
    traffic.toPs = traffic.rows * (rowBytes(v) * scale + kIndexBytes);
    break;
  }
  return traffic;
}

double timesPerStep(const Plan &plan, PsTransfer transfer) {
  return transfer == PsTransfer::Pull ? std::max(1, plan.run().accumulate()) : 1;
}

} // namespace prism::plan
