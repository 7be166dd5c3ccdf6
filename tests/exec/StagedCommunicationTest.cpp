// The staged communication kernels (runtime/exec/StagedCommunication.h) on the CPU device, where
// staging is a plain copy: what reaches the task's Communication, what comes back, and when the
// all-reduce is waited for. (On a GPU the same code copies between device and host.)
#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "ir/OpTable.h"
#include "runtime/exec/Communication.h"
#include "runtime/exec/Device.h"
#include "runtime/exec/StagedCommunication.h"

using namespace prism;
using namespace prism::runtime;

namespace {

// Doubles what it all-reduces (a stand-in for the other tasks' sum), serves pulls from a table,
// and keeps pushes.
class RecordingCommunication final : public Communication {
public:
  llvm::Error allReduce(llvm::StringRef group, int64_t bucket,
                        llvm::ArrayRef<Tensor *> tensors) override {
    groups.push_back(group.str() + "/" + std::to_string(bucket));
    pendingTensors.insert(pendingTensors.end(), tensors.begin(), tensors.end());
    return llvm::Error::success();
  }
  llvm::Error synchronize() override {
    for (Tensor *t : pendingTensors)
      for (int64_t i = 0; i < t->numElements(); ++i)
        t->data<float>()[i] *= 2;
    pendingTensors.clear();
    ++synchronized;
    return llvm::Error::success();
  }
  llvm::Expected<Tensor> pull(llvm::StringRef) override { return table; }
  llvm::Expected<Tensor> pullRows(llvm::StringRef, const Tensor &indices) override {
    Tensor rows(ir::DType::F32, {indices.numElements(), 2});
    for (int64_t r = 0; r < indices.numElements(); ++r)
      for (int64_t k = 0; k < 2; ++k)
        rows.data<float>()[r * 2 + k] = table.data<float>()[indices.data<int64_t>()[r] * 2 + k];
    return rows;
  }
  llvm::Error push(llvm::StringRef variable, const RuntimeValue &gradient) override {
    pushed.push_back({variable.str(), gradient});
    return llvm::Error::success();
  }
  llvm::Expected<const RuntimeValue *> gradient(llvm::StringRef) override {
    return ir::makeError("no gradients here");
  }
  bool keepsValues(llvm::StringRef, int64_t) const override { return keeps; }

  Tensor table{ir::DType::F32, {4, 2}};
  std::vector<std::string> groups;
  std::vector<Tensor *> pendingTensors;
  int synchronized = 0;
  std::vector<std::pair<std::string, RuntimeValue>> pushed;
  bool keeps = false; // a sole worker's all-reduce
};

// The family as the GPU path registers it, under the `cuda` kind (no GPU is needed to build the
// kernels; they run here on the CPU device).
void registerOnce() {
  static bool registered = [] {
    registerKernelFamily(ir::DeviceKind::Cuda, registerStagedCommunicationKernels);
    return true;
  }();
  (void)registered;
}

std::unique_ptr<Kernel> build(const ir::Op &op, Device &device, Communication &communication,
                              const StepContext *step = nullptr) {
  KernelSpec spec;
  spec.op = &op;
  spec.attrs = ir::withDefaults(op.def(), op.attrs);
  spec.device = &device;
  spec.communication = &communication;
  spec.step = step;
  for (const ir::Value *v : op.operands())
    spec.inputTypes.push_back(v->type());
  for (unsigned r = 0; r < op.numResults(); ++r)
    spec.outputTypes.push_back(op.result(r)->type());
  registerOnce();
  KernelFactory factory = findKernel(op.name(), ir::DeviceKind::Cuda);
  EXPECT_NE(factory, nullptr) << op.name().str();
  auto kernel = factory(spec);
  EXPECT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
  return kernel ? std::move(*kernel) : nullptr;
}

RuntimeValue filled(std::vector<int64_t> shape, float first) {
  RuntimeValue v;
  v.dense = Tensor(ir::DType::F32, shape);
  for (int64_t i = 0; i < v.dense.numElements(); ++i)
    v.dense.data<float>()[i] = first + static_cast<float>(i);
  return v;
}

} // namespace

