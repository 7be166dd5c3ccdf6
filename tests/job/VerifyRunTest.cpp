// prism verify's comparison without running anything: metrics lines, loss and variable
// differences, and PS shards put back together (a task may hold several ranges of a table).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "runtime/job/VerifyRun.h"
#include "llvm/Support/FileSystem.h"

namespace prism::runtime::job {
namespace {

Tensor rowsTensor(std::vector<float> values, int64_t rows) {
  Tensor t(ir::DType::F32, {rows, static_cast<int64_t>(values.size()) / rows});
  for (size_t i = 0; i < values.size(); ++i)
    t.data<float>()[i] = values[i];
  return t;
}

// f32[4, 2] in three shards: rows 0..1 and 3..4 on ps:0, rows 1..3 on ps:1.
plan::Variable table() {
  plan::Variable v;
  v.set_name("emb");
  v.set_dtype("f32");
  v.add_shape(4);
  v.add_shape(2);
  v.set_bytes(32);
  v.set_placement("ps");
  auto add = [&](const char *task, int64_t begin, int64_t end) {
    plan::Shard *s = v.add_shards();
    s->set_task(task);
    s->set_row_begin(begin);
    s->set_row_end(end);
  };
  add("ps:0", 0, 1);
  add("ps:1", 1, 3);
  add("ps:0", 3, 4);
  return v;
}

TEST(VerifyRun, ReadsTheLossOfEachStep) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("prism-metrics", "jsonl", path));
  {
    std::ofstream out(path.str().str());
    out << R"({"step": 1, "loss": 2.5, "samples_per_sec": 10})"
        << "\n"
        << R"({"step": 1, "test_accuracy": 0.5})"
        << "\n"
        << "not json\n"
        << R"({"step": 2, "loss": 2.25})"
        << "\n";
  }
  auto losses = readLosses(path);
  ASSERT_TRUE(static_cast<bool>(losses)) << llvm::toString(losses.takeError());
  EXPECT_EQ(*losses, (std::vector<double>{2.5, 2.25}));
  llvm::sys::fs::remove(path);
  auto missing = readLosses(path);
  ASSERT_FALSE(static_cast<bool>(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("cannot read the metrics"), std::string::npos);
}

TEST(VerifyRun, LossesCompareStepByStep) {
  auto same = compareLosses({1, 2, 4}, {1, 2, 4});
  ASSERT_TRUE(static_cast<bool>(same));
  EXPECT_EQ(same->largest, 0);
  EXPECT_EQ(same->step, 0u);
  EXPECT_EQ(same->steps, 3u);
  auto apart = compareLosses({1, 2.2, 4.4}, {1, 2, 4});
  ASSERT_TRUE(static_cast<bool>(apart));
  EXPECT_NEAR(apart->largest, 0.1, 1e-12);
  EXPECT_EQ(apart->step, 2u); // the first of the largest
  auto shorter = compareLosses({1}, {1, 2});
  ASSERT_FALSE(static_cast<bool>(shorter));
  EXPECT_NE(llvm::toString(shorter.takeError()).find("logged 1 steps, the single-device run 2"),
            std::string::npos);
}

TEST(VerifyRun, VariablesCompareByTheirLargestElement) {
  std::map<std::string, Tensor> distributed = {{"w", rowsTensor({1, 2, 4.04f, 8}, 2)}};
  llvm::StringMap<Tensor> single;
  single["w"] = rowsTensor({1, 2, 4, 8}, 2);
  auto compared = compareVariables(distributed, single);
  ASSERT_TRUE(static_cast<bool>(compared));
  EXPECT_NEAR(compared->largest, 0.005, 1e-6); // 0.04 of the largest magnitude, 8
  EXPECT_EQ(compared->variable, "w");
  EXPECT_EQ(compared->variables, 1u);
  single["b"] = rowsTensor({0}, 1);
  auto missing = compareVariables(distributed, single);
  ASSERT_FALSE(static_cast<bool>(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("no value of 'b'"), std::string::npos);
}

TEST(VerifyRun, ShardsGoBackInRowOrderEvenWithTwoRangesOnATask) {
  std::map<std::string, Tensor> parts = {
      {"ps:0", rowsTensor({0, 0.5f, 3, 3.5f}, 2)}, // rows 0 and 3
      {"ps:1", rowsTensor({1, 1.5f, 2, 2.5f}, 2)}, // rows 1 and 2
  };
  auto whole = assembleShards(table(), parts);
  ASSERT_TRUE(static_cast<bool>(whole)) << llvm::toString(whole.takeError());
  ASSERT_EQ(whole->shape(), (std::vector<int64_t>{4, 2}));
  for (int64_t i = 0; i < 8; ++i)
    EXPECT_EQ(whole->data<float>()[i], 0.5f * static_cast<float>(i)) << i;

  parts.erase("ps:1");
  auto missing = assembleShards(table(), parts);
  ASSERT_FALSE(static_cast<bool>(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("ps:1 wrote no value of 'emb'"),
            std::string::npos);
  parts["ps:1"] = rowsTensor({1, 1.5f}, 1); // one row short
  auto short_ = assembleShards(table(), parts);
  ASSERT_FALSE(static_cast<bool>(short_));
  EXPECT_NE(llvm::toString(short_.takeError()).find("does not hold the rows"), std::string::npos);
}

TEST(VerifyRun, TheVerdictTakesBothLargestDifferences) {
  VerifyResult result;
  result.losses.largest = 1e-7;
  result.variables.largest = 2e-6;
  EXPECT_TRUE(result.within(kDefaultVerifyTolerance));
  EXPECT_FALSE(result.within(1e-6));
}

} // namespace
} // namespace prism::runtime::job
