// The .npy reader and npy:DIR data sets: the dtypes and versions NumPy writes, and every kind of
// file Prism cannot take, each an error naming the file and the way out.
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/data/DataSpec.h"
#include "runtime/data/Npy.h"
#include "tests/data/ScratchDir.h"

using namespace prism;
using namespace prism::runtime::data;
using prism::runtime::data::testing::ScratchDir;

namespace {

// A .npy file as np.save writes it: magic, version, header length, the dict padded with spaces to
// a multiple of 64 bytes ending in '\n', then `data`.
std::string npy(const std::string &descr, const std::string &shape, const std::string &data,
                int major = 1, const std::string &order = "False") {
  std::string dict =
      "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': " + shape + ", }";
  size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + dict.size() + 1) % 64 != 0)
    dict += ' ';
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  size_t n = dict.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major != 1) {
    out += static_cast<char>((n >> 16) & 0xff);
    out += static_cast<char>((n >> 24) & 0xff);
  }
  return out + dict + data;
}

template <typename T> std::string raw(const std::vector<T> &values) {
  std::string s(values.size() * sizeof(T), '\0');
  std::memcpy(s.data(), values.data(), s.size());
  return s;
}

std::string readError(const std::string &path) {
  auto t = readNpy(path);
  if (t) {
    ADD_FAILURE() << path << " was read";
    return "";
  }
  return llvm::toString(t.takeError());
}

TEST(Npy, ReadsTheDtypesAndVersionsNumPyWrites) {
  ScratchDir dir;
  auto f = readNpy(dir.write("f.npy", npy("<f4", "(2, 3)", raw<float>({1, 2, 3, 4, 5, 6.5f}))));
  ASSERT_TRUE(bool(f)) << llvm::toString(f.takeError());
  EXPECT_EQ(f->dtype(), ir::DType::F32);
  EXPECT_EQ(f->shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f->data<float>()[5], 6.5f);

  auto i = readNpy(dir.write("i.npy", npy("<i4", "(3,)", raw<int32_t>({7, -1, 9}), 2)));
  ASSERT_TRUE(bool(i)) << llvm::toString(i.takeError());
  EXPECT_EQ(i->dtype(), ir::DType::I32);
  EXPECT_EQ(i->shape(), (std::vector<int64_t>{3}));
  EXPECT_EQ(i->data<int32_t>()[1], -1);

  auto d = readNpy(dir.write("d.npy", npy("<f8", "(1, 1, 2)", raw<double>({0.25, -3}), 3)));
  ASSERT_TRUE(bool(d)) << llvm::toString(d.takeError());
  EXPECT_EQ(d->dtype(), ir::DType::F64);
  EXPECT_EQ(d->data<double>()[1], -3.0);

  auto l = readNpy(dir.write("l.npy", npy("<i8", "(2,)", raw<int64_t>({1LL << 40, 2}))));
  ASSERT_TRUE(bool(l));
  EXPECT_EQ(l->data<int64_t>()[0], 1LL << 40);

  auto b = readNpy(dir.write("b.npy", npy("|b1", "(3,)", std::string("\x01\x00\x01", 3))));
  ASSERT_TRUE(bool(b));
  EXPECT_EQ(b->dtype(), ir::DType::Bool);

  // One-column data in Fortran order is the same bytes as C order.
  auto column = readNpy(dir.write("c.npy", npy("<f4", "(2,)", raw<float>({1, 2}), 1, "True")));
  EXPECT_TRUE(bool(column));
}

TEST(Npy, FilesPrismCannotTakeAreErrorsThatNameTheFileAndTheWayOut) {
  ScratchDir dir;
  struct Case {
    std::string name, bytes, message;
  };
  std::vector<Case> cases = {
      {"magic.npy", "PK\x03\x04 not numpy", "not a .npy file"},
      {"version.npy", std::string("\x93NUMPY\x04\x00\x10\x00", 10) + std::string(16, ' '),
       ".npy format version 4 (Prism reads versions 1 to 3)"},
      {"uint8.npy", npy("|u1", "(2,)", "ab"),
       "holds '|u1' values; Prism reads float32, float64, int32, int64 and bool arrays: convert "
       "it (e.g. a.astype(np.float32)"},
      {"half.npy", npy("<f2", "(1,)", "ab"), "holds '<f2' values"},
      {"big.npy", npy(">f4", "(1,)", "abcd"), "big-endian data ('>f4')"},
      {"fortran.npy", npy("<f4", "(2, 2)", raw<float>({1, 2, 3, 4}), 1, "True"),
       "is in Fortran order: save np.ascontiguousarray(a)"},
      {"short.npy", npy("<f4", "(2, 3)", raw<float>({1, 2, 3})),
       "f32 of shape (2, 3) needs 24 bytes of data, the file has 12"},
      {"long.npy", npy("<i4", "(1,)", raw<int32_t>({1, 2})),
       "needs 4 bytes of data, the file has 8"},
      {"scalar.npy", npy("<f4", "()", raw<float>({1})),
       "holds one value; it needs one row per "
       "example"},
      {"empty.npy", npy("<f4", "(0, 4)", ""), "has no examples"},
      {"huge.npy", npy("<f8", "(4611686018427387904, 4611686018427387904)", ""),
       "the header's shape is too large"},
      {"negative.npy", npy("<f4", "(-1,)", ""), "bad dimension '-1'"},
      {"noshape.npy", std::string("\x93NUMPY\x01\x00\x10\x00", 10) + "{'descr': '<f4'}\n",
       "the header lacks descr, fortran_order or shape"},
      {"header.npy", std::string("\x93NUMPY\x01\x00\xff\x00", 10) + "{'descr'",
       "the header runs past the end of the file"},
  };
  for (const Case &c : cases) {
    std::string path = dir.write(c.name, c.bytes);
    std::string message = readError(path);
    EXPECT_NE(message.find(path + ": "), std::string::npos) << c.name << ": " << message;
    EXPECT_NE(message.find(c.message), std::string::npos) << c.name << ": " << message;
  }
  EXPECT_NE(readError(dir.file("missing.npy")).find("missing.npy: "), std::string::npos);
}

