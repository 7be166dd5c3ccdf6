// The GPU kernels against plain CPU loops (in double) on random inputs; every test skips where
// there is no CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>

#include "CudaTestSupport.h"
#include "runtime/cuda/CudaKernels.h"

namespace prism::runtime::cuda {
namespace {

using testing::throwIfError;
using testing::valueOrThrow;

std::vector<float> contents(const DeviceBuffer &buffer) {
  Tensor tensor = valueOrThrow(buffer.download({buffer.size()}));
  return std::vector<float>(tensor.data<float>(), tensor.data<float>() + buffer.size());
}

// |actual - expected| <= bound * scale for every element, reporting the first miss.
void expectClose(const std::vector<float> &actual, const std::vector<double> &expected,
                 const std::vector<double> &scale, double bound) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    ASSERT_LE(std::abs(actual[i] - expected[i]), bound * std::max(scale[i], 1e-30))
        << "element " << i << ": " << actual[i] << ", expected " << expected[i];
}

void expectClose(const std::vector<float> &actual, const std::vector<double> &expected,
                 double bound) {
  std::vector<double> scale(expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    scale[i] = std::abs(expected[i]);
  expectClose(actual, expected, scale, bound);
}

class CudaKernelTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (std::string reason = testing::noDeviceReason(); !reason.empty())
      GTEST_SKIP() << "no CUDA device: " << reason;
    throwIfError(cudaCheck(cudaSetDevice(0), "cudaSetDevice"));
    stream_.emplace(valueOrThrow(CudaStream::create()));
  }

  // Uniform values in [-1, 1], every seventh one exactly 0 (relu's boundary).
  Tensor random(std::vector<int64_t> shape) {
    Tensor tensor(ir::DType::F32, std::move(shape));
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (int64_t i = 0; i < tensor.numElements(); ++i)
      tensor.data<float>()[i] = i % 7 == 3 ? 0.0f : uniform(engine_);
    return tensor;
  }

  DeviceBuffer upload(const Tensor &tensor) {
    return valueOrThrow(DeviceBuffer::upload(tensor, stream()));
  }
  DeviceBuffer allocate(int64_t count) {
    return valueOrThrow(DeviceBuffer::allocate(count, stream()));
  }
  cudaStream_t stream() const { return stream_->get(); }

  std::mt19937 engine_{20240611};
  std::optional<CudaStream> stream_;
};

// Sizes that are not multiples of a block, and one larger than the grid (the stride loop).
constexpr int64_t kCounts[] = {1, 1000, 4096 * 256 + 37};

TEST_F(CudaKernelTest, Relu) {
  for (int64_t count : kCounts) {
    Tensor x = random({count});
    DeviceBuffer dx = upload(x), dy = allocate(count);
    throwIfError(relu(dx.data(), dy.data(), count, stream()));
    std::vector<double> expected(count);
    for (int64_t i = 0; i < count; ++i)
      expected[i] = x.data<float>()[i] > 0 ? x.data<float>()[i] : 0.0;
    expectClose(contents(dy), expected, 1e-5);
  }
}

TEST_F(CudaKernelTest, ReluInPlace) {
  Tensor x = random({999});
  DeviceBuffer dx = upload(x);
  throwIfError(relu(dx.data(), dx.data(), 999, stream()));
  std::vector<double> expected(999);
  for (int64_t i = 0; i < 999; ++i)
    expected[i] = std::max(x.data<float>()[i], 0.0f);
  expectClose(contents(dx), expected, 1e-5);
}

TEST_F(CudaKernelTest, ReluGrad) {
  for (int64_t count : kCounts) {
    Tensor dy = random({count}), x = random({count});
    DeviceBuffer ddy = upload(dy), dxIn = upload(x), ddx = allocate(count);
    throwIfError(reluGrad(ddy.data(), dxIn.data(), ddx.data(), count, stream()));
    std::vector<double> expected(count);
    for (int64_t i = 0; i < count; ++i)
      expected[i] = x.data<float>()[i] > 0 ? dy.data<float>()[i] : 0.0;
    expectClose(contents(ddx), expected, 1e-5);
  }
}

