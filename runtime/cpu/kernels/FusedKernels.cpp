// CPU kernels of the fused ops: fused_matmul and fused_conv2d are one oneDNN matmul or
// convolution that adds the bias and applies the activation as post-ops, while each output
// block is still in cache, instead of two more passes over the output.
#include <unordered_map>

#include "runtime/cpu/Kernel.h"
#include "runtime/cpu/kernels/OneDnnKernel.h"

namespace prism::runtime::cpu {

// In FusedElementwiseKernels.cpp: it shares nothing with the oneDNN kernels here.
llvm::Expected<std::unique_ptr<Kernel>> makeFusedElementwiseKernel(const KernelSpec &spec);

namespace {

using dnnl::memory;
using namespace onednn;

bool reluActivation(const KernelSpec &spec) {
  return spec.attrs.getString("activation") == "relu";
}

// The kernel's primitive attributes: user scratchpad, and relu as an eltwise post-op when the
// op asks for it.
dnnl::primitive_attr epilogueAttr(const KernelSpec &spec) {
  dnnl::primitive_attr attr = primitiveAttr();
  if (reluActivation(spec)) {
    dnnl::post_ops ops;
    ops.append_eltwise(/*scale=*/1.0f, dnnl::algorithm::eltwise_relu, /*alpha=*/0.0f,
                       /*beta=*/0.0f);
    attr.set_post_ops(ops);
  }
  return attr;
}

// fused_matmul(a, b, bias) -> activation(op(a) · op(b) + bias)
llvm::Expected<std::unique_ptr<Kernel>> makeFusedMatmul(const KernelSpec &spec) {
  bool ta = spec.attrs.getBool("transpose_a"), tb = spec.attrs.getBool("transpose_b");
  const ir::TensorType &a = spec.inputTypes[0];
  const ir::TensorType &c = spec.outputTypes[0];
  int64_t m = c.dims[0], n = c.dims[1], k = a.dims[ta ? 0 : 1];
  bool allF64 = true;
  for (const ir::TensorType &t : spec.inputTypes)
    allF64 = allF64 && t.dtype == ir::DType::F64 && !t.sparse;
  if (allF64 && c.dtype == ir::DType::F64)
    return std::make_unique<MatmulF64Kernel>(m, k, n, ta, tb,
                                             MatmulEpilogue{/*bias=*/true, reluActivation(spec)});
  return buildOneDnnKernel(spec, [&](OneDnnKernel &kernel) {
    memory::desc aDesc = matrixDesc(m, k, ta), bDesc = matrixDesc(k, n, tb);
    memory::desc cDesc = matrixDesc(m, n, false);
    // oneDNN's matmul bias has the rank of the output and broadcasts over its unit rows.
    memory::desc biasDesc = matrixDesc(1, n, false);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(aDesc, bDesc, biasDesc, cDesc),
                                    epilogueAttr(spec), engine());
    memory aMem = unboundMemory(aDesc), bMem = unboundMemory(bDesc);
    memory biasMem = unboundMemory(biasDesc), cMem = unboundMemory(cDesc);
    kernel.bindInput(0, aMem);
    kernel.bindInput(1, bMem);
    kernel.bindInput(2, biasMem);
    kernel.bindOutput(0, cMem);
    kernel.addCall(pd, {{DNNL_ARG_SRC, aMem},
                        {DNNL_ARG_WEIGHTS, bMem},
                        {DNNL_ARG_BIAS, biasMem},
                        {DNNL_ARG_DST, cMem}});
  });
}

// fused_conv2d(x, filter, bias) -> activation(conv2d(x, filter) + bias)
llvm::Expected<std::unique_ptr<Kernel>> makeFusedConv2d(const KernelSpec &spec) {
  return buildOneDnnKernel(spec, [&](OneDnnKernel &kernel) {
    ConvShapes s =
        convShapes(spec.inputTypes[0], spec.inputTypes[1], spec.outputTypes[0], spec.attrs);
    memory::desc biasDesc({spec.inputTypes[2].dims[0]}, memory::data_type::f32,
                          memory::format_tag::a);
    auto pd = convForwardDesc(s, biasDesc, epilogueAttr(spec));
    memory x = unboundMemory(s.src), userW = unboundMemory(s.userWeights);
    memory bias = unboundMemory(biasDesc), y = unboundMemory(s.dst);
    kernel.bindInput(0, x);
    kernel.bindInput(1, userW);
    kernel.bindInput(2, bias);
    kernel.bindOutput(0, y);
    memory w = primitiveWeights(pd.weights_desc(), userW);
    if (w != userW)
      kernel.addReorder(userW, w);
    kernel.addCall(
        pd, {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, y}});
  });
}

} // namespace

void registerFusedKernels(KernelRegistry &registry) {
  registry.add("fused_matmul", makeFusedMatmul);
  registry.add("fused_conv2d", makeFusedConv2d);
  registry.add("fused_elementwise", makeFusedElementwiseKernel);
}

} // namespace prism::runtime::cpu
