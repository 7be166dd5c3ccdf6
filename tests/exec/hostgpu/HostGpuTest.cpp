// The executor on a device other than the CPU, without a GPU: the `cuda` kind is served here by
// a device of host memory (its tensors are not the host's: every copy goes through the device's
// counted copies) and the CPU's kernels, the cross-entropy ones wrapped to check later
// (Kernel::checksLater) as a GPU's flagging kernels do. Checked: what such kernels flag is
// reported with the op's model line before any state is written, once a step; gradient
// accumulation over micro-batches sums device values in host memory and trains as on the CPU;
// training reports the device's memory and copies, and copies within the device are not
// counted.
// Its own binary: it registers that device and kernels of its own under `cuda`.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "runtime/data/DataSpec.h"
#include "runtime/exec/Device.h"
#include "runtime/exec/Executor.h"
#include "runtime/train/Trainer.h"
#include "tests/exec/TinyModel.h"

namespace prism {
namespace {

using runtime::Kernel;
using runtime::KernelSpec;
using runtime::RuntimeValue;
using runtime::Tensor;

// What the kernels did, in order: "run <op>" and "check <op>".
std::vector<std::string> &events() {
  static std::vector<std::string> all;
  return all;
}

// Host memory under the name cuda:0 (copies are plain, and counted as a GPU's).
class HostMemoryGpu final : public runtime::Device {
public:
  HostMemoryGpu() : Device(ir::DeviceId{ir::DeviceKind::Cuda, 0}) {}
  llvm::Expected<std::shared_ptr<void>> allocate(size_t bytes) override {
    void *memory = std::aligned_alloc(64, (std::max<size_t>(bytes, 1) + 63) / 64 * 64);
    return std::shared_ptr<void>(memory, std::free);
  }

protected:
  llvm::Error copyToDevice(void *dst, const void *src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return llvm::Error::success();
  }
  llvm::Error copyToHost(void *dst, const void *src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return llvm::Error::success();
  }
  llvm::Error copyOnDevice(void *dst, const void *src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return llvm::Error::success();
  }
};

// The CPU's kernel of an op; the cross-entropy ones keep their error for `check`.
class Wrapped final : public Kernel {
public:
  Wrapped(std::unique_ptr<Kernel> inner, std::string op, bool later)
      : inner_(std::move(inner)), op_(std::move(op)), later_(later) {}
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    events().push_back("run " + op_);
    llvm::Error ran = inner_->run(inputs, outputs);
    if (!later_)
      return ran;
    flagged_ = ran ? llvm::toString(std::move(ran)) : "";
    return llvm::Error::success();
  }
  bool checksLater() const override { return later_; }
  llvm::Error check() override {
    events().push_back("check " + op_);
    if (flagged_.empty())
      return llvm::Error::success();
    return ir::makeError(llvm::StringRef(flagged_).drop_front(strlen("error: ")));
  }

private:
  std::unique_ptr<Kernel> inner_;
  std::string op_;
  bool later_;
  std::string flagged_;
};

llvm::Expected<std::unique_ptr<Kernel>> wrap(const KernelSpec &spec) {
  auto inner = runtime::findKernel(spec.op->name(), ir::DeviceKind::Cpu)(spec);
  if (!inner)
    return inner.takeError();
  bool later = spec.op->name().startswith("softmax_cross_entropy");
  return std::make_unique<Wrapped>(std::move(*inner), spec.op->name().str(), later);
}

// `cuda` devices as HostMemoryGpu, with the wrapped CPU kernel of every op of `module` (added
// again for each module).
void serveCudaFor(const ir::Module &module) {
  runtime::registerDeviceFactory(ir::DeviceKind::Cuda,
                                 [](ir::DeviceId, const runtime::DeviceOptions &)
                                     -> llvm::Expected<std::unique_ptr<runtime::Device>> {
                                   return std::make_unique<HostMemoryGpu>();
                                 });
  static const ir::Module *ops;
  ops = &module;
  runtime::registerKernelFamily(ir::DeviceKind::Cuda, [](runtime::KernelRegistry &registry) {
    for (const auto &op : ops->ops())
      registry.add(op->name(), wrap);
  });
}

std::unique_ptr<runtime::Executor> executorOn(const ir::Module &module,
                                              std::shared_ptr<runtime::VariableStore> store,
                                              runtime::ExecutorOptions options = {}) {
  serveCudaFor(module);
  options.device = ir::DeviceId{ir::DeviceKind::Cuda, 0};
  auto executor = runtime::Executor::create(module, store, options);
  EXPECT_TRUE(bool(executor)) << llvm::toString(executor.takeError());
  return executor ? std::move(*executor) : nullptr;
}

runtime::Feeds feeds(int32_t secondLabel) {
  Tensor x(ir::DType::F32, {2, 3}), y(ir::DType::I32, {2});
  for (int64_t i = 0; i < x.numElements(); ++i)
    x.data<float>()[i] = 0.1f * static_cast<float>(i + 1);
  y.data<int32_t>()[0] = 1;
  y.data<int32_t>()[1] = secondLabel;
  return {{"x", x}, {"y", y}};
}

std::vector<float> weights(runtime::Executor &executor) {
  EXPECT_FALSE(bool(executor.variablesToHost()));
  const Tensor *w = executor.variables().find("w");
  return std::vector<float>(w->data<float>(), w->data<float>() + w->numElements());
}

size_t indexOf(const std::string &event) {
  auto it = std::find(events().begin(), events().end(), event);
  return static_cast<size_t>(it - events().begin());
}

TEST(CheckLater, AFlaggedLabelIsReportedAtItsLineAndNoVariableIsWritten) {
  auto module = testing::tinyModule();
  auto store = std::make_shared<runtime::VariableStore>();
  ASSERT_FALSE(bool(store->initialize(*module, 3)));
  auto executor = executorOn(*module, store);
  ASSERT_TRUE(executor);
  const std::vector<float> before = weights(*executor);

  events().clear();
  llvm::Error err = executor->step(feeds(/*secondLabel=*/9));
  ASSERT_TRUE(bool(err));
  EXPECT_EQ(llvm::toString(std::move(err)),
            "tiny.prism:6:3: error: 'softmax_cross_entropy': label 9 of row 1 is outside [0, 4)");
  EXPECT_EQ(weights(*executor), before); // the update did not run
  EXPECT_EQ(indexOf("run apply_sgd"), events().size()) << "the update ran";

  // A good step: both cross-entropy kernels are checked once, after both ran and before the
  // update; the weights move.
  events().clear();
  ASSERT_FALSE(bool(executor->step(feeds(2))));
  const size_t forward = indexOf("run softmax_cross_entropy");
  const size_t gradient = indexOf("run softmax_cross_entropy_grad");
  const size_t checked = indexOf("check softmax_cross_entropy");
  const size_t update = indexOf("run apply_sgd");
  ASSERT_LT(update, events().size()) << ::testing::PrintToString(events());
  EXPECT_LT(forward, gradient);
  EXPECT_LT(gradient, checked);
  EXPECT_LT(checked, update);
  EXPECT_EQ(std::count(events().begin(), events().end(), "check softmax_cross_entropy"), 1);
  EXPECT_EQ(std::count(events().begin(), events().end(), "check softmax_cross_entropy_grad"), 1);
  EXPECT_NE(weights(*executor), before);
}

// An evaluation step (no state written) checks at its end.
TEST(CheckLater, AnEvaluationStepChecksAtItsEnd) {
  auto module = testing::tinyModule("infer-shapes");
  ASSERT_TRUE(module);
  auto store = std::make_shared<runtime::VariableStore>();
  ASSERT_FALSE(bool(store->initialize(*module, 3)));
  auto executor = executorOn(*module, store);
  ASSERT_TRUE(executor);
  events().clear();
  llvm::Error err = executor->step(feeds(-1));
  ASSERT_TRUE(bool(err));
  EXPECT_EQ(llvm::toString(std::move(err)),
            "tiny.prism:6:3: error: 'softmax_cross_entropy': label -1 of row 1 is outside [0, 4)");
  EXPECT_EQ(events().back(), "check softmax_cross_entropy");
}

// An embedding bag: its table's gradient is sparse (rows of the tokens a micro-batch touches).
constexpr const char *kBag = R"(model bag {
  input tokens : i32[B, 3]
  input y : i32[B]
  var emb : f32[12, 4] = uniform(min = -0.5, max = 0.5)
  var out.w : f32[4, 4] = glorot_uniform
  %pooled = reduce_mean(gather(emb, tokens), axes = [1])
  %loss = softmax_cross_entropy(matmul(%pooled, out.w), y)
  minimize %loss with adam(lr = 0.01)
}
)";

