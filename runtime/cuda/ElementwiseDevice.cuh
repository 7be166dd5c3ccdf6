// The math of each fusable elementwise op (ir/ops/ElementwiseExpr.h) on the GPU: NVRTC compiles
// this file in front of every generated elementwise kernel (ElementwiseCodegen.h), and the tests
// compile it for the host too (PRISM_DEVICE defined empty, <cmath>'s overloads in scope) to check
// each function against a float64 reference. The semantics are the CPU kernels'
// (runtime/cpu/kernels/ElementwiseMath.h): ties of maximum and minimum go to the first operand,
// relu of NaN is 0, gelu uses erfc so that its far left tail keeps its digits.
//
// Only what NVRTC knows without headers may appear here: no includes, no std::, T is float or
// double (the CUDA math functions are overloaded for both).
#ifndef PRISM_DEVICE
#define PRISM_DEVICE __device__ __forceinline__
#endif

template <typename T> PRISM_DEVICE T prism_add(T a, T b) { return a + b; }
template <typename T> PRISM_DEVICE T prism_sub(T a, T b) { return a - b; }
template <typename T> PRISM_DEVICE T prism_mul(T a, T b) { return a * b; }
template <typename T> PRISM_DEVICE T prism_div(T a, T b) { return a / b; }
template <typename T> PRISM_DEVICE T prism_maximum(T a, T b) { return a >= b ? a : b; }
template <typename T> PRISM_DEVICE T prism_minimum(T a, T b) { return a <= b ? a : b; }
template <typename T> PRISM_DEVICE T prism_neg(T x) { return -x; }
template <typename T> PRISM_DEVICE T prism_exp(T x) { return exp(x); }
template <typename T> PRISM_DEVICE T prism_log(T x) { return log(x); }
template <typename T> PRISM_DEVICE T prism_sqrt(T x) { return sqrt(x); }
template <typename T> PRISM_DEVICE T prism_relu(T x) { return x > T(0) ? x : T(0); }
// Two branches so that exp never overflows.
template <typename T> PRISM_DEVICE T prism_sigmoid(T x) {
  if (x >= T(0))
    return T(1) / (T(1) + exp(-x));
  T e = exp(x);
  return e / (T(1) + e);
}
template <typename T> PRISM_DEVICE T prism_tanh(T x) { return tanh(x); }
template <typename T> PRISM_DEVICE T prism_erf(T x) { return erf(x); }
// Phi(x) as erfc(-x / sqrt(2)) / 2.
template <typename T> PRISM_DEVICE T prism_gelu(T x) {
  return T(0.5) * x * erfc(-x * T(0.70710678118654752440));
}
// (dy, x): dy where x > 0.
template <typename T> PRISM_DEVICE T prism_relu_grad(T dy, T x) { return x > T(0) ? dy : T(0); }
// (dy, y) with y = sigmoid(x).
template <typename T> PRISM_DEVICE T prism_sigmoid_grad(T dy, T y) { return dy * y * (T(1) - y); }
// (dy, y) with y = tanh(x).
template <typename T> PRISM_DEVICE T prism_tanh_grad(T dy, T y) { return dy * (T(1) - y * y); }
// (dy, x): dy * 2/sqrt(pi) * e^(-x^2).
template <typename T> PRISM_DEVICE T prism_erf_grad(T dy, T x) {
  return dy * T(1.12837916709551257390) * exp(-x * x);
}
// (dy, x): dy * (Phi(x) + x phi(x)).
template <typename T> PRISM_DEVICE T prism_gelu_grad(T dy, T x) {
  T cdf = T(0.5) * erfc(-x * T(0.70710678118654752440));
  T pdf = T(0.39894228040143267794) * exp(T(-0.5) * x * x);
  return dy * (cdf + x * pdf);
}
