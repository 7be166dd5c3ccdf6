// A training loop of one's own with the Prism library: Fashion-MNIST read and batched here,
// each batch fed to a Session, one step at a time; the loss fetched, the model saved, restored
// into a second session, and both continued to show that they agree.
//
//   custom_loop MODEL [--data DIR] [--steps N] [--batch B] [--checkpoint DIR]
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <prism/Prism.h>

namespace {

struct Images {
  int64_t count = 0;
  std::vector<uint8_t> pixels; // count x 784
  std::vector<int32_t> labels;
};

// An IDX file (gzip-compressed): big-endian header, then the bytes.
bool readIdx(const std::string &path, int dims, std::vector<int64_t> &shape,
             std::vector<uint8_t> &bytes) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (!file)
    return false;
  unsigned char header[4 + 4 * 3];
  int headerBytes = 4 + 4 * dims;
  bool ok = gzread(file, header, headerBytes) == headerBytes;
  int64_t total = 1;
  shape.clear();
  for (int d = 0; ok && d < dims; ++d) {
    const unsigned char *p = header + 4 + 4 * d;
    shape.push_back((int64_t(p[0]) << 24) | (p[1] << 16) | (p[2] << 8) | p[3]);
    total *= shape.back();
  }
  if (ok) {
    bytes.resize(static_cast<size_t>(total));
    ok = gzread(file, bytes.data(), static_cast<unsigned>(total)) == total;
  }
  gzclose(file);
  return ok;
}

bool loadSplit(const std::string &dir, const std::string &prefix, Images &out) {
  std::vector<int64_t> shape;
  std::vector<uint8_t> labels;
  if (!readIdx(dir + "/" + prefix + "-images-idx3-ubyte.gz", 3, shape, out.pixels) ||
      !readIdx(dir + "/" + prefix + "-labels-idx1-ubyte.gz", 1, shape, labels))
    return false;
  out.count = static_cast<int64_t>(labels.size());
  out.labels.assign(labels.begin(), labels.end());
  return true;
}

// Batch `index` of `size` images: pixels scaled to [0, 1] (the model standardizes them).
void makeBatch(const Images &images, int64_t index, int64_t size, prism::api::Tensor &x,
               prism::api::Tensor &y) {
  x = prism::api::Tensor(prism::api::DType::F32, {size, 784});
  y = prism::api::Tensor(prism::api::DType::I32, {size});
  float *pixels = x.data<float>();
  int32_t *labels = y.data<int32_t>();
  for (int64_t r = 0; r < size; ++r) {
    int64_t image = (index * size + r) % images.count;
    for (int64_t c = 0; c < 784; ++c)
      pixels[r * 784 + c] = images.pixels[image * 784 + c] / 255.0f;
    labels[r] = images.labels[image];
  }
}

bool check(const prism::api::Status &status) {
  if (!status.ok())
    std::fprintf(stderr, "%s\n", status.message().c_str());
  return status.ok();
}

// One step on batch `index`: feed, step.
bool trainStep(prism::api::Session &session, const Images &images, int64_t index, int64_t batch) {
  prism::api::Tensor x, y;
  makeBatch(images, index, batch, x, y);
  return check(session.feed("x", x)) && check(session.feed("y", y)) && check(session.step());
}

double accuracy(prism::api::Session &session, const Images &test, int64_t examples) {
  prism::api::Tensor x, y;
  makeBatch(test, 0, examples, x, y);
  if (!check(session.feed("x", x)) || !check(session.feed("y", y)))
    return -1;
  auto values = session.evaluate({"logits"});
  if (!values.ok())
    return check(values.status()), -1;
  const prism::api::Tensor &logits = values->at("logits");
  int64_t classes = logits.shape()[1], correct = 0;
  for (int64_t r = 0; r < examples; ++r) {
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (logits.at(r * classes + c) > logits.at(r * classes + best))
        best = c;
    correct += best == y.data<int32_t>()[r];
  }
  return static_cast<double>(correct) / static_cast<double>(examples);
}

} // namespace

