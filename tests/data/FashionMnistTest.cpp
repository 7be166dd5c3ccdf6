// Fashion-MNIST: the real files of dataset-fashion-mnist, small written ones, and their errors.
#include <algorithm>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "runtime/data/FashionMnist.h"
#include "runtime/data/Idx.h"
#include "tests/data/ScratchDir.h"
#include "llvm/Support/FileSystem.h"

using namespace prism;
using namespace prism::runtime::data;
using prism::runtime::data::testing::ScratchDir;

namespace {

bool fashionMnistInstalled() {
  return llvm::sys::fs::exists(std::string(kFashionMnistDefaultDir) +
                               "/train-images-idx3-ubyte.gz");
}

// Writes u8 images [n, h, w] and labels [n] as the upstream file names of `prefix`.
void writeSplit(const ScratchDir &dir, const std::string &prefix, int64_t n, int64_t h, int64_t w,
                const std::vector<uint8_t> &labels, bool compress) {
  IdxArray images;
  images.dims = {n, h, w};
  for (int64_t i = 0; i < n * h * w; ++i)
    images.bytes.push_back(static_cast<uint8_t>(i * 37 % 256));
  IdxArray labelArray;
  labelArray.dims = {static_cast<int64_t>(labels.size())};
  labelArray.bytes = labels;
  std::string suffix = compress ? ".gz" : "";
  ASSERT_FALSE(
      bool(writeIdxFile(dir.file(prefix + "-images-idx3-ubyte" + suffix), images, compress)));
  ASSERT_FALSE(
      bool(writeIdxFile(dir.file(prefix + "-labels-idx1-ubyte" + suffix), labelArray, compress)));
}

std::string loadError(const std::string &dir, Split split = Split::Train) {
  auto d = loadFashionMnist(dir, split);
  if (d) {
    ADD_FAILURE() << dir << " loaded";
    return "";
  }
  return llvm::toString(d.takeError());
}

} // namespace

TEST(FashionMnist, RealTrainSplit) {
  if (!fashionMnistInstalled())
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  auto d = loadFashionMnist(kFashionMnistDefaultDir, Split::Train);
  ASSERT_TRUE(bool(d)) << llvm::toString(d.takeError());
  ImageDataset &train = **d;
  EXPECT_EQ(train.size(), 60000);
  EXPECT_EQ(train.description(), "fashion-mnist train");
  EXPECT_EQ(train.height(), 28);
  EXPECT_EQ(train.width(), 28);
  EXPECT_EQ(train.channels(), 1);
  // The first ten labels of the upstream train set: ankle boot, T-shirt, T-shirt, dress, ...
  int expected[10] = {9, 0, 0, 3, 0, 2, 7, 2, 5, 5};
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(train.label(i), expected[i]) << i;
  EXPECT_EQ(fashionMnistClassName(train.label(0)), "Ankle boot");
  // Balanced classes: 6,000 of each.
  std::vector<int> perClass(10, 0);
  for (int64_t i = 0; i < train.size(); ++i)
    ++perClass[train.label(i)];
  for (int c = 0; c < 10; ++c)
    EXPECT_EQ(perClass[c], 6000) << c;

  runtime::Tensor images = train.images();
  EXPECT_EQ(images.shape(), (std::vector<int64_t>{60000, 28, 28, 1}));
  const float *px = images.data<float>();
  float lo = 1, hi = 0;
  double firstImageSum = 0;
  for (int64_t i = 0; i < images.numElements(); ++i) {
    lo = std::min(lo, px[i]);
    hi = std::max(hi, px[i]);
    if (i < 784)
      firstImageSum += px[i];
  }
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);
  // The bytes of the first image sum to 76,247.
  EXPECT_NEAR(firstImageSum, 76247.0 / 255.0, 1e-3);

  runtime::Tensor flat = train.flatImages();
  EXPECT_EQ(flat.shape(), (std::vector<int64_t>{60000, 784}));
  EXPECT_EQ(std::memcmp(flat.raw(), images.raw(), images.numBytes()), 0);
  runtime::Tensor labels = train.labels();
  EXPECT_EQ(labels.dtype(), ir::DType::I32);
  EXPECT_EQ(labels.shape(), (std::vector<int64_t>{60000}));
  EXPECT_EQ(labels.data<int32_t>()[3], 3);
}

TEST(FashionMnist, RealTestSplit) {
  if (!fashionMnistInstalled())
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  auto d = loadFashionMnist(kFashionMnistDefaultDir, Split::Test);
  ASSERT_TRUE(bool(d)) << llvm::toString(d.takeError());
  EXPECT_EQ((*d)->size(), 10000);
  int expected[10] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ((*d)->label(i), expected[i]) << i;
}

TEST(FashionMnist, MissingDirectoryNamesThePackage) {
  EXPECT_EQ(loadError("/nonexistent/fashion"),
            "error: Fashion-MNIST not found in /nonexistent/fashion: install Debian's "
            "dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or pass --data "
            "fashion-mnist:DIR");
}

