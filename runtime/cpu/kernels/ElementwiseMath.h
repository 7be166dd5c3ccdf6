// The math of each elementwise op, written once: the elementwise kernels and the
// fused_elementwise evaluator both run these functors, through the same loops.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "runtime/cpu/kernels/FastMath.h"
#include "runtime/cpu/kernels/Parallel.h"
#include "runtime/cpu/kernels/TargetClones.h"
#include "llvm/ADT/StringRef.h"

namespace prism::runtime::cpu::elementwise {

// What a kernel needs to know of an op besides its math: how many operands it takes, how many
// of its elements make a parallel block worthwhile, and whether it takes i32 and i64 as well as
// f32 and f64.
template <int Arity, int64_t Grain, bool Integers> struct OpTraits {
  static constexpr int arity = Arity;
  static constexpr int64_t grain = Grain;
  static constexpr bool integers = Integers;
};

struct Add : OpTraits<2, kCheapGrain, true> {
  template <typename T> T operator()(T a, T b) const { return a + b; }
};

struct Sub : OpTraits<2, kCheapGrain, true> {
  template <typename T> T operator()(T a, T b) const { return a - b; }
};

struct Mul : OpTraits<2, kCheapGrain, true> {
  template <typename T> T operator()(T a, T b) const { return a * b; }
};

// Integer division truncates toward zero; a zero divisor is the kernel's error, checked
// before the loop.
struct Div : OpTraits<2, kCheapGrain, true> {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      // The lowest value divided by -1 traps in hardware, so -1 negates with wrap-around.
      using U = std::make_unsigned_t<T>;
      return b == T(-1) ? static_cast<T>(U(0) - static_cast<U>(a)) : a / b;
    } else {
      return a / b;
    }
  }
};

// a on ties, as the gradient rules (maximum_grad, minimum_grad) assume.
struct Maximum : OpTraits<2, kCheapGrain, true> {
  template <typename T> T operator()(T a, T b) const { return a >= b ? a : b; }
};

struct Minimum : OpTraits<2, kCheapGrain, true> {
  template <typename T> T operator()(T a, T b) const { return a <= b ? a : b; }
};

struct Neg : OpTraits<1, kCheapGrain, true> {
  template <typename T> T operator()(T x) const { return -x; }
};

struct Exp : OpTraits<1, kCostlyGrain, false> {
  template <typename T> T operator()(T x) const { return fastmath::exp(x); }
};

struct Log : OpTraits<1, kCostlyGrain, false> {
  template <typename T> T operator()(T x) const { return fastmath::log(x); }
};

// Vectorizes because prism_cpu is built with -fno-math-errno (a sqrt that may set errno stays
// a scalar call).
struct Sqrt : OpTraits<1, kCheapGrain, false> {
  template <typename T> T operator()(T x) const { return std::sqrt(x); }
};

struct Relu : OpTraits<1, kCheapGrain, false> {
  template <typename T> T operator()(T x) const { return x > T(0) ? x : T(0); }
};

struct Sigmoid : OpTraits<1, kCostlyGrain, false> {
  template <typename T> T operator()(T x) const { return fastmath::sigmoid(x); }
};

struct Tanh : OpTraits<1, kCostlyGrain, false> {
  template <typename T> T operator()(T x) const { return fastmath::tanh(x); }
};

// std::erf: accurate to the last bit or two, but a scalar call (gelu likewise).
struct Erf : OpTraits<1, kCostlyGrain, false> {
  template <typename T> T operator()(T x) const { return std::erf(x); }
};

// Phi(x) as erfc(-x / sqrt(2)) / 2, not (1 + erf(x / sqrt(2))) / 2: for x below about -3 the
// sum cancels erf's leading digits (float32 keeps 1% of gelu(-4.5)), erfc keeps them.
struct Gelu : OpTraits<1, kCostlyGrain, false> {
  template <typename T> T operator()(T x) const {
    return T(0.5) * x * std::erfc(-x * T(0.70710678118654752440));
  }
};

// (dy, x): dy * 2/sqrt(pi) * e^(-x^2).
struct ErfGrad : OpTraits<2, kCostlyGrain, false> {
  template <typename T> T operator()(T dy, T x) const {
    return dy * T(1.12837916709551257390) * fastmath::exp(-x * x);
  }
};

