// The dense CPU kernels: matmul and batch_matmul, conv2d and its two gradients, max and average
// pooling and their gradients, each one or a few oneDNN primitives made when the kernel is built.
#include <unordered_map>

#include "runtime/cpu/Kernel.h"
#include "runtime/cpu/kernels/OneDnnKernel.h"

namespace prism::runtime::cpu {

namespace onednn {

using dnnl::memory;

namespace {
// The primitive attributes of an epilogue: relu as an eltwise post-op (the bias is an argument
// of the primitive itself).
dnnl::primitive_attr epilogueAttr(Epilogue epilogue) {
  dnnl::primitive_attr attr = primitiveAttr();
  if (epilogue.relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(/*scale=*/1.0f, dnnl::algorithm::eltwise_relu, /*alpha=*/0.0f,
                       /*beta=*/0.0f);
    attr.set_post_ops(ops);
  }
  return attr;
}
} // namespace

// (a, b[, bias]) -> c, for matmul, fused_matmul and batch_matmul. A batch_matmul is one
// oneDNN matmul over [batch, rows, cols] views (its batch dimensions flattened into one); a
// rank-2 operand is a batch of 1, which oneDNN broadcasts. In bf16 the two factors are
// converted into plain bf16 copies (a transpose is done by that copy), the product accumulates
// in f32 and c stays f32.
llvm::Expected<std::unique_ptr<Kernel>> makeMatmulKernel(const KernelSpec &spec,
                                                         Epilogue epilogue) {
  bool ta = spec.attrs.getBool("transpose_a"), tb = spec.attrs.getBool("transpose_b");
  const ir::TensorType &a = spec.inputTypes[0], &b = spec.inputTypes[1];
  const ir::TensorType &c = spec.outputTypes[0];
  int64_t rc = c.rank();
  int64_t m = c.dims[rc - 2], n = c.dims[rc - 1], k = a.dims[a.rank() - (ta ? 2 : 1)];
  int64_t batch = 1;
  for (int64_t i = 0; i + 2 < rc; ++i)
    batch *= c.dims[i];
  int64_t aBatch = a.rank() == 2 ? 1 : batch, bBatch = b.rank() == 2 ? 1 : batch;
  auto type = computeDataType(spec);
  if (!type)
    return type.takeError();
  bool allF64 = c.dtype == ir::DType::F64;
  for (const ir::TensorType &t : spec.inputTypes)
    allF64 = allF64 && t.dtype == ir::DType::F64 && !t.sparse;
  if (allF64 && *type == memory::data_type::f32) {
    auto f64 = std::make_unique<MatmulF64Kernel>(m, k, n, ta, tb, epilogue);
    f64->setBatch(batch, aBatch > 1, bBatch > 1);
    return std::unique_ptr<Kernel>(std::move(f64));
  }
  return buildOneDnnKernel(spec, [&](OneDnnKernel &kernel) {
    bool batched = rc > 2;
    // Rank-2 matrices, or [entries, rows, cols] batches of them.
    auto matrix = [&](int64_t entries, int64_t rows, int64_t cols, bool transposed) {
      return batched ? batchedMatrixDesc(entries, rows, cols, transposed)
                     : matrixDesc(rows, cols, transposed);
    };
    auto plain = [&](int64_t entries, int64_t rows, int64_t cols) {
      return batched ? memory::desc({entries, rows, cols}, *type, memory::format_tag::abc)
                     : memory::desc({rows, cols}, *type, memory::format_tag::ab);
    };
    memory::desc aUser = matrix(aBatch, m, k, ta), bUser = matrix(bBatch, k, n, tb);
    bool reduced = *type != memory::data_type::f32;
    memory::desc aDesc = reduced ? plain(aBatch, m, k) : aUser;
    memory::desc bDesc = reduced ? plain(bBatch, k, n) : bUser;
    memory::desc cDesc = matrix(batch, m, n, false);
    // oneDNN's matmul bias has the rank of the output and broadcasts over its unit rows.
    memory::desc biasDesc = epilogue.bias ? matrixDesc(1, n, false) : memory::desc();
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(aDesc, bDesc, biasDesc, cDesc),
                                    epilogueAttr(epilogue), engine());
    memory aMem = unboundMemory(aUser), bMem = unboundMemory(bUser);
    memory cMem = unboundMemory(cDesc);
    kernel.bindInput(0, aMem);
    kernel.bindInput(1, bMem);
    kernel.bindOutput(0, cMem);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, convertedInput(kernel, aMem, aDesc)},
                                            {DNNL_ARG_WEIGHTS, convertedInput(kernel, bMem, bDesc)},
                                            {DNNL_ARG_DST, cMem}};
    if (epilogue.bias) {
      memory biasMem = unboundMemory(biasDesc);
      kernel.bindInput(2, biasMem);
      args[DNNL_ARG_BIAS] = biasMem;
    }
    kernel.addCall(pd, std::move(args));
  });
}

