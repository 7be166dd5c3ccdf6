// Values files (ir/ValuesFile.h) and the `values(file, offset)` initializer's check and paths:
// what is written reads back, and every kind of damage is an error naming the file.
#include <fstream>

#include <gtest/gtest.h>

#include "ir/Diagnostic.h"
#include "ir/Initializer.h"
#include "ir/ValuesFile.h"
#include "llvm/Support/FileSystem.h"

using namespace prism;

namespace {

std::string writeTemp(const std::string &bytes) {
  llvm::SmallString<128> path;
  EXPECT_FALSE(llvm::sys::fs::createTemporaryFile("values", "weights", path));
  std::ofstream(std::string(path), std::ios::binary) << bytes;
  return std::string(path);
}

std::string errorOf(llvm::Expected<std::vector<float>> r) {
  EXPECT_FALSE(static_cast<bool>(r));
  return r ? "" : ir::messageOf(r.takeError());
}

ir::Initializer valuesInit(ir::Attr file, int64_t offset) {
  ir::Initializer init{"values", {}};
  init.params.set("file", std::move(file));
  init.params.set("offset", ir::Attr::integer(offset));
  return init;
}

TEST(ValuesFileTest, RecordsReadBackAtTheirOffsets) {
  ir::ValuesFileWriter writer;
  const uint64_t a = writer.append({1.5f, -2.0f, 3.25f});
  const uint64_t b = writer.append({7.0f});
  EXPECT_EQ(a % ir::kValuesRecordAlignment, 0u);
  EXPECT_EQ(b % ir::kValuesRecordAlignment, 0u);
  const std::string path = writeTemp(writer.bytes());
  auto first = ir::readValuesRecord(path, a, 3);
  ASSERT_TRUE(static_cast<bool>(first)) << ir::messageOf(first.takeError());
  EXPECT_EQ(*first, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  auto second = ir::readValuesRecord(path, b, 1);
  ASSERT_TRUE(static_cast<bool>(second));
  EXPECT_EQ(*second, std::vector<float>{7.0f});
  llvm::sys::fs::remove(path);
}

TEST(ValuesFileTest, DamageIsAnErrorNamingTheFile) {
  ir::ValuesFileWriter writer;
  const uint64_t offset = writer.append({1, 2, 3, 4});
  std::string bytes = writer.bytes();
  const std::string good = writeTemp(bytes);
  EXPECT_NE(errorOf(ir::readValuesRecord(good, offset, 5))
                .find("holds 4 elements, the variable "
                      "needs 5"),
            std::string::npos);
  EXPECT_NE(errorOf(ir::readValuesRecord(good, 4096, 4)).find("no record there"),
            std::string::npos);
  EXPECT_NE(errorOf(ir::readValuesRecord(good + ".none", offset, 4)).find("cannot read"),
            std::string::npos);

  std::string flipped = bytes;
  flipped.back() ^= 1;
  const std::string damaged = writeTemp(flipped);
  EXPECT_NE(errorOf(ir::readValuesRecord(damaged, offset, 4)).find("checksum mismatch"),
            std::string::npos);

  const std::string truncated = writeTemp(bytes.substr(0, bytes.size() - 4));
  EXPECT_NE(errorOf(ir::readValuesRecord(truncated, offset, 4)).find("run past the end"),
            std::string::npos);

  const std::string other = writeTemp("not a values file at all");
  std::string message = errorOf(ir::readValuesRecord(other, 16, 1));
  EXPECT_NE(message.find("does not start with PRISMVAL"), std::string::npos);
  EXPECT_NE(message.find(other), std::string::npos);
  for (const std::string &p : {good, damaged, truncated, other})
    llvm::sys::fs::remove(p);
}

TEST(ValuesFileTest, InitializerCheckAndPaths) {
  EXPECT_FALSE(
      static_cast<bool>(ir::checkInitializer(valuesInit(ir::Attr::string("m.weights"), 64))));
  auto messageOf = [](const ir::Initializer &init) {
    return ir::messageOf(ir::checkInitializer(init));
  };
  EXPECT_EQ(messageOf(valuesInit(ir::Attr::integer(3), 64)),
            "parameter 'file' of initializer 'values' must be a file name in quotes, got 3");
  EXPECT_EQ(messageOf(valuesInit(ir::Attr::string("m.weights"), -1)),
            "parameter 'offset' of initializer 'values' must be an integer >= 0, got -1");
  EXPECT_EQ(messageOf(ir::Initializer{"values", {}}),
            "initializer 'values' needs parameter 'file': values(file, offset = 0)");

  EXPECT_EQ(ir::resolveValuesFile("m.weights", "models/m.prism"), "models/m.weights");
  EXPECT_EQ(ir::resolveValuesFile("m.weights", "m.prism"), "m.weights");
  EXPECT_EQ(ir::resolveValuesFile("/abs/m.weights", "models/m.prism"), "/abs/m.weights");
  EXPECT_EQ(ir::resolveValuesFile("m.weights", "<plan program worker>"), "m.weights");

  ir::Module module;
  module.setSourceFile("/data/models/m.prism");
  module.addVariable("w", ir::TensorType(ir::DType::F32, {2}),
                     valuesInit(ir::Attr::string("../w/m.weights"), 64));
  ir::makeValuesFilesAbsolute(module);
  EXPECT_EQ(ir::valuesSource(module.variables()[0]->init)->file, "/data/w/m.weights");
  EXPECT_EQ(ir::valuesSource(module.variables()[0]->init)->offset, 64u);
}

} // namespace