// (dy, x): dy * (Phi(x) + x phi(x)), Phi and phi the standard normal's distribution and density.
struct GeluGrad : OpTraits<2, kCostlyGrain, false> {
  template <typename T> T operator()(T dy, T x) const {
    T cdf = T(0.5) * std::erfc(-x * T(0.70710678118654752440)); // as in Gelu
    T pdf = T(0.39894228040143267794) * fastmath::exp(T(-0.5) * x * x);
    return dy * (cdf + x * pdf);
  }
};

// (dy, x): dy where x > 0.
struct ReluGrad : OpTraits<2, kCheapGrain, false> {
  template <typename T> T operator()(T dy, T x) const { return x > T(0) ? dy : T(0); }
};

// (dy, y) with y = sigmoid(x).
struct SigmoidGrad : OpTraits<2, kCheapGrain, false> {
  template <typename T> T operator()(T dy, T y) const { return dy * y * (T(1) - y); }
};

// (dy, y) with y = tanh(x).
struct TanhGrad : OpTraits<2, kCheapGrain, false> {
  template <typename T> T operator()(T dy, T y) const { return dy * (T(1) - y * y); }
};

// The three-operand selects, which fused_elementwise does not take: where(cond, a, b), with
// cond of any dtype (non-zero is true), and the shares of a in the gradients of maximum and
// minimum, (dy, a, b), a winning ties.
struct Where {
  template <typename C, typename T> T operator()(C cond, T a, T b) const {
    return cond != C(0) ? a : b;
  }
};

struct MaximumGrad {
  template <typename T> T operator()(T dy, T a, T b) const { return a >= b ? dy : T(0); }
};

struct MinimumGrad {
  template <typename T> T operator()(T dy, T a, T b) const { return a <= b ? dy : T(0); }
};

// X(name, Functor) for every one- and two-operand op above: the plain kernels register one
// kernel each, and fused_elementwise evaluates any of them.
#define PRISM_ELEMENTWISE_OPS(X)                                                                   \
  X("add", Add)                                                                                    \
  X("sub", Sub)                                                                                    \
  X("mul", Mul)                                                                                    \
  X("div", Div)                                                                                    \
  X("maximum", Maximum)                                                                            \
  X("minimum", Minimum)                                                                            \
  X("neg", Neg)                                                                                    \
  X("exp", Exp)                                                                                    \
  X("log", Log)                                                                                    \
  X("sqrt", Sqrt)                                                                                  \
  X("relu", Relu)                                                                                  \
  X("sigmoid", Sigmoid)                                                                            \
  X("tanh", Tanh)                                                                                  \
  X("erf", Erf)                                                                                    \
  X("gelu", Gelu)                                                                                  \
  X("relu_grad", ReluGrad)                                                                         \
  X("sigmoid_grad", SigmoidGrad)                                                                   \
  X("tanh_grad", TanhGrad)                                                                         \
  X("erf_grad", ErfGrad)                                                                           \
  X("gelu_grad", GeluGrad)

// Calls visit(Functor{}) for the op called `name` and returns its result, or returns
// `otherwise` when no op has that name.
template <typename Result, typename Visit>
Result visitOp(llvm::StringRef name, Result otherwise, const Visit &visit) {
#define PRISM_VISIT_OP(opName, Functor)                                                            \
  if (name == opName)                                                                              \
    return visit(Functor{});
  PRISM_ELEMENTWISE_OPS(PRISM_VISIT_OP)
#undef PRISM_VISIT_OP
  return otherwise;
}

// out[i] = op(a[i]) for n contiguous elements.
template <typename Op, typename T>
PRISM_TARGET_CLONES void unaryLoop(T *__restrict out, const T *__restrict a, int64_t n) {
  const Op op;
  for (int64_t i = 0; i < n; ++i)
    out[i] = op(a[i]);
}

// out[i] = op(a[i * aStep], b[i * bStep]) for steps of 0 (the operand repeats one element) or
// 1: one loop per case, so that each is a plain contiguous loop that vectorizes.
template <typename Op, typename T>
PRISM_TARGET_CLONES void binaryLoop(T *__restrict out, const T *__restrict a, bool aStep,
                                    const T *__restrict b, bool bStep, int64_t n) {
  const Op op;
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

} // namespace prism::runtime::cpu::elementwise
