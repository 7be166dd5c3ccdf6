// CPU kernels of the elementwise ops: broadcasting arithmetic (add, sub, mul, div, bias_add),
// unary math and activations, and the activations' backward ops.
#include <type_traits>

#include "runtime/cpu/kernels/Broadcast.h"
#include "runtime/cpu/kernels/DTypeDispatch.h"
#include "runtime/cpu/kernels/FastMath.h"
#include "runtime/cpu/kernels/Parallel.h"

namespace prism::runtime::cpu {
namespace {

// Each operation is a functor so that the loops below inline it; `grain` is how many of its
// elements make a parallel block worthwhile.
struct Add {
  static constexpr int64_t grain = kCheapGrain;
  template <typename T> T operator()(T a, T b) const { return a + b; }
};

struct Sub {
  static constexpr int64_t grain = kCheapGrain;
  template <typename T> T operator()(T a, T b) const { return a - b; }
};

struct Mul {
  static constexpr int64_t grain = kCheapGrain;
  template <typename T> T operator()(T a, T b) const { return a * b; }
};

struct Div {
  static constexpr int64_t grain = kCheapGrain;
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      // Integer division truncates toward zero. The lowest value divided by -1 traps in
      // hardware, so -1 negates with wrap-around instead.
      using U = std::make_unsigned_t<T>;
      return b == T(-1) ? static_cast<T>(U(0) - static_cast<U>(a)) : a / b;
    } else {
      return a / b;
    }
  }
};

struct ReluGrad {
  static constexpr int64_t grain = kCheapGrain;
  template <typename T> T operator()(T dy, T x) const { return x > T(0) ? dy : T(0); }
};

struct SigmoidGrad {
  static constexpr int64_t grain = kCheapGrain;
  template <typename T> T operator()(T dy, T y) const { return dy * y * (T(1) - y); }
};

struct TanhGrad {
  static constexpr int64_t grain = kCheapGrain;
  template <typename T> T operator()(T dy, T y) const { return dy * (T(1) - y * y); }
};

struct Neg {
  static constexpr int64_t grain = kCheapGrain;
  template <typename T> T operator()(T x) const { return -x; }
};

struct Relu {
  static constexpr int64_t grain = kCheapGrain;
  template <typename T> T operator()(T x) const { return x > T(0) ? x : T(0); }
};

struct Exp {
  static constexpr int64_t grain = kCostlyGrain;
  template <typename T> T operator()(T x) const { return fastmath::exp(x); }
};

struct Log {
  static constexpr int64_t grain = kCostlyGrain;
  template <typename T> T operator()(T x) const { return fastmath::log(x); }
};

struct Sqrt {
  static constexpr int64_t grain = kCheapGrain;
};

struct Sigmoid {
  static constexpr int64_t grain = kCostlyGrain;
  template <typename T> T operator()(T x) const { return fastmath::sigmoid(x); }
};

struct Tanh {
  static constexpr int64_t grain = kCostlyGrain;
  template <typename T> T operator()(T x) const { return fastmath::tanh(x); }
};

// out[i] = op(a[i * aStep], b[i * bStep]) for steps of 0 or 1: one loop per case, so that each
// is a plain contiguous loop the compiler vectorizes.
template <typename T, typename Op>
void binaryRow(const Op &op, T *__restrict out, const T *__restrict a, bool aStep,
               const T *__restrict b, bool bStep, int64_t n) {
  if (aStep && bStep) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = op(a[i], b[i]);
  } else if (aStep) {
    const T bValue = *b;
    for (int64_t i = 0; i < n; ++i)
      out[i] = op(a[i], bValue);
  } else if (bStep) {
    const T aValue = *a;
    for (int64_t i = 0; i < n; ++i)
      out[i] = op(aValue, b[i]);
  } else {
    const T value = op(*a, *b);
    for (int64_t i = 0; i < n; ++i)
      out[i] = value;
  }
}

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
                       binaryRow(Op{}, out + at, a + from[0], aStep, b + from[1], bStep, count);
                     });
    });
    return llvm::Error::success();
  }

private:
  BroadcastPlan<2> plan_;
  int threads_;
};

template <typename T, typename Op>
void unaryBlock(const T *__restrict in, T *__restrict out, int64_t n) {
  if constexpr (std::is_same_v<Op, Sqrt>) {
    fastmath::sqrtArray(in, out, n);
  } else {
    Op op;
    for (int64_t i = 0; i < n; ++i)
      out[i] = op(in[i]);
  }
}

template <typename T, typename Op> class UnaryKernel final : public Kernel {
public:
  explicit UnaryKernel(const KernelSpec &spec)
      : elements_(spec.outputTypes[0].numElements()), threads_(spec.threads) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const T *in = inputs[0]->dense.data<T>();
    T *out = outputs[0]->dense.data<T>();
    parallelFor(elements_, threads_, Op::grain, [&](int64_t begin, int64_t end) {
      unaryBlock<T, Op>(in + begin, out + begin, end - begin);
    });
    return llvm::Error::success();
  }

private:
  int64_t elements_;
  int threads_;
};

template <typename Op> KernelOrError makeNumericBinary(const KernelSpec &spec) {
  return withNumericType(spec, spec.outputTypes[0].dtype, [&](auto t) {
    return std::unique_ptr<Kernel>(new BinaryKernel<decltype(t), Op>(spec));
  });
}

// bias_add and the activations' backward ops take floating-point values only.
template <typename Op> KernelOrError makeFloatBinary(const KernelSpec &spec) {
  return withFloatType(spec, spec.outputTypes[0].dtype, [&](auto t) {
    return std::unique_ptr<Kernel>(new BinaryKernel<decltype(t), Op>(spec));
  });
}

template <typename Op> KernelOrError makeNumericUnary(const KernelSpec &spec) {
  return withNumericType(spec, spec.outputTypes[0].dtype, [&](auto t) {
    return std::unique_ptr<Kernel>(new UnaryKernel<decltype(t), Op>(spec));
  });
}

template <typename Op> KernelOrError makeFloatUnary(const KernelSpec &spec) {
  return withFloatType(spec, spec.outputTypes[0].dtype, [&](auto t) {
    return std::unique_ptr<Kernel>(new UnaryKernel<decltype(t), Op>(spec));
  });
}

} // namespace

void registerElementwiseKernels(KernelRegistry &registry) {
  registry.add("add", makeNumericBinary<Add>);
  registry.add("sub", makeNumericBinary<Sub>);
  registry.add("mul", makeNumericBinary<Mul>);
  registry.add("div", makeNumericBinary<Div>);
  registry.add("bias_add", makeFloatBinary<Add>);
  registry.add("relu_grad", makeFloatBinary<ReluGrad>);
  registry.add("sigmoid_grad", makeFloatBinary<SigmoidGrad>);
  registry.add("tanh_grad", makeFloatBinary<TanhGrad>);
  registry.add("neg", makeNumericUnary<Neg>);
  registry.add("exp", makeFloatUnary<Exp>);
  registry.add("log", makeFloatUnary<Log>);
  registry.add("sqrt", makeFloatUnary<Sqrt>);
  registry.add("relu", makeFloatUnary<Relu>);
  registry.add("sigmoid", makeFloatUnary<Sigmoid>);
  registry.add("tanh", makeFloatUnary<Tanh>);
}

} // namespace prism::runtime::cpu
