// CPU kernels of the ops that compute differently in training and evaluation: dropout and
// dropout_grad, whose masks follow runtime/DropoutMask.h (the reference's rule, draw for draw).
#include <algorithm>
#include <cstring>

#include "ir/OpTable.h"
#include "runtime/DropoutMask.h"
#include "runtime/cpu/kernels/DTypeDispatch.h"
#include "runtime/cpu/kernels/Parallel.h"

namespace prism::runtime::cpu {
namespace {

// x through the mask of the op's stream (training), or x (evaluation). A value whose first
// dimension is B draws per example by its index in the global batch.
template <typename T> class DropoutKernel final : public Kernel {
public:
  explicit DropoutKernel(const KernelSpec &spec)
      : key_(ir::randomStreamKey(*spec.op)), rate_(spec.attrs.getFloat("rate")), step_(spec.step),
        towerOffset_(spec.towerOffset), elements_(spec.outputTypes[0].numElements()),
        threads_(spec.threads) {
    const ir::TensorType &declared = spec.op->result(0)->type();
    perExample_ = declared.rank() > 0 && declared.dims[0] == ir::kBatchDim;
    int64_t examples = perExample_ ? spec.outputTypes[0].dims[0] : 1;
    exampleSize_ = examples == 0 ? 1 : std::max<int64_t>(elements_ / examples, 1);
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const T *in = inputs[0]->dense.data<T>();
    T *out = outputs[0]->dense.data<T>();
    const StepContext step = step_ ? *step_ : StepContext{};
    if (!step.training()) {
      if (elements_ > 0 && out != in)
        std::memcpy(out, in, static_cast<size_t>(elements_) * sizeof(T));
      return llvm::Error::success();
    }
    const uint64_t stream = dropoutStepStream(step.seed, key_, step.step);
    const int64_t first = perExample_ ? step.exampleOffset + towerOffset_ : 0;
    const T scale = static_cast<T>(dropoutScale(rate_));
    const double rate = rate_;
    const int64_t size = exampleSize_;
    parallelFor(elements_, threads_, kCostlyGrain, [&](int64_t begin, int64_t end) {
      int64_t e = begin / size, i = begin % size;
      uint64_t example = dropoutExampleStream(stream, first + e);
      for (int64_t at = begin; at < end; ++at) {
        out[at] = dropoutKeeps(example, i, rate) ? in[at] * scale : T(0);
        if (++i == size && at + 1 < end) {
          i = 0;
          example = dropoutExampleStream(stream, first + ++e);
        }
      }
    });
    return llvm::Error::success();
  }

private:
  std::string key_;
  double rate_;
  const StepContext *step_;
  int64_t towerOffset_, elements_, exampleSize_ = 1;
  bool perExample_ = false;
  int threads_;
};

KernelOrError makeDropout(const KernelSpec &spec) {
  return withFloatType(spec, spec.outputTypes[0].dtype, [&](auto t) -> std::unique_ptr<Kernel> {
    return std::make_unique<DropoutKernel<decltype(t)>>(spec);
  });
}

} // namespace

void registerTrainingModeKernels(KernelRegistry &registry) {
  registry.add("dropout", makeDropout);
  registry.add("dropout_grad", makeDropout);
}

} // namespace prism::runtime::cpu