TEST(FashionMnist, IncompleteDirectoryNamesTheMissingFile) {
  ScratchDir dir;
  writeSplit(dir, "train", 2, 2, 2, {1, 2}, true);
  llvm::sys::fs::remove(dir.file("train-labels-idx1-ubyte.gz"));
  std::string error = loadError(dir.path());
  EXPECT_NE(error.find("Fashion-MNIST in " + dir.path() +
                       " is incomplete: no train-labels-idx1-ubyte[.gz]"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("apt-get install dataset-fashion-mnist"), std::string::npos) << error;
}

TEST(FashionMnist, SmallWrittenSplitsPlainAndGzip) {
  ScratchDir dir;
  writeSplit(dir, "train", 3, 2, 4, {7, 0, 9}, true);
  writeSplit(dir, "t10k", 1, 2, 4, {4}, false);
  auto train = loadFashionMnist(dir.path(), Split::Train);
  ASSERT_TRUE(bool(train)) << llvm::toString(train.takeError());
  EXPECT_EQ((*train)->size(), 3);
  EXPECT_EQ((*train)->label(2), 9);
  auto pixel = (*train)->example("image", 1);
  ASSERT_TRUE(bool(pixel)) << llvm::toString(pixel.takeError());
  EXPECT_EQ(pixel->shape(), (std::vector<int64_t>{2, 4, 1}));
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(pixel->data<float>()[i], static_cast<float>((8 + i) * 37 % 256) / 255.0f) << i;
  auto label = (*train)->example("y", 0);
  ASSERT_TRUE(bool(label)) << llvm::toString(label.takeError());
  EXPECT_EQ(label->data<int32_t>()[0], 7);

  auto test = loadFashionMnist(dir.path(), Split::Test);
  ASSERT_TRUE(bool(test)) << llvm::toString(test.takeError());
  EXPECT_EQ((*test)->size(), 1);
  EXPECT_EQ((*test)->description(), "fashion-mnist test");
}

TEST(FashionMnist, InconsistentFiles) {
  ScratchDir counts;
  writeSplit(counts, "train", 3, 2, 2, {1, 2}, false);
  EXPECT_NE(loadError(counts.path())
                .find("holds 2 labels, but " + counts.file("train-images-idx3-ubyte") +
                      " holds 3 images"),
            std::string::npos);

  ScratchDir range;
  writeSplit(range, "train", 2, 2, 2, {3, 10}, false);
  std::string error = loadError(range.path());
  EXPECT_EQ(error, range.file("train-labels-idx1-ubyte") +
                       ": error: label 1 is 10, beyond the 10 classes");

  ScratchDir rank;
  writeSplit(rank, "train", 2, 2, 2, {3, 1}, false);
  IdxArray flat;
  flat.dims = {2, 4};
  flat.bytes.assign(8, 0);
  ASSERT_FALSE(bool(writeIdxFile(rank.file("train-images-idx3-ubyte"), flat, false)));
  EXPECT_NE(loadError(rank.path()).find("expected images u8 [N, height, width], found 2x4 u8"),
            std::string::npos);
}

TEST(FashionMnist, ModelInputsBindToFieldsAndAliases) {
  ScratchDir dir;
  writeSplit(dir, "train", 2, 28, 28, {1, 2}, true);
  auto d = loadFashionMnist(dir.path(), Split::Train);
  ASSERT_TRUE(bool(d)) << llvm::toString(d.takeError());
  using ir::DType;
  using ir::kBatchDim;
  std::vector<InputSlot> mlp = {{"x", ir::TensorType(DType::F32, {kBatchDim, 784})},
                                {"y", ir::TensorType(DType::I32, {kBatchDim})}};
  auto requests = requestsForInputs(**d, mlp);
  ASSERT_TRUE(bool(requests)) << llvm::toString(requests.takeError());
  auto batch = (*d)->gather({1, 0}, *requests);
  ASSERT_TRUE(bool(batch)) << llvm::toString(batch.takeError());
  EXPECT_EQ(batch->at("x").shape(), (std::vector<int64_t>{2, 784}));
  EXPECT_EQ(batch->at("y").data<int32_t>()[0], 2);
  EXPECT_EQ(batch->at("y").data<int32_t>()[1], 1);

  std::vector<InputSlot> cnn = {{"x", ir::TensorType(DType::F32, {kBatchDim, 28, 28, 1})}};
  requests = requestsForInputs(**d, cnn);
  ASSERT_TRUE(bool(requests)) << llvm::toString(requests.takeError());
  batch = (*d)->gather({0}, *requests);
  ASSERT_TRUE(bool(batch)) << llvm::toString(batch.takeError());
  EXPECT_EQ(batch->at("x").shape(), (std::vector<int64_t>{1, 28, 28, 1}));

  auto expectError = [&](InputSlot slot, const std::string &text) {
    auto r = requestsForInputs(**d, {slot});
    ASSERT_FALSE(bool(r)) << slot.name;
    std::string error = llvm::toString(r.takeError());
    EXPECT_NE(error.find(text), std::string::npos) << error;
  };
  expectError({"x", ir::TensorType(DType::F32, {kBatchDim, 100})},
              "has shape [28, 28, 1] per example, which cannot be read as [100]");
  expectError({"y", ir::TensorType(DType::F32, {kBatchDim})},
              "cannot be fed from field 'label' of fashion-mnist train, which is i32[] per "
              "example");
  expectError({"tokens", ir::TensorType(DType::I32, {kBatchDim, 20})}, "has no field");
  expectError({"x", ir::TensorType(DType::F32, {784})}, "needs the batch dimension B first");
}
