// The dense CPU kernels: matmul, conv2d and its two gradients, max and average pooling and
// their gradients, each one or a few oneDNN primitives made when the kernel is built.
#include <algorithm>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/Diagnostic.h"
#include "runtime/cpu/Kernel.h"
#include "runtime/cpu/kernels/OneDnn.h"

namespace prism::runtime::cpu {
namespace {

using dnnl::memory;
using Dims = memory::dims;
using Tag = memory::format_tag;

// Weights of conv2d and its gradients are given to oneDNN in the layout it prefers (blocked),
// reordered from and to our [KH, KW, C, O] on each run: with plain weights oneDNN falls back
// to im2col + GEMM, two to four times slower, while the weights are tiny next to the
// activations. Activations stay NHWC, which the direct convolutions read as they are.
constexpr bool kBlockedConvWeights = true;

// One primitive and its arguments. Memory objects are handles, so the kernel rebinds user
// buffers through its own copies and every call sees the new pointers.
struct PrimitiveCall {
  dnnl::primitive primitive;
  std::unordered_map<int, memory> args;
};

// A kernel that runs a fixed sequence of primitives over its inputs and outputs.
class OneDnnKernel : public Kernel {
public:
  explicit OneDnnKernel(std::string opName) : opName_(std::move(opName)) {}

