// The primitive-sequence kernel and the descriptors that the dense and fused kernels share.
#include "runtime/cpu/kernels/OneDnnKernel.h"

#include <algorithm>

#include "ir/Diagnostic.h"
#include "ir/Precision.h"
#include "runtime/cpu/kernels/Fp16Rounding.h"

namespace prism::runtime::cpu::onednn {

using dnnl::memory;
using Dims = memory::dims;
using Tag = memory::format_tag;

// Weights of conv2d and its gradients are given to oneDNN in the layout it prefers (blocked),
// reordered from and to our [KH, KW, C, O] on each run: with plain weights oneDNN falls back
// to im2col + GEMM, two to four times slower, while the weights are tiny next to the
// activations. Activations stay NHWC, which the direct convolutions read as they are.
constexpr bool kBlockedConvWeights = true;

void OneDnnKernel::addCall(const dnnl::primitive_desc_base &pd,
                           std::unordered_map<int, memory> args) {
  args[DNNL_ARG_SCRATCHPAD] = ownedMemory(pd.scratchpad_desc());
  calls_.push_back({dnnl::primitive(pd.get()), std::move(args)});
}

void OneDnnKernel::addFp16Rounding(const memory &from, const memory &to) {
  fp16Roundings_.emplace_back(from, to);
}

void OneDnnKernel::addReorder(const memory &from, const memory &to) {
  dnnl::reorder::primitive_desc pd(engine(), from.get_desc(), engine(), to.get_desc(),
                                   primitiveAttr());
  addCall(pd, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

llvm::Error OneDnnKernel::run(llvm::ArrayRef<const RuntimeValue *> inputs,
                              llvm::ArrayRef<RuntimeValue *> outputs) {
  try {
    // oneDNN takes non-const handles; inputs are only read.
    for (auto &[index, mem] : inputs_)
      mem.set_data_handle(const_cast<void *>(inputs[index]->dense.raw()));
    for (auto &[index, mem] : outputs_)
      mem.set_data_handle(outputs[index]->dense.raw());
    for (auto &[from, to] : fp16Roundings_)
      roundToFp16(static_cast<const float *>(from.get_data_handle()),
                  static_cast<float *>(to.get_data_handle()),
                  static_cast<int64_t>(from.get_desc().get_size() / sizeof(float)), threads_);
    dnnl::stream &s = stream();
    for (PrimitiveCall &call : calls_)
      call.primitive.execute(s, call.args);
    s.wait();
  } catch (const dnnl::error &e) {
    return toError(e, opName_, "run the kernel");
  }
  return llvm::Error::success();
}

namespace {
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
} // namespace

llvm::Expected<std::unique_ptr<Kernel>>
buildOneDnnKernel(const KernelSpec &spec, const std::function<void(OneDnnKernel &kernel)> &build) {
  if (auto err = requireF32(spec))
    return std::move(err);
  auto kernel = std::make_unique<OneDnnKernel>(spec.op->name().str());
  kernel->setRoundsToFp16(ir::computePrecision(*spec.op) == ir::ComputePrecision::FP16,
                          spec.threads);
  try {
    ScopedOmpThreads threads(spec.threads);
    build(*kernel);
  } catch (const dnnl::error &e) {
    return toError(e, spec.op->name(), "create the primitives");
  }
  return std::unique_ptr<Kernel>(std::move(kernel));
}

bool cpuHasBf16() {
  auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16;
}

llvm::Expected<memory::data_type> computeDataType(const KernelSpec &spec) {
  switch (ir::computePrecision(*spec.op)) {
  case ir::ComputePrecision::F32:
    return memory::data_type::f32;
  case ir::ComputePrecision::BF16:
    if (!cpuHasBf16())
      return ir::makeError(ir::ErrorCode::Unsupported,
                           "'" + spec.op->name() +
                               "' computes in bf16, which needs a CPU with AVX512_BF16 (or AMX); "
                               "this one has neither: train in f32 (no --precision)");
    return memory::data_type::bf16;
  case ir::ComputePrecision::FP16:
    break;
  }
  return memory::data_type::f32; // on operands rounded to fp16 (buildOneDnnKernel)
}

memory::desc withDataType(const memory::desc &desc, memory::data_type type) {
  dnnl_memory_desc_t data = desc.data;
  data.data_type = static_cast<dnnl_data_type_t>(type);
  return memory::desc(data);
}

namespace {
// What a kernel reads of `user`: `user` itself, or with fp16 compute its copy rounded to fp16.
memory roundedIfFp16(OneDnnKernel &kernel, const memory &user) {
  if (!kernel.roundsToFp16())
    return user;
  memory rounded = ownedMemory(user.get_desc());
  kernel.addFp16Rounding(user, rounded);
  return rounded;
}
} // namespace

memory convertedInput(OneDnnKernel &kernel, const memory &user, const memory::desc &read) {
  memory source = roundedIfFp16(kernel, user);
  if (read == source.get_desc())
    return source;
  memory converted = ownedMemory(read);
  kernel.addReorder(source, converted);
  return converted;
}

memory::desc matrixDesc(int64_t rows, int64_t cols, bool transposed) {
  return memory::desc({rows, cols}, memory::data_type::f32,
                      transposed ? Dims{1, rows} : Dims{cols, 1});
}

memory::desc batchedMatrixDesc(int64_t entries, int64_t rows, int64_t cols, bool transposed) {
  return memory::desc({entries, rows, cols}, memory::data_type::f32,
                      transposed ? Dims{rows * cols, 1, rows} : Dims{rows * cols, cols, 1});
}

llvm::Error MatmulF64Kernel::run(llvm::ArrayRef<const RuntimeValue *> inputs,
                                 llvm::ArrayRef<RuntimeValue *> outputs) {
  const double *a0 = inputs[0]->dense.data<double>(), *b0 = inputs[1]->dense.data<double>();
  const double *bias = epilogue_.bias ? inputs[2]->dense.data<double>() : nullptr;
  double *c0 = outputs[0]->dense.data<double>();
  const int64_t m = m_, k = k_, n = n_;
  const int64_t aStride = aBatched_ ? m * k : 0, bStride = bBatched_ ? k * n : 0;
  const bool ta = ta_, tb = tb_, relu = epilogue_.relu;
  // One loop over every (entry, row) pair, so that a batch of short products still spreads.
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < batch_ * m; ++row) {
    int64_t e = row / m, i = row % m;
    const double *a = a0 + e * aStride, *b = b0 + e * bStride;
    double *out = c0 + e * m * n + i * n;
    for (int64_t j = 0; j < n; ++j)
      out[j] = 0;
    for (int64_t p = 0; p < k; ++p) {
      double aip = ta ? a[p * m + i] : a[i * k + p];
      if (tb)
        for (int64_t j = 0; j < n; ++j)
          out[j] += aip * b[j * k + p];
      else
        for (int64_t j = 0; j < n; ++j)
          out[j] += aip * b[p * n + j];
    }
    if (bias)
      for (int64_t j = 0; j < n; ++j)
        out[j] += bias[j];
    if (relu)
      for (int64_t j = 0; j < n; ++j)
        out[j] = out[j] > 0 ? out[j] : 0.0;
  }
  return llvm::Error::success();
}

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

memory::desc nhwcDesc(const ir::TensorType &t) {
  return memory::desc({t.dims[0], t.dims[3], t.dims[1], t.dims[2]}, memory::data_type::f32,
                      Tag::nhwc);
}

namespace {
// Our filter [KH, KW, C, O] is oneDNN's `hwio` of the OIHW-ordered dims.
memory::desc filterDesc(const ir::TensorType &w, Tag tag) {
  return memory::desc({w.dims[3], w.dims[2], w.dims[0], w.dims[1]}, memory::data_type::f32, tag);
}
} // namespace

ConvShapes convShapes(const ir::TensorType &x, const ir::TensorType &w, const ir::TensorType &y,
                      const ir::AttrMap &attrs) {
  ConvShapes s;
  s.src = nhwcDesc(x);
  s.dst = nhwcDesc(y);
  s.weights = filterDesc(w, kBlockedConvWeights ? Tag::any : Tag::hwio);
  s.userWeights = filterDesc(w, Tag::hwio);
  s.geometry = windowGeometry(x, w.dims[0], w.dims[1], attrs);
  return s;
}

dnnl::convolution_forward::primitive_desc
convForwardDesc(const ConvShapes &s, const memory::desc &bias, const dnnl::primitive_attr &attr) {
  const WindowGeometry &g = s.geometry;
  auto desc =
      bias.is_zero()
          ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                            dnnl::algorithm::convolution_direct, s.src, s.weights,
                                            s.dst, g.strides, g.padBefore, g.padAfter)
          : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                            dnnl::algorithm::convolution_direct, s.src, s.weights,
                                            bias, s.dst, g.strides, g.padBefore, g.padAfter);
  return dnnl::convolution_forward::primitive_desc(desc, attr, engine());
}

memory primitiveWeights(const memory::desc &primitiveDesc, const memory &userWeights) {
  if (primitiveDesc == userWeights.get_desc())
    return userWeights;
  return ownedMemory(primitiveDesc);
}

memory weightsReadBy(OneDnnKernel &kernel, const memory::desc &primitiveDesc,
                     const memory &userWeights) {
  memory source = roundedIfFp16(kernel, userWeights);
  memory weights = primitiveWeights(primitiveDesc, source);
  if (weights != source)
    kernel.addReorder(source, weights);
  return weights;
}

} // namespace prism::runtime::cpu::onednn
