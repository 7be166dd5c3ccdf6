// The IDX reader and writer: layout, byte order, gzip, and every kind of damaged file.
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "runtime/data/Idx.h"
#include "tests/data/ScratchDir.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace prism::runtime::data;
using prism::runtime::data::testing::ScratchDir;

namespace {

std::string bytes(std::initializer_list<int> values) {
  std::string s;
  for (int v : values)
    s.push_back(static_cast<char>(v));
  return s;
}

std::string readAll(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, false, false);
  EXPECT_TRUE(bool(buffer)) << path;
  return buffer ? (*buffer)->getBuffer().str() : "";
}

// The message of a failed read; the test fails if the read succeeded.
std::string readError(const std::string &path) {
  auto array = readIdxFile(path);
  if (array) {
    ADD_FAILURE() << path << " was read as " << array->describe();
    return "";
  }
  return llvm::toString(array.takeError());
}

IdxArray randomBytes(int64_t rows, int64_t cols, uint64_t seed) {
  IdxArray a;
  a.dims = {rows, cols};
  std::mt19937_64 gen(seed);
  for (int64_t i = 0; i < rows * cols; ++i)
    a.bytes.push_back(static_cast<uint8_t>(gen()));
  return a;
}

} // namespace

TEST(Idx, ReadsAnUncompressedFileByHand) {
  ScratchDir dir;
  std::string path = dir.write("a.idx", bytes({0, 0, 0x08, 2, 0, 0, 0, 2, 0, 0, 0, 3, //
                                               1, 2, 3, 4, 5, 255}));
  auto a = readIdxFile(path);
  ASSERT_TRUE(bool(a)) << llvm::toString(a.takeError());
  EXPECT_EQ(a->element, IdxElement::U8);
  EXPECT_EQ(a->dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->bytes, (std::vector<uint8_t>{1, 2, 3, 4, 5, 255}));
  EXPECT_EQ(a->describe(), "2x3 u8");
}

TEST(Idx, MultiByteElementsAreBigEndianInTheFile) {
  ScratchDir dir;
  std::string path = dir.write("i32.idx", bytes({0, 0, 0x0C, 1, 0, 0, 0, 2, //
                                                 1, 2, 3, 4, 0xFF, 0xFF, 0xFF, 0xFE}));
  auto a = readIdxFile(path);
  ASSERT_TRUE(bool(a)) << llvm::toString(a.takeError());
  ASSERT_EQ(a->bytes.size(), 8u);
  const auto *values = reinterpret_cast<const int32_t *>(a->bytes.data());
  EXPECT_EQ(values[0], 0x01020304);
  EXPECT_EQ(values[1], -2);
}

TEST(Idx, WritesAndReadsBackPlainAndGzip) {
  ScratchDir dir;
  IdxArray a = randomBytes(7, 5, 1);
  for (bool compress : {false, true}) {
    std::string path = dir.file(compress ? "a.idx.gz" : "a.idx");
    ASSERT_FALSE(bool(writeIdxFile(path, a, compress)));
    std::string raw = readAll(path);
    ASSERT_GE(raw.size(), 2u);
    if (compress) {
      EXPECT_EQ(raw.substr(0, 2), "\x1f\x8b") << "not gzip";
    } else {
      EXPECT_EQ(raw, bytes({0, 0, 8, 2, 0, 0, 0, 7, 0, 0, 0, 5}) +
                         std::string(a.bytes.begin(), a.bytes.end()));
    }
    auto back = readIdxFile(path);
    ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
    EXPECT_EQ(back->dims, a.dims);
    EXPECT_EQ(back->bytes, a.bytes);
  }
}

TEST(Idx, F64RoundTripsThroughGzip) {
  ScratchDir dir;
  IdxArray a;
  a.element = IdxElement::F64;
  a.dims = {3};
  double values[3] = {1.5, -2.25, 1e300};
  a.bytes.assign(reinterpret_cast<uint8_t *>(values), reinterpret_cast<uint8_t *>(values) + 24);
  std::string path = dir.file("f.idx.gz");
  ASSERT_FALSE(bool(writeIdxFile(path, a, true)));
  auto back = readIdxFile(path);
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->bytes, a.bytes);
}

TEST(Idx, MissingFileAndDirectory) {
  ScratchDir dir;
  std::string missing = dir.file("nope.idx");
  EXPECT_EQ(readError(missing), missing + ": error: no such file");
  EXPECT_NE(readError(dir.path()).find("is a directory"), std::string::npos);
}

