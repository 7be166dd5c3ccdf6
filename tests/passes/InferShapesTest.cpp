// infer-shapes: every op result typed in program order; declared types checked.
#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "ir/Verifier.h"
#include "passes/Passes.h"

using namespace prism;
using namespace prism::ir;

namespace {

std::unique_ptr<Module> mlp() {
  ModuleBuilder b("mlp");
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 784}));
  Value *y = b.input("y", TensorType(DType::I32, {kBatchDim}));
  Value *w1 = b.variable("w1", TensorType(DType::F32, {784, 256}));
  Value *b1 = b.variable("b1", TensorType(DType::F32, {256}));
  Value *w2 = b.variable("w2", TensorType(DType::F32, {256, 10}));
  Value *h = b.relu(b.add(b.matmul(x, w1, "xw"), b1, "pre"), "h");
  Value *logits = b.matmul(h, w2, "logits");
  Value *loss = b.op("softmax_cross_entropy", {logits, y}, {}, "loss");
  b.minimize(loss, "sgd", attrs({{"lr", Attr::real(0.1)}}));
  auto m = b.finish();
  EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
  return std::move(*m);
}

void forgetTypes(Module &m) {
  for (const auto &op : m.ops())
    for (unsigned i = 0; i < op->numResults(); ++i)
      op->result(i)->setType(std::nullopt);
}

} // namespace

TEST(InferShapes, TypesEveryResult) {
  auto m = mlp();
  forgetTypes(*m);
  llvm::Error untyped = verify(*m, {/*requireTypes=*/false});
  EXPECT_FALSE(bool(untyped)) << llvm::toString(std::move(untyped));
  auto pass = passes::createPass("infer-shapes");
  auto changed = pass->run(*m, {});
  ASSERT_TRUE(bool(changed)) << llvm::toString(changed.takeError());
  EXPECT_TRUE(*changed);
  EXPECT_EQ(m->lookup("xw")->type(), TensorType(DType::F32, {kBatchDim, 256}));
  EXPECT_EQ(m->lookup("h")->type(), TensorType(DType::F32, {kBatchDim, 256}));
  EXPECT_EQ(m->lookup("logits")->type(), TensorType(DType::F32, {kBatchDim, 10}));
  EXPECT_EQ(m->lookup("loss")->type(), TensorType(DType::F32, {}));
  llvm::Error typed = verify(*m);
  EXPECT_FALSE(bool(typed)) << llvm::toString(std::move(typed));
  ASSERT_EQ(pass->statistics().size(), 1u);
  EXPECT_EQ(pass->statistics()[0], passes::Pass::Statistic("values typed", 5));
}

TEST(InferShapes, TypedModuleIsUnchanged) {
  auto m = mlp();
  auto pass = passes::createPass("infer-shapes");
  auto changed = pass->run(*m, {});
  ASSERT_TRUE(bool(changed));
  EXPECT_FALSE(*changed);
  EXPECT_EQ(pass->statistics()[0].second, 0);
}

TEST(InferShapes, DeclaredTypeThatDisagreesNamesBothTypes) {
  auto m = mlp();
  forgetTypes(*m);
  Value *logits = m->lookup("logits");
  logits->setType(TensorType(DType::F32, {kBatchDim, 12}));
  logits->definingOp()->loc = {7, 3};
  m->setSourceFile("mlp.prism");
  auto changed = passes::createPass("infer-shapes")->run(*m, {});
  ASSERT_FALSE(bool(changed));
  EXPECT_EQ(llvm::toString(changed.takeError()),
            "mlp.prism:7:3: error: 'matmul' defining %logits: result %logits is declared "
            "f32[B, 12] but the op gives f32[B, 10]");
}

TEST(InferShapes, ShapeErrorCarriesTheOpLocation) {
  ModuleBuilder b("m");
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 784}));
  Value *w = b.variable("w", TensorType(DType::F32, {784, 10}));
  Value *v = b.variable("v", TensorType(DType::F32, {100, 10}));
  b.matmul(b.matmul(x, w, "a"), v, "b");
  Module &m = b.module();
  m.setSourceFile("bad.prism");
  forgetTypes(m);
  m.lookup("b")->definingOp()->loc = {4, 8};
  auto changed = passes::createPass("infer-shapes")->run(m, {});
  ASSERT_FALSE(bool(changed));
  std::string msg = llvm::toString(changed.takeError());
  EXPECT_EQ(msg.rfind("bad.prism:4:8: error: 'matmul' defining %b: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("contracted dimensions differ"), std::string::npos) << msg;
  // Types were set in program order up to the failing op.
  EXPECT_TRUE(m.lookup("a")->hasType());
}