TEST(Npy, ADirectoryIsADataSetWithAFieldPerFile) {
  ScratchDir dir;
  ASSERT_FALSE(llvm::sys::fs::create_directories(dir.file("train")));
  ASSERT_FALSE(llvm::sys::fs::create_directories(dir.file("test")));
  dir.write("train/x.npy", npy("<f4", "(3, 2)", raw<float>({0, 1, 2, 3, 4, 5})));
  dir.write("train/y.npy", npy("<i4", "(3,)", raw<int32_t>({2, 0, 1})));
  dir.write("train/notes.txt", "not an array");
  dir.write("test/x.npy", npy("<f4", "(1, 2)", raw<float>({9, 8})));
  dir.write("test/y.npy", npy("<i4", "(1,)", raw<int32_t>({1})));

  auto spec = parseDataSpec("npy:" + dir.path());
  ASSERT_TRUE(bool(spec)) << llvm::toString(spec.takeError());
  EXPECT_EQ(spec->source, DataSource::Npy);
  EXPECT_EQ(spec->str(), "npy:" + dir.path());
  auto train = openDataset(*spec, Split::Train, 0);
  ASSERT_TRUE(bool(train)) << llvm::toString(train.takeError());
  EXPECT_EQ((*train)->size(), 3);
  EXPECT_EQ((*train)->description(), "npy:" + dir.path() + " train");
  auto batch = (*train)->gather({2, 0});
  ASSERT_TRUE(bool(batch)) << llvm::toString(batch.takeError());
  EXPECT_EQ(batch->at("x").data<float>()[0], 4.0f);
  EXPECT_EQ(batch->at("y").data<int32_t>()[1], 2);
  auto test = openDataset(*spec, Split::Test, 0);
  ASSERT_TRUE(bool(test));
  EXPECT_EQ((*test)->size(), 1);

  // A model input of another dtype names the file.
  std::vector<InputSlot> inputs = {{"x", ir::TensorType(ir::DType::F32, {ir::kBatchDim, 2})},
                                   {"y", ir::TensorType(ir::DType::I64, {ir::kBatchDim})}};
  auto requests = requestsForInputs(**train, inputs);
  ASSERT_FALSE(bool(requests));
  std::string message = llvm::toString(requests.takeError());
  EXPECT_NE(message.find("field 'y' (" + dir.file("train/y.npy") + ")"), std::string::npos)
      << message;

  // Arrays of one split with different numbers of rows name both files.
  dir.write("train/z.npy", npy("<f4", "(2,)", raw<float>({1, 2})));
  auto mismatched = openDataset(*spec, Split::Train, 0);
  ASSERT_FALSE(bool(mismatched));
  message = llvm::toString(mismatched.takeError());
  EXPECT_NE(message.find(dir.file("train/z.npy") + " has 2 rows and " + dir.file("train/x.npy") +
                         " 3: every array of a split needs one row per example"),
            std::string::npos)
      << message;
}

TEST(Npy, AMissingSplitOrAnEmptyOneSaysWhatTheDirectoryNeeds) {
  ScratchDir dir;
  auto spec = parseDataSpec("npy:" + dir.path());
  ASSERT_TRUE(bool(spec));
  auto none = openDataset(*spec, Split::Train, 0);
  ASSERT_FALSE(bool(none));
  EXPECT_NE(llvm::toString(none.takeError())
                .find("is not a directory (npy:DIR reads DIR/train/NAME.npy and "
                      "DIR/test/NAME.npy, one file per model input)"),
            std::string::npos);
  ASSERT_FALSE(llvm::sys::fs::create_directories(dir.file("train")));
  auto empty = openDataset(*spec, Split::Train, 0);
  ASSERT_FALSE(bool(empty));
  EXPECT_NE(llvm::toString(empty.takeError()).find("no .npy files"), std::string::npos);
  EXPECT_FALSE(bool(parseDataSpec("npy:")));
}

} // namespace
