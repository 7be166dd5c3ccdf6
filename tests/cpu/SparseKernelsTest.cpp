// The CPU kernels of gather, gather_grad, sparse_add and sparse_to_dense against the reference
// interpreter, and their errors.
#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "runtime/cpu/kernels/SparseRowCoalescer.h"
#include "runtime/exec/Executor.h"
#include "tests/cpu/ReferenceCheck.h"

using namespace prism;
using ir::Attr;
using ir::DType;
using ir::TensorType;
using runtime::Executor;
using runtime::RuntimeValue;
using runtime::Tensor;
using runtime::VariableStore;
using runtime::cpu::SparseRowCoalescer;

namespace {

constexpr int64_t B = ir::kBatchDim;

std::unique_ptr<ir::Module> finish(ir::ModuleBuilder &b) {
  auto m = b.finish();
  EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
  return m ? std::move(*m) : nullptr;
}

ir::AttrMap numRows(int64_t rows) {
  return ir::attrs({{"num_rows", Attr::integer(rows)}});
}

ir::Initializer normal() {
  return {"normal", {}};
}

// out = gather(table, ids) with a table of `rows` rows, ids of the given type; the ids draw
// from [0, rows) and, with a batch of 3 and rows < ids per batch, repeat.
void expectGatherMatches(DType indexType, llvm::ArrayRef<int64_t> idsDims, int64_t rows,
                         llvm::ArrayRef<int64_t> rowDims, int threads = 1, int64_t batch = 3) {
  ir::ModuleBuilder b("gather");
  std::vector<int64_t> tableDims{rows};
  tableDims.insert(tableDims.end(), rowDims.begin(), rowDims.end());
  ir::Value *table = b.variable("table", TensorType(DType::F32, tableDims), normal());
  ir::Value *ids = b.input("ids", TensorType(indexType, idsDims));
  b.op("gather", {table, ids}, {}, "out");
  auto module = finish(b);
  ASSERT_TRUE(module);
  prism::testing::ReferenceCheckOptions options;
  options.intBound["ids"] = rows;
  options.threads = threads;
  options.batch = batch;
  options.tolerance = 1e-7; // a copy: exact up to f32 rounding of the reference
  prism::testing::expectMatchesReference(*module, {"out"}, options);
}

TEST(SparseKernels, GatherI32Rank1) {
  expectGatherMatches(DType::I32, {B}, 5, {4});
}

TEST(SparseKernels, GatherI64Rank1) {
  expectGatherMatches(DType::I64, {B}, 5, {4});
}

TEST(SparseKernels, GatherI32Rank2WithDuplicates) {
  expectGatherMatches(DType::I32, {B, 6}, 4, {3});
}

TEST(SparseKernels, GatherI64Rank2WithDuplicates) {
  expectGatherMatches(DType::I64, {B, 6}, 4, {2, 3});
}

TEST(SparseKernels, GatherScalarRows) {
  expectGatherMatches(DType::I64, {B, 3}, 7, {});
}

TEST(SparseKernels, GatherOnSeveralThreads) {
  // 256 x 20 rows of 64 floats: enough bytes for the parallel loop.
  expectGatherMatches(DType::I32, {B, 20}, 1000, {64}, /*threads=*/2, /*batch=*/256);
}

// g = gather_grad(dy, ids); dense = sparse_to_dense(g): both against the reference, with ids
// that repeat.
void expectGatherGradMatches(DType indexType) {
  ir::ModuleBuilder b("gather_grad");
  ir::Value *dy = b.input("dy", TensorType(DType::F32, {B, 4, 3}));
  ir::Value *ids = b.input("ids", TensorType(indexType, {B, 4}));
  ir::Value *g = b.op("gather_grad", {dy, ids}, numRows(5), "g");
  b.op("sparse_to_dense", {g}, {}, "dense");
  auto module = finish(b);
  ASSERT_TRUE(module);
  prism::testing::ReferenceCheckOptions options;
  options.intBound["ids"] = 5;
  options.steps = 3; // the sparse output's buffers are reused from step to step
  prism::testing::expectMatchesReference(*module, {"g", "dense"}, options);
}

TEST(SparseKernels, GatherGradToDenseI32) {
  expectGatherGradMatches(DType::I32);
}

TEST(SparseKernels, GatherGradToDenseI64) {
  expectGatherGradMatches(DType::I64);
}

TEST(SparseKernels, SparseAddConcatenates) {
  ir::ModuleBuilder b("sparse_add");
  ir::Value *dy = b.input("dy", TensorType(DType::F32, {B, 2, 3}));
  ir::Value *ids = b.input("ids", TensorType(DType::I64, {B, 2}));
  ir::Value *dz = b.input("dz", TensorType(DType::F32, {5, 3}));
  ir::Value *jds = b.input("jds", TensorType(DType::I32, {5}));
  ir::Value *g = b.op("gather_grad", {dy, ids}, numRows(6), "g");
  ir::Value *h = b.op("gather_grad", {dz, jds}, numRows(6), "h");
  ir::Value *sum = b.op("sparse_add", {g, h}, {}, "sum");
  b.op("sparse_to_dense", {sum}, {}, "dense");
  auto module = finish(b);
  ASSERT_TRUE(module);
  prism::testing::ReferenceCheckOptions options;
  options.intBound["ids"] = 6;
  options.intBound["jds"] = 6;
  options.steps = 2;
  prism::testing::expectMatchesReference(*module, {"sum", "dense"}, options);

  // The sum carries every (index, row) pair: 3 * 2 + 5 of them, in operand order.
  auto store = std::make_shared<VariableStore>();
  runtime::ExecutorOptions execOptions;
  execOptions.outputs = {"sum"};
  auto exec = Executor::create(*module, store, execOptions);
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  Tensor dyValue(DType::F32, {3, 2, 3}), dzValue(DType::F32, {5, 3});
  Tensor idsValue(DType::I64, {3, 2}), jdsValue(DType::I32, {5});
  for (int64_t i = 0; i < 18; ++i)
    dyValue.data<float>()[i] = static_cast<float>(i);
  for (int64_t i = 0; i < 15; ++i)
    dzValue.data<float>()[i] = static_cast<float>(100 + i);
  for (int64_t i = 0; i < 6; ++i)
    idsValue.data<int64_t>()[i] = i % 3;
  for (int32_t i = 0; i < 5; ++i)
    jdsValue.data<int32_t>()[i] = 5 - i;
  ASSERT_FALSE(bool(
      (*exec)->step({{"dy", dyValue}, {"ids", idsValue}, {"dz", dzValue}, {"jds", jdsValue}})));
  const runtime::RuntimeValue *result = (*exec)->output("sum");
  ASSERT_NE(result, nullptr);
  ASSERT_TRUE(result->sparse);
  ASSERT_EQ(result->numRows(), 11);
  EXPECT_EQ(result->rows().shape(), std::vector<int64_t>({11, 3}));
  std::vector<int64_t> indices(result->indices.data<int64_t>(),
                               result->indices.data<int64_t>() + 11);
  EXPECT_EQ(indices, std::vector<int64_t>({0, 1, 2, 0, 1, 2, 5, 4, 3, 2, 1}));
  EXPECT_EQ(result->rows().data<float>()[17], 17.0f);
  EXPECT_EQ(result->rows().data<float>()[18], 100.0f);
}

// gather on a table of 10 rows fed index 12: the step fails and says which index and bound.
TEST(SparseKernels, GatherRejectsAnIndexOutOfRange) {
  for (DType indexType : {DType::I32, DType::I64}) {
    ir::ModuleBuilder b("out_of_range");
    ir::Value *table = b.variable("table", TensorType(DType::F32, {10, 4}), normal());
    ir::Value *ids = b.input("ids", TensorType(indexType, {B}));
    b.op("gather", {table, ids}, {}, "out");
    auto module = finish(b);
    ASSERT_TRUE(module);
    auto store = std::make_shared<VariableStore>();
    ASSERT_FALSE(bool(store->initialize(*module, 1)));
    runtime::ExecutorOptions options;
    options.outputs = {"out"};
    auto exec = Executor::create(*module, store, options);
    ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
    Tensor idsValue(indexType, {3});
    for (int64_t i = 0; i < 3; ++i) {
      int64_t index = i == 2 ? 12 : i;
      if (indexType == DType::I32)
        idsValue.data<int32_t>()[i] = static_cast<int32_t>(index);
      else
        idsValue.data<int64_t>()[i] = index;
    }
    llvm::Error err = (*exec)->step({{"ids", idsValue}});
    ASSERT_TRUE(bool(err));
    std::string message = llvm::toString(std::move(err));
    EXPECT_NE(message.find("index 12"), std::string::npos) << message;
    EXPECT_NE(message.find("10 rows"), std::string::npos) << message;
    EXPECT_NE(message.find("gather"), std::string::npos) << message;

    // A negative index is out of range too.
    idsValue = Tensor(indexType, {1});
    if (indexType == DType::I32)
      idsValue.data<int32_t>()[0] = -1;
    else
      idsValue.data<int64_t>()[0] = -1;
    err = (*exec)->step({{"ids", idsValue}});
    ASSERT_TRUE(bool(err));
    message = llvm::toString(std::move(err));
    EXPECT_NE(message.find("index -1"), std::string::npos) << message;
  }
}

TEST(SparseKernels, GatherGradRejectsAnIndexOutOfRange) {
  ir::ModuleBuilder b("out_of_range");
  ir::Value *dy = b.input("dy", TensorType(DType::F32, {B, 2}));
  ir::Value *ids = b.input("ids", TensorType(DType::I64, {B}));
  b.op("gather_grad", {dy, ids}, numRows(4), "g");
  auto module = finish(b);
  ASSERT_TRUE(module);
  runtime::ExecutorOptions options;
  options.outputs = {"g"};
  auto exec = Executor::create(*module, std::make_shared<VariableStore>(), options);
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  Tensor dyValue(DType::F32, {2, 2}), idsValue(DType::I64, {2});
  dyValue.fillZero();
  idsValue.data<int64_t>()[0] = 3;
  idsValue.data<int64_t>()[1] = 4;
  llvm::Error err = (*exec)->step({{"dy", dyValue}, {"ids", idsValue}});
  ASSERT_TRUE(bool(err));
  std::string message = llvm::toString(std::move(err));
  EXPECT_NE(message.find("index 4"), std::string::npos) << message;
  EXPECT_NE(message.find("num_rows = 4"), std::string::npos) << message;
}

// Indices {4, 1, 4, 7, 1, 4} with rows r * 10 + j: three distinct rows in order of first
// appearance, repeated ones summed; the same on a table small enough for the flat slot array
// and on one large enough for the hash map, and again on a second call (the slot table must
// have been cleared).
TEST(SparseKernels, CoalescerSumsRepeatedRows) {
  for (int64_t tableRows : {int64_t(8), int64_t(1) << 23}) {
    SCOPED_TRACE("table rows " + std::to_string(tableRows));
    SparseRowCoalescer coalescer(tableRows, 2);
    RuntimeValue value;
    value.sparse = true;
    value.indices = Tensor(DType::I64, {6});
    value.rows() = Tensor(DType::F32, {6, 2});
    const int64_t indices[6] = {4, 1, 4, 7, 1, 4};
    for (int64_t r = 0; r < 6; ++r) {
      value.indices.data<int64_t>()[r] = indices[r];
      for (int64_t j = 0; j < 2; ++j)
        value.rows().data<float>()[r * 2 + j] = static_cast<float>(r * 10 + j);
    }
    for (int call = 0; call < 2; ++call) {
      ASSERT_FALSE(bool(coalescer.coalesce(value)));
      ASSERT_EQ(coalescer.numRows(), 3);
      EXPECT_EQ(coalescer.indices().vec(), std::vector<int64_t>({4, 1, 7}));
      EXPECT_EQ(coalescer.row(0)[0], 0 + 20 + 50);
      EXPECT_EQ(coalescer.row(0)[1], 1 + 21 + 51);
      EXPECT_EQ(coalescer.row(1)[0], 10 + 40);
      EXPECT_EQ(coalescer.row(2)[1], 31);
    }
    value.indices.data<int64_t>()[5] = tableRows;
    llvm::Error err = coalescer.coalesce(value);
    ASSERT_TRUE(bool(err));
    EXPECT_NE(llvm::toString(std::move(err)).find("element 5"), std::string::npos);
  }
}

} // namespace