// Micro-batches of 3 and 2 examples for tiny (x, y) or bag (tokens, y); step `s` differs.
std::vector<runtime::Feeds> microBatches(const ir::Module &module, int s) {
  std::vector<runtime::Feeds> batches;
  for (int64_t size : {3, 2}) {
    runtime::Feeds feeds;
    Tensor y(ir::DType::I32, {size});
    for (int64_t i = 0; i < size; ++i)
      y.data<int32_t>()[i] = static_cast<int32_t>((i + s + size) % 4);
    feeds["y"] = y;
    if (module.name() == "bag") {
      Tensor tokens(ir::DType::I32, {size, 3});
      for (int64_t i = 0; i < tokens.numElements(); ++i)
        tokens.data<int32_t>()[i] = static_cast<int32_t>((5 * i + s) % 7); // rows repeat
      feeds["tokens"] = tokens;
    } else {
      Tensor x(ir::DType::F32, {size, 3});
      for (int64_t i = 0; i < x.numElements(); ++i)
        x.data<float>()[i] = 0.1f * static_cast<float>((i * 7 + s) % 11) - 0.5f;
      feeds["x"] = x;
    }
    batches.push_back(std::move(feeds));
  }
  return batches;
}

// Three accumulated steps on the CPU and on the host-memory GPU: the same variables, bit for
// bit (the same kernels, the same sums in host memory), and the GPU's values crossed by counted
// copies.
void expectAccumulationAsOnTheCpu(const ir::Module &module) {
  runtime::ExecutorOptions options;
  options.accumulate = true;
  auto cpuStore = std::make_shared<runtime::VariableStore>();
  auto gpuStore = std::make_shared<runtime::VariableStore>();
  ASSERT_FALSE(bool(cpuStore->initialize(module, 5)));
  ASSERT_FALSE(bool(gpuStore->initialize(module, 5)));
  auto cpu = runtime::Executor::create(module, cpuStore, options);
  ASSERT_TRUE(bool(cpu)) << llvm::toString(cpu.takeError());
  auto gpu = executorOn(module, gpuStore, options);
  ASSERT_TRUE(gpu);
  for (int s = 0; s < 3; ++s) {
    llvm::Error onCpu = (*cpu)->accumulatedStep(microBatches(module, s));
    ASSERT_FALSE(bool(onCpu)) << llvm::toString(std::move(onCpu));
    llvm::Error onGpu = gpu->accumulatedStep(microBatches(module, s));
    ASSERT_FALSE(bool(onGpu)) << llvm::toString(std::move(onGpu));
    EXPECT_EQ(gpu->loss(), (*cpu)->loss());
  }
  const runtime::CopyCounters before = gpu->device().copies();
  EXPECT_GT(before.toHostCopies, 0);
  EXPECT_GT(before.toDeviceCopies, 0);
  ASSERT_FALSE(bool(gpu->variablesToHost()));
  for (const auto &var : module.variables()) {
    const Tensor *a = cpuStore->find(var->name()), *b = gpuStore->find(var->name());
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(b->onHost());
    EXPECT_EQ(std::memcmp(a->raw(), b->raw(), static_cast<size_t>(a->numBytes())), 0)
        << var->name();
  }
}

