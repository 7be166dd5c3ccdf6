// Periodic checkpoint directories: partial ones never count, completing one moves it into place
// and keeps the newest, and the newest complete one is found.
#include <gtest/gtest.h>

#include "runtime/train/CheckpointDir.h"
#include "llvm/Support/FileSystem.h"

using namespace prism::runtime::train;

namespace {

std::string scratchDir() {
  llvm::SmallString<128> dir;
  llvm::sys::fs::createUniqueDirectory("prism-checkpoint-dir", dir);
  return std::string(dir);
}

std::optional<CompleteCheckpoint> latest(const std::string &dir) {
  auto found = latestCheckpoint(dir);
  EXPECT_TRUE(static_cast<bool>(found)) << llvm::toString(found.takeError());
  return found ? *found : std::nullopt;
}

void writePartial(const std::string &dir, int64_t step) {
  ASSERT_FALSE(llvm::sys::fs::create_directories(partialCheckpointDir(dir, step) + "/worker"));
}

TEST(CheckpointDir, NamesSortByStep) {
  EXPECT_EQ(checkpointStepDir("/c", 40), "/c/step-00000040");
  EXPECT_EQ(partialCheckpointDir("/c", 40), "/c/step-00000040.partial");
  EXPECT_EQ(checkpointStepDir("/c", 123456789), "/c/step-123456789");
}

TEST(CheckpointDir, OnlyCompleteCheckpointsCountAndTheNewestAreKept) {
  std::string dir = scratchDir();
  EXPECT_FALSE(latest(dir + "/absent"));
  EXPECT_FALSE(latest(dir));
  writePartial(dir, 10);
  EXPECT_FALSE(latest(dir)) << "a partial checkpoint is not one";
  for (int64_t step : {10, 20, 30, 40}) {
    if (step != 10)
      writePartial(dir, step);
    ASSERT_FALSE(static_cast<bool>(completeCheckpoint(dir, step, /*keep=*/2)));
    auto newest = latest(dir);
    ASSERT_TRUE(newest);
    EXPECT_EQ(newest->step, step);
    EXPECT_EQ(newest->path, checkpointStepDir(dir, step));
    EXPECT_TRUE(llvm::sys::fs::exists(newest->path + "/worker"));
  }
  EXPECT_FALSE(llvm::sys::fs::exists(checkpointStepDir(dir, 20)));
  EXPECT_TRUE(llvm::sys::fs::exists(checkpointStepDir(dir, 30)));
  // A partial checkpoint older than a completed one goes with it; a newer one stays until a
  // failure removes every partial one.
  writePartial(dir, 45);
  writePartial(dir, 60);
  writePartial(dir, 50);
  ASSERT_FALSE(static_cast<bool>(completeCheckpoint(dir, 50, 2)));
  EXPECT_FALSE(llvm::sys::fs::exists(partialCheckpointDir(dir, 45)));
  EXPECT_TRUE(llvm::sys::fs::exists(partialCheckpointDir(dir, 60)));
  removePartialCheckpoints(dir);
  EXPECT_FALSE(llvm::sys::fs::exists(partialCheckpointDir(dir, 60)));
  EXPECT_EQ(latest(dir)->step, 50);
  // Completing a step with no partial directory is an error naming it.
  auto missing = completeCheckpoint(dir, 70, 2);
  ASSERT_TRUE(static_cast<bool>(missing));
  EXPECT_NE(llvm::toString(std::move(missing)).find("step 70"), std::string::npos);
  llvm::sys::fs::remove_directories(dir);
}

TEST(CheckpointDir, SettingsThatCannotWorkNameTheFlag) {
  auto message = [](PeriodicCheckpoints c) {
    llvm::Error e = checkPeriodicCheckpoints(c);
    return e ? llvm::toString(std::move(e)) : std::string();
  };
  EXPECT_EQ(message({}), "");
  EXPECT_EQ(message({"/c", 10, 3}), "");
  EXPECT_NE(message({"", 10, 3}).find("--checkpoint-every 10 needs --checkpoint-dir"),
            std::string::npos);
  EXPECT_NE(message({"/c", 0, 3}).find("needs --checkpoint-every N"), std::string::npos);
  EXPECT_NE(message({"/c", -1, 3}).find("--checkpoint-every -1"), std::string::npos);
  EXPECT_NE(message({"/c", 10, 0}).find("--keep-checkpoints 0"), std::string::npos);
}

} // namespace
