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
#include <functional>
#include <regex>

#include "ir/OpTable.h"
#include "runtime/data/DataSpec.h"
#include "runtime/exec/Communication.h"
#include "runtime/exec/Device.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/StagedCommunication.h"
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

// Work "recorded" by a HostMemoryGpu: the kernel runs it was asked for, run again on replay.
class HostRecording final : public runtime::CapturedWork {
public:
  std::vector<std::function<llvm::Error()>> runs;
  llvm::Error replay() override {
    for (auto &run : runs)
      if (auto e = run())
        return e;
    return llvm::Error::success();
  }
};

// Host memory under the name cuda:N (copies are plain, and counted as a GPU's). It captures as a
// GPU does: between beginCapture and endCapture its kernels (Wrapped) are recorded, not run, and
// a copy is an error, as a copy on a capturing GPU's stream would be.
class HostMemoryGpu final : public runtime::Device {
public:
  explicit HostMemoryGpu(int index = 0) : Device(ir::DeviceId{ir::DeviceKind::Cuda, index}) {}
  // Allocations made by every such device so far.
  static inline int64_t allocations = 0;
  llvm::Expected<std::shared_ptr<void>> allocate(size_t bytes) override {
    ++allocations;
    void *memory = std::aligned_alloc(64, (std::max<size_t>(bytes, 1) + 63) / 64 * 64);
    return std::shared_ptr<void>(memory, std::free);
  }

  bool canCapture() const override { return true; }
  llvm::Error beginCapture() override {
    recording_ = std::make_unique<HostRecording>();
    return llvm::Error::success();
  }
  llvm::Expected<std::unique_ptr<runtime::CapturedWork>> endCapture() override {
    if (!recording_)
      return ir::makeError("endCapture without beginCapture");
    return std::unique_ptr<runtime::CapturedWork>(std::move(recording_));
  }
  // While capturing: where a kernel's run goes instead of running.
  HostRecording *recording() const { return recording_.get(); }

protected:
  llvm::Error copyToDevice(void *dst, const void *src, size_t bytes) override {
    return copy(dst, src, bytes);
  }
  llvm::Error copyToHost(void *dst, const void *src, size_t bytes) override {
    return copy(dst, src, bytes);
  }
  llvm::Error copyOnDevice(void *dst, const void *src, size_t bytes) override {
    return copy(dst, src, bytes);
  }

private:
  llvm::Error copy(void *dst, const void *src, size_t bytes) {
    if (recording_)
      return ir::makeError("a copy on " + id().str() + " while it captures");
    std::memcpy(dst, src, bytes);
    return llvm::Error::success();
  }
  std::unique_ptr<HostRecording> recording_;
};

// `t`'s elements, as a tensor of `device` (the CPU kernels make their sparse results in host
// memory: here that is the device's).
Tensor rehomed(const Tensor &t, ir::DeviceId device) {
  if (t.empty() || !t.onHost())
    return t;
  auto holder = std::make_shared<Tensor>(t);
  return Tensor::view(t.dtype(), t.shape(),
                      std::shared_ptr<void>(holder, const_cast<void *>(t.raw())), 0, device);
}

// An error unless every tensor of `value` is on `device`.
llvm::Error expectOn(const RuntimeValue &value, ir::DeviceId device, const std::string &what) {
  for (const Tensor *t : {&value.dense, &value.indices})
    if (!t->empty() && t->device() != device)
      return ir::makeError(what + " is on " + t->device().str() + ", not " + device.str());
  return llvm::Error::success();
}

