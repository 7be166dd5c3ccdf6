// CPU kernels of the elementwise ops: broadcasting arithmetic (add, sub, mul, div, maximum,
// minimum, bias_add), unary math and activations, the activations' backward ops, and the
// three-operand selects (where, maximum_grad, minimum_grad). Each op's math is its functor in
// ElementwiseMath.h.
#include <type_traits>

#include "runtime/cpu/kernels/Broadcast.h"
#include "runtime/cpu/kernels/DTypeDispatch.h"
#include "runtime/cpu/kernels/ElementwiseMath.h"
#include "runtime/cpu/kernels/Parallel.h"

namespace prism::runtime::cpu {
namespace {

using namespace elementwise;

// A binary op with numpy broadcasting: same shapes run as one flat loop, [N, C] with [C] or a
// scalar as rows without a table, anything else as rows from the plan's table.
template <typename T, typename Op> class BinaryKernel final : public Kernel {
public:
  explicit BinaryKernel(const KernelSpec &spec)
      : plan_(spec.outputTypes[0].dims,
              {broadcastStrides(spec.inputTypes[0].dims, spec.outputTypes[0].dims),
               broadcastStrides(spec.inputTypes[1].dims, spec.outputTypes[0].dims)}),
        threads_(spec.threads) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const T *a = inputs[0]->dense.data<T>();
    const T *b = inputs[1]->dense.data<T>();
    T *out = outputs[0]->dense.data<T>();
    if constexpr (std::is_same_v<Op, Div> && std::is_integral_v<T>) {
      // Every element of b is used at least once (the output is not empty), so a zero
      // anywhere in b is a division by zero.
      bool zero = false;
      int64_t n = inputs[1]->dense.numElements();
      for (int64_t i = 0; i < n; ++i)
        zero |= b[i] == T(0);
      if (zero && plan_.total() > 0)
        return ir::makeError("integer division by zero");
    }
    bool aStep = plan_.innerStep(0) != 0, bStep = plan_.innerStep(1) != 0;
    parallelFor(plan_.total(), threads_, Op::grain, [&](int64_t begin, int64_t end) {
      plan_.forRange(begin, end,
                     [&](int64_t at, const std::array<int64_t, 2> &from, int64_t count) {
                       binaryLoop<Op>(out + at, a + from[0], aStep, b + from[1], bStep, count);
                     });
    });
    return llvm::Error::success();
  }

private:
  BroadcastPlan<2> plan_;
  int threads_;
};

template <typename T, typename Op> class UnaryKernel final : public Kernel {
public:
  explicit UnaryKernel(const KernelSpec &spec)
      : elements_(spec.outputTypes[0].numElements()), threads_(spec.threads) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const T *in = inputs[0]->dense.data<T>();
    T *out = outputs[0]->dense.data<T>();
    parallelFor(elements_, threads_, Op::grain, [&](int64_t begin, int64_t end) {
      unaryLoop<Op>(out + begin, in + begin, end - begin);
    });
    return llvm::Error::success();
  }

private:
  int64_t elements_;
  int threads_;
};

template <typename T, typename Op> std::unique_ptr<Kernel> makeKernel(const KernelSpec &spec) {
  if constexpr (Op::arity == 1)
    return std::make_unique<UnaryKernel<T, Op>>(spec);
  else
    return std::make_unique<BinaryKernel<T, Op>>(spec);
}

// The kernel of `Op` for the output's dtype: f32 or f64, and i32 or i64 where the op takes
// integers.
template <typename Op> KernelOrError makeElementwise(const KernelSpec &spec) {
  auto make = [&](auto t) { return makeKernel<decltype(t), Op>(spec); };
  if constexpr (Op::integers)
    return withNumericType(spec, spec.outputTypes[0].dtype, make);
  else
    return withFloatType(spec, spec.outputTypes[0].dtype, make);
}

// out[i] = op(x[i * xStep], y[i * yStep], z[i * zStep]), steps 0 or 1; operands of one shape
// (every step 1) get a loop of their own, which vectorizes.
template <typename Op, typename C, typename T>
PRISM_TARGET_CLONES void ternaryLoop(T *__restrict out, const C *__restrict x, int64_t xStep,
                                     const T *__restrict y, int64_t yStep, const T *__restrict z,
                                     int64_t zStep, int64_t n) {
  const Op op;
  if (xStep && yStep && zStep) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = op(x[i], y[i], z[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    out[i] = op(x[i * xStep], y[i * yStep], z[i * zStep]);
}

// A three-operand op with numpy broadcasting; operand 0 is of type C, the others and the
// output of type T.
template <typename Op, typename C, typename T> class TernaryKernel final : public Kernel {
public:
  explicit TernaryKernel(const KernelSpec &spec)
      : plan_(spec.outputTypes[0].dims,
              {broadcastStrides(spec.inputTypes[0].dims, spec.outputTypes[0].dims),
               broadcastStrides(spec.inputTypes[1].dims, spec.outputTypes[0].dims),
               broadcastStrides(spec.inputTypes[2].dims, spec.outputTypes[0].dims)}),
        threads_(spec.threads) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const C *x = inputs[0]->dense.data<C>();
    const T *y = inputs[1]->dense.data<T>();
    const T *z = inputs[2]->dense.data<T>();
    T *out = outputs[0]->dense.data<T>();
    int64_t xStep = plan_.innerStep(0), yStep = plan_.innerStep(1), zStep = plan_.innerStep(2);
    parallelFor(plan_.total(), threads_, kCheapGrain, [&](int64_t begin, int64_t end) {
      plan_.forRange(begin, end,
                     [&](int64_t at, const std::array<int64_t, 3> &from, int64_t count) {
                       ternaryLoop<Op>(out + at, x + from[0], xStep, y + from[1], yStep,
                                       z + from[2], zStep, count);
                     });
    });
    return llvm::Error::success();
  }

private:
  BroadcastPlan<3> plan_;
  int threads_;
};

KernelOrError makeWhere(const KernelSpec &spec) {
  return withElementType(spec, spec.inputTypes[0].dtype, [&](auto c) {
    return withFloatType(spec, spec.outputTypes[0].dtype, [&](auto t) -> KernelOrError {
      return std::make_unique<TernaryKernel<Where, decltype(c), decltype(t)>>(spec);
    });
  });
}

template <typename Op> KernelOrError makeExtremumGrad(const KernelSpec &spec) {
  return withFloatType(spec, spec.outputTypes[0].dtype, [&](auto t) -> KernelOrError {
    return std::make_unique<TernaryKernel<Op, decltype(t), decltype(t)>>(spec);
  });
}

// bias_add is add with a broadcast [C] operand, for floating-point values only.
KernelOrError makeBiasAdd(const KernelSpec &spec) {
  return withFloatType(spec, spec.outputTypes[0].dtype,
                       [&](auto t) { return makeKernel<decltype(t), Add>(spec); });
}

} // namespace

void registerElementwiseKernels(KernelRegistry &registry) {
#define PRISM_REGISTER_ELEMENTWISE(name, Functor) registry.add(name, makeElementwise<Functor>);
  PRISM_ELEMENTWISE_OPS(PRISM_REGISTER_ELEMENTWISE)
#undef PRISM_REGISTER_ELEMENTWISE
  registry.add("bias_add", makeBiasAdd);
  registry.add("where", makeWhere);
  registry.add("maximum_grad", makeExtremumGrad<MaximumGrad>);
  registry.add("minimum_grad", makeExtremumGrad<MinimumGrad>);
}

} // namespace prism::runtime::cpu
