// What one communication op moves per step (see CommunicationCost.h).
#include "plan/CommunicationCost.h"

#include <algorithm>

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

double shardBytes(const Variable &v, const Shard &shard) {
  return static_cast<double>(v.bytes()) * shardFraction(v, shard);
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

ShardTraffic psShardTraffic(PsTransfer transfer, const Variable &v, const Shard &shard,
                            double rows) {
  const double fraction = shardFraction(v, shard);
  ShardTraffic traffic;
  switch (transfer) {
  case PsTransfer::Pull: // the shard's part of the variable
    traffic.fromPs = fraction * static_cast<double>(v.bytes());
    break;
  case PsTransfer::Push:
    traffic.toPs = fraction * static_cast<double>(v.bytes());
    break;
  case PsTransfer::PullRows: // the indices out, the rows back
    traffic.toPs = rows * fraction * kIndexBytes;
    traffic.fromPs = rows * fraction * rowBytes(v);
    break;
  case PsTransfer::PushRows: // the rows with their indices
    traffic.toPs = rows * fraction * (rowBytes(v) + kIndexBytes);
    break;
  }
  return traffic;
}

double timesPerStep(const Plan &plan, PsTransfer transfer) {
  return transfer == PsTransfer::Pull ? std::max(1, plan.run().accumulate()) : 1;
}

} // namespace prism::plan