// The CPU's kernel of an op; the cross-entropy ones keep their error for `check`. It checks that
// it reads and writes its own device's memory; on a capturing device its run is recorded.
class Wrapped final : public Kernel {
public:
  Wrapped(std::unique_ptr<Kernel> inner, std::string op, bool later, bool communicates,
          runtime::Device *device)
      : inner_(std::move(inner)), op_(std::move(op)), later_(later), communicates_(communicates),
        device_(device) {}
  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    auto *gpu = dynamic_cast<HostMemoryGpu *>(device_);
    if (gpu && gpu->recording()) {
      // As a graph holds its kernels' arguments: the memory they name now (the values copied,
      // their tensors aliasing it), whatever the executor's slots name later.
      events().push_back("record " + op_);
      auto in = std::make_shared<std::vector<RuntimeValue>>();
      auto out = std::make_shared<std::vector<RuntimeValue>>();
      for (const RuntimeValue *v : inputs)
        in->push_back(*v);
      for (const RuntimeValue *v : outputs)
        out->push_back(*v);
      gpu->recording()->runs.push_back([this, in, out] {
        events().push_back("replay " + op_);
        std::vector<const RuntimeValue *> inputs;
        std::vector<RuntimeValue *> outputs;
        for (const RuntimeValue &v : *in)
          inputs.push_back(&v);
        for (RuntimeValue &v : *out)
          outputs.push_back(&v);
        return runNow(inputs, outputs);
      });
      return llvm::Error::success();
    }
    events().push_back("run " + op_);
    return runNow(inputs, outputs);
  }
  bool checksLater() const override { return later_; }
  // As a GPU's convolutions say whether cuDNN runs them: here the matrix products say so.
  std::string choice() const override {
    return op_ == "matmul" || op_ == "fused_matmul" ? "products on the host" : "";
  }
  llvm::Error check() override {
    events().push_back("check " + op_);
    if (flagged_.empty())
      return llvm::Error::success();
    return ir::makeError(llvm::StringRef(flagged_).drop_front(strlen("error: ")));
  }
  std::string notCapturable() const override {
    if (communicates_)
      return "it communicates";
    return sparseResult_ ? "it makes its sparse result in new memory each run" : "";
  }
  bool sparseResult_ = false;

private:
  llvm::Error runNow(llvm::ArrayRef<const RuntimeValue *> inputs,
                     llvm::ArrayRef<RuntimeValue *> outputs) {
    const ir::DeviceId device = device_->id();
    for (size_t i = 0; i < inputs.size(); ++i)
      if (auto e = expectOn(*inputs[i], device, op_ + "'s operand " + std::to_string(i)))
        return e;
    llvm::Error ran = inner_->run(inputs, outputs);
    if (!ran)
      for (RuntimeValue *out : outputs) {
        out->dense = rehomed(out->dense, device);
        out->indices = rehomed(out->indices, device);
        if (auto e = expectOn(*out, device, op_ + "'s result"))
          return e;
      }
    if (!later_)
      return ran;
    flagged_ = ran ? llvm::toString(std::move(ran)) : "";
    return llvm::Error::success();
  }

  std::unique_ptr<Kernel> inner_;
  std::string op_;
  bool later_, communicates_;
  runtime::Device *device_;
  std::string flagged_;
};

llvm::Expected<std::unique_ptr<Kernel>> wrap(const KernelSpec &spec) {
  auto inner = runtime::findKernel(spec.op->name(), ir::DeviceKind::Cpu)(spec);
  if (!inner)
    return inner.takeError();
  bool later = spec.op->name().startswith("softmax_cross_entropy");
  auto kernel = std::make_unique<Wrapped>(std::move(*inner), spec.op->name().str(), later,
                                          spec.op->def().has(ir::kCommunication), spec.device);
  for (const ir::TensorType &type : spec.outputTypes)
    kernel->sparseResult_ |= type.sparse;
  return kernel;
}

