// CPU kernel of fused_elementwise: the expression is compiled once into a flat list of
// instructions over block-sized temporaries, then each block of the tensor runs every
// instruction as one tight loop, so intermediate values stay in cache and the loops vectorize.
#include <algorithm>
#include <vector>

#include "ir/ops/ElementwiseExpr.h"
#include "runtime/cpu/kernels/DTypeDispatch.h"
#include "runtime/cpu/kernels/FastMath.h"
#include "runtime/cpu/kernels/Parallel.h"
#include "llvm/ADT/StringSwitch.h"

namespace prism::runtime::cpu {

KernelOrError makeFusedElementwiseKernel(const KernelSpec &spec);

namespace {

// Elements per block: the temporaries of a typical expression fit in L1 together.
constexpr int64_t kBlock = 512;

enum class Opcode {
  Copy,
  Add,
  Sub,
  Mul,
  Div,
  Neg,
  Exp,
  Log,
  Sqrt,
  Relu,
  Sigmoid,
  Tanh,
  ReluGrad,
  SigmoidGrad,
  TanhGrad
};

Opcode opcodeOf(llvm::StringRef op) {
  return llvm::StringSwitch<Opcode>(op)
      .Case("add", Opcode::Add)
      .Case("sub", Opcode::Sub)
      .Case("mul", Opcode::Mul)
      .Case("div", Opcode::Div)
      .Case("neg", Opcode::Neg)
      .Case("exp", Opcode::Exp)
      .Case("log", Opcode::Log)
      .Case("sqrt", Opcode::Sqrt)
      .Case("relu", Opcode::Relu)
      .Case("sigmoid", Opcode::Sigmoid)
      .Case("tanh", Opcode::Tanh)
      .Case("relu_grad", Opcode::ReluGrad)
      .Case("sigmoid_grad", Opcode::SigmoidGrad)
      .Case("tanh_grad", Opcode::TanhGrad)
      .Default(Opcode::Copy);
}

bool costly(Opcode code) {
  return code == Opcode::Exp || code == Opcode::Log || code == Opcode::Sigmoid ||
         code == Opcode::Tanh;
}

// Slots 0..operands-1 are the operands; slot operands + t is temporary t. `out` < 0 is the
// output tensor itself.
struct Instruction {
  Opcode code;
  int out;
  int a;
  int b; // -1 for unary instructions
};

template <typename T, typename F>
void mapUnary(T *__restrict out, const T *__restrict a, int64_t n, const F &f) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = f(a[i]);
}

template <typename T, typename F>
void mapBinary(T *__restrict out, const T *__restrict a, const T *__restrict b, int64_t n,
               const F &f) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = f(a[i], b[i]);
}

template <typename T> void execute(Opcode code, T *out, const T *a, const T *b, int64_t n) {
  switch (code) {
  case Opcode::Copy:
    std::copy(a, a + n, out);
    return;
  case Opcode::Add:
    return mapBinary(out, a, b, n, [](T x, T y) { return x + y; });
  case Opcode::Sub:
    return mapBinary(out, a, b, n, [](T x, T y) { return x - y; });
  case Opcode::Mul:
    return mapBinary(out, a, b, n, [](T x, T y) { return x * y; });
  case Opcode::Div:
    return mapBinary(out, a, b, n, [](T x, T y) { return x / y; });
  case Opcode::Neg:
    return mapUnary(out, a, n, [](T x) { return -x; });
  case Opcode::Exp:
    return mapUnary(out, a, n, [](T x) { return fastmath::exp(x); });
  case Opcode::Log:
    return mapUnary(out, a, n, [](T x) { return fastmath::log(x); });
  case Opcode::Sqrt:
    return fastmath::sqrtArray(a, out, n);
  case Opcode::Relu:
    return mapUnary(out, a, n, [](T x) { return x > T(0) ? x : T(0); });
  case Opcode::Sigmoid:
    return mapUnary(out, a, n, [](T x) { return fastmath::sigmoid(x); });
  case Opcode::Tanh:
    return mapUnary(out, a, n, [](T x) { return fastmath::tanh(x); });
  case Opcode::ReluGrad:
    return mapBinary(out, a, b, n, [](T dy, T x) { return x > T(0) ? dy : T(0); });
  case Opcode::SigmoidGrad:
    return mapBinary(out, a, b, n, [](T dy, T y) { return dy * y * (T(1) - y); });
  case Opcode::TanhGrad:
    return mapBinary(out, a, b, n, [](T dy, T y) { return dy * (T(1) - y * y); });
  }
}