// The ring runs after the kernel returns (the step's next kernels run meanwhile); the results come
// back to the device in `finish`, once the communication was waited for.
TEST(StagedCommunication, AnAllReduceCopiesBackAfterItsRing) {
  ir::ModuleBuilder b("m");
  ir::Value *x = b.input("x", ir::TensorType(ir::DType::F32, {3}));
  ir::Value *y = b.input("y", ir::TensorType(ir::DType::F32, {2}));
  b.op("all_reduce", {x, y},
       ir::attrs({{"group", ir::Attr::string("workers")}, {"bucket", ir::Attr::integer(1)}}), "r");
  auto module = b.finish();
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  const ir::Op &op = **(*module)->ops().begin();
  CpuDevice device(0, 1);
  RecordingCommunication communication;
  auto kernel = build(op, device, communication);
  ASSERT_TRUE(kernel);
  RuntimeValue a = filled({3}, 1), c = filled({2}, 10), outA = filled({3}, 0),
               outC = filled({2}, 0);
  ASSERT_TRUE(kernel->finishesAfterCommunication());
  ASSERT_FALSE(bool(kernel->run({&a, &c}, {&outA, &outC})));
  EXPECT_EQ(communication.groups, std::vector<std::string>{"workers/1"});
  EXPECT_EQ(communication.synchronized, 0);
  EXPECT_EQ(outA.dense.data<float>()[2], 2.0f); // not yet written
  a.dense.data<float>()[2] = 100;               // the input may be overwritten while the ring runs
  ASSERT_FALSE(bool(communication.synchronize()));
  EXPECT_EQ(outA.dense.data<float>()[2], 2.0f);
  ASSERT_FALSE(bool(kernel->finish()));
  a.dense.data<float>()[2] = 3;
  EXPECT_EQ(outA.dense.data<float>()[2], 6.0f); // (1 + 2) * 2
  EXPECT_EQ(outC.dense.data<float>()[1], 22.0f);
  EXPECT_EQ(a.dense.data<float>()[2], 3.0f); // the input stays as it was

  // An evaluation step keeps the task's own values.
  StepContext evaluation;
  evaluation.mode = StepMode::Evaluation;
  auto evalKernel = build(op, device, communication, &evaluation);
  ASSERT_TRUE(evalKernel);
  ASSERT_FALSE(bool(evalKernel->run({&a, &c}, {&outA, &outC})));
  EXPECT_EQ(communication.groups.size(), 1u);
  EXPECT_EQ(outA.dense.data<float>()[2], 3.0f);
  ASSERT_FALSE(bool(evalKernel->finish())); // nothing to finish
  EXPECT_EQ(outA.dense.data<float>()[2], 3.0f);

  // A run abandoned before its wait (the step failed) is not finished by the next run's finish.
  RuntimeValue other = filled({3}, 50), abandonedA = filled({3}, 0), abandonedC = filled({2}, 0);
  ASSERT_FALSE(bool(kernel->run({&other, &c}, {&abandonedA, &abandonedC})));
  communication.pendingTensors.clear();

  // An all-reduce that keeps the values (a sole worker holding the whole batch) copies them on
  // the device and never reaches the ring.
  communication.keeps = true;
  RuntimeValue keptA = filled({3}, 0), keptC = filled({2}, 0);
  ASSERT_FALSE(bool(kernel->run({&a, &c}, {&keptA, &keptC})));
  EXPECT_EQ(communication.groups.size(), 2u);
  EXPECT_EQ(keptA.dense.data<float>()[2], 3.0f);
  EXPECT_EQ(keptC.dense.data<float>()[1], 11.0f);
  ASSERT_FALSE(bool(kernel->finish()));
  EXPECT_EQ(keptA.dense.data<float>()[2], 3.0f);
  EXPECT_EQ(abandonedA.dense.data<float>()[2], 2.0f); // as it was
  EXPECT_EQ(communication.synchronized, 1);           // the test's own
}