// `cuda` devices as HostMemoryGpu, with the wrapped CPU kernel of every op of `module` (added
// again for each module).
void serveCudaFor(const ir::Module &module) {
  runtime::registerDeviceFactory(ir::DeviceKind::Cuda,
                                 [](ir::DeviceId id, const runtime::DeviceOptions &)
                                     -> llvm::Expected<std::unique_ptr<runtime::Device>> {
                                   return std::make_unique<HostMemoryGpu>(id.index);
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

// The module's variables initialized with `seed`.
std::shared_ptr<runtime::VariableStore> initializedStore(const ir::Module &module, int seed = 3) {
  auto store = std::make_shared<runtime::VariableStore>();
  EXPECT_FALSE(bool(store->initialize(module, seed)));
  return store;
}

TEST(CheckLater, AFlaggedLabelIsReportedAtItsLineAndNoVariableIsWritten) {
  auto module = testing::tinyModule();
  auto store = initializedStore(*module);
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
  auto store = initializedStore(*module);
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

// Micro-batches of `sizes` examples for tiny (x, y) or bag (tokens, y); step `s` differs.
std::vector<runtime::Feeds> microBatches(const ir::Module &module, int s,
                                         std::initializer_list<int64_t> sizes = {3, 2}) {
  std::vector<runtime::Feeds> batches;
  for (int64_t size : sizes) {
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
void expectAccumulationAsOnTheCpu(const ir::Module &module,
                                  std::vector<ir::DeviceId> towerDevices = {}) {
  runtime::ExecutorOptions options;
  options.accumulate = true;
  auto cpuStore = initializedStore(module, 5);
  auto gpuStore = initializedStore(module, 5);
  auto cpu = runtime::Executor::create(module, cpuStore, options);
  ASSERT_TRUE(bool(cpu)) << llvm::toString(cpu.takeError());
  options.towerDevices = std::move(towerDevices);
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

// `steps` quiet steps of batch 8 over a small Zipf data set of the bag's shape, no evaluation.
runtime::train::TrainOptions bagTraining(int64_t steps) {
  auto data = runtime::data::parseDataSpec("zipf:12,tokens=3,classes=4,examples=64");
  EXPECT_TRUE(bool(data)) << llvm::toString(data.takeError());
  runtime::train::TrainOptions options;
  if (data)
    options.data = *data;
  options.steps = steps;
  options.batchSize = 8;
  options.quiet = true;
  options.evaluate = false;
  return options;
}

// Training through the trainer on the host-memory GPU: the run reports its device, memory and
// copies (feeds each step, variables up once and back once), and the CPU reports none.
TEST(DeviceUse, TrainingReportsTheDevicesMemoryAndCopies) {
  auto module = testing::compiledModule(kBag, "bag.prism");
  ASSERT_TRUE(module);
  runtime::train::TrainOptions options = bagTraining(3);
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
  // The kernels' choices, counted (Kernel::choice, Executor::kernelChoices).
  EXPECT_TRUE(
      std::regex_search(text, std::regex("; kernels: products on the host \\([1-9][0-9]*\\)$")))
      << text;
  // The same training as on the CPU.
  for (const auto &var : module->variables()) {
    const Tensor *a = cpu->store->find(var->name()), *b = gpu->store->find(var->name());
    ASSERT_TRUE(a && b);
    EXPECT_EQ(std::memcmp(a->raw(), b->raw(), static_cast<size_t>(a->numBytes())), 0)
        << var->name();
  }
}

// After its first step a program allocates nothing on the device: the feeds are copied into
// buffers it keeps (a GPU's allocations and frees wait for its queue).
TEST(DeviceUse, AStepAfterTheFirstAllocatesNothing) {
  auto module = testing::tinyModule();
  ASSERT_TRUE(module);
  auto store = initializedStore(*module);
  auto executor = executorOn(*module, store);
  ASSERT_TRUE(executor);
  ASSERT_FALSE(bool(executor->step(feeds(2))));
  const int64_t after = HostMemoryGpu::allocations;
  const int64_t copies = executor->device().copies().toDeviceCopies;
  for (int s = 0; s < 3; ++s)
    ASSERT_FALSE(bool(executor->step(feeds(s % 4))));
  EXPECT_EQ(HostMemoryGpu::allocations, after);
  EXPECT_EQ(executor->device().copies().toDeviceCopies, copies + 3 * 2); // x and y each step
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

// A task's communication whose rings finish when waited for: each all-reduce doubles its tensors
// (a stand-in for the other task's sum) in synchronize(), or fails there. Both go to events().
class WaitedCommunication final : public runtime::Communication {
public:
  llvm::Error allReduce(llvm::StringRef, int64_t bucket,
                        llvm::ArrayRef<Tensor *> tensors) override {
    events().push_back("all-reduce bucket " + std::to_string(bucket));
    pending_.insert(pending_.end(), tensors.begin(), tensors.end());
    return llvm::Error::success();
  }
  llvm::Error synchronize() override {
    events().push_back("synchronize");
    std::vector<Tensor *> pending;
    pending.swap(pending_);
    if (fail)
      return ir::makeError("the ring lost its peer");
    for (Tensor *t : pending)
      for (int64_t i = 0; i < t->numElements(); ++i)
        t->data<float>()[i] *= 2;
    return llvm::Error::success();
  }
  llvm::Expected<Tensor> pull(llvm::StringRef) override { return ir::makeError("no servers"); }
  llvm::Expected<Tensor> pullRows(llvm::StringRef, const Tensor &) override {
    return ir::makeError("no servers");
  }
  llvm::Error push(llvm::StringRef, const RuntimeValue &) override {
    return ir::makeError("no servers");
  }
  llvm::Expected<const RuntimeValue *> gradient(llvm::StringRef) override {
    return ir::makeError("no servers");
  }
  bool fail = false;

private:
  std::vector<Tensor *> pending_;
};

// Two buckets staged through host memory on a device: the second bucket's ring starts and the op
// between them runs before anything waits; the first reader of a result waits once, and the
// results reach the device after that wait. A ring that fails stops the step there.
TEST(StagedAllReduces, BucketsTravelWhileTheNextKernelsRun) {
  auto module = testing::compiledModule(R"(model m {
  input x : f32[4]
  %a = mul(x, x)
  %ra = all_reduce(%a, group = workers, bucket = 0)
  %b = add(x, x)
  %rb = all_reduce(%b, group = workers, bucket = 1)
  %y = add(%ra, %rb)
}
)",
                                        "m.prism", "infer-shapes");
  ASSERT_TRUE(module);
  serveCudaFor(*module);
  runtime::registerKernelFamily(ir::DeviceKind::Cuda, runtime::registerStagedCommunicationKernels);
  WaitedCommunication communication;
  runtime::ExecutorOptions options;
  options.communication = &communication;
  options.outputs = {"y", "ra"};
  options.device = ir::DeviceId{ir::DeviceKind::Cuda, 0};
  auto created =
      runtime::Executor::create(*module, std::make_shared<runtime::VariableStore>(), options);
  ASSERT_TRUE(bool(created)) << llvm::toString(created.takeError());
  runtime::Executor *executor = created->get();
  Tensor x(ir::DType::F32, {4});
  for (int64_t i = 0; i < 4; ++i)
    x.data<float>()[i] = static_cast<float>(i + 1);
  events().clear();
  ASSERT_FALSE(bool(executor->step({{"x", x}})));
  EXPECT_EQ(events(), (std::vector<std::string>{"run mul", "all-reduce bucket 0", "run add",
                                                "all-reduce bucket 1", "synchronize", "run add",
                                                "synchronize"}));
  auto y = executor->fetch("y");
  ASSERT_TRUE(bool(y)) << llvm::toString(y.takeError());
  for (int64_t i = 0; i < 4; ++i) {
    const float v = x.data<float>()[i];
    EXPECT_EQ(y->data<float>()[i], 2 * v * v + 2 * (v + v)) << i;
  }

  // The ring fails: the step fails at the first reader, naming it, and runs nothing after.
  communication.fail = true;
  events().clear();
  llvm::Error failed = executor->step({{"x", x}});
  ASSERT_TRUE(bool(failed));
  EXPECT_EQ(llvm::toString(std::move(failed)),
            "m.prism:7:3: error: before 'add': the ring lost its peer");
  EXPECT_EQ(events(), (std::vector<std::string>{"run mul", "all-reduce bucket 0", "run add",
                                                "all-reduce bucket 1", "synchronize"}));
}

// `text` replicated in-graph into `towers` towers (each pinned to its tower's device).
std::unique_ptr<ir::Module> towered(const char *text, const char *file, int towers) {
  passes::PassOptions options;
  options.set("devices", std::to_string(towers));
  return testing::compiledModule(
      text, file, "infer-shapes,autodiff,lower-optimizer,replicate-in-graph", options);
}

// The tiny model or the bag of embeddings ("tiny", "bag") as two towers.
std::unique_ptr<ir::Module> twoTowers(const std::string &name) {
  return name == "tiny" ? towered(testing::kTinyModel, "tiny.prism", 2)
                        : towered(kBag, "bag.prism", 2);
}

std::vector<ir::DeviceId> gpus(std::initializer_list<int> indices) {
  std::vector<ir::DeviceId> ids;
  for (int i : indices)
    ids.push_back(ir::DeviceId{ir::DeviceKind::Cuda, i});
  return ids;
}

// Three steps of `module`'s towers on the CPU (sharing it) and on the host-memory GPUs `devices`
// (a tower each): the same losses and variables, bit for bit, every kernel reading and writing
// its own device's memory (Wrapped checks it). Returns the GPU executor.
std::unique_ptr<runtime::Executor> expectTowersAsOnTheCpu(const ir::Module &module,
                                                          std::vector<ir::DeviceId> devices) {
  auto cpuStore = initializedStore(module, 5);
  auto gpuStore = initializedStore(module, 5);
  auto cpu = runtime::Executor::create(module, cpuStore);
  EXPECT_TRUE(bool(cpu)) << llvm::toString(cpu.takeError());
  runtime::ExecutorOptions options;
  options.towerDevices = std::move(devices);
  auto gpu = executorOn(module, gpuStore, options);
  if (!cpu || !gpu)
    return nullptr;
  for (int s = 0; s < 3; ++s) {
    for (const runtime::Feeds &feeds : microBatches(module, s, {5, 4})) {
      llvm::Error onCpu = (*cpu)->step(feeds);
      EXPECT_FALSE(bool(onCpu)) << llvm::toString(std::move(onCpu));
      llvm::Error onGpu = gpu->step(feeds);
      EXPECT_FALSE(bool(onGpu)) << llvm::toString(std::move(onGpu));
      EXPECT_EQ(gpu->loss(), (*cpu)->loss());
    }
  }
  EXPECT_FALSE(bool(gpu->variablesToHost()));
  for (const auto &var : module.variables()) {
    const Tensor *a = cpuStore->find(var->name()), *b = gpuStore->find(var->name());
    EXPECT_TRUE(a && b && b->onHost());
    if (a && b) {
      EXPECT_EQ(std::memcmp(a->raw(), b->raw(), static_cast<size_t>(a->numBytes())), 0)
          << var->name();
    }
  }
  return gpu;
}

// Two towers on cuda:0 and cuda:1. Per step, tower 1 gets the shared seed of backward and w
// from cuda:0, and cuda:0 gets tower 1's loss and gradient to combine: two copies each way.
// The feeds go from the host to each device (x and y, and the loss comes back once).
TEST(InGraphTowers, TwoTowersOnTwoDevicesTrainAsOnTheCpu) {
  auto module = towered(testing::kTinyModel, "tiny.prism", 2);
  ASSERT_TRUE(module);
  auto gpu = expectTowersAsOnTheCpu(*module, gpus({0, 1}));
  ASSERT_TRUE(gpu);
  std::vector<runtime::Device *> devices = gpu->devices();
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0]->id().str(), "cuda:0");
  EXPECT_EQ(devices[1]->id().str(), "cuda:1");
  const int64_t steps = 6, variables = 1;
  EXPECT_EQ(devices[0]->copies().fromPeerCopies, 2 * steps);
  EXPECT_EQ(devices[1]->copies().fromPeerCopies, 2 * steps);
  EXPECT_EQ(devices[0]->copies().toDeviceCopies, 2 * steps + variables);
  EXPECT_EQ(devices[1]->copies().toDeviceCopies, 2 * steps);
  EXPECT_EQ(devices[1]->copies().toHostCopies, 0);
  EXPECT_GT(gpu->arenaBytes(devices[1]), 0u);
  EXPECT_EQ(gpu->arenaBytes(), gpu->arenaBytes(devices[0]) + gpu->arenaBytes(devices[1]));
}

// Sparse gradients (an embedding's rows) cross to the first device as indices and rows; three
// towers over three devices, batches of 5 and 4 uneven across them.
TEST(InGraphTowers, SparseGradientsOfThreeTowersCombineAsOnTheCpu) {
  auto module = towered(kBag, "bag.prism", 3);
  ASSERT_TRUE(module);
  auto gpu = expectTowersAsOnTheCpu(*module, gpus({0, 1, 2}));
  ASSERT_TRUE(gpu);
  EXPECT_EQ(gpu->devices().size(), 3u);
  EXPECT_GT(gpu->devices()[2]->copies().fromPeerCopies, 0);
}

// Towers that name one device share it: nothing crosses.
TEST(InGraphTowers, TowersNamingOneDeviceShareIt) {
  auto module = towered(testing::kTinyModel, "tiny.prism", 2);
  ASSERT_TRUE(module);
  auto gpu = expectTowersAsOnTheCpu(*module, gpus({0, 0}));
  ASSERT_TRUE(gpu);
  ASSERT_EQ(gpu->devices().size(), 1u);
  EXPECT_EQ(gpu->device().copies().fromPeerCopies, 0);
}

// Gradient accumulation with towers on two devices: the micro-steps' sums, dense and sparse, are
// the CPU towers', bit for bit.
TEST(InGraphTowers, AccumulatedMicroStepsOnTwoDevicesAsOnTheCpu) {
  for (const char *name : {"tiny", "bag"}) {
    SCOPED_TRACE(name);
    auto module = twoTowers(name);
    ASSERT_TRUE(module);
    expectAccumulationAsOnTheCpu(*module, gpus({0, 1}));
  }
}

TEST(InGraphTowers, DevicesThatDoNotFitTheTowersAreAnError) {
  auto module = towered(testing::kTinyModel, "tiny.prism", 2);
  ASSERT_TRUE(module);
  serveCudaFor(*module);
  auto store = initializedStore(*module, 5);
  runtime::ExecutorOptions options;
  options.device = ir::DeviceId{ir::DeviceKind::Cuda, 0};
  options.towerDevices = gpus({0, 1, 2});
  auto three = runtime::Executor::create(*module, store, options);
  ASSERT_FALSE(bool(three));
  EXPECT_EQ(llvm::toString(three.takeError()),
            "error: the program has 2 towers, but the devices cuda:0, cuda:1, cuda:2 were given");
  options.towerDevices = {ir::DeviceId{ir::DeviceKind::Cuda, 0}, ir::DeviceId{}};
  auto mixed = runtime::Executor::create(*module, store, options);
  ASSERT_FALSE(bool(mixed));
  EXPECT_EQ(llvm::toString(mixed.takeError()),
            "error: the towers' devices cuda:0, cpu:0 mix cuda and cpu: a task's towers run on one "
            "kind");
}

// The trainer reports each device of the towers, the others' copies from their peers.
TEST(InGraphTowers, TrainingReportsEveryDevice) {
  auto module = towered(kBag, "bag.prism", 2);
  ASSERT_TRUE(module);
  runtime::train::TrainOptions options = bagTraining(2);
  serveCudaFor(*module);
  options.device = ir::DeviceId{ir::DeviceKind::Cuda, 0};
  options.towerDevices = gpus({0, 1});
  auto result = runtime::train::train(*module, options);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  EXPECT_EQ(result->device.device.str(), "cuda:0");
  ASSERT_EQ(result->towerDevices.size(), 1u);
  const runtime::train::DeviceUse &other = result->towerDevices[0];
  EXPECT_EQ(other.device.str(), "cuda:1");
  EXPECT_GT(other.arenaBytes, 0u);
  const std::string text = runtime::train::describeDeviceUse(other);
  EXPECT_EQ(text.rfind("cuda:1: arena ", 0), 0u) << text;
  EXPECT_NE(text.find(" from other devices ("), std::string::npos) << text;
  EXPECT_NE(text.find(" in 2 steps"), std::string::npos) << text;
}

// Executor options with steps as captured graphs (--cuda-graphs).
runtime::ExecutorOptions capturing() {
  runtime::ExecutorOptions options;
  options.captureSteps = true;
  return options;
}

// Two executors of `module` on the host-memory GPU from the same initial variables: steps op by
// op, and with captureSteps.
std::pair<std::unique_ptr<runtime::Executor>, std::unique_ptr<runtime::Executor>>
plainAndCaptured(const ir::Module &module) {
  runtime::ExecutorOptions options = capturing();
  return {executorOn(module, initializedStore(module)),
          executorOn(module, initializedStore(module), options)};
}

// Steps as captured graphs (--cuda-graphs) on the host-memory GPU, which records kernels as a
// GPU's stream capture does and fails any copy made meanwhile: five steps give the uncaptured
// run's losses and variables, bit for bit; the first step runs op by op, the second records
// two graphs (forward and backward, then the update, which waits for the cross-entropies'
// flags), the rest replay them.
TEST(CapturedSteps, ReplayedStepsTrainAsOpByOp) {
  auto module = testing::tinyModule();
  ASSERT_TRUE(module);
  auto [plain, captured] = plainAndCaptured(*module);
  ASSERT_TRUE(plain && captured);
  EXPECT_EQ(captured->captureReport(), "");
  for (int s = 0; s < 5; ++s) {
    events().clear();
    ASSERT_FALSE(bool(plain->step(feeds(s % 4))));
    events().clear();
    llvm::Error err = captured->step(feeds(s % 4));
    ASSERT_FALSE(bool(err)) << llvm::toString(std::move(err));
    EXPECT_EQ(captured->loss(), plain->loss());
    const std::string first = s == 0 ? "run matmul" : s == 1 ? "record matmul" : "replay matmul";
    EXPECT_EQ(events().front(), first) << "step " << s;
    if (s == 0) {
      EXPECT_EQ(captured->captureReport(),
                "not captured yet (a program is captured from its second step)");
    }
  }
  // Flags are checked after the graph that raised them, before the update.
  const size_t checked = indexOf("check softmax_cross_entropy");
  EXPECT_LT(indexOf("replay softmax_cross_entropy_grad"), checked);
  EXPECT_LT(checked, indexOf("replay apply_sgd"));
  EXPECT_EQ(captured->captureReport(),
            "6 of 6 ops in 2 CUDA graphs, recorded 2 and replayed 6 times");
  EXPECT_EQ(weights(*captured), weights(*plain));
}

// A label out of range in a replayed step: the flag is read after the first graph, the error
// names the op's line and the update's graph does not run.
TEST(CapturedSteps, AFlagRaisedInAReplayedStepStopsItBeforeTheUpdate) {
  auto module = testing::tinyModule();
  ASSERT_TRUE(module);
  auto store = initializedStore(*module);
  runtime::ExecutorOptions options = capturing();
  auto executor = executorOn(*module, store, options);
  ASSERT_TRUE(executor);
  for (int s = 0; s < 3; ++s)
    ASSERT_FALSE(bool(executor->step(feeds(2))));
  const std::vector<float> before = weights(*executor);
  events().clear();
  llvm::Error err = executor->step(feeds(9));
  ASSERT_TRUE(bool(err));
  EXPECT_EQ(llvm::toString(std::move(err)),
            "tiny.prism:6:3: error: 'softmax_cross_entropy': label 9 of row 1 is outside [0, 4)");
  EXPECT_EQ(indexOf("replay apply_sgd"), events().size()) << "the update ran";
  EXPECT_EQ(weights(*executor), before);
}

// Memory that moved is recorded again: after the variables come back to the host (a
// checkpoint), the next step uploads them to new memory, and the graphs that read them are
// recorded anew rather than replayed over the old.
TEST(CapturedSteps, GraphsAreRecordedAgainWhenTheirMemoryMoved) {
  auto module = testing::tinyModule();
  ASSERT_TRUE(module);
  auto [plain, captured] = plainAndCaptured(*module);
  ASSERT_TRUE(plain && captured);
  for (int s = 0; s < 6; ++s) {
    ASSERT_FALSE(bool(plain->step(feeds(s % 4))));
    ASSERT_FALSE(bool(captured->step(feeds(s % 4))));
    if (s == 2) {
      ASSERT_FALSE(bool(plain->variablesToHost()));
      ASSERT_FALSE(bool(captured->variablesToHost()));
    }
    EXPECT_EQ(captured->loss(), plain->loss()) << "step " << s;
  }
  EXPECT_EQ(captured->captureReport(),
            "6 of 6 ops in 2 CUDA graphs, recorded 4 and replayed 6 times");
  EXPECT_EQ(weights(*captured), weights(*plain));
}

// Towers on two devices: a graph per device's run of ops, broken where values cross between
// them; sparse gradients (new host memory each run here) are recorded again each step, and the
// training is the CPU's.
TEST(CapturedSteps, TowersOnTwoDevicesTrainAsOnTheCpu) {
  for (const char *name : {"tiny", "bag"}) {
    SCOPED_TRACE(name);
    auto module = twoTowers(name);
    ASSERT_TRUE(module);
    auto cpuStore = initializedStore(*module, 5);
    auto gpuStore = initializedStore(*module, 5);
    auto cpu = runtime::Executor::create(*module, cpuStore);
    ASSERT_TRUE(bool(cpu)) << llvm::toString(cpu.takeError());
    runtime::ExecutorOptions options;
    options.towerDevices = gpus({0, 1});
    options.captureSteps = true;
    auto gpu = executorOn(*module, gpuStore, options);
    ASSERT_TRUE(gpu);
    for (int s = 0; s < 4; ++s) {
      runtime::Feeds feeds = microBatches(*module, s, {5})[0];
      ASSERT_FALSE(bool((*cpu)->step(feeds)));
      llvm::Error err = gpu->step(feeds);
      ASSERT_FALSE(bool(err)) << llvm::toString(std::move(err));
      EXPECT_EQ(gpu->loss(), (*cpu)->loss());
    }
    const std::string report = gpu->captureReport();
    EXPECT_NE(report.find(" CUDA graphs, recorded "), std::string::npos) << report;
    ASSERT_FALSE(bool(gpu->variablesToHost()));
    for (const auto &var : module->variables()) {
      const Tensor *a = cpuStore->find(var->name()), *b = gpuStore->find(var->name());
      ASSERT_TRUE(a && b);
      EXPECT_EQ(std::memcmp(a->raw(), b->raw(), static_cast<size_t>(a->numBytes())), 0)
          << var->name();
    }
  }
}

// The trainer's device line says what the steps captured.
TEST(CapturedSteps, TrainingReportsWhatItCaptured) {
  auto module = testing::compiledModule(kBag, "bag.prism");
  ASSERT_TRUE(module);
  runtime::train::TrainOptions options = bagTraining(4);
  options.cudaGraphs = true;
  serveCudaFor(*module);
  options.device = ir::DeviceId{ir::DeviceKind::Cuda, 0};
  auto result = runtime::train::train(*module, options);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  const std::string text = runtime::train::describeDeviceUse(result->device);
  EXPECT_NE(text.find(" in 4 steps; captured: "), std::string::npos) << text;
  EXPECT_NE(text.find(" CUDA graphs, recorded "), std::string::npos) << text;
  EXPECT_NE(text.find("; not captured: gather_grad %"), std::string::npos) << text;
  EXPECT_NE(text.find(" (it makes its sparse result in new memory each run)"), std::string::npos)
      << text;
}

// --cuda-graphs where it cannot apply is an error naming why.
TEST(CapturedSteps, WhereStepsCannotBeCapturedItIsAnError) {
  auto module = testing::tinyModule();
  ASSERT_TRUE(module);
  auto store = initializedStore(*module);
  runtime::ExecutorOptions options = capturing();
  auto cpu = runtime::Executor::create(*module, store, options);
  ASSERT_FALSE(bool(cpu));
  EXPECT_EQ(llvm::toString(cpu.takeError()),
            "error: --cuda-graphs records a GPU's kernels as CUDA graphs; this program runs on "
            "cpu:0, not a GPU");
  serveCudaFor(*module);
  options.device = ir::DeviceId{ir::DeviceKind::Cuda, 0};
  options.accumulate = true;
  auto accumulating = runtime::Executor::create(*module, store, options);
  ASSERT_FALSE(bool(accumulating));
  EXPECT_EQ(llvm::toString(accumulating.takeError()),
            "error: --cuda-graphs and --accumulate: accumulated steps are not captured; give one "
            "of them");
}

} // namespace
} // namespace prism
