// A synthetic model of any size, for measuring how compile time grows with the graph: an
// embedding read by gathers, then a ladder of residual dense layers
// (`h = add(relu(bias_add(matmul(h, w), b)), h)`), a softmax loss and adam. Shared by
// bench/ir_scale and the 100,000-op test.
#pragma once

#include <cstdint>
#include <memory>

#include "ir/Module.h"
#include "llvm/Support/Error.h"

namespace prism::bench {

// Ops the builder makes per layer, and around the layers (embedding, output, loss).
constexpr int64_t kLadderOpsPerLayer = 4;
constexpr int64_t kLadderOtherOps = 4;

// The layer count whose module has at least `ops` ops.
int64_t ladderLayersFor(int64_t ops);

// `layers` layers of `width` units; the embedding has `vocab` rows.
llvm::Expected<std::unique_ptr<ir::Module>> buildLadderModel(int64_t layers, int64_t width = 8,
                                                             int64_t vocab = 1000);

// The passes of a training step on one device (as `prism train` runs them), then the
// data-parallel ones (as the partitioner runs them between graphs).
constexpr const char *kLadderTrainingPipeline =
    "infer-shapes,autodiff,lower-optimizer,cse,dce,fuse-bias-activation,fuse-elementwise";
constexpr const char *kLadderParallelPipeline =
    "classify-variables,replicate-between-graph,place-variables,route-gradients";

} // namespace prism::bench