int main(int argc, char **argv) {
  std::string modelPath, data = "/usr/share/datasets/fashion-mnist", checkpoint = "checkpoint";
  int64_t steps = 200, batch = 64;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    bool hasValue = i + 1 < argc;
    if (arg == "--data" && hasValue)
      data = argv[++i];
    else if (arg == "--steps" && hasValue)
      steps = std::atoll(argv[++i]);
    else if (arg == "--batch" && hasValue)
      batch = std::atoll(argv[++i]);
    else if (arg == "--checkpoint" && hasValue)
      checkpoint = argv[++i];
    else if (modelPath.empty() && arg[0] != '-')
      modelPath = arg;
    else {
      std::fprintf(stderr, "usage: custom_loop MODEL [--data DIR] [--steps N] [--batch B] "
                           "[--checkpoint DIR]\n");
      return 2;
    }
  }
  if (modelPath.empty() || steps < 20 || batch < 1) {
    std::fprintf(stderr, "usage: custom_loop MODEL [--data DIR] [--steps N>=20] [--batch B] "
                         "[--checkpoint DIR]\n");
    return 2;
  }
  Images train, test;
  if (!loadSplit(data, "train", train) || !loadSplit(data, "t10k", test)) {
    std::fprintf(stderr, "cannot read Fashion-MNIST from %s\n", data.c_str());
    return 1;
  }

  auto model = prism::api::Model::load(modelPath);
  if (!model.ok())
    return check(model.status()), 1;
  auto session = prism::api::Session::open(*model);
  if (!session.ok())
    return check(session.status()), 1;
  std::printf("prism %s: training %s on %lld Fashion-MNIST images, batch %lld\n",
              prism::api::version(), model->name().c_str(), static_cast<long long>(train.count),
              static_cast<long long>(batch));

  // Train, remembering the mean loss of the first and the last ten steps.
  const int64_t window = 10;
  double first = 0, last = 0;
  for (int64_t step = 0; step < steps; ++step) {
    if (!trainStep(*session, train, step, batch))
      return 1;
    double loss = session->loss();
    if (step < window)
      first += loss / window;
    if (step >= steps - window)
      last += loss / window;
    if ((step + 1) % 20 == 0)
      std::printf("step %lld loss %.4f\n", static_cast<long long>(step + 1), loss);
  }
  std::printf("loss %s: %.4f over the first %lld steps, %.4f over the last %lld\n",
              last < first ? "decreased" : "did not decrease", first,
              static_cast<long long>(window), last, static_cast<long long>(window));
  std::printf("test accuracy %.4f on 1000 images\n", accuracy(*session, test, 1000));

  // Save, restore into a fresh session, and continue both on the same batches.
  if (!check(session->save(checkpoint)))
    return 1;
  std::printf("saved %s at step %lld\n", checkpoint.c_str(),
              static_cast<long long>(session->globalStep()));
  auto restored = prism::api::Session::open(*model);
  if (!restored.ok() || !check(restored->restore(checkpoint)))
    return check(restored.status()), 1;
  std::printf("restored %s at step %lld\n", checkpoint.c_str(),
              static_cast<long long>(restored->globalStep()));
  bool equal = true;
  for (int64_t step = steps; step < steps + 5; ++step) {
    if (!trainStep(*session, train, step, batch) || !trainStep(*restored, train, step, batch))
      return 1;
    equal = equal && session->loss() == restored->loss();
    std::printf("step %lld loss %.6f, restored %.6f\n", static_cast<long long>(step + 1),
                session->loss(), restored->loss());
  }
  auto w1 = session->fetch("w1"), w1Restored = restored->fetch("w1");
  if (w1.ok() && w1Restored.ok())
    for (int64_t i = 0; i < w1->numElements(); ++i)
      equal = equal && w1->at(i) == w1Restored->at(i);
  std::printf("restore %s\n", equal ? "continues exactly" : "differs");
  return last < first && equal ? 0 : 1;
}
