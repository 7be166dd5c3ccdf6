// Memory limits: byte sizes as users write them, the limit in force, and the check's message.
#include <cstdlib>

#include <gtest/gtest.h>

#include "ir/Diagnostic.h"
#include "support/Memory.h"

using namespace prism;

namespace {

uint64_t parsed(const char *text) {
  auto bytes = support::parseByteSize(text);
  EXPECT_TRUE(bool(bytes)) << text << ": " << llvm::toString(bytes.takeError());
  return bytes ? *bytes : 0;
}

std::string parseError(const char *text) {
  auto bytes = support::parseByteSize(text);
  if (bytes)
    return "parsed as " + std::to_string(*bytes);
  return llvm::toString(bytes.takeError());
}

TEST(Memory, ByteSizesInDecimalAndBinaryUnits) {
  EXPECT_EQ(parsed("512"), 512u);
  EXPECT_EQ(parsed("64k"), 64000u);
  EXPECT_EQ(parsed("64kB"), 64000u);
  EXPECT_EQ(parsed("512M"), 512000000u);
  EXPECT_EQ(parsed("8G"), 8000000000u);
  EXPECT_EQ(parsed("8g"), 8000000000u);
  EXPECT_EQ(parsed("1.5T"), 1500000000000u);
  EXPECT_EQ(parsed("8Gi"), 8ull << 30);
  EXPECT_EQ(parsed("8GiB"), 8ull << 30);
  EXPECT_EQ(parsed("64Ki"), 65536u);
  EXPECT_EQ(parsed(" 2M "), 2000000u);
  for (const char *bad : {"", "G", "8Q", "-1G", "0", "8i", "1e30", "eight"})
    EXPECT_NE(parseError(bad).find("bad byte size"), std::string::npos) << bad;
  EXPECT_NE(parseError("8Q").find("e.g. 8G"), std::string::npos);
}

TEST(Memory, FormatBytesInDecimalUnits) {
  EXPECT_EQ(support::formatBytes(512), "512 B");
  EXPECT_EQ(support::formatBytes(636500), "636.5 kB");
  EXPECT_EQ(support::formatBytes(25.6e6), "25.6 MB");
  EXPECT_EQ(support::formatBytes(549.8e9), "549.8 GB");
  EXPECT_EQ(support::formatBytes(1.6e12), "1.6 TB");
}

// The environment variable lowers the machine's memory, never raises it; checkFits names what
// asked, the bytes and the limit, with the ResourceExhausted code.
TEST(Memory, TheLimitAndTheCheck) {
  unsetenv(support::kMemoryLimitEnv);
  auto machine = support::memoryLimit();
  ASSERT_TRUE(bool(machine)) << llvm::toString(machine.takeError());
  EXPECT_FALSE(machine->fromUser);
  EXPECT_EQ(machine->bytes, support::machineMemoryBytes());
  auto none = support::userMemoryLimit();
  ASSERT_TRUE(bool(none));
  EXPECT_FALSE(none->has_value());

  setenv(support::kMemoryLimitEnv, "1M", 1);
  auto lowered = support::memoryLimit();
  ASSERT_TRUE(bool(lowered));
  EXPECT_TRUE(lowered->fromUser);
  EXPECT_EQ(lowered->bytes, 1000000u);
  EXPECT_EQ(lowered->describe(), "1.0 MB (--memory-limit)");
  EXPECT_FALSE(bool(support::checkFits(999999, "a tensor")));
  llvm::Error tooMuch = support::checkFits(2.5e6, "the variables of ps:0");
  ASSERT_TRUE(bool(tooMuch));
  EXPECT_EQ(ir::errorCode(tooMuch), ir::ErrorCode::ResourceExhausted);
  EXPECT_EQ(llvm::toString(std::move(tooMuch)),
            "error: the variables of ps:0: 2.5 MB needed, more than the 1.0 MB (--memory-limit) "
            "Prism may use");

  // Above the machine's memory: this machine's limit stays its memory, while tasks on other
  // machines are held to the value as given.
  setenv(support::kMemoryLimitEnv, "1000T", 1);
  auto high = support::memoryLimit();
  ASSERT_TRUE(bool(high));
  EXPECT_FALSE(high->fromUser);
  auto user = support::userMemoryLimit();
  ASSERT_TRUE(bool(user) && user->has_value());
  EXPECT_EQ((*user)->bytes, 1000000000000000u);

  setenv(support::kMemoryLimitEnv, "lots", 1);
  auto bad = support::memoryLimit();
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("PRISM_MEMORY_LIMIT: bad byte size 'lots'"),
            std::string::npos);
  unsetenv(support::kMemoryLimitEnv);
}

} // namespace