TEST_F(CudaKernelTest, BiasAddAlongTheLastDimension) {
  for (auto [rows, columns] : {std::pair<int64_t, int64_t>{1, 1}, {37, 53}, {1025, 19}}) {
    Tensor x = random({rows, columns}), bias = random({columns});
    DeviceBuffer dx = upload(x), dbias = upload(bias), dy = allocate(rows * columns);
    throwIfError(biasAdd(dx.data(), dbias.data(), dy.data(), rows, columns, stream()));
    std::vector<double> expected(rows * columns), scale(rows * columns);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < columns; ++c) {
        double a = x.data<float>()[r * columns + c], b = bias.data<float>()[c];
        expected[r * columns + c] = a + b;
        scale[r * columns + c] = std::abs(a) + std::abs(b); // the sum may cancel
      }
    expectClose(contents(dy), expected, scale, 1e-5);
  }
}

// The all-reduce's batch-weighted mean: scale by this task's examples, sum, scale by 1 / all.
TEST_F(CudaKernelTest, ScaleAndAxpy) {
  for (int64_t count : kCounts) {
    Tensor x = random({count}), y = random({count});
    DeviceBuffer dx = upload(x), dy = upload(y), scaled = allocate(count);
    const float examples = 24.0f, inverseAll = 1.0f / 56.0f;
    throwIfError(scale(dx.data(), examples, scaled.data(), count, stream()));
    throwIfError(axpy(-0.75f, dx.data(), dy.data(), count, stream()));
    throwIfError(scale(dy.data(), inverseAll, dy.data(), count, stream()));
    std::vector<double> expectedScaled(count), expectedAxpy(count), axpyScale(count);
    for (int64_t i = 0; i < count; ++i) {
      double a = x.data<float>()[i], b = y.data<float>()[i];
      expectedScaled[i] = double(examples) * a;
      expectedAxpy[i] = (b - 0.75 * a) * double(inverseAll);
      axpyScale[i] = (std::abs(b) + 0.75 * std::abs(a)) * double(inverseAll);
    }
    expectClose(contents(scaled), expectedScaled, 1e-5);
    expectClose(contents(dy), expectedAxpy, axpyScale, 1e-5);
  }
}

TEST_F(CudaKernelTest, MatmulEveryTransposition) {
  CublasHandle blas = valueOrThrow(CublasHandle::create());
  const int64_t m = 37, k = 53, n = 19;
  for (bool transposeA : {false, true})
    for (bool transposeB : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << "transpose_a " << transposeA << ", transpose_b " << transposeB);
      Tensor a = transposeA ? random({k, m}) : random({m, k});
      Tensor b = transposeB ? random({n, k}) : random({k, n});
      auto at = [&](int64_t i, int64_t p) -> double {
        return transposeA ? a.data<float>()[p * m + i] : a.data<float>()[i * k + p];
      };
      auto bt = [&](int64_t p, int64_t j) -> double {
        return transposeB ? b.data<float>()[j * k + p] : b.data<float>()[p * n + j];
      };
      DeviceBuffer da = upload(a), db = upload(b), dc = allocate(m * n);
      throwIfError(
          matmul(blas, da.data(), db.data(), dc.data(), m, n, k, transposeA, transposeB, stream()));
      // The bound is relative to Σ |a||b|: a dot product may cancel to near zero.
      std::vector<double> expected(m * n), scale(m * n);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t p = 0; p < k; ++p) {
            expected[i * n + j] += at(i, p) * bt(p, j);
            scale[i * n + j] += std::abs(at(i, p) * bt(p, j));
          }
      expectClose(contents(dc), expected, scale, 1e-4);
    }
}

TEST_F(CudaKernelTest, DownloadChecksTheShape) {
  DeviceBuffer buffer = allocate(6);
  auto tensor = buffer.download({2, 4});
  ASSERT_FALSE(bool(tensor));
  EXPECT_NE(llvm::toString(tensor.takeError()).find("8 elements for a device buffer of 6"),
            std::string::npos);
}

} // namespace
} // namespace prism::runtime::cuda
