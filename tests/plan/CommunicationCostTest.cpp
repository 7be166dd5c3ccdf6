// What one communication op moves, by the formulas the estimate and the dump share.
#include <gtest/gtest.h>

#include "plan/CommunicationCost.h"

namespace prism::plan {
namespace {

// f32[100, 8] on two shards: rows 0..25 on ps:0, 25..100 on ps:1.
Variable table() {
  Variable v;
  v.set_name("emb");
  v.set_dtype("f32");
  v.add_shape(100);
  v.add_shape(8);
  v.set_bytes(3200);
  v.set_placement("ps");
  Shard *a = v.add_shards();
  a->set_task("ps:0");
  a->set_row_end(25);
  Shard *b = v.add_shards();
  b->set_task("ps:1");
  b->set_row_begin(25);
  b->set_row_end(100);
  return v;
}

TEST(CommunicationCost, RingSendsTwiceTheBucketTimesNMinusOneOverN) {
  EXPECT_EQ(ringAllReduceBytes(400, 1), 0);
  EXPECT_EQ(ringAllReduceBytes(400, 2), 400);
  EXPECT_EQ(ringAllReduceBytes(400, 4), 600);
}

TEST(CommunicationCost, ShardsTakeTheirPartOfTheRows) {
  Variable v = table();
  EXPECT_EQ(tableRows(v), 100);
  EXPECT_EQ(rowBytes(v), 32);
  EXPECT_EQ(shardFraction(v, v.shards(1)), 0.75);
  EXPECT_EQ(shardBytes(v, v.shards(0)), 800);
}

TEST(CommunicationCost, EachPsTransferMovesWhatTheTableSays) {
  Variable v = table();
  const Shard &s = v.shards(1);
  ShardTraffic pull = psShardTraffic(PsTransfer::Pull, v, s);
  EXPECT_EQ(pull.toPs, 0);
  EXPECT_EQ(pull.fromPs, 2400);
  ShardTraffic push = psShardTraffic(PsTransfer::Push, v, s);
  EXPECT_EQ(push.toPs, 2400);
  EXPECT_EQ(push.fromPs, 0);
  // 40 distinct rows, 30 of them on this shard: their indices out, the rows back.
  ShardTraffic pullRows = psShardTraffic(PsTransfer::PullRows, v, s, 40);
  EXPECT_EQ(pullRows.toPs, 30 * kIndexBytes);
  EXPECT_EQ(pullRows.fromPs, 30 * 32);
  ShardTraffic pushRows = psShardTraffic(PsTransfer::PushRows, v, s, 40);
  EXPECT_EQ(pushRows.toPs, 30 * (32 + kIndexBytes));
  EXPECT_EQ(pushRows.fromPs, 0);
}

TEST(CommunicationCost, OnlyPsOpsArePsTransfers) {
  EXPECT_EQ(psTransferOf("ps_pull_rows"), PsTransfer::PullRows);
  EXPECT_EQ(psTransferOf("ps_push"), PsTransfer::Push);
  EXPECT_FALSE(psTransferOf("all_reduce"));
  EXPECT_FALSE(psTransferOf("ps_gradient_rows"));
  EXPECT_TRUE(movesRows(PsTransfer::PushRows));
  EXPECT_FALSE(movesRows(PsTransfer::Pull));
}

} // namespace
} // namespace prism::plan