// (x, filter[, bias]) -> y; in bf16, x and the filter are read as bf16 copies, y stays f32.
llvm::Expected<std::unique_ptr<Kernel>> makeConvForwardKernel(const KernelSpec &spec,
                                                              Epilogue epilogue) {
  auto type = computeDataType(spec);
  if (!type)
    return type.takeError();
  return buildOneDnnKernel(spec, [&](OneDnnKernel &kernel) {
    ConvShapes s =
        convShapes(spec.inputTypes[0], spec.inputTypes[1], spec.outputTypes[0], spec.attrs);
    memory::desc userX = s.src;
    s.src = withDataType(s.src, *type);
    s.weights = withDataType(s.weights, *type);
    memory::desc biasDesc = epilogue.bias
                                ? memory::desc({spec.inputTypes[2].dims[0]}, memory::data_type::f32,
                                               memory::format_tag::a)
                                : memory::desc();
    auto pd = convForwardDesc(s, biasDesc, epilogueAttr(epilogue));
    memory x = unboundMemory(userX), userW = unboundMemory(s.userWeights);
    memory y = unboundMemory(s.dst);
    kernel.bindInput(0, x);
    kernel.bindInput(1, userW);
    kernel.bindOutput(0, y);
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, convertedInput(kernel, x, pd.src_desc())},
        {DNNL_ARG_WEIGHTS, weightsReadBy(kernel, pd.weights_desc(), userW)},
        {DNNL_ARG_DST, y}};
    if (epilogue.bias) {
      memory bias = unboundMemory(biasDesc);
      kernel.bindInput(2, bias);
      args[DNNL_ARG_BIAS] = bias;
    }
    kernel.addCall(pd, std::move(args));
  });
}

namespace {
// The forward convolution a backward primitive is made against: its operands in `type`.
dnnl::convolution_forward::primitive_desc convHint(ConvShapes s, memory::data_type type) {
  s.src = withDataType(s.src, type);
  s.weights = withDataType(s.weights, type);
  s.dst = withDataType(s.dst, type);
  return convForwardDesc(s);
}
} // namespace

} // namespace onednn

namespace {

using dnnl::memory;
using namespace onednn;

// ---- matmul and convolution -----------------------------------------------------------------

llvm::Expected<std::unique_ptr<Kernel>> makeMatmul(const KernelSpec &spec) {
  return makeMatmulKernel(spec, Epilogue());
}

llvm::Expected<std::unique_ptr<Kernel>> makeConv2d(const KernelSpec &spec) {
  return makeConvForwardKernel(spec, Epilogue());
}

// conv2d_backprop_input(dy, filter, x) -> dx; x gives only its shape. In bf16, dy and the
// filter are read as bf16 copies and dx stays f32.
llvm::Expected<std::unique_ptr<Kernel>> makeConv2dBackpropInput(const KernelSpec &spec) {
  auto type = computeDataType(spec);
  if (!type)
    return type.takeError();
  return buildOneDnnKernel(spec, [&](OneDnnKernel &kernel) {
    ConvShapes s =
        convShapes(spec.inputTypes[2], spec.inputTypes[1], spec.inputTypes[0], spec.attrs);
    memory::desc userDy = s.dst;
    const WindowGeometry &g = s.geometry;
    dnnl::convolution_backward_data::desc desc(
        dnnl::algorithm::convolution_direct, s.src, withDataType(s.weights, *type),
        withDataType(s.dst, *type), g.strides, g.padBefore, g.padAfter);
    dnnl::convolution_backward_data::primitive_desc pd(desc, onednn::primitiveAttr(),
                                                       onednn::engine(), convHint(s, *type));
    memory dy = onednn::unboundMemory(userDy), userW = onednn::unboundMemory(s.userWeights);
    memory dx = onednn::unboundMemory(s.src);
    kernel.bindInput(0, dy);
    kernel.bindInput(1, userW);
    kernel.bindOutput(0, dx);
    memory w = weightsReadBy(kernel, pd.weights_desc(), userW);
    kernel.addCall(pd, {{DNNL_ARG_DIFF_DST, convertedInput(kernel, dy, pd.diff_dst_desc())},
                        {DNNL_ARG_WEIGHTS, w},
                        {DNNL_ARG_DIFF_SRC, dx}});
  });
}

// conv2d_backprop_filter(x, dy, filter) -> dfilter; filter gives only its shape. In bf16, x
// and dy are read as bf16 copies and dfilter stays f32.
llvm::Expected<std::unique_ptr<Kernel>> makeConv2dBackpropFilter(const KernelSpec &spec) {
  auto type = computeDataType(spec);
  if (!type)
    return type.takeError();
  return buildOneDnnKernel(spec, [&](OneDnnKernel &kernel) {
    ConvShapes s =
        convShapes(spec.inputTypes[0], spec.inputTypes[2], spec.inputTypes[1], spec.attrs);
    memory::desc userX = s.src, userDy = s.dst;
    const WindowGeometry &g = s.geometry;
    dnnl::convolution_backward_weights::desc desc(
        dnnl::algorithm::convolution_direct, withDataType(s.src, *type), s.weights,
        withDataType(s.dst, *type), g.strides, g.padBefore, g.padAfter);
    dnnl::convolution_backward_weights::primitive_desc pd(desc, onednn::primitiveAttr(),
                                                          onednn::engine(), convHint(s, *type));
    memory x = onednn::unboundMemory(userX), dy = onednn::unboundMemory(userDy);
    memory userDw = onednn::unboundMemory(s.userWeights);
    kernel.bindInput(0, x);
    kernel.bindInput(1, dy);
    kernel.bindOutput(0, userDw);
    memory dw = primitiveWeights(pd.diff_weights_desc(), userDw);
    kernel.addCall(pd, {{DNNL_ARG_SRC, convertedInput(kernel, x, pd.src_desc())},
                        {DNNL_ARG_DIFF_DST, convertedInput(kernel, dy, pd.diff_dst_desc())},
                        {DNNL_ARG_DIFF_WEIGHTS, dw}});
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
  registry.add("batch_matmul", makeMatmul);
  registry.add("conv2d", makeConv2d);
  registry.add("conv2d_backprop_input", makeConv2dBackpropInput);
  registry.add("conv2d_backprop_filter", makeConv2dBackpropFilter);
  registry.add("max_pool2d", makePool2d);
  registry.add("avg_pool2d", makePool2d);
  registry.add("max_pool2d_grad", makePool2dGrad);
  registry.add("avg_pool2d_grad", makePool2dGrad);
}

} // namespace prism::runtime::cpu