  // Binds operand `index` (input or output) to `mem` at run time.
  void bindInput(size_t index, memory mem) { inputs_.emplace_back(index, std::move(mem)); }
  void bindOutput(size_t index, memory mem) { outputs_.emplace_back(index, std::move(mem)); }
  // Appends the primitive of `pd`, with a scratchpad of its own, to what run() executes.
  void addCall(const dnnl::primitive_desc_base &pd, std::unordered_map<int, memory> args) {
    args[DNNL_ARG_SCRATCHPAD] = onednn::ownedMemory(pd.scratchpad_desc());
    calls_.push_back({dnnl::primitive(pd.get()), std::move(args)});
  }
  // Appends a copy of `from` into `to` (two layouts of one tensor).
  void addReorder(const memory &from, const memory &to) {
    dnnl::reorder::primitive_desc pd(onednn::engine(), from.get_desc(), onednn::engine(),
                                     to.get_desc(), onednn::primitiveAttr());
    addCall(pd, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    try {
      // oneDNN takes non-const handles; inputs are only read.
      for (auto &[index, mem] : inputs_)
        mem.set_data_handle(const_cast<void *>(inputs[index]->dense.raw()));
      for (auto &[index, mem] : outputs_)
        mem.set_data_handle(outputs[index]->dense.raw());
      dnnl::stream &stream = onednn::stream();
      for (PrimitiveCall &call : calls_)
        call.primitive.execute(stream, call.args);
      stream.wait();
    } catch (const dnnl::error &e) {
      return onednn::toError(e, opName_, "run the kernel");
    }
    return llvm::Error::success();
  }

private:
  std::string opName_;
  std::vector<std::pair<size_t, memory>> inputs_, outputs_;
  std::vector<PrimitiveCall> calls_;
};

llvm::Error requireF32(const KernelSpec &spec) {
  auto all = spec.inputTypes;
  all.insert(all.end(), spec.outputTypes.begin(), spec.outputTypes.end());
  for (const ir::TensorType &t : all)
    if (t.dtype != ir::DType::F32 || t.sparse)
      return ir::makeError(ir::dtypeName(t.dtype) + (t.sparse ? " sparse" : "") +
                           " is not supported by the CPU kernel of '" + spec.op->name() +
                           "' (dense f32 only)");
  return llvm::Error::success();
}

// Runs `build` (which makes primitives) under the kernel's thread count, turning oneDNN's
// exceptions into errors.
llvm::Expected<std::unique_ptr<Kernel>>
buildOneDnnKernel(const KernelSpec &spec, const std::function<void(OneDnnKernel &kernel)> &build) {
  if (auto err = requireF32(spec))
    return std::move(err);
  auto kernel = std::make_unique<OneDnnKernel>(spec.op->name().str());
  try {
    onednn::ScopedOmpThreads threads(spec.threads);
    build(*kernel);
  } catch (const dnnl::error &e) {
    return onednn::toError(e, spec.op->name(), "create the primitives");
  }
  return std::unique_ptr<Kernel>(std::move(kernel));
}

// ---- matmul ---------------------------------------------------------------------------------

// A logical [rows, cols] matrix stored row-major as [rows, cols], or as [cols, rows] when
// `transposed`: the transpose is a pair of swapped strides, never a copy.
memory::desc matrixDesc(int64_t rows, int64_t cols, bool transposed) {
  return memory::desc({rows, cols}, memory::data_type::f32,
                      transposed ? Dims{1, rows} : Dims{cols, 1});
}

// The f64 matmul (oneDNN has no f64 matmul on CPU): plain loops, fast enough for the small
// double-precision models of checks.
class MatmulF64Kernel : public Kernel {
public:
  MatmulF64Kernel(int64_t m, int64_t k, int64_t n, bool ta, bool tb)
      : m_(m), k_(k), n_(n), ta_(ta), tb_(tb) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const double *a = inputs[0]->dense.data<double>(), *b = inputs[1]->dense.data<double>();
    double *c = outputs[0]->dense.data<double>();
    const int64_t m = m_, k = k_, n = n_;
    const bool ta = ta_, tb = tb_;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
      double *row = c + i * n;
      for (int64_t j = 0; j < n; ++j)
        row[j] = 0;
      for (int64_t p = 0; p < k; ++p) {
        double aip = ta ? a[p * m + i] : a[i * k + p];
        if (tb)
          for (int64_t j = 0; j < n; ++j)
            row[j] += aip * b[j * k + p];
        else
          for (int64_t j = 0; j < n; ++j)
            row[j] += aip * b[p * n + j];
      }
    }
    return llvm::Error::success();
  }

private:
  int64_t m_, k_, n_;
  bool ta_, tb_;
};

llvm::Expected<std::unique_ptr<Kernel>> makeMatmul(const KernelSpec &spec) {
  bool ta = spec.attrs.getBool("transpose_a"), tb = spec.attrs.getBool("transpose_b");
  const ir::TensorType &a = spec.inputTypes[0];
  const ir::TensorType &c = spec.outputTypes[0];
  int64_t m = c.dims[0], n = c.dims[1], k = a.dims[ta ? 0 : 1];
  if (a.dtype == ir::DType::F64 && spec.inputTypes[1].dtype == ir::DType::F64 &&
      c.dtype == ir::DType::F64)
    return std::make_unique<MatmulF64Kernel>(m, k, n, ta, tb);
  return buildOneDnnKernel(spec, [&](OneDnnKernel &kernel) {
    memory::desc aDesc = matrixDesc(m, k, ta), bDesc = matrixDesc(k, n, tb);
    memory::desc cDesc = matrixDesc(m, n, false);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(aDesc, bDesc, cDesc),
                                    onednn::primitiveAttr(), onednn::engine());
    memory aMem = onednn::unboundMemory(aDesc), bMem = onednn::unboundMemory(bDesc);
    memory cMem = onednn::unboundMemory(cDesc);
    kernel.bindInput(0, aMem);
    kernel.bindInput(1, bMem);
    kernel.bindOutput(0, cMem);
    kernel.addCall(pd, {{DNNL_ARG_SRC, aMem}, {DNNL_ARG_WEIGHTS, bMem}, {DNNL_ARG_DST, cMem}});
  });
}

// ---- convolution ----------------------------------------------------------------------------

