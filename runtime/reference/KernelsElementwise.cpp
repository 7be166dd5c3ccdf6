// Reference kernels of the elementwise ops: broadcasting arithmetic, maximum, minimum, where,
// unary math, activations and their backward ops.
#include <cmath>

#include "runtime/reference/KernelSupport.h"

namespace prism::runtime::reference::kernels {
namespace {

// out = f(a, b) with numpy broadcasting into the result's shape.
template <typename F> Tensor broadcastBinary(const KernelArgs &args, F f) {
  const Tensor &a = args.operand(0), &b = args.operand(1);
  Tensor out = zeroResult(args);
  Shape sa = broadcastStrides(a.shape(), out.shape());
  Shape sb = broadcastStrides(b.shape(), out.shape());
  int64_t flat = 0;
  forEachIndex(out.shape(), [&](llvm::ArrayRef<int64_t> index) {
    out.data()[flat++] = f(a.data()[offsetOf(index, sa)], b.data()[offsetOf(index, sb)]);
  });
  return out;
}

// out = f(x, y, z) with numpy broadcasting of the three into the result's shape.
template <typename F> Tensor broadcastTernary(const KernelArgs &args, F f) {
  const Tensor &x = args.operand(0), &y = args.operand(1), &z = args.operand(2);
  Tensor out = zeroResult(args);
  Shape sx = broadcastStrides(x.shape(), out.shape());
  Shape sy = broadcastStrides(y.shape(), out.shape());
  Shape sz = broadcastStrides(z.shape(), out.shape());
  int64_t flat = 0;
  forEachIndex(out.shape(), [&](llvm::ArrayRef<int64_t> index) {
    out.data()[flat++] = f(x.data()[offsetOf(index, sx)], y.data()[offsetOf(index, sy)],
                           z.data()[offsetOf(index, sz)]);
  });
  return out;
}

template <typename F> Tensor unaryMap(const KernelArgs &args, F f) {
  Tensor out = args.operand(0);
  for (double &v : out.data())
    v = f(v);
  return out;
}

// out[i] = f(a[i], b[i]) for two operands of one shape.
template <typename F> Tensor pairMap(const KernelArgs &args, F f) {
  const Tensor &a = args.operand(0), &b = args.operand(1);
  Tensor out = zeroResult(args);
  for (size_t i = 0; i < out.data().size(); ++i)
    out.data()[i] = f(a.data()[i], b.data()[i]);
  return out;
}

llvm::Expected<KernelResults> addKernel(const KernelArgs &args) {
  return single(broadcastBinary(args, [](double a, double b) { return a + b; }));
}

llvm::Expected<KernelResults> subKernel(const KernelArgs &args) {
  return single(broadcastBinary(args, [](double a, double b) { return a - b; }));
}

llvm::Expected<KernelResults> mulKernel(const KernelArgs &args) {
  return single(broadcastBinary(args, [](double a, double b) { return a * b; }));
}

llvm::Expected<KernelResults> divKernel(const KernelArgs &args) {
  if (ir::isFloat(args.resultDType()))
    return single(broadcastBinary(args, [](double a, double b) { return a / b; }));
  // Integer division truncates toward zero (C semantics); by zero it has no value.
  bool byZero = false;
  Tensor out = broadcastBinary(args, [&](double a, double b) {
    byZero |= b == 0;
    return b == 0 ? 0.0 : std::trunc(a / b);
  });
  if (byZero)
    return kernelError("integer division by zero");
  return single(std::move(out));
}

llvm::Expected<KernelResults> maximumKernel(const KernelArgs &args) {
  return single(broadcastBinary(args, [](double a, double b) { return a >= b ? a : b; }));
}

llvm::Expected<KernelResults> minimumKernel(const KernelArgs &args) {
  return single(broadcastBinary(args, [](double a, double b) { return a <= b ? a : b; }));
}

llvm::Expected<KernelResults> whereKernel(const KernelArgs &args) {
  return single(
      broadcastTernary(args, [](double cond, double a, double b) { return cond != 0 ? a : b; }));
}

// (dy, a, b): a's share of the gradient of maximum (minimum), a winning ties.
llvm::Expected<KernelResults> maximumGradKernel(const KernelArgs &args) {
  return single(
      broadcastTernary(args, [](double dy, double a, double b) { return a >= b ? dy : 0.0; }));
}

llvm::Expected<KernelResults> minimumGradKernel(const KernelArgs &args) {
  return single(
      broadcastTernary(args, [](double dy, double a, double b) { return a <= b ? dy : 0.0; }));
}

llvm::Expected<KernelResults> negKernel(const KernelArgs &args) {
  return single(unaryMap(args, [](double x) { return -x; }));
}

llvm::Expected<KernelResults> expKernel(const KernelArgs &args) {
  return single(unaryMap(args, [](double x) { return std::exp(x); }));
}

llvm::Expected<KernelResults> logKernel(const KernelArgs &args) {
  return single(unaryMap(args, [](double x) { return std::log(x); }));
}

llvm::Expected<KernelResults> sqrtKernel(const KernelArgs &args) {
  return single(unaryMap(args, [](double x) { return std::sqrt(x); }));
}

llvm::Expected<KernelResults> reluKernel(const KernelArgs &args) {
  return single(unaryMap(args, [](double x) { return x > 0 ? x : 0.0; }));
}

double sigmoid(double x) {
  // Two branches so that exp never overflows.
  if (x >= 0)
    return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

llvm::Expected<KernelResults> sigmoidKernel(const KernelArgs &args) {
  return single(unaryMap(args, sigmoid));
}

llvm::Expected<KernelResults> tanhKernel(const KernelArgs &args) {
  return single(unaryMap(args, [](double x) { return std::tanh(x); }));
}

constexpr double kSqrtHalf = 0.70710678118654752440;       // 1 / sqrt(2)
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;  // 2 / sqrt(pi)
constexpr double kNormalDensity0 = 0.39894228040143267794; // 1 / sqrt(2 pi)

llvm::Expected<KernelResults> erfKernel(const KernelArgs &args) {
  return single(unaryMap(args, [](double x) { return std::erf(x); }));
}

llvm::Expected<KernelResults> geluKernel(const KernelArgs &args) {
  return single(unaryMap(args, [](double x) { return 0.5 * x * (1 + std::erf(x * kSqrtHalf)); }));
}

llvm::Expected<KernelResults> erfGradKernel(const KernelArgs &args) {
  return single(
      pairMap(args, [](double dy, double x) { return dy * kTwoOverSqrtPi * std::exp(-x * x); }));
}

llvm::Expected<KernelResults> geluGradKernel(const KernelArgs &args) {
  return single(pairMap(args, [](double dy, double x) {
    double cdf = 0.5 * (1 + std::erf(x * kSqrtHalf));
    return dy * (cdf + x * kNormalDensity0 * std::exp(-0.5 * x * x));
  }));
}

llvm::Expected<KernelResults> reluGradKernel(const KernelArgs &args) {
  return single(pairMap(args, [](double dy, double x) { return x > 0 ? dy : 0.0; }));
}

llvm::Expected<KernelResults> sigmoidGradKernel(const KernelArgs &args) {
  return single(pairMap(args, [](double dy, double y) { return dy * y * (1 - y); }));
}

llvm::Expected<KernelResults> tanhGradKernel(const KernelArgs &args) {
  return single(pairMap(args, [](double dy, double y) { return dy * (1 - y * y); }));
}

} // namespace

void registerElementwiseKernels(KernelTable &t) {
  t["add"] = {addKernel};
  t["sub"] = {subKernel};
  t["mul"] = {mulKernel};
  t["div"] = {divKernel};
  t["maximum"] = {maximumKernel};
  t["minimum"] = {minimumKernel};
  t["where"] = {whereKernel};
  t["maximum_grad"] = {maximumGradKernel};
  t["minimum_grad"] = {minimumGradKernel};
  t["neg"] = {negKernel};
  t["exp"] = {expKernel};
  t["log"] = {logKernel};
  t["sqrt"] = {sqrtKernel};
  t["relu"] = {reluKernel};
  t["sigmoid"] = {sigmoidKernel};
  t["tanh"] = {tanhKernel};
  t["erf"] = {erfKernel};
  t["gelu"] = {geluKernel};
  t["erf_grad"] = {erfGradKernel};
  t["gelu_grad"] = {geluGradKernel};
  t["relu_grad"] = {reluGradKernel};
  t["sigmoid_grad"] = {sigmoidGradKernel};
  t["tanh_grad"] = {tanhGradKernel};
}

} // namespace prism::runtime::reference::kernels
