// The device seam: the CPU device, device names the machine cannot honour, kernels checked per
// device before a step, tensors that know their device, and errors printed once.
#include <gtest/gtest.h>

#include "frontends/text/Parser.h"
#include "ir/Diagnostic.h"
#include "passes/PassManager.h"
#include "runtime/exec/Communication.h"
#include "runtime/exec/Executor.h"
#include "tests/exec/TinyModel.h"
#ifdef PRISM_WITH_CUDA
#include "runtime/cuda/CudaRuntimeDevice.h"
#endif

namespace prism {
namespace {

using runtime::createDevice;
using runtime::Tensor;

std::unique_ptr<ir::Module> trainingModule() {
  return testing::tinyModule();
}

runtime::Feeds feeds(int64_t batch, int32_t label) {
  Tensor x(ir::DType::F32, {batch, 3}), y(ir::DType::I32, {batch});
  for (int64_t i = 0; i < x.numElements(); ++i)
    x.data<float>()[i] = 0.1f * static_cast<float>(i);
  for (int64_t i = 0; i < batch; ++i)
    y.data<int32_t>()[i] = label;
  return {{"x", x}, {"y", y}};
}

TEST(CpuDevice, HostTensorsNeedNoCopies) {
  auto device = createDevice({ir::DeviceKind::Cpu, 0}, {2});
  ASSERT_TRUE(bool(device)) << llvm::toString(device.takeError());
  EXPECT_TRUE((*device)->isHost());
  auto tensor = (*device)->allocateTensor(ir::DType::F32, {5, 7});
  ASSERT_TRUE(bool(tensor));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(tensor->raw()) % 64, 0u);
  EXPECT_EQ(tensor->device(), (ir::DeviceId{ir::DeviceKind::Cpu, 0}));
  Tensor host(ir::DType::F32, {4});
  auto same = (*device)->toDevice(host);
  ASSERT_TRUE(bool(same));
  EXPECT_EQ(same->raw(), host.raw());
  EXPECT_EQ((*device)->copies().toDeviceCopies, 0);
}

TEST(Devices, TheCpuOfATaskIsCpu0) {
  auto device = createDevice({ir::DeviceKind::Cpu, 1});
  ASSERT_FALSE(bool(device));
  llvm::Error err = device.takeError();
  EXPECT_EQ(ir::errorCode(err), ir::ErrorCode::Unsupported);
  EXPECT_NE(llvm::toString(std::move(err)).find("cpu:1"), std::string::npos);
}

TEST(Devices, AGpuTheMachineLacksIsAClearError) {
#ifdef PRISM_WITH_CUDA
  runtime::cuda::registerCudaDevice();
#endif
  // cuda:99 exists nowhere: without the GPU path, or with it on any machine, it is refused.
  auto device = createDevice({ir::DeviceKind::Cuda, 99});
  ASSERT_FALSE(bool(device));
  llvm::Error err = device.takeError();
  EXPECT_EQ(ir::errorCode(err), ir::ErrorCode::Unsupported);
  std::string text = llvm::toString(std::move(err));
  EXPECT_NE(text.find("device cuda:99 was asked for"), std::string::npos) << text;
}

TEST(Devices, NamesParseAndPrint) {
  for (const char *name : {"cpu:0", "cuda:3"}) {
    auto id = ir::DeviceId::parse(name);
    ASSERT_TRUE(bool(id));
    EXPECT_EQ(id->str(), name);
  }
  auto gpu = ir::DeviceId::parse("gpu:2");
  ASSERT_TRUE(bool(gpu));
  EXPECT_EQ(gpu->str(), "cuda:2");
  for (const char *bad : {"tpu:0", "cpu", "cpu:x", "cuda:-1"}) {
    auto id = ir::DeviceId::parse(bad);
    ASSERT_FALSE(bool(id)) << bad;
    EXPECT_NE(llvm::toString(id.takeError()).find(bad), std::string::npos);
  }
}

TEST(KernelCheck, NamesTheOpTheDeviceAndTheModelLine) {
  auto module = trainingModule();
  EXPECT_FALSE(bool(runtime::checkKernels(*module, ir::DeviceKind::Cpu)));
  // The GPU kernel families are not registered in this binary: the first op is reported.
  llvm::Error err = runtime::checkKernels(*module, ir::DeviceKind::Cuda);
  ASSERT_TRUE(bool(err));
  EXPECT_EQ(ir::errorCode(err), ir::ErrorCode::Unsupported);
  std::string text = llvm::toString(std::move(err));
  EXPECT_EQ(text.rfind("tiny.prism:5:3: error: no cuda kernel for 'matmul'", 0), 0u) << text;
}

TEST(Executor, AKernelErrorIsPrintedOnceWithItsPlace) {
  auto module = trainingModule();
  auto store = std::make_shared<runtime::VariableStore>();
  ASSERT_FALSE(bool(store->initialize(*module, 0)));
  auto exec = runtime::Executor::create(*module, store);
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  ASSERT_FALSE(bool((*exec)->step(feeds(2, 1))));
  EXPECT_EQ((*exec)->device().id().str(), "cpu:0");
  llvm::Error err = (*exec)->step(feeds(2, 7)); // 4 classes: label 7 is out of range
  ASSERT_TRUE(bool(err));
  std::string text = llvm::toString(std::move(err));
  EXPECT_EQ(text.rfind("tiny.prism:6:3: error: 'softmax_cross_entropy': ", 0), 0u) << text;
  EXPECT_EQ(text.find("error:"), text.rfind("error:")) << "printed twice: " << text;
}

// TF32 is a GPU's: asked of a CPU program, it is an error naming the flag and the device, not a
// setting quietly ignored.
TEST(Executor, Tf32OnACpuIsAClearError) {
  auto module = trainingModule();
  auto store = std::make_shared<runtime::VariableStore>();
  ASSERT_FALSE(bool(store->initialize(*module, 0)));
  runtime::ExecutorOptions options;
  options.tf32 = true;
  auto exec = runtime::Executor::create(*module, store, options);
  ASSERT_FALSE(bool(exec));
  std::string text = llvm::toString(exec.takeError());
  EXPECT_NE(text.find("--tf32"), std::string::npos) << text;
  EXPECT_NE(text.find("runs on cpu:0, not a GPU"), std::string::npos) << text;
}

// In-graph towers each compute a slice of the batch: a batch with fewer examples than towers is
// an error saying so, not a kernel over no rows.
TEST(Executor, ABatchSmallerThanTheTowersIsAClearError) {
  passes::PassOptions pass;
  pass.set("devices", "3");
  auto module =
      testing::compiledModule(testing::kTinyModel, "tiny.prism",
                              "infer-shapes,autodiff,lower-optimizer,replicate-in-graph", pass);
  ASSERT_TRUE(module);
  auto store = std::make_shared<runtime::VariableStore>();
  ASSERT_FALSE(bool(store->initialize(*module, 0)));
  auto exec = runtime::Executor::create(*module, store);
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  llvm::Error err = (*exec)->step(feeds(2, 1));
  ASSERT_TRUE(bool(err));
  EXPECT_EQ(llvm::toString(std::move(err)),
            "error: a batch of 2 examples for 3 towers: each tower needs at least one");
  EXPECT_FALSE(bool((*exec)->step(feeds(3, 1))));
}

// Towers on devices of their own: one per tower, of one kind.
TEST(Executor, TowerDevicesMustFitTheTowers) {
  auto module = trainingModule();
  auto store = std::make_shared<runtime::VariableStore>();
  ASSERT_FALSE(bool(store->initialize(*module, 0)));
  runtime::ExecutorOptions options;
  options.towerDevices = {ir::DeviceId{}, ir::DeviceId{}};
  auto exec = runtime::Executor::create(*module, store, options);
  ASSERT_FALSE(bool(exec));
  EXPECT_EQ(llvm::toString(exec.takeError()),
            "error: the program has 1 tower, but the devices cpu:0, cpu:0 were given");
}

// An all-reduce runs in place: its result takes the buffer of an operand read for the last time
// there (nothing copied), and a buffer of its own where the operand is read later.
TEST(Executor, AnAllReduceRunsInPlaceWhereItsOperandDies) {
  for (bool readLater : {false, true}) {
    SCOPED_TRACE(readLater ? "the operand read later" : "the operand dies there");
    std::string text = R"(model m {
  input x : f32[4, 256]
  %g = mul(x, x)
  %r = all_reduce(%g, group = workers, bucket = 0)
)";
    text += readLater ? "  %y = add(%r, %g)\n}\n" : "}\n";
    auto module = testing::compiledModule(text.c_str(), "m.prism", "infer-shapes");
    ASSERT_TRUE(module);
    auto store = std::make_shared<runtime::VariableStore>();
    ASSERT_FALSE(bool(store->initialize(*module, 0)));
    runtime::SoleWorkerCommunication communication("the test");
    runtime::ExecutorOptions options;
    options.communication = &communication;
    options.outputs = {readLater ? "y" : "r"};
    auto exec = runtime::Executor::create(*module, store, options);
    ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
    Tensor x(ir::DType::F32, {4, 256});
    for (int64_t i = 0; i < x.numElements(); ++i)
      x.data<float>()[i] = 0.01f * static_cast<float>(i % 7);
    ASSERT_FALSE(bool((*exec)->step({{"x", x}})));
    // 4 KiB each: r in g's buffer, or g, r and y all live at the add.
    EXPECT_EQ((*exec)->arenaBytes(), readLater ? 3u * 4096 : 4096u);
    auto out = (*exec)->fetch(readLater ? "y" : "r");
    ASSERT_TRUE(bool(out));
    for (int64_t i = 0; i < x.numElements(); i += 97) {
      float v = x.data<float>()[i] * x.data<float>()[i];
      EXPECT_EQ(out->data<float>()[i], readLater ? v + v : v) << i;
    }
  }
}

TEST(Tensor, KnowsItsDevice) {
  Tensor host(ir::DType::F32, {2});
  EXPECT_TRUE(host.onHost());
  auto memory =
      std::shared_ptr<void>(new char[64], [](void *p) { delete[] static_cast<char *>(p); });
  Tensor view = Tensor::view(ir::DType::F32, {2}, memory, 0, {ir::DeviceKind::Cuda, 1});
  EXPECT_FALSE(view.onHost());
  EXPECT_EQ(view.device().str(), "cuda:1");
}

} // namespace
} // namespace prism