template <typename T> class FusedElementwiseKernel final : public Kernel {
public:
  FusedElementwiseKernel(const KernelSpec &spec, const ir::ElementwiseExpr &expr)
      : elements_(spec.outputTypes[0].numElements()), threads_(spec.threads) {
    int operands = static_cast<int>(spec.inputTypes.size());
    for (const ir::TensorType &t : spec.inputTypes)
      scalar_.push_back(t.dims.empty() && elements_ != 1);
    // Node i's value lives in slot[i]: an operand's slot, or a fresh temporary.
    std::vector<int> slot(expr.nodes.size());
    int temps = 0;
    for (size_t i = 0; i < expr.nodes.size(); ++i) {
      const ir::ExprNode &node = expr.nodes[i];
      if (node.isOperand()) {
        slot[i] = node.operand;
        continue;
      }
      Instruction in{opcodeOf(node.op), operands + temps++, slot[node.args[0]],
                     node.args.size() > 1 ? slot[node.args[1]] : -1};
      grain_ = costly(in.code) ? kCostlyGrain : grain_;
      program_.push_back(in);
      slot[i] = in.out;
    }
    // The last instruction writes the output directly; an expression that is just an
    // operand copies it.
    if (program_.empty())
      program_.push_back({Opcode::Copy, -1, slot.back(), -1});
    else
      program_.back().out = -1;
    scalarSlots_ = static_cast<int>(std::count(scalar_.begin(), scalar_.end(), true));
    slotsPerThread_ = temps + scalarSlots_;
    scratch_.resize(static_cast<size_t>(std::max(threads_, 1)) * slotsPerThread_ * kBlock);
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    T *out = outputs[0]->dense.data<T>();
    int operands = static_cast<int>(inputs.size());
    int blocks = parallelBlocks(elements_, threads_, grain_);
    forEachBlock(elements_, blocks, [&](int thread, int64_t begin, int64_t end) {
      T *scratch = scratch_.data() + static_cast<size_t>(thread) * slotsPerThread_ * kBlock;
      // Scalars are repeated over one block once, so every instruction reads whole arrays.
      std::vector<const T *> base(operands);
      T *nextScratch = scratch;
      for (int i = 0; i < operands; ++i) {
        const T *data = inputs[i]->dense.data<T>();
        if (scalar_[i]) {
          std::fill(nextScratch, nextScratch + kBlock, *data);
          base[i] = nextScratch;
          nextScratch += kBlock;
        } else {
          base[i] = data;
        }
      }
      T *temps = nextScratch;
      auto slotPointer = [&](int s, int64_t at) -> T * {
        if (s < 0)
          return out + at;
        if (s < operands)
          return const_cast<T *>(scalar_[s] ? base[s] : base[s] + at);
        return temps + static_cast<size_t>(s - operands) * kBlock;
      };
      for (int64_t at = begin; at < end; at += kBlock) {
        int64_t n = std::min(kBlock, end - at);
        for (const Instruction &in : program_)
          execute<T>(in.code, slotPointer(in.out, at), slotPointer(in.a, at),
                     in.b >= 0 ? slotPointer(in.b, at) : nullptr, n);
      }
    });
    return llvm::Error::success();
  }

private:
  int64_t elements_;
  int threads_;
  int64_t grain_ = kCheapGrain;
  std::vector<bool> scalar_; // operands repeated over the result (scalars of a larger result)
  std::vector<Instruction> program_;
  int scalarSlots_ = 0;
  int slotsPerThread_ = 0;
  std::vector<T> scratch_;
};

} // namespace

KernelOrError makeFusedElementwiseKernel(const KernelSpec &spec) {
  auto expr = ir::parseElementwiseExpr(spec.attrs.getString("expr"));
  if (!expr)
    return expr.takeError();
  for (const ir::TensorType &t : spec.inputTypes)
    if (t.sparse || t.dtype != spec.outputTypes[0].dtype)
      return ir::makeError("fused_elementwise takes dense operands of the result's dtype");
  return withFloatType(spec, spec.outputTypes[0].dtype, [&](auto t) {
    return std::unique_ptr<Kernel>(new FusedElementwiseKernel<decltype(t)>(spec, *expr));
  });
}

} // namespace prism::runtime::cpu
