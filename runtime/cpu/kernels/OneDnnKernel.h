// A kernel that runs a fixed sequence of oneDNN primitives, and the memory descriptors the dense
// kernels build theirs from: matrices (transposes as strides), NHWC tensors, convolution
// geometry with TensorFlow's `same` padding, and the f64 matmul that oneDNN lacks.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/cpu/Kernel.h"
#include "runtime/cpu/kernels/OneDnn.h"

namespace prism::runtime::cpu::onednn {

// One primitive and its arguments. Memory objects are handles, so the kernel rebinds user
// buffers through its own copies and every call sees the new pointers.
struct PrimitiveCall {
  dnnl::primitive primitive;
  std::unordered_map<int, dnnl::memory> args;
};

class OneDnnKernel : public Kernel {
public:
  explicit OneDnnKernel(std::string opName) : opName_(std::move(opName)) {}

  // Binds operand `index` (input or output) to `mem` at run time.
  void bindInput(size_t index, dnnl::memory mem) { inputs_.emplace_back(index, std::move(mem)); }
  void bindOutput(size_t index, dnnl::memory mem) { outputs_.emplace_back(index, std::move(mem)); }
  // Appends the primitive of `pd`, with a scratchpad of its own, to what run() executes.
  void addCall(const dnnl::primitive_desc_base &pd, std::unordered_map<int, dnnl::memory> args);
  // Appends a copy of `from` into `to` (two layouts of one tensor).
  void addReorder(const dnnl::memory &from, const dnnl::memory &to);
  // fp16 compute: the operands the op table marks are rounded to fp16 before an f32 primitive
  // reads them (convertedInput, weightsReadBy), on `threads` threads.
  void setRoundsToFp16(bool rounds, int threads) {
    roundsToFp16_ = rounds;
    threads_ = threads;
  }
  bool roundsToFp16() const { return roundsToFp16_; }
  // Before the primitives run: `to` (f32, the same size) takes `from` rounded to fp16.
  void addFp16Rounding(const dnnl::memory &from, const dnnl::memory &to);

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override;

private:
  std::string opName_;
  std::vector<std::pair<size_t, dnnl::memory>> inputs_, outputs_;
  std::vector<PrimitiveCall> calls_;
  bool roundsToFp16_ = false;
  int threads_ = 1;
  std::vector<std::pair<dnnl::memory, dnnl::memory>> fp16Roundings_; // from, to
};

// Runs `build` (which makes primitives) under the kernel's thread count, turning oneDNN's
// exceptions into errors. Every operand must be dense f32.
llvm::Expected<std::unique_ptr<Kernel>>
buildOneDnnKernel(const KernelSpec &spec, const std::function<void(OneDnnKernel &kernel)> &build);

// The data type a kernel's primitive reads the operands that the op table marks for reduced
// precision in: f32, or bf16 for `compute = "bf16"` where the CPU has AVX512_BF16. A precision
// the CPU cannot run is an error naming the op and what is missing, never a silent f32 run.
// `compute = "fp16"` is f32: x86 CPUs before AVX512_FP16 have no fp16 arithmetic, so the marked
// operands are rounded to fp16 (the kernel's roundsToFp16) and multiplied and accumulated in
// f32, which is what fp16 units with f32 accumulation compute.
llvm::Expected<dnnl::memory::data_type> computeDataType(const KernelSpec &spec);
// Whether this CPU computes bf16 in hardware (AVX512_BF16 or AMX).
bool cpuHasBf16();

// `desc` with another data type (same dims and layout, or `any`).
dnnl::memory::desc withDataType(const dnnl::memory::desc &desc, dnnl::memory::data_type type);
// The operand `user` as a primitive reads it (`read`): `user` itself when the two agree, else a
// buffer of the kernel's that a reorder before the primitive fills (converting f32 to bf16 with
// rounding to nearest even, and changing the layout). A kernel that rounds to fp16 always copies:
// `user` rounded to fp16 values (Fp16Rounding.h) in its own layout, then reordered to `read`'s
// when that differs.
dnnl::memory convertedInput(OneDnnKernel &kernel, const dnnl::memory &user,
                            const dnnl::memory::desc &read);

// A logical [rows, cols] matrix stored row-major as [rows, cols], or as [cols, rows] when
// `transposed`: the transpose is a pair of swapped strides, never a copy.
dnnl::memory::desc matrixDesc(int64_t rows, int64_t cols, bool transposed);
// `entries` such matrices one after the other: [entries, rows, cols].
dnnl::memory::desc batchedMatrixDesc(int64_t entries, int64_t rows, int64_t cols, bool transposed);

// What a matmul or a forward convolution applies to its result while it is in cache: a bias
// (input 2: [n] added to each row of a matmul, [O] to each pixel of a convolution), then relu.
// Plain matmul and conv2d have none; fused_matmul and fused_conv2d always have the bias.
struct Epilogue {
  bool bias = false, relu = false;
};

// matmul, fused_matmul and batch_matmul: op(a) · op(b) (for each batch entry) and the epilogue,
// one oneDNN matmul for f32, the f64 loops when every operand is f64.
llvm::Expected<std::unique_ptr<Kernel>> makeMatmulKernel(const KernelSpec &spec, Epilogue epilogue);
// conv2d and fused_conv2d: conv2d(x, filter) and the epilogue, one oneDNN convolution (after a
// reorder of the filter into oneDNN's layout).
llvm::Expected<std::unique_ptr<Kernel>> makeConvForwardKernel(const KernelSpec &spec,
                                                              Epilogue epilogue);

// The f64 matmul (oneDNN has no f64 matmul on CPU): plain loops, fast enough for the small
// double-precision models of checks.
class MatmulF64Kernel : public Kernel {
public:
  MatmulF64Kernel(int64_t m, int64_t k, int64_t n, bool ta, bool tb, Epilogue epilogue = Epilogue())
      : m_(m), k_(k), n_(n), ta_(ta), tb_(tb), epilogue_(epilogue) {}
  // batch_matmul: `batch` products, a and b each batched or one matrix that every entry shares.
  void setBatch(int64_t batch, bool aBatched, bool bBatched) {
    batch_ = batch;
    aBatched_ = aBatched;
    bBatched_ = bBatched;
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override;

private:
  int64_t m_, k_, n_;
  bool ta_, tb_;
  Epilogue epilogue_;
  int64_t batch_ = 1;
  bool aBatched_ = false, bBatched_ = false;
};

// Strides, window and padding of a 2-D window op over NHWC. `same` pads as TensorFlow does:
// out = ceil(in / stride), total = max((out - 1) * stride + window - in, 0), the smaller half
// before. `valid` pads nothing and drops the rows a last partial window would need.
struct WindowGeometry {
  dnnl::memory::dims strides, window, padBefore, padAfter;
};
WindowGeometry windowGeometry(const ir::TensorType &x, int64_t kh, int64_t kw,
                              const ir::AttrMap &attrs);

// oneDNN describes tensors in NCHW order whatever their layout; the tag gives the layout.
dnnl::memory::desc nhwcDesc(const ir::TensorType &t);

// The shapes of one convolution, whichever op of conv2d, its gradients and fused_conv2d it
// serves.
struct ConvShapes {
  dnnl::memory::desc src, weights, dst; // weights: `any` (oneDNN's choice) or hwio
  dnnl::memory::desc userWeights;       // hwio: our [KH, KW, C, O]
  WindowGeometry geometry;
};
ConvShapes convShapes(const ir::TensorType &x, const ir::TensorType &w, const ir::TensorType &y,
                      const ir::AttrMap &attrs);

// The forward convolution; with a `bias` descriptor the primitive adds the bias, and `attr`
// may carry post-ops.
dnnl::convolution_forward::primitive_desc
convForwardDesc(const ConvShapes &s, const dnnl::memory::desc &bias = {},
                const dnnl::primitive_attr &attr = primitiveAttr());

// The weights in the primitive's layout: the user's buffer itself when the layouts agree, else
// a buffer of the kernel's (which the caller fills or empties with a reorder).
dnnl::memory primitiveWeights(const dnnl::memory::desc &primitiveDesc,
                              const dnnl::memory &userWeights);
// The weights a primitive reads, in its layout: primitiveWeights, filled from the user's by a
// reorder that `kernel` runs before the primitive's call when the layouts differ.
dnnl::memory weightsReadBy(OneDnnKernel &kernel, const dnnl::memory::desc &primitiveDesc,
                           const dnnl::memory &userWeights);

} // namespace prism::runtime::cpu::onednn
