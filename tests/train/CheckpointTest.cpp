// Checkpoint files: round trip, atomic replacement, and clear errors for damaged files.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "runtime/SeedRule.h"
#include "runtime/train/Checkpoint.h"
#include "llvm/Support/FileSystem.h"

using namespace prism::runtime;
using namespace prism::runtime::train;

namespace {

std::string scratchDir(const char *name) {
  llvm::SmallString<128> dir;
  llvm::sys::fs::createUniqueDirectory(name, dir);
  return std::string(dir);
}

llvm::StringMap<Tensor> sampleVariables() {
  llvm::StringMap<Tensor> vars;
  Tensor w(prism::ir::DType::F32, {2, 3});
  for (int i = 0; i < 6; ++i)
    w.data<float>()[i] = 0.5f * static_cast<float>(i) - 1.0f;
  Tensor step(prism::ir::DType::F32, {});
  *step.data<float>() = 7;
  vars["w"] = w;
  vars["adam.step"] = step;
  return vars;
}

TEST(Checkpoint, RoundTripKeepsEveryByteAndThePosition) {
  std::string dir = scratchDir("ckpt");
  TrainingPosition pos;
  pos.globalStep = 12;
  pos.epoch = 1;
  pos.batchInEpoch = 3;
  pos.seed = 42;
  pos.batchSize = 64;
  pos.model = "mlp";
  pos.data = "fashion-mnist";
  ASSERT_FALSE(bool(saveCheckpoint(dir, pos, sampleVariables())));
  auto ckpt = loadCheckpoint(dir);
  ASSERT_TRUE(bool(ckpt)) << llvm::toString(ckpt.takeError());
  EXPECT_EQ(ckpt->position.globalStep, 12);
  EXPECT_EQ(ckpt->position.batchInEpoch, 3);
  EXPECT_EQ(ckpt->position.seed, 42u);
  EXPECT_EQ(ckpt->position.model, "mlp");
  ASSERT_EQ(ckpt->variables.size(), 2u);
  const Tensor &w = ckpt->variables.at("w");
  EXPECT_EQ(w.shape(), (std::vector<int64_t>{2, 3}));
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(w.data<float>()[i], 0.5f * static_cast<float>(i) - 1.0f);
  EXPECT_EQ(*ckpt->variables.at("adam.step").data<float>(), 7.0f);
  // No temporary file is left behind.
  std::error_code ec;
  int files = 0;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec))
    ++files;
  EXPECT_EQ(files, 1);
}

TEST(Checkpoint, DamagedFilesAreErrorsNotCrashes) {
  std::string dir = scratchDir("ckpt");
  ASSERT_FALSE(bool(saveCheckpoint(dir, TrainingPosition(), sampleVariables())));
  std::string path = checkpointPath(dir);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto rewrite = [&](const std::string &contents) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << contents;
  };
  for (size_t cut : {size_t(0), size_t(5), bytes.size() / 2, bytes.size() - 1}) {
    rewrite(bytes.substr(0, cut));
    auto ckpt = loadCheckpoint(dir);
    ASSERT_FALSE(bool(ckpt)) << "truncated at " << cut;
    EXPECT_NE(llvm::toString(ckpt.takeError()).find("is corrupt"), std::string::npos);
  }
  std::string flipped = bytes;
  flipped[bytes.size() - 12] ^= 0x40;
  rewrite(flipped);
  auto ckpt = loadCheckpoint(dir);
  ASSERT_FALSE(bool(ckpt));
  EXPECT_NE(llvm::toString(ckpt.takeError()).find("checksum"), std::string::npos);

  auto missing = loadCheckpoint(dir + "/nowhere");
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("cannot read checkpoint"), std::string::npos);
}

// Headers with a right checksum and hostile values (the checkpoint fuzz target's finds): a
// step that is a float out of any integer's range used to be undefined behaviour, and a shape
// of 10^12 elements was allocated before its bytes were checked. Each is an error naming the
// file.
TEST(Checkpoint, HostileHeadersAreErrorsNotCrashes) {
  std::string dir = scratchDir("ckpt-hostile");
  auto withHeader = [&](const std::string &header, const std::string &data) {
    std::string contents = "PRISM-CHECKPOINT 1\n" + header + "\n" + data;
    uint64_t sum = prism::runtime::fnv1a64(contents);
    contents.append(reinterpret_cast<const char *>(&sum), sizeof(sum));
    std::ofstream(checkpointPath(dir), std::ios::binary | std::ios::trunc) << contents;
    auto ckpt = loadCheckpoint(dir);
    return ckpt ? std::string("loaded") : llvm::toString(ckpt.takeError());
  };
  const std::string position = R"("epoch":0,"batch_in_epoch":0,"seed":0,"batch_size":8,)"
                               R"("model":"m","data":"d")";
  EXPECT_NE(withHeader(R"({"global_step":7.7e88,)" + position + "}", "").find("is corrupt"),
            std::string::npos);
  // One variable w of 4 bytes of data, with this shape and offset: what loading it says.
  auto withVariable = [&](const std::string &shape, const std::string &offset) {
    return withHeader(R"({"global_step":1,)" + position +
                          R"(,"variables":[{"name":"w","dtype":"f32","shape":)" + shape +
                          R"(,"offset":)" + offset + R"(,"bytes":4}]})",
                      "abcd");
  };
  EXPECT_NE(withVariable("[1000000,1000000]", "0").find("variable w is out of bounds"),
            std::string::npos);
  EXPECT_NE(withVariable("[1.5]", "0").find("is corrupt"), std::string::npos);
  EXPECT_NE(withVariable("[1]", "9223372036854775807").find("variable w is out of bounds"),
            std::string::npos);
  // The same header with sane values loads.
  EXPECT_EQ(withVariable("[1]", "0"), "loaded");
  llvm::sys::fs::remove_directories(dir);
}

} // namespace