TEST(StagedCommunication, PullsRowPullsAndPushesGoThroughTheHost) {
  ir::ModuleBuilder b("m");
  ir::Value *table = b.variable("table", ir::TensorType(ir::DType::F32, {4, 2}));
  ir::Value *ids = b.input("ids", ir::TensorType(ir::DType::I64, {3}));
  ir::Value *g = b.input("g", ir::TensorType(ir::DType::F32, {4, 2}));
  b.op("ps_pull", {table}, {}, "whole");
  b.op("ps_pull_rows", {table, ids}, {}, "rows");
  b.op("ps_push", {table, g}, {}, "");
  auto module = b.finish();
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  auto ops = (*module)->ops().begin();
  const ir::Op &pull = **ops++, &pullRows = **ops++, &push = **ops;
  CpuDevice device(0, 1);
  RecordingCommunication communication;
  for (int64_t i = 0; i < 8; ++i)
    communication.table.data<float>()[i] = static_cast<float>(i);

  RuntimeValue whole = filled({4, 2}, 0);
  ASSERT_FALSE(bool(build(pull, device, communication)->run({}, {&whole})));
  EXPECT_EQ(whole.dense.data<float>()[7], 7.0f);

  RuntimeValue indices;
  indices.dense = Tensor(ir::DType::I64, {3});
  for (int64_t i = 0; i < 3; ++i)
    indices.dense.data<int64_t>()[i] = 3 - i;
  RuntimeValue rows = filled({3, 2}, 0), tableValue = whole;
  ASSERT_FALSE(bool(build(pullRows, device, communication)->run({&tableValue, &indices}, {&rows})));
  EXPECT_EQ(rows.dense.data<float>()[0], 6.0f); // row 3
  EXPECT_EQ(rows.dense.data<float>()[5], 3.0f); // row 1

  RuntimeValue gradient = filled({4, 2}, 0.5f);
  ASSERT_FALSE(bool(build(push, device, communication)->run({&tableValue, &gradient}, {})));
  ASSERT_EQ(communication.pushed.size(), 1u);
  EXPECT_EQ(communication.pushed[0].first, "table");
  EXPECT_EQ(communication.pushed[0].second.dense.data<float>()[7], 7.5f);
}

// A sparse push is staged in host buffers the kernel keeps: a copy of the rows and indices (the
// device's values may change after), the same memory the next step, grown for more rows.
TEST(StagedCommunication, SparsePushesReuseTheirStagingBuffers) {
  ir::ModuleBuilder b("m");
  ir::Value *table = b.variable("table", ir::TensorType(ir::DType::F32, {4, 2}));
  ir::Value *g = b.input("g", ir::TensorType(ir::DType::F32, {4, 2}, /*sparse=*/true));
  b.op("ps_push_rows", {table, g}, {}, "");
  auto module = b.finish();
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  CpuDevice device(0, 1);
  RecordingCommunication communication;
  auto push = build(**(*module)->ops().begin(), device, communication);
  ASSERT_TRUE(push);
  auto sparse = [](std::vector<int64_t> ids, float first) {
    RuntimeValue v = filled({static_cast<int64_t>(ids.size()), 2}, first);
    v.sparse = true;
    v.indices = Tensor(ir::DType::I64, {static_cast<int64_t>(ids.size())});
    std::copy(ids.begin(), ids.end(), v.indices.data<int64_t>());
    return v;
  };
  RuntimeValue tableValue = filled({4, 2}, 0);
  RuntimeValue first = sparse({3, 1}, 10);
  ASSERT_FALSE(bool(push->run({&tableValue, &first}, {})));
  first.dense.data<float>()[0] = -1; // the device's value changes after the push
  ASSERT_EQ(communication.pushed.size(), 1u);
  const RuntimeValue &sent = communication.pushed[0].second;
  EXPECT_TRUE(sent.sparse);
  EXPECT_EQ(sent.dense.data<float>()[0], 10.0f);
  EXPECT_EQ(sent.indices.data<int64_t>()[0], 3);
  const void *rows = sent.dense.raw();

  RuntimeValue second = sparse({0, 2}, 20);
  ASSERT_FALSE(bool(push->run({&tableValue, &second}, {})));
  EXPECT_EQ(communication.pushed[1].second.dense.raw(), rows);
  EXPECT_EQ(communication.pushed[1].second.dense.data<float>()[3], 23.0f);

  RuntimeValue larger = sparse({0, 1, 2, 3}, 30);
  ASSERT_FALSE(bool(push->run({&tableValue, &larger}, {})));
  const RuntimeValue &grown = communication.pushed[2].second;
  EXPECT_EQ(grown.dense.shape(), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(grown.dense.data<float>()[7], 37.0f);
  EXPECT_EQ(grown.indices.data<int64_t>()[3], 3);
}
