// What one communication op moves, by the formulas the estimate and the dump share.
#include <gtest/gtest.h>

#include <vector>

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
  const RunConfig run;
  ShardTraffic pull = psShardTraffic(run, PsTransfer::Pull, v, s);
  EXPECT_EQ(pull.toPs, 0);
  EXPECT_EQ(pull.fromPs, 2400);
  ShardTraffic push = psShardTraffic(run, PsTransfer::Push, v, s);
  EXPECT_EQ(push.toPs, 2400);
  EXPECT_EQ(push.fromPs, 0);
  // 40 distinct rows, 30 of them on this shard: their indices out, the rows back.
  ShardTraffic pullRows = psShardTraffic(run, PsTransfer::PullRows, v, s, 40);
  EXPECT_EQ(pullRows.toPs, 30 * kIndexBytes);
  EXPECT_EQ(pullRows.fromPs, 30 * 32);
  ShardTraffic pushRows = psShardTraffic(run, PsTransfer::PushRows, v, s, 40);
  EXPECT_EQ(pushRows.toPs, 30 * (32 + kIndexBytes));
  EXPECT_EQ(pushRows.fromPs, 0);
}

// --compress: gradient values and pulled rows travel in half the bytes; indices, dense pulls of
// variables, float64 values and the loss bucket do not shrink.
// Sampled ids that crowd the first rows: the shards take the rows where they fall, not their
// part of the table.
TEST(CommunicationCost, ShardsTakeTheRowsThatFallInThemWhereTheirSharesAreKnown) {
  Variable v = table();
  // Four ranges of 25 rows: half the step's rows in rows 0..25, 0.3 in 25..50, 0.2 in 50..75.
  const std::vector<double> shares = {0.5, 0.3, 0.2, 0};
  EXPECT_DOUBLE_EQ(shardRowFraction(v, v.shards(0), shares), 0.5);
  EXPECT_DOUBLE_EQ(shardRowFraction(v, v.shards(1), shares), 0.5);
  EXPECT_DOUBLE_EQ(shardRowFraction(v, v.shards(1), {}), 0.75); // spread as the rows are
  // Rows 10..60: 15/25 of the first range, all the second, 10/25 of the third.
  Shard middle;
  middle.set_row_begin(10);
  middle.set_row_end(60);
  EXPECT_DOUBLE_EQ(shardRowFraction(v, middle, shares), 0.5 * 0.6 + 0.3 + 0.2 * 0.4);
  // 40 distinct rows, 20 of them on ps:1 by the shares (30 by its part of the table).
  const RunConfig run;
  ShardTraffic pullRows = psShardTraffic(run, PsTransfer::PullRows, v, v.shards(1), 40, shares);
  EXPECT_DOUBLE_EQ(pullRows.rows, 20);
  EXPECT_DOUBLE_EQ(pullRows.toPs, 20 * kIndexBytes);
  EXPECT_DOUBLE_EQ(pullRows.fromPs, 20 * 32);
  ShardTraffic pushRows = psShardTraffic(run, PsTransfer::PushRows, v, v.shards(0), 40, shares);
  EXPECT_DOUBLE_EQ(pushRows.toPs, 20 * (32 + kIndexBytes));
  // Whole variables move by their part of the table whatever the rows' shares.
  EXPECT_EQ(psShardTraffic(run, PsTransfer::Pull, v, v.shards(1), 0, shares).fromPs, 2400);
}

TEST(CommunicationCost, CompressionHalvesFloatValuesOnly) {
  Variable v = table();
  const Shard &s = v.shards(1);
  RunConfig run;
  run.set_compress("fp16");
  EXPECT_EQ(psShardTraffic(run, PsTransfer::Pull, v, s).fromPs, 2400);
  EXPECT_EQ(psShardTraffic(run, PsTransfer::Push, v, s).toPs, 1200);
  EXPECT_EQ(psShardTraffic(run, PsTransfer::PullRows, v, s, 40).fromPs, 30 * 16);
  EXPECT_EQ(psShardTraffic(run, PsTransfer::PullRows, v, s, 40).toPs, 30 * kIndexBytes);
  EXPECT_EQ(psShardTraffic(run, PsTransfer::PushRows, v, s, 40).toPs, 30 * (16 + kIndexBytes));
  EXPECT_EQ(wireScale(run, "f32"), 0.5);
  EXPECT_EQ(wireScale(run, "f64"), 1);
  EXPECT_EQ(wireScale(RunConfig(), "f32"), 1);

  Plan plan;
  *plan.mutable_run() = run;
  *plan.add_variables() = v;
  Bucket gradients;
  gradients.set_id(0);
  gradients.add_variables("emb");
  gradients.set_bytes(3200);
  EXPECT_EQ(bucketWireBytes(plan, gradients), 1600);
  Bucket loss;
  loss.set_id(-1);
  loss.set_bytes(4);
  EXPECT_EQ(bucketWireBytes(plan, loss), 4);
  plan.mutable_variables(0)->set_dtype("f64");
  EXPECT_EQ(bucketWireBytes(plan, gradients), 3200);
}

TEST(CommunicationCost, CompressionNamesAreChecked) {
  EXPECT_EQ(*parseCompression("fp16"), ir::ComputePrecision::FP16);
  EXPECT_EQ(*parseCompression("bf16"), ir::ComputePrecision::BF16);
  EXPECT_EQ(*parseCompression("none"), ir::ComputePrecision::F32);
  EXPECT_EQ(*parseCompression(""), ir::ComputePrecision::F32);
  auto bad = parseCompression("int8");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("expected none, fp16 or bf16, got 'int8'"),
            std::string::npos);
  EXPECT_EQ(compressionName(ir::ComputePrecision::BF16), "bf16");
  EXPECT_EQ(compressionName(ir::ComputePrecision::F32), "none");
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
