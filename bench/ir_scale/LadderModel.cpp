// The ladder model.
#include "bench/ir_scale/LadderModel.h"

#include <string>

#include "ir/Builder.h"

namespace prism::bench {

int64_t ladderLayersFor(int64_t ops) {
  int64_t layers = (ops - kLadderOtherOps + kLadderOpsPerLayer - 1) / kLadderOpsPerLayer;
  return layers < 1 ? 1 : layers;
}

llvm::Expected<std::unique_ptr<ir::Module>> buildLadderModel(int64_t layers, int64_t width,
                                                             int64_t vocab) {
  using ir::Attr;
  using ir::DType;
  using ir::TensorType;
  ir::ModuleBuilder b("ladder");
  ir::Value *tokens = b.input("tokens", TensorType(DType::I32, {ir::kBatchDim, 4}));
  ir::Value *labels = b.input("labels", TensorType(DType::I32, {ir::kBatchDim}));
  ir::Value *emb =
      b.variable("emb", TensorType(DType::F32, {vocab, width}),
                 {"uniform", ir::attrs({{"min", Attr::real(-0.05)}, {"max", Attr::real(0.05)}})});
  ir::Value *h = b.op("reduce_mean", {b.op("gather", {emb, tokens}, {}, "embedded")},
                      ir::attrs({{"axes", Attr::ints({1})}}), "h");
  for (int64_t i = 0; i < layers; ++i) {
    std::string layer = "l" + std::to_string(i);
    ir::Value *w =
        b.variable(layer + ".w", TensorType(DType::F32, {width, width}), {"glorot_uniform", {}});
    ir::Value *bias = b.variable(layer + ".b", TensorType(DType::F32, {width}));
    ir::Value *z = b.op("bias_add", {b.matmul(h, w, layer + ".mm"), bias}, {}, layer + ".z");
    h = b.add(b.relu(z, layer + ".a"), h, layer + ".h");
  }
  ir::Value *outW =
      b.variable("out.w", TensorType(DType::F32, {width, 10}), {"glorot_uniform", {}});
  ir::Value *loss =
      b.op("softmax_cross_entropy", {b.matmul(h, outW, "logits"), labels}, {}, "loss");
  b.minimize(loss, "adam", ir::attrs({{"lr", Attr::real(0.001)}}));
  return b.finish();
}

} // namespace prism::bench