TEST(DeviceAccumulation, DenseGradientsSumInHostMemoryAsOnTheCpu) {
  auto module = testing::tinyModule();
  ASSERT_TRUE(module);
  expectAccumulationAsOnTheCpu(*module);
}

TEST(DeviceAccumulation, SparseGradientsSumInHostMemoryAsOnTheCpu) {
  auto module = testing::compiledModule(kBag, "bag.prism");
  ASSERT_TRUE(module);
  expectAccumulationAsOnTheCpu(*module);
}

// Training through the trainer on the host-memory GPU: the run reports its device, memory and
// copies (feeds each step, variables up once and back once), and the CPU reports none.
TEST(DeviceUse, TrainingReportsTheDevicesMemoryAndCopies) {
  auto module = testing::compiledModule(kBag, "bag.prism");
  ASSERT_TRUE(module);
  auto data = runtime::data::parseDataSpec("zipf:12,tokens=3,classes=4,examples=64");
  ASSERT_TRUE(bool(data)) << llvm::toString(data.takeError());
  runtime::train::TrainOptions options;
  options.data = *data;
  options.steps = 3;
  options.batchSize = 8;
  options.quiet = true;
  options.evaluate = false;
  auto cpu = runtime::train::train(*module, options);
  ASSERT_TRUE(bool(cpu)) << llvm::toString(cpu.takeError());
  EXPECT_EQ(runtime::train::describeDeviceUse(cpu->device), "");
  EXPECT_EQ(cpu->device.copies.toDeviceCopies, 0);

  serveCudaFor(*module);
  options.device = ir::DeviceId{ir::DeviceKind::Cuda, 0};
  auto gpu = runtime::train::train(*module, options);
  ASSERT_TRUE(bool(gpu)) << llvm::toString(gpu.takeError());
  const runtime::train::DeviceUse &use = gpu->device;
  EXPECT_EQ(use.device.str(), "cuda:0");
  EXPECT_EQ(use.steps, 3);
  EXPECT_GT(use.arenaBytes, 0u);
  // Per step the two feeds in and the loss out; once, the variables (Adam's moments and step
  // too) up and back.
  const int64_t variables = static_cast<int64_t>(module->variables().size());
  EXPECT_EQ(use.copies.toDeviceCopies, 3 * 2 + variables);
  EXPECT_EQ(use.copies.toHostCopies, 3 + variables);
  const std::string text = runtime::train::describeDeviceUse(use);
  EXPECT_EQ(text.rfind("cuda:0: arena ", 0), 0u) << text;
  EXPECT_NE(text.find("; " + std::to_string(3 * 2 + variables) + " copies to the device ("),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(" in 3 steps"), std::string::npos) << text;
  // The same training as on the CPU.
  for (const auto &var : module->variables()) {
    const Tensor *a = cpu->store->find(var->name()), *b = gpu->store->find(var->name());
    ASSERT_TRUE(a && b);
    EXPECT_EQ(std::memcmp(a->raw(), b->raw(), static_cast<size_t>(a->numBytes())), 0)
        << var->name();
  }
}

// A copy within the device (a sole worker's all-reduce keeps its values there) is not a copy
// between host and device: it is not counted.
TEST(DeviceUse, ACopyWithinTheDeviceIsNotCounted) {
  HostMemoryGpu gpu;
  auto a = gpu.allocateTensor(ir::DType::F32, {3});
  auto b = gpu.allocateTensor(ir::DType::F32, {3});
  ASSERT_TRUE(a && b);
  Tensor host(ir::DType::F32, {3});
  for (int i = 0; i < 3; ++i)
    host.data<float>()[i] = static_cast<float>(i + 1);
  ASSERT_FALSE(bool(gpu.copyInto(*a, host)));
  ASSERT_FALSE(bool(gpu.copyInto(*b, *a)));
  EXPECT_EQ(gpu.copies().toDeviceCopies, 1);
  EXPECT_EQ(gpu.copies().toHostCopies, 0);
  auto back = gpu.toHost(*b);
  ASSERT_TRUE(bool(back));
  EXPECT_EQ(back->data<float>()[2], 3.0f);
}

} // namespace
} // namespace prism
