// Fashion-MNIST from IDX files: locating them, checking them against each other, scaling pixels.
#include "runtime/data/FashionMnist.h"

#include "ir/Diagnostic.h"
#include "runtime/data/Idx.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

namespace prism::runtime::data {

llvm::StringRef fashionMnistClassName(int label) {
  static const char *const kNames[kFashionMnistClasses] = {
      "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  if (label < 0 || label >= kFashionMnistClasses)
    return "?";
  return kNames[label];
}

ImageDataset::ImageDataset(std::string description, int64_t height, int64_t width, int64_t channels,
                           std::vector<uint8_t> pixels, std::vector<int32_t> labels)
    : description_(std::move(description)), height_(height), width_(width), channels_(channels),
      pixels_(std::move(pixels)), labels_(std::move(labels)) {
  fields_.push_back({"image", {"x", "images"}, ir::DType::F32, {height_, width_, channels_}, {}});
  fields_.push_back({"label", {"y", "labels"}, ir::DType::I32, {}, {}});
}

void ImageDataset::scaleImages(float *dst) const {
  for (size_t i = 0; i < pixels_.size(); ++i)
    dst[i] = static_cast<float>(pixels_[i]) / 255.0f;
}

Tensor ImageDataset::images() const {
  Tensor t(ir::DType::F32, {size(), height_, width_, channels_});
  scaleImages(t.data<float>());
  return t;
}

Tensor ImageDataset::flatImages() const {
  Tensor t(ir::DType::F32, {size(), height_ * width_ * channels_});
  scaleImages(t.data<float>());
  return t;
}

Tensor ImageDataset::labels() const {
  Tensor t(ir::DType::I32, {size()});
  std::copy(labels_.begin(), labels_.end(), t.data<int32_t>());
  return t;
}

void ImageDataset::copyExample(size_t field, int64_t index, void *dst) const {
  if (field == 1) {
    *static_cast<int32_t *>(dst) = labels_[index];
    return;
  }
  int64_t n = height_ * width_ * channels_;
  const uint8_t *src = pixels_.data() + index * n;
  auto *out = static_cast<float *>(dst);
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(src[i]) / 255.0f;
}

llvm::Expected<std::unique_ptr<ImageDataset>> loadIdxImageDataset(llvm::StringRef imagesPath,
                                                                  llvm::StringRef labelsPath,
                                                                  int numClasses,
                                                                  std::string description) {
  auto images = readIdxFile(imagesPath);
  if (!images)
    return images.takeError();
  auto labels = readIdxFile(labelsPath);
  if (!labels)
    return labels.takeError();
  auto fail = [](llvm::StringRef path, const llvm::Twine &message) {
    return ir::makeError(path, ir::SourceLoc{}, message);
  };
  if (images->element != IdxElement::U8 || images->dims.size() != 3)
    return fail(imagesPath, "expected images u8 [N, height, width], found " + images->describe());
  if (labels->element != IdxElement::U8 || labels->dims.size() != 1)
    return fail(labelsPath, "expected labels u8 [N], found " + labels->describe());
  if (images->dims[0] != labels->dims[0])
    return fail(labelsPath, "holds " + llvm::Twine(labels->dims[0]) + " labels, but " + imagesPath +
                                " holds " + llvm::Twine(images->dims[0]) + " images");
  std::vector<int32_t> labelValues(labels->bytes.begin(), labels->bytes.end());
  for (size_t i = 0; i < labelValues.size(); ++i)
    if (labelValues[i] >= numClasses)
      return fail(labelsPath, "label " + llvm::Twine(i) + " is " + llvm::Twine(labelValues[i]) +
                                  ", beyond the " + llvm::Twine(numClasses) + " classes");
  return std::make_unique<ImageDataset>(std::move(description), images->dims[1], images->dims[2], 1,
                                        std::move(images->bytes), std::move(labelValues));
}

namespace {

// `dir/name.gz` if it exists, else `dir/name` if that exists, else nothing.
std::optional<std::string> findIdxFile(llvm::StringRef dir, llvm::StringRef name) {
  for (llvm::StringRef suffix : {".gz", ""}) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, name + suffix);
    if (llvm::sys::fs::is_regular_file(path))
      return std::string(path);
  }
  return std::nullopt;
}

} // namespace

llvm::Expected<std::unique_ptr<ImageDataset>> loadFashionMnist(llvm::StringRef dir, Split split) {
  llvm::StringRef prefix = split == Split::Train ? "train" : "t10k";
  std::string imagesName = (prefix + "-images-idx3-ubyte").str();
  std::string labelsName = (prefix + "-labels-idx1-ubyte").str();
  std::optional<std::string> images = findIdxFile(dir, imagesName);
  std::optional<std::string> labels = findIdxFile(dir, labelsName);
  const char *remedy = "install Debian's dataset-fashion-mnist (apt-get install "
                       "dataset-fashion-mnist) or pass --data fashion-mnist:DIR";
  if (!images && !labels)
    return ir::makeError("Fashion-MNIST not found in " + dir + ": " + remedy);
  if (!images || !labels)
    return ir::makeError("Fashion-MNIST in " + dir + " is incomplete: no " +
                         (images ? labelsName : imagesName) + "[.gz]: " + remedy);
  return loadIdxImageDataset(*images, *labels, kFashionMnistClasses,
                             ("fashion-mnist " + splitName(split)).str());
}

} // namespace prism::runtime::data