// Strides, window and padding of a 2-D window op over NHWC. `same` pads as TensorFlow does:
// out = ceil(in / stride), total = max((out - 1) * stride + window - in, 0), the smaller half
// before. `valid` pads nothing and drops the rows a last partial window would need.
struct WindowGeometry {
  Dims strides, window, padBefore, padAfter;
};

WindowGeometry windowGeometry(const ir::TensorType &x, int64_t kh, int64_t kw,
                              const ir::AttrMap &attrs) {
  auto stride = attrs.getInts("stride");
  bool same = attrs.getString("padding") == "same";
  WindowGeometry g;
  g.strides = {stride[0], stride[1]};
  g.window = {kh, kw};
  for (int axis = 0; axis < 2; ++axis) {
    int64_t in = x.dims[1 + axis], s = stride[axis], k = axis == 0 ? kh : kw;
    int64_t total = 0;
    if (same) {
      int64_t out = (in + s - 1) / s;
      total = std::max<int64_t>((out - 1) * s + k - in, 0);
    }
    g.padBefore.push_back(total / 2);
    g.padAfter.push_back(total - total / 2);
  }
  return g;
}

// oneDNN describes tensors in NCHW order whatever their layout; the tag gives the layout.
memory::desc nhwcDesc(const ir::TensorType &t) {
  return memory::desc({t.dims[0], t.dims[3], t.dims[1], t.dims[2]}, memory::data_type::f32,
                      Tag::nhwc);
}

// Our filter [KH, KW, C, O] is oneDNN's `hwio` of the OIHW-ordered dims.
memory::desc filterDesc(const ir::TensorType &w, Tag tag) {
  return memory::desc({w.dims[3], w.dims[2], w.dims[0], w.dims[1]}, memory::data_type::f32, tag);
}

Tag convWeightsTag() {
  return kBlockedConvWeights ? Tag::any : Tag::hwio;
}

// The shapes of one convolution, whichever op of the three it serves.
struct ConvShapes {
  memory::desc src, weights, dst; // weights: `any` or hwio
  memory::desc userWeights;       // hwio
  WindowGeometry geometry;
};

ConvShapes convShapes(const ir::TensorType &x, const ir::TensorType &w, const ir::TensorType &y,
                      const ir::AttrMap &attrs) {
  ConvShapes s;
  s.src = nhwcDesc(x);
  s.dst = nhwcDesc(y);
  s.weights = filterDesc(w, convWeightsTag());
  s.userWeights = filterDesc(w, Tag::hwio);
  s.geometry = windowGeometry(x, w.dims[0], w.dims[1], attrs);
  return s;
}

dnnl::convolution_forward::primitive_desc convForwardDesc(const ConvShapes &s) {
  const WindowGeometry &g = s.geometry;
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training,
                                       dnnl::algorithm::convolution_direct, s.src, s.weights, s.dst,
                                       g.strides, g.padBefore, g.padAfter);
  return dnnl::convolution_forward::primitive_desc(desc, onednn::primitiveAttr(), onednn::engine());
}

// The weights in the primitive's layout: the user's buffer itself when the layouts agree, else
// a buffer of the kernel's (which the caller fills or empties with a reorder).
memory primitiveWeights(const memory::desc &primitiveDesc, const memory &userWeights) {
  if (primitiveDesc == userWeights.get_desc())
    return userWeights;
  return onednn::ownedMemory(primitiveDesc);
}

// conv2d(x, filter) -> y
llvm::Expected<std::unique_ptr<Kernel>> makeConv2d(const KernelSpec &spec) {
  return buildOneDnnKernel(spec, [&](OneDnnKernel &kernel) {
    ConvShapes s =
        convShapes(spec.inputTypes[0], spec.inputTypes[1], spec.outputTypes[0], spec.attrs);
    auto pd = convForwardDesc(s);
    memory x = onednn::unboundMemory(s.src), userW = onednn::unboundMemory(s.userWeights);
    memory y = onednn::unboundMemory(s.dst);
    kernel.bindInput(0, x);
    kernel.bindInput(1, userW);
    kernel.bindOutput(0, y);
    memory w = primitiveWeights(pd.weights_desc(), userW);
    if (w != userW)
      kernel.addReorder(userW, w);
    kernel.addCall(pd, {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}});
  });
}

