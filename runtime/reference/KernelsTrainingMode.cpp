// Reference kernels of the ops that compute differently in training and evaluation: dropout
// and dropout_grad, which draw their masks by the rule of runtime/DropoutMask.h.
#include "ir/OpTable.h"
#include "runtime/DropoutMask.h"
#include "runtime/reference/KernelSupport.h"

namespace prism::runtime::reference::kernels {
namespace {

// x through the mask of the op's stream in training; x itself in evaluation. A value whose
// first dimension is B draws per example by its global index; any other is one example
// (index 0) that every replica draws alike.
llvm::Expected<KernelResults> dropoutMaskKernel(const KernelArgs &args) {
  Tensor out = args.operand(0);
  const StepContext &step = *args.step;
  if (!step.training())
    return single(std::move(out));
  double rate = args.attrs.getFloat("rate");
  double scale = dropoutScale(rate);
  bool perExample = args.batchRows[0];
  int64_t n = out.numElements();
  int64_t examples = perExample ? out.shape()[0] : 1;
  int64_t size = examples == 0 ? 0 : n / examples;
  uint64_t stream = dropoutStepStream(step.seed, ir::randomStreamKey(args.op), step.step);
  for (int64_t e = 0; e < examples; ++e) {
    uint64_t example = dropoutExampleStream(stream, perExample ? step.exampleOffset + e : 0);
    for (int64_t i = 0; i < size; ++i) {
      double &v = out.data()[e * size + i];
      v = dropoutKeeps(example, i, rate) ? v * scale : 0.0;
    }
  }
  return single(std::move(out));
}

} // namespace

void registerTrainingModeKernels(KernelTable &t) {
  t["dropout"] = {dropoutMaskKernel};
  t["dropout_grad"] = {dropoutMaskKernel};
}

} // namespace prism::runtime::reference::kernels
