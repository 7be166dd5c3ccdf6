// Fashion-MNIST (and any IDX image/label pair): 28x28 grey images as f32 in [0, 1], i32 labels.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/Dataset.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::data {

// Where Debian's dataset-fashion-mnist package puts the files.
constexpr const char *kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";
constexpr int kFashionMnistClasses = 10;

// `T-shirt/top`, `Trouser`, ... `Ankle boot` for labels 0..9.
llvm::StringRef fashionMnistClassName(int label);

// Images kept as bytes and scaled (pixel / 255) as they are copied out. Fields:
//   image  f32[H, W, C] (aliases x, images); NHWC, so a batch is [B, H, W, C]
//   label  i32[]        (aliases y, labels)
// A model input may read `image` flattened, e.g. x : f32[B, 784].
class ImageDataset : public Dataset {
public:
  ImageDataset(std::string description, int64_t height, int64_t width, int64_t channels,
               std::vector<uint8_t> pixels, std::vector<int32_t> labels);

  int64_t height() const { return height_; }
  int64_t width() const { return width_; }
  int64_t channels() const { return channels_; }
  int32_t label(int64_t index) const { return labels_[index]; }
  uint8_t pixel(int64_t index, int64_t offset) const {
    return pixels_[index * height_ * width_ * channels_ + offset];
  }

  // Every image, f32 [N, H, W, C].
  Tensor images() const;
  // Every image flattened, f32 [N, H * W * C].
  Tensor flatImages() const;
  // Every label, i32 [N].
  Tensor labels() const;

  std::string description() const override { return description_; }
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  const std::vector<FieldInfo> &fields() const override { return fields_; }
  void copyExample(size_t field, int64_t index, void *dst) const override;

private:
  void scaleImages(float *dst) const;

  std::string description_;
  int64_t height_, width_, channels_;
  std::vector<uint8_t> pixels_;
  std::vector<int32_t> labels_;
  std::vector<FieldInfo> fields_;
};

// Reads an IDX images file (u8 [N, H, W]) and labels file (u8 [N], each below `numClasses`).
llvm::Expected<std::unique_ptr<ImageDataset>> loadIdxImageDataset(llvm::StringRef imagesPath,
                                                                  llvm::StringRef labelsPath,
                                                                  int numClasses,
                                                                  std::string description);

// The train (60,000) or test (10,000) split from `dir`, whose files are named as upstream
// (train-images-idx3-ubyte, ...), gzip-compressed (.gz) or not. Missing files give an error that
// names the Debian package and the --data option.
llvm::Expected<std::unique_ptr<ImageDataset>>
loadFashionMnist(llvm::StringRef dir = kFashionMnistDefaultDir, Split split = Split::Train);

} // namespace prism::runtime::data