// conv2d_backprop_input(dy, filter, x) -> dx; x gives only its shape.
llvm::Expected<std::unique_ptr<Kernel>> makeConv2dBackpropInput(const KernelSpec &spec) {
  return buildOneDnnKernel(spec, [&](OneDnnKernel &kernel) {
    ConvShapes s =
        convShapes(spec.inputTypes[2], spec.inputTypes[1], spec.inputTypes[0], spec.attrs);
    const WindowGeometry &g = s.geometry;
    dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, s.src,
                                               s.weights, s.dst, g.strides, g.padBefore,
                                               g.padAfter);
    dnnl::convolution_backward_data::primitive_desc pd(desc, onednn::primitiveAttr(),
                                                       onednn::engine(), convForwardDesc(s));
    memory dy = onednn::unboundMemory(s.dst), userW = onednn::unboundMemory(s.userWeights);
    memory dx = onednn::unboundMemory(s.src);
    kernel.bindInput(0, dy);
    kernel.bindInput(1, userW);
    kernel.bindOutput(0, dx);
    memory w = primitiveWeights(pd.weights_desc(), userW);
    if (w != userW)
      kernel.addReorder(userW, w);
    kernel.addCall(pd, {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_SRC, dx}});
  });
}

// conv2d_backprop_filter(x, dy, filter) -> dfilter; filter gives only its shape.
llvm::Expected<std::unique_ptr<Kernel>> makeConv2dBackpropFilter(const KernelSpec &spec) {
  return buildOneDnnKernel(spec, [&](OneDnnKernel &kernel) {
    ConvShapes s =
        convShapes(spec.inputTypes[0], spec.inputTypes[2], spec.inputTypes[1], spec.attrs);
    const WindowGeometry &g = s.geometry;
    dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, s.src,
                                                  s.weights, s.dst, g.strides, g.padBefore,
                                                  g.padAfter);
    dnnl::convolution_backward_weights::primitive_desc pd(desc, onednn::primitiveAttr(),
                                                          onednn::engine(), convForwardDesc(s));
    memory x = onednn::unboundMemory(s.src), dy = onednn::unboundMemory(s.dst);
    memory userDw = onednn::unboundMemory(s.userWeights);
    kernel.bindInput(0, x);
    kernel.bindInput(1, dy);
    kernel.bindOutput(0, userDw);
    memory dw = primitiveWeights(pd.diff_weights_desc(), userDw);
    kernel.addCall(pd, {{DNNL_ARG_SRC, x}, {DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_DIFF_WEIGHTS, dw}});
    if (dw != userDw)
      kernel.addReorder(dw, userDw);
  });
}

// ---- pooling --------------------------------------------------------------------------------

// Padded cells never win a max and are not counted by the mean (TensorFlow's semantics).
dnnl::algorithm poolAlgorithm(const KernelSpec &spec) {
  llvm::StringRef name = spec.op->name();
  return name.startswith("max") ? dnnl::algorithm::pooling_max
                                : dnnl::algorithm::pooling_avg_exclude_padding;
}

dnnl::pooling_forward::primitive_desc
poolForwardDesc(dnnl::prop_kind prop, dnnl::algorithm algorithm, const ir::TensorType &x,
                const ir::TensorType &y, const ir::AttrMap &attrs) {
  auto window = attrs.getInts("window");
  WindowGeometry g = windowGeometry(x, window[0], window[1], attrs);
  dnnl::pooling_forward::desc desc(prop, algorithm, nhwcDesc(x), nhwcDesc(y), g.strides, g.window,
                                   g.padBefore, g.padAfter);
  return dnnl::pooling_forward::primitive_desc(desc, onednn::primitiveAttr(), onednn::engine());
}