TEST(Idx, DamagedHeaders) {
  ScratchDir dir;
  struct Case {
    const char *name;
    std::string content;
    std::string expected;
  };
  std::vector<Case> cases = {
      {"empty", "", "truncated header: 0 of the 4 bytes of the magic number"},
      {"short-magic", bytes({0, 0, 8}), "truncated header: 3 of the 4 bytes of the magic number"},
      {"bad-magic", bytes({0x12, 0x34, 0x56, 0x78, 0, 0, 0, 1, 0}),
       "not an IDX file: bad magic number 0x12345678"},
      {"text", "hello world\n", "not an IDX file: bad magic number 0x68656C6C"},
      {"bad-type", bytes({0, 0, 0x07, 1, 0, 0, 0, 1, 0}), "unknown element type 0x07"},
      {"no-dims", bytes({0, 0, 0x08, 0}), "IDX header declares no dimensions"},
      {"short-dims", bytes({0, 0, 8, 3, 0, 0, 0, 2, 0, 0}),
       "truncated header: 6 of the 12 bytes of 3 dimensions"},
      {"absurd", bytes({0, 0, 8, 3, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 1, 0}),
       "IDX header declares an absurd size"},
  };
  for (const Case &c : cases) {
    std::string path = dir.write(c.name, c.content);
    std::string error = readError(path);
    EXPECT_EQ(error.rfind(path + ": error: ", 0), 0u) << error;
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.name << ": " << error;
  }
}

TEST(Idx, TruncatedAndOverlongBodies) {
  ScratchDir dir;
  std::string header = bytes({0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3});
  std::string shortPath = dir.write("short", header + bytes({1, 2, 3, 4}));
  EXPECT_EQ(readError(shortPath),
            shortPath + ": error: truncated: the header declares 2x3 u8 (6 bytes of data), the "
                        "file holds 4");
  std::string longPath = dir.write("long", header + bytes({1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(readError(longPath), longPath + ": error: unexpected bytes after the 6 bytes of data "
                                            "that the header declares (2x3 u8)");
}

TEST(Idx, TruncatedGzipStream) {
  ScratchDir dir;
  std::string full = dir.file("full.gz");
  ASSERT_FALSE(bool(writeIdxFile(full, randomBytes(100, 100, 2), true)));
  std::string raw = readAll(full);
  std::string cut = dir.write("cut.gz", raw.substr(0, raw.size() / 2));
  std::string error = readError(cut);
  EXPECT_EQ(error.rfind(cut + ": error: truncated gzip stream", 0), 0u) << error;
}

TEST(Idx, GzipChecksumMismatchIsCorruption) {
  ScratchDir dir;
  std::string full = dir.file("full.gz");
  ASSERT_FALSE(bool(writeIdxFile(full, randomBytes(10, 10, 3), true)));
  std::string raw = readAll(full);
  // The trailer is CRC-32 then length, 4 bytes each.
  raw[raw.size() - 8] ^= 0x55;
  std::string bad = dir.write("crc.gz", raw);
  std::string error = readError(bad);
  EXPECT_EQ(error.rfind(bad + ": error: corrupt gzip stream (zlib: ", 0), 0u) << error;
}

TEST(Idx, CorruptDeflateDataIsAnErrorNamingTheFile) {
  ScratchDir dir;
  std::string full = dir.file("full.gz");
  ASSERT_FALSE(bool(writeIdxFile(full, randomBytes(50, 50, 4), true)));
  std::string raw = readAll(full);
  for (size_t i = raw.size() / 3; i < raw.size() / 3 + 16; ++i)
    raw[i] = static_cast<char>(~raw[i]);
  std::string bad = dir.write("flipped.gz", raw);
  std::string error = readError(bad);
  EXPECT_EQ(error.rfind(bad + ": error: ", 0), 0u) << error;
}

TEST(Idx, WriterRejectsInconsistentArrays) {
  ScratchDir dir;
  IdxArray a;
  a.dims = {2, 2};
  a.bytes = {1, 2, 3};
  llvm::Error err = writeIdxFile(dir.file("x"), a, false);
  ASSERT_TRUE(bool(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("2x2 u8 needs 4 bytes of data, got 3"),
            std::string::npos);
}
