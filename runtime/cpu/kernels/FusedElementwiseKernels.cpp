// CPU kernel of fused_elementwise: the expression is compiled once into a flat list of
// instructions over block-sized temporaries, then each block of the tensor runs every
// instruction as one tight loop, so intermediate values stay in cache and the loops vectorize.
// An instruction's loop is its op's loop from ElementwiseMath.h, as in the op's own kernel.
#include <algorithm>
#include <vector>

#include "ir/ops/ElementwiseExpr.h"
#include "runtime/cpu/kernels/DTypeDispatch.h"
#include "runtime/cpu/kernels/ElementwiseMath.h"
#include "runtime/cpu/kernels/Parallel.h"

namespace prism::runtime::cpu {

KernelOrError makeFusedElementwiseKernel(const KernelSpec &spec);

namespace {

// Elements per block: the temporaries of a typical expression fit in L1 together.
constexpr int64_t kBlock = 512;

// Runs one instruction over n contiguous elements (b is null for unary ops).
template <typename T> using InstructionLoop = void (*)(T *out, const T *a, const T *b, int64_t n);

template <typename T, typename Op> void runOp(T *out, const T *a, const T *b, int64_t n) {
  if constexpr (Op::arity == 1)
    elementwise::unaryLoop<Op>(out, a, n);
  else
    elementwise::binaryLoop<Op>(out, a, true, b, true, n);
}

template <typename T> void copyOperand(T *out, const T *a, const T *, int64_t n) {
  std::copy(a, a + n, out);
}

// Slots 0..operands-1 are the operands; slot operands + t is temporary t. `out` < 0 is the
// output tensor itself.
template <typename T> struct Instruction {
  InstructionLoop<T> loop;
  int out;
  int a;
  int b; // -1 for unary instructions
};

template <typename T> class FusedElementwiseKernel final : public Kernel {
public:
  explicit FusedElementwiseKernel(const KernelSpec &spec)
      : elements_(spec.outputTypes[0].numElements()), threads_(spec.threads) {}

  // Compiles the expression; an op without a CPU loop is an error.
  llvm::Error compile(const KernelSpec &spec, const ir::ElementwiseExpr &expr) {
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
      Instruction<T> in{nullptr, operands + temps++, slot[node.args[0]],
                        node.args.size() > 1 ? slot[node.args[1]] : -1};
      in.loop = elementwise::visitOp(node.op, InstructionLoop<T>(nullptr), [&](auto op) {
        using Op = decltype(op);
        grain_ = std::min(grain_, Op::grain);
        return &runOp<T, Op>;
      });
      if (!in.loop)
        return ir::makeError("fused_elementwise has no CPU loop for '" + node.op + "'");
      program_.push_back(in);
      slot[i] = in.out;
    }
    // The last instruction writes the output directly; an expression that is just an
    // operand copies it.
    if (program_.empty())
      program_.push_back({&copyOperand<T>, -1, slot.back(), -1});
    else
      program_.back().out = -1;
    scalarSlots_ = static_cast<int>(std::count(scalar_.begin(), scalar_.end(), true));
    slotsPerThread_ = temps + scalarSlots_;
    scratch_.resize(static_cast<size_t>(std::max(threads_, 1)) * slotsPerThread_ * kBlock);
    return llvm::Error::success();
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
        for (const Instruction<T> &in : program_)
          in.loop(slotPointer(in.out, at), slotPointer(in.a, at),
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
  std::vector<Instruction<T>> program_;
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
  return withFloatType(spec, spec.outputTypes[0].dtype, [&](auto t) -> KernelOrError {
    auto kernel = std::make_unique<FusedElementwiseKernel<decltype(t)>>(spec);
    if (auto err = kernel->compile(spec, *expr))
      return std::move(err);
    return std::unique_ptr<Kernel>(std::move(kernel));
  });
}

} // namespace prism::runtime::cpu