// max_pool2d(x) and avg_pool2d(x) -> y
llvm::Expected<std::unique_ptr<Kernel>> makePool2d(const KernelSpec &spec) {
  return buildOneDnnKernel(spec, [&](OneDnnKernel &kernel) {
    const ir::TensorType &xType = spec.inputTypes[0], &yType = spec.outputTypes[0];
    // Inference: the gradient recomputes the maxima from x, so no workspace is kept.
    auto pd = poolForwardDesc(dnnl::prop_kind::forward_inference, poolAlgorithm(spec), xType, yType,
                              spec.attrs);
    memory x = onednn::unboundMemory(nhwcDesc(xType)), y = onednn::unboundMemory(nhwcDesc(yType));
    kernel.bindInput(0, x);
    kernel.bindOutput(0, y);
    kernel.addCall(pd, {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, y}});
  });
}

// max_pool2d_grad(dy, x) and avg_pool2d_grad(dy, x) -> dx. oneDNN's max pooling gradient
// routes through the workspace of a forward pass, so the max kernel first pools x again (into
// buffers of its own); the average needs only the geometry.
llvm::Expected<std::unique_ptr<Kernel>> makePool2dGrad(const KernelSpec &spec) {
  return buildOneDnnKernel(spec, [&](OneDnnKernel &kernel) {
    const ir::TensorType &dyType = spec.inputTypes[0], &xType = spec.inputTypes[1];
    dnnl::algorithm algorithm = poolAlgorithm(spec);
    auto forward =
        poolForwardDesc(dnnl::prop_kind::forward_training, algorithm, xType, dyType, spec.attrs);
    auto window = spec.attrs.getInts("window");
    WindowGeometry g = windowGeometry(xType, window[0], window[1], spec.attrs);
    dnnl::pooling_backward::desc desc(algorithm, nhwcDesc(xType), nhwcDesc(dyType), g.strides,
                                      g.window, g.padBefore, g.padAfter);
    dnnl::pooling_backward::primitive_desc pd(desc, onednn::primitiveAttr(), onednn::engine(),
                                              forward);
    memory dy = onednn::unboundMemory(nhwcDesc(dyType));
    memory dx = onednn::unboundMemory(nhwcDesc(xType));
    kernel.bindInput(0, dy);
    kernel.bindOutput(0, dx);
    std::unordered_map<int, memory> backwardArgs = {{DNNL_ARG_DIFF_DST, dy},
                                                    {DNNL_ARG_DIFF_SRC, dx}};
    if (algorithm == dnnl::algorithm::pooling_max) {
      memory x = onednn::unboundMemory(nhwcDesc(xType));
      kernel.bindInput(1, x);
      memory workspace = onednn::ownedMemory(forward.workspace_desc());
      kernel.addCall(forward, {{DNNL_ARG_SRC, x},
                               {DNNL_ARG_DST, onednn::ownedMemory(forward.dst_desc())},
                               {DNNL_ARG_WORKSPACE, workspace}});
      backwardArgs[DNNL_ARG_WORKSPACE] = workspace;
    }
    kernel.addCall(pd, std::move(backwardArgs));
  });
}

} // namespace

void registerDenseKernels(KernelRegistry &registry) {
  registry.add("matmul", makeMatmul);
  registry.add("conv2d", makeConv2d);
  registry.add("conv2d_backprop_input", makeConv2dBackpropInput);
  registry.add("conv2d_backprop_filter", makeConv2dBackpropFilter);
  registry.add("max_pool2d", makePool2d);
  registry.add("avg_pool2d", makePool2d);
  registry.add("max_pool2d_grad", makePool2dGrad);
  registry.add("avg_pool2d_grad", makePool2dGrad);
}

} // namespace prism::runtime::cpu
