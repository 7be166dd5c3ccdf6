// The GPU's op kernels (runtime/cuda/CudaOpKernels.h) on a host backend, which runs the source of
// DeviceKernels.cuh on the CPU one index at a time and cuBLAS's column-major gemm as a plain loop:
// every kernel's arguments, index arithmetic and math against the CPU kernels, with no GPU.
// Where there is a GPU, each case also runs through the executor on it against the reference
// interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>

#include "frontends/text/Parser.h"
#include "ir/OpTable.h"
#include "ir/Precision.h"
#include "plan/Pipeline.h"
#include "runtime/cuda/CudaElementwiseKernels.h"
#include "runtime/cuda/CudaOpKernels.h"
#include "runtime/cuda/CudaRuntimeDevice.h"
#include "runtime/cuda/DeviceKernelsHost.h"
#include "runtime/exec/Device.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/VariableStore.h"
#include "tests/cpu/ReferenceCheck.h"
#include "tests/cuda/PtxasCheck.h"
#include "tests/exec/TinyModel.h"

using namespace prism;
using namespace prism::runtime;
using runtime::cuda::GpuBackend;

namespace {

namespace k = runtime::cuda::kernels;

// A convolution's pass as cuDNN computes it (filter [O, KH, KW, C], the same padding before and
// after), in float64 loops, for the kernels' library path. It fills its workspace with NaN
// first, so a kernel that puts its own values there shows.
class HostConvolution final : public runtime::cuda::LibraryConvolution {
public:
  HostConvolution(runtime::cuda::ConvolutionPass pass, const runtime::cuda::ConvolutionGeometry &g)
      : pass_(pass), g_(g) {}
  std::string name() const override { return "the host's loops"; }
  size_t workspaceBytes() const override { return 1000; }

  llvm::Error run(const float *x, const float *filter, const float *dy, float *out,
                  void *workspace) const override {
    std::fill_n(static_cast<float *>(workspace), workspaceBytes() / sizeof(float),
                std::numeric_limits<float>::quiet_NaN());
    using runtime::cuda::ConvolutionPass;
    const auto &g = g_;
    const int64_t outputs = pass_ == ConvolutionPass::Forward         ? g.n * g.oh * g.ow * g.o
                            : pass_ == ConvolutionPass::BackwardInput ? g.n * g.h * g.w * g.c
                                                                      : g.o * g.kh * g.kw * g.c;
    std::vector<double> sums(static_cast<size_t>(outputs), 0.0);
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t oh = 0; oh < g.oh; ++oh)
        for (int64_t ow = 0; ow < g.ow; ++ow)
          for (int64_t kh = 0; kh < g.kh; ++kh)
            for (int64_t kw = 0; kw < g.kw; ++kw) {
              const int64_t ih = oh * g.strideH - g.padH + kh, iw = ow * g.strideW - g.padW + kw;
              if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w)
                continue;
              for (int64_t o = 0; o < g.o; ++o)
                for (int64_t c = 0; c < g.c; ++c) {
                  const int64_t xi = ((n * g.h + ih) * g.w + iw) * g.c + c;
                  const int64_t yi = ((n * g.oh + oh) * g.ow + ow) * g.o + o;
                  const int64_t fi = ((o * g.kh + kh) * g.kw + kw) * g.c + c;
                  if (pass_ == ConvolutionPass::Forward)
                    sums[yi] += double{x[xi]} * filter[fi];
                  else if (pass_ == ConvolutionPass::BackwardInput)
                    sums[xi] += double{dy[yi]} * filter[fi];
                  else
                    sums[fi] += double{x[xi]} * dy[yi];
                }
            }
    for (size_t i = 0; i < sums.size(); ++i)
      out[i] = static_cast<float>(sums[i]);
    return llvm::Error::success();
  }

private:
  runtime::cuda::ConvolutionPass pass_;
  runtime::cuda::ConvolutionGeometry g_;
};

class HostBackend final : public GpuBackend {
public:
  HostBackend() {
#define PRISM_HOST_KERNEL(name, Args)                                                              \
  kernels_[#name] = [](const void *a) { k::name(*static_cast<const k::Args *>(a)); };              \
  sizes_[#name] = sizeof(k::Args);
    PRISM_DEVICE_KERNELS(PRISM_HOST_KERNEL)
#undef PRISM_HOST_KERNEL
  }

  llvm::Error launch(llvm::StringRef kernel, int64_t, const void *arguments) override {
    auto it = kernels_.find(kernel.str());
    if (it == kernels_.end())
      return ir::makeError("no kernel " + kernel);
    it->second(arguments);
    ++launches;
    if (recording) {
      const char *bytes = static_cast<const char *>(arguments);
      recorded.emplace_back(kernel.str(), std::vector<char>(bytes, bytes + sizes_[kernel.str()]));
    }
    return llvm::Error::success();
  }

  // As a captured CUDA graph replays them: the launches recorded (while `recording`), with the
  // argument bytes they had then.
  void replay() {
    for (const auto &[kernel, arguments] : recorded)
      kernels_[kernel](arguments.data());
  }
  bool recording = false;
  std::vector<std::pair<std::string, std::vector<char>>> recorded;

  llvm::Error gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t kk, const float *a, int64_t lda,
                   const float *b, int64_t ldb, float *c, int64_t ldc, bool accumulate) override {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = accumulate ? c[i + j * ldc] : 0;
        for (int64_t p = 0; p < kk; ++p)
          sum += static_cast<double>(ta ? a[p + i * lda] : a[i + p * lda]) *
                 static_cast<double>(tb ? b[j + p * ldb] : b[p + j * ldb]);
        c[i + j * ldc] = static_cast<float>(sum);
      }
    ++launches;
    return llvm::Error::success();
  }

  // Small by default, so that the models' convolutions are made in parts of examples.
  static inline int64_t limit = 16 << 10;
  int64_t workspaceLimit() const override {
    return limit;
  }

  // With `libraryConvolutions`, convolutions whose padding cuDNN takes go through HostConvolution,
  // as on a GPU they go through cuDNN.
  static inline bool libraryConvolutions = false;
  llvm::Expected<std::unique_ptr<runtime::cuda::LibraryConvolution>>
  convolution(runtime::cuda::ConvolutionPass pass,
              const runtime::cuda::ConvolutionGeometry &g) override {
    if (!libraryConvolutions || !runtime::cuda::cudnnPadsAsWanted(g))
      return nullptr;
    ++libraryPasses;
    return std::make_unique<HostConvolution>(pass, g);
  }
  static inline int libraryPasses = 0;

  int launches = 0;

private:
  std::map<std::string, std::function<void(const void *)>> kernels_;
  std::map<std::string, size_t> sizes_;
};

// A random tensor of `type`: floats in [-1, 1), integers in [0, bound).
Tensor randomTensor(const ir::TensorType &type, std::mt19937 &random, int64_t bound) {
  std::vector<int64_t> shape(type.dims.begin(), type.dims.end());
  Tensor t(type.dtype, shape);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    if (type.dtype == ir::DType::F32)
      t.data<float>()[i] = std::uniform_real_distribution<float>(-1, 1)(random);
    else if (type.dtype == ir::DType::I32)
      t.data<int32_t>()[i] = std::uniform_int_distribution<int32_t>(0, bound - 1)(random);
    else if (type.dtype == ir::DType::I64)
      t.data<int64_t>()[i] = std::uniform_int_distribution<int64_t>(0, bound - 1)(random);
  }
  return t;
}

Tensor copyOf(const Tensor &t) {
  Tensor copy(t.dtype(), t.shape());
  std::memcpy(copy.raw(), t.raw(), static_cast<size_t>(t.numBytes()));
  return copy;
}

// ||a - b|| / ||a|| for f32 and f64 (equal values, infinities too, differ by 0); 0 or 1 (bytes
// equal or not) for other dtypes.
double relativeError(const Tensor &a, const Tensor &b) {
  const bool f32 = a.dtype() == ir::DType::F32;
  if (!f32 && a.dtype() != ir::DType::F64)
    return std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.numBytes())) == 0 ? 0 : 1;
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < a.numElements(); ++i) {
    double x = f32 ? a.data<float>()[i] : a.data<double>()[i];
    double y = f32 ? b.data<float>()[i] : b.data<double>()[i];
    if (std::isfinite(x))
      norm += x * x;
    if (x != y)
      diff += (x - y) * (x - y);
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-12);
}

using Values = std::map<const ir::Value *, RuntimeValue>;

// `type` in a step of batch 4 (B bound, as the executor binds it).
ir::TensorType bound(ir::TensorType type) {
  for (auto &d : type.dims)
    if (d == ir::kBatchDim)
      d = 4;
  return type;
}

// Runs `op` with its CPU kernel on `cpu`'s values and with its GPU kernel on the host backend on
// `gpu`'s, and compares the results. An op without a GPU op kernel (an elementwise op: the
// generated family's, tested elsewhere) gives the CPU's result to both.
void runBoth(const ir::Op &op, Device &device, const std::shared_ptr<HostBackend> &backend,
             Values &cpu, Values &gpu, double tolerance, const StepContext *step) {
  KernelSpec spec;
  spec.op = &op;
  spec.attrs = ir::withDefaults(op.def(), op.attrs);
  spec.device = &device;
  spec.batch = 4; // the examples of the step (batch_norm_update counts them)
  spec.step = step;
  std::vector<const RuntimeValue *> cpuIn, gpuIn;
  std::vector<RuntimeValue *> cpuOut, gpuOut;
  for (const ir::Value *v : op.operands()) {
    spec.inputTypes.push_back(bound(v->type()));
    cpuIn.push_back(&cpu[v]);
    gpuIn.push_back(&gpu[v]);
  }
  for (unsigned r = 0; r < op.numResults(); ++r) {
    const ir::Value *v = op.result(r);
    const ir::TensorType type = bound(v->type());
    spec.outputTypes.push_back(type);
    std::vector<int64_t> shape(type.dims.begin(), type.dims.end());
    if (!type.sparse) { // sparse values are filled by their kernels
      cpu[v].dense = Tensor(v->type().dtype, shape);
      gpu[v].dense = Tensor(v->type().dtype, shape);
    }
    cpu[v].sparse = gpu[v].sparse = type.sparse; // as the executor marks its slots
    cpuOut.push_back(&cpu[v]);
    gpuOut.push_back(&gpu[v]);
  }
  auto cpuKernel = findKernel(op.name(), ir::DeviceKind::Cpu)(spec);
  ASSERT_TRUE(bool(cpuKernel)) << llvm::toString(cpuKernel.takeError());
  llvm::Error cpuRan = (*cpuKernel)->run(cpuIn, cpuOut);
  ASSERT_FALSE(bool(cpuRan)) << llvm::toString(std::move(cpuRan));
  auto gpuKernel = cuda::makeGpuOpKernel(spec, backend);
  if (!gpuKernel) {
    llvm::Error e = gpuKernel.takeError();
    ASSERT_FALSE(llvm::is_contained(cuda::gpuOpKernelNames(), op.name()))
        << "the GPU kernel of '" << op.name().str()
        << "' was refused: " << llvm::toString(std::move(e));
    ASSERT_EQ(ir::errorCode(e), ir::ErrorCode::Unsupported) << llvm::toString(std::move(e));
    llvm::consumeError(std::move(e));
    for (unsigned r = 0; r < op.numResults(); ++r)
      gpu[op.result(r)].dense = copyOf(cpu[op.result(r)].dense);
    return;
  }
  // What the executor writes before a step's kernels run.
  const StepValues values{step ? step->step : 0, step ? step->exampleOffset : 0, spec.batch};
  ASSERT_FALSE(bool(device.writeStepValues(values)));
  llvm::Error gpuRan = (*gpuKernel)->run(gpuIn, gpuOut);
  ASSERT_FALSE(bool(gpuRan)) << llvm::toString(std::move(gpuRan));
  llvm::Error gpuChecked = (*gpuKernel)->check();
  ASSERT_FALSE(bool(gpuChecked)) << llvm::toString(std::move(gpuChecked));
  for (unsigned r = 0; r < op.numResults(); ++r) {
    const RuntimeValue &c = cpu[op.result(r)], &g = gpu[op.result(r)];
    EXPECT_LT(relativeError(c.dense, g.dense), tolerance) << op.result(r)->ref();
    EXPECT_EQ(c.sparse, g.sparse) << op.result(r)->ref();
    if (c.sparse) {
      EXPECT_EQ(relativeError(c.indices, g.indices), 0) << op.result(r)->ref();
    }
  }
}

// Whether this machine has a GPU (the device checks run only there).
bool haveGpu() {
  static bool have = [] {
    runtime::cuda::registerCudaDevice();
    runtime::cuda::registerCudaKernels();
    auto gpu = createDevice({ir::DeviceKind::Cuda, 0});
    if (!gpu)
      llvm::consumeError(gpu.takeError());
    return bool(gpu);
  }();
  return have;
}

// On a GPU: the module through the executor on cuda:0 against the float64 reference interpreter
// on fresh random inputs (relative error below 1e-4): every dense op result, then (when the
// module writes variables) the variables after a step.
void expectMatchesReferenceOnGpu(const ir::Module &module, int64_t bound) {
  prism::testing::ReferenceCheckOptions options;
  options.device = ir::DeviceId{ir::DeviceKind::Cuda, 0};
  options.tolerance = 1e-4;
  for (const auto &in : module.inputs())
    if (!ir::isFloat(in->type().dtype))
      options.intBound[in->name()] = bound;
  std::vector<std::string> outputs;
  bool updates = false;
  for (const auto &op : module.ops()) {
    updates |= op->numResults() == 0;
    for (unsigned r = 0; r < op->numResults(); ++r)
      if (!op->result(r)->type().sparse)
        outputs.push_back(op->result(r)->name());
  }
  if (!outputs.empty())
    prism::testing::expectMatchesReference(module, outputs, options);
  if (updates)
    prism::testing::expectMatchesReference(module, {}, options);
}

// Runs every op of a typed module once with the CPU kernels and once with the GPU kernels on the
// host backend, from the same random inputs (floats in [-1, 1), integers below `indexBound`) and
// variables: random too (those whose names start with "v", Adam's second moments, non-negative),
// or with `initialized`, the model's initial values. Every op result and every variable
// afterwards must agree within `tolerance`. Returns the GPU kernels' launches.
int runEveryOpOnBoth(const ir::Module &module, double tolerance, int64_t indexBound,
                     const StepContext &step, bool initialized = false) {
  auto device = createDevice({ir::DeviceKind::Cpu, 0});
  EXPECT_TRUE(bool(device));
  auto backend = std::make_shared<HostBackend>();
  std::mt19937 random(11);
  std::map<const ir::Value *, RuntimeValue> cpu, gpu;
  runtime::VariableStore initial;
  if (initialized) {
    EXPECT_FALSE(bool(initial.initialize(module, 5)));
  }
  auto seed = [&](const ir::Value *v) {
    Tensor t = randomTensor(bound(v->type()), random, indexBound);
    bool variable = v->kind() == ir::ValueKind::Variable;
    if (variable && initialized) {
      t = copyOf(*initial.find(v->name()));
    } else if (variable && llvm::StringRef(v->name()).startswith("v")) {
      for (int64_t i = 0; i < t.numElements(); ++i)
        t.data<float>()[i] = std::fabs(t.data<float>()[i]);
    }
    cpu[v].dense = copyOf(t);
    gpu[v].dense = t;
  };
  for (const auto &in : module.inputs())
    seed(in->value.get());
  for (const auto &var : module.variables())
    seed(var->value.get());
  for (const auto &op : module.ops()) {
    SCOPED_TRACE(op->name().str() + " at line " + std::to_string(op->loc.line) + " (" +
                 (op->numResults() ? op->result(0)->ref() : std::string("no result")) + ")");
    runBoth(*op, **device, backend, cpu, gpu, tolerance, &step);
    if (::testing::Test::HasFatalFailure())
      return backend->launches;
  }
  for (const auto &var : module.variables())
    EXPECT_LT(relativeError(cpu[var->value.get()].dense, gpu[var->value.get()].dense), tolerance)
        << "variable " << var->name();
  return backend->launches;
}

// Runs every op of `text` (a model, its types inferred) once with the CPU kernels and once with
// the GPU kernels on the host backend, from the same random inputs and variables; every op
// result and every variable afterwards must agree within `tolerance`. `bound`: the labels'
// classes; variables whose names start with "v" (Adam's second moments) are non-negative.
// `mode`: a training step (the default) or an evaluation step.
// Returns the GPU kernels' launches.
int expectSameAsCpu(const std::string &text, double tolerance = 1e-5, int64_t indexBound = 4,
                    StepMode mode = StepMode::Training) {
  StepContext step;
  step.mode = mode;
  auto module = frontends::parseModule(text, "case.prism");
  EXPECT_TRUE(bool(module)) << llvm::toString(module.takeError());
  if (!module)
    return 0;
  llvm::Error typed = plan::runPipeline(**module, "infer-shapes");
  EXPECT_FALSE(bool(typed)) << llvm::toString(std::move(typed));
  int launches = runEveryOpOnBoth(**module, tolerance, indexBound, step);
  if (haveGpu()) {
    SCOPED_TRACE("on cuda:0");
    expectMatchesReferenceOnGpu(**module, indexBound);
  }
  return launches;
}

// The GPU kernel of the only op of `text` on the host backend (the module kept alive with it).
struct SingleOp {
  std::unique_ptr<ir::Module> module;
  std::unique_ptr<Device> device;
  std::unique_ptr<Kernel> kernel;
};

SingleOp singleOpKernel(const char *text) {
  SingleOp result;
  auto module = frontends::parseModule(text, "case.prism");
  EXPECT_TRUE(bool(module)) << llvm::toString(module.takeError());
  if (!module)
    return result;
  result.module = std::move(*module);
  llvm::Error typed = plan::runPipeline(*result.module, "infer-shapes");
  EXPECT_FALSE(bool(typed)) << llvm::toString(std::move(typed));
  auto device = createDevice({ir::DeviceKind::Cpu, 0});
  EXPECT_TRUE(bool(device));
  if (!device)
    return result;
  result.device = std::move(*device);
  const ir::Op &op = **result.module->ops().begin();
  KernelSpec spec;
  spec.op = &op;
  spec.attrs = ir::withDefaults(op.def(), op.attrs);
  spec.device = result.device.get();
  for (const ir::Value *v : op.operands())
    spec.inputTypes.push_back(v->type());
  spec.outputTypes = {op.result(0)->type()};
  auto kernel = cuda::makeGpuOpKernel(spec, std::make_shared<HostBackend>());
  EXPECT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
  if (kernel)
    result.kernel = std::move(*kernel);
  return result;
}

// `kernel` runs on bad input without an error; what it flagged is `message`, from `check` (the
// executor checks such kernels later: Kernel::checksLater).
void expectFlagged(Kernel &kernel, llvm::ArrayRef<const RuntimeValue *> inputs,
                   llvm::ArrayRef<RuntimeValue *> outputs, const std::string &message) {
  llvm::Error ran = kernel.run(inputs, outputs);
  ASSERT_FALSE(bool(ran)) << llvm::toString(std::move(ran));
  EXPECT_TRUE(kernel.checksLater());
  llvm::Error checked = kernel.check();
  ASSERT_TRUE(bool(checked));
  EXPECT_EQ(llvm::toString(std::move(checked)), message);
}

} // namespace

TEST(GpuOpKernels, MatmulInEveryTranspositionAndFusedWithBiasAndRelu) {
  EXPECT_GT(expectSameAsCpu(R"(model m {
  input a : f32[5, 3]
  input at : f32[3, 5]
  input b : f32[3, 4]
  input bt : f32[4, 3]
  input bias : f32[4]
  %nn = matmul(a, b)
  %tn = matmul(at, b, transpose_a = true)
  %nt = matmul(a, bt, transpose_b = true)
  %tt = matmul(at, bt, transpose_a = true, transpose_b = true)
  %f = fused_matmul(a, b, bias)
  %fr = fused_matmul(at, bt, bias, transpose_a = true, transpose_b = true, activation = relu)
})"),
            0);
}

TEST(GpuOpKernels, ConstantOfEveryDtype) {
  EXPECT_GT(expectSameAsCpu(R"(model m {
  %f = constant(value = -2.75, shape = [3, 2])
  %d = constant(value = 0.1, shape = [4], dtype = f64)
  %i = constant(value = -7.9, shape = [5], dtype = i32)
  %l = constant(value = 123456789012, shape = [2], dtype = i64)
  %b = constant(value = 0.5, shape = [3], dtype = bool)
})"),
            0);
}

TEST(GpuOpKernels, SumLikeOverLeadingAndUnitDimensions) {
  EXPECT_GT(expectSameAsCpu(R"(model m {
  input g : f32[2, 3, 4]
  var bias : f32[4] = zeros
  var middle : f32[3, 1] = zeros
  var all : f32[] = zeros
  var same : f32[2, 3, 4] = zeros
  %s1 = sum_like(g, bias)
  %s2 = sum_like(g, middle)
  %s3 = sum_like(g, all)
  %s4 = sum_like(g, same)
})"),
            0);
}

TEST(GpuOpKernels, SoftmaxCrossEntropyAndItsGradient) {
  for (const char *labels : {"i32", "i64"})
    EXPECT_GT(expectSameAsCpu(std::string(R"(model m {
  input logits : f32[6, 4]
  input labels : )") + labels +
                              R"([6]
  input seq : f32[2, 3, 4]
  input seqLabels : )" + labels +
                              R"([2, 3]
  input long : f32[40, 30, 5]
  input longLabels : )" + labels +
                              R"([40, 30]
  %loss = softmax_cross_entropy(logits, labels)
  %one = constant(value = 1.5)
  %grad = softmax_cross_entropy_grad(%one, logits, labels)
  %seqLoss = softmax_cross_entropy(seq, seqLabels, ignore_index = 2)
  %seqGrad = softmax_cross_entropy_grad(%one, seq, seqLabels, ignore_index = 2)
  %longLoss = softmax_cross_entropy(long, longLabels, ignore_index = 2)
  %longGrad = softmax_cross_entropy_grad(%one, long, longLabels)
})"),
              0)
        << labels;
}

TEST(GpuOpKernels, DenseUpdatesWithScheduleAndFiniteFlags) {
  EXPECT_GT(expectSameAsCpu(R"(model m {
  var w : f32[7, 3] = zeros
  var w2 : f32[7, 3] = zeros
  var w3 : f32[7, 3] = zeros
  var w4 : f32[7, 3] = zeros
  var acc : f32[7, 3] = zeros
  var acc2 : f32[7, 3] = zeros
  var m : f32[7, 3] = zeros
  var v : f32[7, 3] = zeros
  var m2 : f32[7, 3] = zeros
  var v2 : f32[7, 3] = zeros
  var w5 : f32[7, 3] = zeros
  var w6 : f32[7, 3] = zeros
  input g : f32[7, 3]
  %t = constant(value = 3)
  %factor = constant(value = 0.5)
  %finite = constant(value = 1)
  %skip = constant(value = 0)
  apply_sgd(w, g, lr = 0.1)
  apply_sgd(w2, g, %factor, %skip, lr = 0.1)
  apply_momentum(w3, acc, g, %factor, %finite, lr = 0.1, momentum = 0.8)
  apply_momentum(w4, acc2, g, lr = 0.1, nesterov = true)
  apply_adam(w5, m, v, g, %t, lr = 0.01)
  apply_adam(w6, m2, v2, g, %t, %factor, %finite, lr = 0.01, beta1 = 0.8)
  var step : f32[] = zeros
  var ids : i64[5] = zeros
  input newIds : i64[5]
  %next = add(step, %t)
  assign(step, %next)
  assign(ids, newIds)
})"),
            0);
}

TEST(GpuOpKernels, ALabelOutOfRangeIsTheCpusError) {
  SingleOp loss = singleOpKernel(R"(model m {
  input logits : f32[3, 4]
  input labels : i32[3]
  %loss = softmax_cross_entropy(logits, labels)
})");
  ASSERT_TRUE(loss.kernel);
  RuntimeValue logits, labels, value;
  logits.dense = Tensor(ir::DType::F32, {3, 4});
  logits.dense.fillZero();
  labels.dense = Tensor(ir::DType::I32, {3});
  for (int i = 0; i < 3; ++i)
    labels.dense.data<int32_t>()[i] = i == 1 ? 4 : 0;
  value.dense = Tensor(ir::DType::F32, {});
  expectFlagged(*loss.kernel, {&logits, &labels}, {&value},
                "error: label 4 of row 1 is outside [0, 4)");
}

// On a GPU, through the executor: a label out of range in a training step is the CPU's error at
// the loss's model line, read once before the update, and the update does not run.
TEST(GpuOpKernels, AFlaggedLabelStopsTheStepBeforeTheUpdateOnTheGpu) {
  if (!haveGpu())
    GTEST_SKIP() << "no CUDA device: cuda:0 could not be made";
  auto module = frontends::parseModule(prism::testing::kTinyModel, "tiny.prism");
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  ASSERT_FALSE(bool(plan::compileTrainingStep(**module)));
  auto store = std::make_shared<runtime::VariableStore>();
  ASSERT_FALSE(bool(store->initialize(**module, 3)));
  const Tensor before = copyOf(*store->find("w"));
  runtime::ExecutorOptions options;
  options.device = ir::DeviceId{ir::DeviceKind::Cuda, 0};
  auto executor = runtime::Executor::create(**module, store, options);
  ASSERT_TRUE(bool(executor)) << llvm::toString(executor.takeError());
  Tensor x(ir::DType::F32, {2, 3}), y(ir::DType::I32, {2});
  for (int64_t i = 0; i < 6; ++i)
    x.data<float>()[i] = 0.1f * static_cast<float>(i + 1);
  y.data<int32_t>()[0] = 1;
  y.data<int32_t>()[1] = 9;
  llvm::Error err = (*executor)->step({{"x", x}, {"y", y}});
  ASSERT_TRUE(bool(err));
  EXPECT_EQ(llvm::toString(std::move(err)),
            "tiny.prism:6:3: error: 'softmax_cross_entropy': label 9 of row 1 is outside [0, 4)");
  ASSERT_FALSE(bool((*executor)->variablesToHost()));
  EXPECT_EQ(relativeError(before, *store->find("w")), 0);
  y.data<int32_t>()[1] = 2;
  ASSERT_FALSE(bool((*executor)->step({{"x", x}, {"y", y}})));
  ASSERT_FALSE(bool((*executor)->variablesToHost()));
  EXPECT_GT(relativeError(before, *store->find("w")), 0);
}

TEST(GpuOpKernels, WhatTheyDoNotTakeIsAClearError) {
  auto module = frontends::parseModule(R"(model m {
  input table : f64[4, 2]
  input ids : i32[3]
  input x : f64[2, 2]
  %p = gather(table, ids)
  %s = sum_like(x, x)
})",
                                       "case.prism");
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  ASSERT_FALSE(bool(plan::runPipeline(**module, "infer-shapes")));
  std::vector<std::string> errors;
  for (const auto &op : (*module)->ops()) {
    KernelSpec spec;
    spec.op = op.get();
    spec.attrs = ir::withDefaults(op->def(), op->attrs);
    for (const ir::Value *v : op->operands())
      spec.inputTypes.push_back(v->type());
    spec.outputTypes = {op->result(0)->type()};
    auto kernel = cuda::makeGpuOpKernel(spec, std::make_shared<HostBackend>());
    ASSERT_FALSE(bool(kernel));
    llvm::Error e = kernel.takeError();
    EXPECT_EQ(ir::errorCode(e), ir::ErrorCode::Unsupported);
    errors.push_back(llvm::toString(std::move(e)));
  }
  EXPECT_EQ(errors[0], "error: the GPU's 'gather' takes f32, not f64[4, 2]");
  EXPECT_EQ(errors[1], "error: the GPU's 'sum_like' takes f32, not f64[2, 2]");
}

// Every kernel of DeviceKernels.cuh through NVRTC and ptxas for sm_90, as a GPU would load them.
TEST(GpuOpKernels, TheKernelSourceAssemblesForSm90) {
  const runtime::cuda::Nvrtc *nvrtc = prism::testing::nvrtcOrFail();
  if (!nvrtc)
    return;
  std::vector<std::string> entries;
#define PRISM_ENTRY(name, Args) entries.push_back(#name);
  PRISM_DEVICE_KERNELS(PRISM_ENTRY)
#undef PRISM_ENTRY
  EXPECT_EQ(prism::testing::compileThroughPtxas(*nvrtc, cuda::deviceKernelsSource(),
                                                "prism_device_kernels", entries),
            "");
}

// Reductions over one block of neighbouring dimensions (indexed without division, sizes of 1
// between them included) and over dimensions apart (the general indexing); long sums in parts.
TEST(GpuOpKernels, ReductionsAndTheirExpansion) {
  EXPECT_GT(expectSameAsCpu(R"(model m {
  input x : f32[2, 3, 4]
  input y : f32[600, 1, 5]
  input z : f32[3, 1, 700]
  %bias = reduce_sum(y, axes = [0, 1])
  %acrossOne = reduce_sum(y, axes = [0, 2])
  %rows = reduce_mean(z, axes = [2])
  %all = reduce_sum(x)
  %middle = reduce_mean(x, axes = [1])
  %ends = reduce_sum(x, axes = [0, -1], keepdims = true)
  %back = expand_like(%middle, x, axes = [1], mean = true)
  %backSum = expand_like(%ends, x, axes = [0, 2], keepdims = true)
  %backAll = expand_like(%all, x)
})"),
            0);
}

// Gathers by i32 and i64 indices, and the sparse gradient that repeats rows (indices drawn from
// [0, 4) of a 6-row table: rows 4 and 5 are never touched) through lazy sgd, momentum and adam.
TEST(GpuOpKernels, GathersAndLazySparseUpdates) {
  EXPECT_GT(expectSameAsCpu(R"(model m {
  var table : f32[6, 3] = zeros
  var t2 : f32[6, 3] = zeros
  var t3 : f32[6, 3] = zeros
  var acc : f32[6, 3] = zeros
  var m : f32[6, 3] = zeros
  var v : f32[6, 3] = zeros
  input ids : i32[2, 4]
  input ids64 : i64[5]
  %rows = gather(table, ids)
  %rows64 = gather(table, ids64)
  %g = gather_grad(%rows, ids, num_rows = 6)
  %g64 = gather_grad(%rows64, ids64, num_rows = 6)
  %t = constant(value = 2)
  apply_sgd(table, %g, lr = 0.1)
  apply_momentum(t2, acc, %g64, lr = 0.1, momentum = 0.5)
  apply_adam(t3, m, v, %g, %t, lr = 0.01)
})"),
            0);
}

TEST(GpuOpKernels, AGatherIndexOutsideTheTableIsTheError) {
  SingleOp gather = singleOpKernel(R"(model m {
  var table : f32[3, 2] = zeros
  input ids : i64[4]
  %rows = gather(table, ids)
})");
  ASSERT_TRUE(gather.kernel);
  RuntimeValue table, ids, rows;
  table.dense = Tensor(ir::DType::F32, {3, 2});
  table.dense.fillZero();
  ids.dense = Tensor(ir::DType::I64, {4});
  for (int i = 0; i < 4; ++i)
    ids.dense.data<int64_t>()[i] = i == 2 ? 3 : 0;
  rows.dense = Tensor(ir::DType::F32, {4, 2});
  expectFlagged(
      *gather.kernel, {&table, &ids}, {&rows},
      "error: index 3 (element 2 of the indices) is outside [0, 3) for a table of 3 rows");
}

// Convolutions over NHWC with `geometry` (stride and padding), fused with a bias and relu, and
// both backprops of each, of 3 channels (a thread a channel) and 8 (four channels a thread), with
// 3x3 and 2x2 filters.
std::string convolutions(const std::string &geometry) {
  return R"(model m {
  input x : f32[5, 7, 6, 3]
  input w3 : f32[3, 3, 3, 4]
  input w2 : f32[2, 2, 3, 4]
  input x8 : f32[3, 5, 6, 8]
  input w8 : f32[3, 3, 8, 5]
  input bias : f32[4]
  %y3 = conv2d(x, w3, )" +
         geometry + R"()
  %y2 = conv2d(x, w2, )" +
         geometry + R"()
  %f = fused_conv2d(x, w3, bias, )" +
         geometry + R"(, activation = relu)
  %dx3 = conv2d_backprop_input(%y3, w3, x, )" +
         geometry + R"()
  %dx2 = conv2d_backprop_input(%y2, w2, x, )" +
         geometry + R"()
  %dw3 = conv2d_backprop_filter(x, %y3, w3, )" +
         geometry + R"()
  %dw2 = conv2d_backprop_filter(x, %f, w3, )" +
         geometry + R"()
  %y8 = conv2d(x8, w8, )" +
         geometry + R"()
  %dx8 = conv2d_backprop_input(%y8, w8, x8, )" +
         geometry + R"()
  %dw8 = conv2d_backprop_filter(x8, %y8, w8, )" +
         geometry + R"()
})";
}

// `same` (odd and even windows, strides 1 and 2) and `valid` padding; the patch matrices made an
// example at a time, in parts of 2 and 1 examples (the 3x3 filter at stride 1) and whole.
TEST(GpuOpKernels, ConvolutionsAndTheirBackprops) {
  for (int64_t limit : {int64_t{1}, int64_t{10} << 10, int64_t{1} << 30})
    for (const char *geometry :
         {"stride = [1, 1], padding = same", "stride = [2, 2], padding = same",
          "stride = [2, 1], padding = valid"}) {
      HostBackend::limit = limit;
      EXPECT_GT(expectSameAsCpu(convolutions(geometry)), 0)
          << geometry << ", workspace limit " << limit;
    }
  HostBackend::limit = 16 << 10;
}

// The same convolutions through a library's passes where it takes their padding (on a GPU,
// cuDNN's; here the host's HostConvolution): the filter transposed into the library's layout and
// the filter gradient out of it, the bias and relu after, the workspace's parts apart. A `same`
// convolution that pads one more after than before is not cuDNN's and stays on the patch
// matrices: the 2x2 filter's at stride 1 or 2, and any at stride 2 over the width of 6.
TEST(GpuOpKernels, ConvolutionsThroughALibrary) {
  HostBackend::libraryConvolutions = true;
  // The geometries and how many of the ten passes the library takes: the 3x3 filters' eight, the
  // 2x2 filter's two where nothing is padded.
  for (auto [geometry, passes] : {std::pair{"stride = [1, 1], padding = same", 8},
                                  std::pair{"stride = [2, 2], padding = same", 0},
                                  std::pair{"stride = [2, 1], padding = same", 8},
                                  std::pair{"stride = [2, 1], padding = valid", 10}}) {
    const int before = HostBackend::libraryPasses;
    EXPECT_GT(expectSameAsCpu(convolutions(geometry)), 0) << geometry;
    EXPECT_EQ(HostBackend::libraryPasses - before, passes) << geometry;
  }
  HostBackend::libraryConvolutions = false;
}

// cuDNN (with the toolkit here) loads and has every function the convolution kernels call.
TEST(GpuOpKernels, CudnnsConvolutionApiLoads) {
  llvm::Error loaded = runtime::cuda::loadCudnn();
  if (!loaded)
    return;
  const std::string message = llvm::toString(std::move(loaded));
  if (llvm::StringRef(message).contains("could not be loaded"))
    GTEST_SKIP() << message;
  FAIL() << message;
}

TEST(GpuOpKernels, CudnnTakesPaddingTheSameBeforeAndAfter) {
  auto geometry = [](int64_t h, int64_t k, int64_t stride, int64_t out, int64_t padBefore) {
    runtime::cuda::ConvolutionGeometry g;
    g.n = 2;
    g.c = g.o = 3;
    g.h = g.w = h;
    g.kh = g.kw = k;
    g.strideH = g.strideW = stride;
    g.oh = g.ow = out;
    g.padH = g.padW = padBefore;
    return g;
  };
  using runtime::cuda::cudnnPadsAsWanted;
  EXPECT_TRUE(cudnnPadsAsWanted(geometry(28, 5, 1, 28, 2)));  // same, 2 before and after
  EXPECT_TRUE(cudnnPadsAsWanted(geometry(7, 3, 2, 4, 1)));    // same at stride 2: 1 and 1
  EXPECT_TRUE(cudnnPadsAsWanted(geometry(7, 3, 2, 3, 0)));    // valid
  EXPECT_FALSE(cudnnPadsAsWanted(geometry(7, 2, 1, 7, 0)));   // same: 0 before, 1 after
  EXPECT_FALSE(cudnnPadsAsWanted(geometry(32, 3, 2, 16, 0))); // same at stride 2: 0 and 1
  EXPECT_FALSE(cudnnPadsAsWanted(geometry(8, 3, 0, 8, 1)));   // no stride
}

// A 1x1 filter of stride 1 without padding multiplies x itself (no patch matrix), and of stride
// 2 does not.
TEST(GpuOpKernels, OneByOneConvolutions) {
  for (const char *stride : {"[1, 1]", "[2, 2]"})
    EXPECT_GT(expectSameAsCpu(std::string(R"(model m {
  input x : f32[3, 5, 4, 6]
  input w : f32[1, 1, 6, 2]
  input bias : f32[2]
  %y = conv2d(x, w, padding = valid, stride = )") +
                              stride + R"()
  %f = fused_conv2d(x, w, bias, padding = same, activation = relu, stride = )" +
                              stride + R"()
  %dx = conv2d_backprop_input(%y, w, x, padding = valid, stride = )" +
                              stride + R"()
  %dw = conv2d_backprop_filter(x, %f, w, padding = same, stride = )" +
                              stride + R"()
})"),
              0)
        << stride;
}

// Matrix products and convolutions computing in bf16 and fp16: their operands rounded as the
// CPU's kernels round them (bias and results float32), on every path of a convolution (its patch
// matrix, a 1x1 filter's product of x itself, and a library's pass, as cuDNN's on a GPU).
TEST(GpuOpKernels, ProductsAndConvolutionsInReducedPrecision) {
  for (bool library : {false, true}) { // the convolutions' patch matrices, then a library's passes
    HostBackend::libraryConvolutions = library;
    const int before = HostBackend::libraryPasses;
    for (const char *precision : {"bf16", "fp16"}) {
      const std::string compute = std::string("compute = ") + precision;
      EXPECT_GT(expectSameAsCpu(R"(model m {
  input a : f32[5, 3]
  input b : f32[3, 4]
  input bias : f32[4]
  input x3 : f32[2, 3, 5]
  input b3 : f32[2, 5, 4]
  input x : f32[2, 7, 5, 3]
  input w : f32[3, 3, 3, 4]
  input w1 : f32[1, 1, 3, 4]
  %p = matmul(a, b, )" + compute +
                                R"()
  %f = fused_matmul(a, b, bias, activation = relu, )" +
                                compute + R"()
  %q = batch_matmul(x3, b3, )" + compute +
                                R"()
  %y = conv2d(x, w, stride = [2, 1], padding = same, )" +
                                compute + R"()
  %y1 = fused_conv2d(x, w1, bias, padding = valid, activation = relu, )" +
                                compute + R"()
  %dx = conv2d_backprop_input(%y, w, x, stride = [2, 1], padding = same, )" +
                                compute + R"()
  %dw = conv2d_backprop_filter(x, %y, w, stride = [2, 1], padding = same, )" +
                                compute + R"()
})"),
                0)
          << precision << (library ? ", through a library" : "");
    }
    EXPECT_EQ(HostBackend::libraryPasses - before, library ? 2 * 4 : 0);
  }
  HostBackend::libraryConvolutions = false;
}

// The device's rounding (prism_round_to) is ir::roundToPrecision's, bit for bit: ties, the
// largest values, fp16's subnormals and overflow, infinities and NaNs, and random floats.
TEST(GpuOpKernels, RoundingToBf16AndFp16IsTheCpus) {
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               -1.5f,
                               65504.0f,
                               65519.0f,
                               65520.0f,
                               -70000.0f,
                               1e-5f,
                               6e-8f,
                               3e-8f,
                               1e-40f,
                               3.0e38f,
                               1.00390625f,
                               1.01171875f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN()};
  std::mt19937 random(3);
  for (int i = 0; i < 20000; ++i) {
    uint32_t bits = random();
    float v;
    std::memcpy(&v, &bits, sizeof v);
    values.push_back(v);
    values.push_back(std::ldexp(std::uniform_real_distribution<float>(-1, 1)(random),
                                std::uniform_int_distribution<int>(-30, 20)(random)));
  }
  for (auto [code, precision] :
       {std::pair{1, ir::ComputePrecision::BF16}, std::pair{2, ir::ComputePrecision::FP16}})
    for (float v : values) {
      float device = k::prism_round_to(v, code), host = ir::roundToPrecision(v, precision);
      uint32_t a, b;
      std::memcpy(&a, &device, sizeof a);
      std::memcpy(&b, &host, sizeof b);
      if (std::isnan(host))
        EXPECT_TRUE(std::isnan(device)) << v;
      else
        ASSERT_EQ(a, b) << "value " << v << " precision " << code;
    }
}

// Max pooling where every window is a tie (an input of zeros: the gradient goes to each window's
// first cell) under `valid` and `same` padding, its gradient, and reshapes.
TEST(GpuOpKernels, MaxPoolingTiesAndReshapes) {
  EXPECT_GT(expectSameAsCpu(R"(model m {
  input x : f32[2, 5, 6, 3]
  input dyValid : f32[2, 2, 3, 3]
  input dySame : f32[2, 3, 3, 3]
  %zero = constant(value = 0)
  %ties = mul(x, %zero)
  %p = max_pool2d(%ties)
  %q = max_pool2d(%ties, window = [3, 3], stride = [2, 2], padding = same)
  %dp = max_pool2d_grad(dyValid, %ties)
  %dq = max_pool2d_grad(dySame, %ties, window = [3, 3], stride = [2, 2], padding = same)
  %flat = reshape(%q, shape = [2, 27])
  %back = reshape_like(%flat, %q)
})"),
            0);
}

// The models under models/ and the training step of one (compiled as for a single device).
const char *const kModels[] = {
    "mlp", "cnn", "embedding_classifier", "lstm_lm", "resnet", "transformer", "resnet18"};

std::unique_ptr<ir::Module>
trainingStepOf(const char *name, ir::ComputePrecision precision = ir::ComputePrecision::F32) {
  auto model =
      frontends::parseModuleFile(std::string(PRISM_SOURCE_DIR "/models/") + name + ".prism");
  EXPECT_TRUE(bool(model)) << llvm::toString(model.takeError());
  if (!model)
    return nullptr;
  plan::TrainingStepOptions options;
  options.precision = precision;
  llvm::Error compiled = plan::compileTrainingStep(**model, options);
  EXPECT_FALSE(bool(compiled)) << llvm::toString(std::move(compiled));
  return std::move(*model);
}

// Every kernel of the training steps that pass the GPU kernel check is built (the op kernels on
// the host backend, the generated ones as source): none refuses its shapes or attributes, which
// the kernel check, by op name alone, cannot see.
TEST(GpuOpKernels, EveryKernelOfTheGpuModelsBuildsWithoutAGpu) {
  auto device = createDevice({ir::DeviceKind::Cpu, 0});
  ASSERT_TRUE(bool(device));
  auto backend = std::make_shared<HostBackend>();
  for (const char *name : kModels) {
    SCOPED_TRACE(name);
    auto model = trainingStepOf(name);
    ASSERT_TRUE(model);
    int built = 0;
    for (const auto &op : model->ops()) {
      ++built;
      KernelSpec spec;
      spec.op = op.get();
      spec.attrs = ir::withDefaults(op->def(), op->attrs);
      spec.device = device->get();
      for (const ir::Value *v : op->operands())
        spec.inputTypes.push_back(bound(v->type()));
      for (unsigned r = 0; r < op->numResults(); ++r)
        spec.outputTypes.push_back(bound(op->result(r)->type()));
      if (llvm::is_contained(cuda::gpuOpKernelNames(), op->name())) {
        auto kernel = cuda::makeGpuOpKernel(spec, backend);
        EXPECT_TRUE(bool(kernel)) << op->name().str() << ": " << llvm::toString(kernel.takeError());
        continue;
      }
      auto source = cuda::elementwiseKernelSource(spec);
      EXPECT_TRUE(bool(source)) << op->name().str() << ": " << llvm::toString(source.takeError());
    }
    EXPECT_GE(built, 15);
  }
}

// Every op of every model's training step, at the model's own shapes (batch 4), with the GPU
// kernels on the host backend against the CPU kernels, op after op, from the model's initial
// variables and random inputs: the index arithmetic of
// strided and padded convolutions, pools and reductions at the sizes the models use, which the
// small cases above do not reach.
TEST(GpuOpKernels, EveryModelsTrainingStepMatchesTheCpuKernelsOpByOp) {
  for (const char *name : kModels) {
    SCOPED_TRACE(name);
    auto model = trainingStepOf(name);
    ASSERT_TRUE(model);
    StepContext step;
    EXPECT_GT(runEveryOpOnBoth(*model, 1e-4, 10, step, /*initialized=*/true), 20);
  }
}

// The training steps of cnn (bf16) and mlp (fp16, with dynamic loss scaling) as
// `--precision` compiles them, op by op against the CPU kernels.
TEST(GpuOpKernels, TrainingStepsInReducedPrecisionMatchTheCpuKernelsOpByOp) {
  for (auto [name, precision] : {std::pair{"cnn", ir::ComputePrecision::BF16},
                                 std::pair{"mlp", ir::ComputePrecision::FP16}}) {
    SCOPED_TRACE(name);
    auto model = trainingStepOf(name, precision);
    ASSERT_TRUE(model);
    StepContext step;
    EXPECT_GT(runEveryOpOnBoth(*model, 1e-4, 10, step, /*initialized=*/true), 20);
  }
}

// Slices, their gradients and concatenation along the first, a middle and the last axis (a
// negative axis too), of f32 and i32 values.
TEST(GpuOpKernels, SlicesAndConcatenation) {
  EXPECT_GT(expectSameAsCpu(R"(model m {
  input x : f32[4, 5, 6]
  input y : f32[4, 2, 6]
  input ids : i32[4, 3]
  %first = slice(x, axis = 0, begin = 1, end = 3)
  %middle = slice(x, axis = 1, begin = 2, end = 5)
  %last = slice(x, axis = -1, begin = 0, end = 4)
  %g0 = slice_grad(%first, x, axis = 0, begin = 1)
  %g1 = slice_grad(%middle, x, axis = 1, begin = 2)
  %g2 = slice_grad(%last, x, axis = -1, begin = 0)
  %joined = concat(x, y, %middle, axis = 1)
  %ids2 = concat(ids, ids, axis = -1)
})"),
            0);
}

// What a Transformer layer needs: dropout (the CPU's mask, draw for draw, and its gradient),
// transposes, softmax and layer norm with their gradients, batched products (shared operands and
// transposes).
TEST(GpuOpKernels, DropoutTransposeSoftmaxLayerNormAndBatchedProducts) {
  EXPECT_GT(expectSameAsCpu(R"(model m {
  input x : f32[3, 4, 5]
  input dy : f32[3, 4, 5]
  input gamma : f32[5]
  input beta : f32[5]
  input w : f32[5, 6]
  input b3 : f32[3, 6, 5]
  %drop = dropout(x, rate = 0.3)
  %dropGrad = dropout_grad(dy, rate = 0.3, key = "drop")
  %t = transpose(x, perm = [2, 0, 1])
  %t2 = transpose(x, perm = [0, 2, 1])
  %s = softmax(x)
  %sg = softmax_grad(dy, %s)
  %n = layer_norm(x, gamma, beta)
  %ng = layer_norm_grad(dy, x, gamma)
  %gg = layer_norm_gamma_grad(dy, x)
  %shared = batch_matmul(x, w)
  %batched = batch_matmul(x, b3, transpose_b = true)
  %both = batch_matmul(%t2, b3, transpose_a = true, transpose_b = true)
  %sharedA = batch_matmul(w, b3)
})"),
            0);
}

// Batch normalization with synchronized statistics, as resnet18 has it: the moments, their mean
// over replicas, the normalization with its three gradients, the moments' gradient and the
// running averages' update; the plain batch_norm with its two gradients; and padding with a
// value and with zeros.
TEST(GpuOpKernels, BatchNormalizationAndPadding) {
  const char *model = R"(model m {
  input x : f32[B, 3, 3, 2]
  input dy : f32[B, 3, 3, 2]
  input scale : f32[2]
  input bias : f32[2]
  var rmean : f32[2] = zeros
  var vrunning : f32[2] = ones
  %moments = batch_norm_moments(x)
  %global = replica_mean(%moments)
  %y = batch_norm_apply(x, scale, bias, rmean, vrunning, %global, epsilon = 0.001)
  %dx = batch_norm_apply_grad(dy, x, scale, rmean, vrunning, %global, epsilon = 0.001)
  %dscale = batch_norm_apply_scale_grad(dy, x, rmean, vrunning, %global, epsilon = 0.001)
  %dmoments = batch_norm_apply_moments_grad(dy, x, scale, %global, epsilon = 0.001)
  %dxMoments = batch_norm_moments_grad(%dmoments, x)
  batch_norm_update(rmean, vrunning, %global, momentum = 0.2, values_per_example = 9)
  %plain = batch_norm(x, scale, bias, rmean, vrunning, epsilon = 0.001)
  %plainDx = batch_norm_grad(dy, x, scale, rmean, vrunning, epsilon = 0.001)
  %plainDscale = batch_norm_scale_grad(dy, x, rmean, vrunning, epsilon = 0.001)
  %padded = pad(x, pads = [0, 1, 2, 0, 0, 2, 1, 0], value = -3.5)
  %zeros = pad(x, pads = [0, 0, 1, 1, 0, 1, 0, 0])
})";
  EXPECT_GT(expectSameAsCpu(model), 0);
  // Evaluation: the running averages normalize, the moments get no gradient, nothing is updated.
  EXPECT_GT(expectSameAsCpu(model, 1e-5, 4, StepMode::Evaluation), 0);
}

// Casts between every pair of element types that models use, the three-operand selects (a
// scalar operand too), log-softmax and its gradient, average pooling (padding not counted), the
// global one, and what gradient clipping and the batch's share compute.
TEST(GpuOpKernels, CastsSelectsLogSoftmaxPoolsAndClipping) {
  EXPECT_GT(expectSameAsCpu(R"(model m {
  input x : f32[2, 5, 4, 3]
  input y : f32[2, 5, 4, 3]
  input dy : f32[2, 5, 4, 3]
  input ids : i32[2, 5, 4, 3]
  input big : i64[6]
  input dyPool : f32[2, 3, 2, 3]
  input rows : f32[B, 3]
  %hundred = constant(value = 100)
  %wide = mul(x, %hundred)
  %toInt = cast(%wide, dtype = i32)
  %toLong = cast(%wide, dtype = i64)
  %toDouble = cast(x, dtype = f64)
  %back = cast(%toDouble, dtype = f32)
  %fromInt = cast(ids, dtype = f32)
  %narrow = cast(big, dtype = i32)
  %toBool = cast(%toInt, dtype = bool)
  %picked = where(ids, x, y)
  %scalarPick = where(ids, x, %hundred)
  %maxShare = maximum_grad(dy, x, y)
  %tieShare = maximum_grad(dy, x, x)
  %tieMin = minimum_grad(dy, y, y)
  %minShare = minimum_grad(dy, x, %hundred)
  %logp = log_softmax(x)
  %dlogp = log_softmax_grad(dy, %logp)
  %avg = avg_pool2d(x, window = [2, 3], stride = [2, 2], padding = same)
  %davg = avg_pool2d_grad(dyPool, x, window = [2, 3], stride = [2, 2], padding = same)
  %gap = global_avg_pool(x)
  %norm = global_norm(x, y, dy)
  %finite = all_finite(x, y)
  %clip = clip_scale(%norm, clip_norm = 2.5)
  %noClip = clip_scale(%norm, clip_norm = 1000)
  %clipped = scale(x, %clip)
  %share = batch_share(rows)
})"),
            0);
}

// Learning-rate schedules (inside and after a warmup; each decay) and the sigmoid cross-entropy
// with its gradient.
TEST(GpuOpKernels, LearningRateSchedulesAndSigmoidCrossEntropy) {
  EXPECT_GT(expectSameAsCpu(R"(model m {
  input logits : f32[4, 6]
  input labels : f32[4, 6]
  input wide : f32[30, 40]
  input wideLabels : f32[30, 40]
  %early = constant(value = 2)
  %late = constant(value = 17)
  %warm = lr_schedule(%early, warmup_steps = 5, warmup_start = 0.1, decay = cosine, total = 20, final = 0.01)
  %cosine = lr_schedule(%late, warmup_steps = 5, warmup_start = 0.1, decay = cosine, total = 20, final = 0.01)
  %past = lr_schedule(%late, decay = cosine, total = 10)
  %steps = lr_schedule(%late, decay = step_decay, every = 4, gamma = 0.5)
  %exponential = lr_schedule(%late, warmup_steps = 2, decay = exponential, gamma = 0.9)
  %constant = lr_schedule(%late)
  %loss = sigmoid_cross_entropy(logits, labels)
  %one = constant(value = 1.5)
  %grad = sigmoid_cross_entropy_grad(%one, logits, labels)
  %wideLoss = sigmoid_cross_entropy(wide, wideLabels)
})"),
            0);
}

TEST(GpuOpKernels, AStepCountThatIsNotWholeIsTheCpusError) {
  SingleOp schedule = singleOpKernel(R"(model m {
  input step : f32[]
  %f = lr_schedule(step, decay = exponential, gamma = 0.9)
})");
  ASSERT_TRUE(schedule.kernel);
  RuntimeValue step, factor;
  step.dense = Tensor(ir::DType::F32, {});
  *step.dense.data<float>() = 2.5f;
  factor.dense = Tensor(ir::DType::F32, {});
  expectFlagged(*schedule.kernel, {&step}, {&factor},
                "error: a step count must be a whole number >= 0, got 2.5");
}

// sparse_from_dense over a table of 900 rows, 40 of whose rows a gradient touches (some twice):
// the positions of its rows counted in ranges of rows (three launches).
TEST(GpuOpKernels, TheRowsOfALargeDensifiedTable) {
  EXPECT_GT(expectSameAsCpu(R"(model m {
  var big : f32[900, 2] = zeros
  input ids : i64[40]
  %r = gather(big, ids)
  %g = gather_grad(%r, ids, num_rows = 900)
  %dense = sparse_to_dense(%g)
  %touched = touched_rows(%g)
  %back = sparse_from_dense(%dense, %touched)
})",
                            1e-5, 900),
            0);
}

// A captured step replays its kernels' launches as they were recorded: what changes from step to
// step (dropout's step number and first example, the global batch that batch_share and
// batch_norm_update read) comes from the device's step values, never from the arguments. Each
// op's launches, recorded at one step and replayed once the next step's values are written,
// give the CPU kernel's results at the next step.
TEST(GpuOpKernels, LaunchesRecordedAtOneStepReplayAtTheNext) {
  auto module = prism::testing::compiledModule(R"(model m {
  input x : f32[B, 6]
  input v : f32[B, 3]
  var rmean : f32[3] = zeros
  var vrunning : f32[3] = ones
  %drop = dropout(x, rate = 0.4)
  %share = batch_share(x)
  %moments = batch_norm_moments(v)
  batch_norm_update(rmean, vrunning, %moments, momentum = 0.2)
})",
                                               "case.prism", "infer-shapes");
  ASSERT_TRUE(module);
  auto cpuDevice = createDevice({ir::DeviceKind::Cpu, 0});
  auto gpuDevice = createDevice({ir::DeviceKind::Cpu, 0});
  ASSERT_TRUE(cpuDevice && gpuDevice);
  StepContext step;
  step.seed = 9;
  int64_t globalBatch = 0;
  // The recorded step and the replayed one: another number, first example and global batch.
  auto moveTo = [&](int64_t number, int64_t offset, int64_t global) {
    step.step = number;
    step.exampleOffset = offset;
    globalBatch = global;
    ASSERT_FALSE(bool((*gpuDevice)->writeStepValues({number, offset, global})));
  };
  std::mt19937 random(5);
  Values cpu, gpu;
  for (const auto &in : module->inputs()) {
    cpu[in->value.get()].dense = randomTensor(bound(in->type()), random, 4);
    gpu[in->value.get()].dense = copyOf(cpu[in->value.get()].dense);
  }
  for (const auto &var : module->variables()) {
    cpu[var->value.get()].dense = randomTensor(var->type(), random, 4);
    gpu[var->value.get()].dense = copyOf(cpu[var->value.get()].dense);
  }
  for (const auto &op : module->ops()) {
    SCOPED_TRACE(op->name().str());
    KernelSpec spec;
    spec.op = op.get();
    spec.attrs = ir::withDefaults(op->def(), op->attrs);
    spec.batch = 4;
    spec.step = &step;
    spec.globalBatch = &globalBatch;
    std::vector<const RuntimeValue *> cpuIn, gpuIn;
    std::vector<RuntimeValue *> cpuOut, gpuOut;
    for (const ir::Value *v : op->operands()) {
      spec.inputTypes.push_back(bound(v->type()));
      cpuIn.push_back(&cpu[v]);
      gpuIn.push_back(&gpu[v]);
    }
    for (unsigned r = 0; r < op->numResults(); ++r) {
      const ir::TensorType type = bound(op->result(r)->type());
      spec.outputTypes.push_back(type);
      std::vector<int64_t> shape(type.dims.begin(), type.dims.end());
      cpu[op->result(r)].dense = Tensor(type.dtype, shape);
      gpu[op->result(r)].dense = Tensor(type.dtype, shape);
      cpuOut.push_back(&cpu[op->result(r)]);
      gpuOut.push_back(&gpu[op->result(r)]);
    }
    // The GPU kernel's launches at step 3 (examples from 5, a global batch of 12), state it
    // writes in place restored after.
    spec.device = gpuDevice->get();
    auto backend = std::make_shared<HostBackend>();
    auto gpuKernel = cuda::makeGpuOpKernel(spec, backend);
    ASSERT_TRUE(bool(gpuKernel)) << llvm::toString(gpuKernel.takeError());
    std::vector<Tensor> before;
    for (const RuntimeValue *in : gpuIn)
      before.push_back(copyOf(in->dense));
    moveTo(3, 5, 12);
    backend->recording = true;
    ASSERT_FALSE(bool((*gpuKernel)->run(gpuIn, gpuOut)));
    backend->recording = false;
    ASSERT_FALSE(backend->recorded.empty());
    for (size_t i = 0; i < gpuIn.size(); ++i)
      std::memcpy(const_cast<void *>(gpuIn[i]->dense.raw()), before[i].raw(),
                  static_cast<size_t>(before[i].numBytes()));
    // Step 4 (examples from 9, a global batch of 20): replayed on the GPU, run on the CPU.
    moveTo(4, 9, 20);
    backend->replay();
    spec.device = cpuDevice->get();
    auto cpuKernel = findKernel(op->name(), ir::DeviceKind::Cpu)(spec);
    ASSERT_TRUE(bool(cpuKernel)) << llvm::toString(cpuKernel.takeError());
    ASSERT_FALSE(bool((*cpuKernel)->run(cpuIn, cpuOut)));
    for (unsigned r = 0; r < op->numResults(); ++r)
      EXPECT_LT(relativeError(cpu[op->result(r)].dense, gpu[op->result(r)].dense), 1e-6)
          << op->result(r)->ref();
  }
  for (const auto &var : module->variables())
    EXPECT_LT(relativeError(cpu[var->value.get()].dense, gpu[var->value.get()].dense), 1e-6)
        << var->name();
}

// combine_towers: three towers' dense values (of a batch of 4, so weighted 2/4, 1/4, 1/4) and
// two towers' sparse gradients (rows appended, each scaled by its tower's weight), exactly the
// CPU's sums. `x` only binds the step's batch (the reference interpreter's, on a device).
TEST(GpuOpKernels, TheTowersCombinedDenseAndSparse) {
  EXPECT_GT(expectSameAsCpu(R"(model m {
  input x : f32[B, 2]
  input a : f32[2, 3]
  input b : f32[2, 3]
  input c : f32[2, 3]
  input la : f32[]
  input lb : f32[]
  input r1 : f32[4, 3]
  input r2 : f32[3, 3]
  input ids : i64[4]
  input ids2 : i64[3]
  %mean = combine_towers(a, b, c)
  %loss = combine_towers(la, lb)
  %g1 = gather_grad(r1, ids, num_rows = 6)
  %g2 = gather_grad(r2, ids2, num_rows = 6)
  %rows = combine_towers(%g1, %g2)
})",
                            1e-12, 6),
            0);
}

// tower_slice: each tower's rows of a batch of 5 over 3 towers (2, 2 and 1 rows), of f32 and
// i32 values, exactly the CPU's.
TEST(GpuOpKernels, TowerSlicesOfEveryTower) {
  auto module = prism::testing::compiledModule(R"(model m {
  input x : f32[B, 3]
  input y : i32[B]
  %xs = tower_slice(x, tower = 0, towers = 3)
  %ys = tower_slice(y, tower = 0, towers = 3)
})",
                                               "case.prism", "infer-shapes");
  ASSERT_TRUE(module);
  auto device = createDevice({ir::DeviceKind::Cpu, 0});
  ASSERT_TRUE(bool(device));
  auto backend = std::make_shared<HostBackend>();
  std::mt19937 random(3);
  for (const auto &op : module->ops())
    for (int64_t tower = 0; tower < 3; ++tower) {
      SCOPED_TRACE(op->result()->ref() + " of tower " + std::to_string(tower));
      const int64_t rows = tower < 2 ? 2 : 1;
      KernelSpec spec;
      spec.op = op.get();
      spec.attrs = ir::withDefaults(op->def(), op->attrs);
      spec.attrs.set("tower", ir::Attr::integer(tower));
      spec.device = device->get();
      spec.batch = 5;
      ir::TensorType in = op->operand(0)->type(), out = in;
      in.dims[0] = 5;
      out.dims[0] = rows;
      spec.inputTypes = {in};
      spec.outputTypes = {out};
      RuntimeValue x, cpuOut, gpuOut;
      x.dense = randomTensor(in, random, 100);
      std::vector<int64_t> shape(out.dims.begin(), out.dims.end());
      cpuOut.dense = Tensor(out.dtype, shape);
      gpuOut.dense = Tensor(out.dtype, shape);
      auto cpuKernel = findKernel(op->name(), ir::DeviceKind::Cpu)(spec);
      auto gpuKernel = cuda::makeGpuOpKernel(spec, backend);
      ASSERT_TRUE(cpuKernel && gpuKernel);
      ASSERT_FALSE(bool((*cpuKernel)->run({&x}, {&cpuOut})));
      ASSERT_FALSE(bool((*gpuKernel)->run({&x}, {&gpuOut})));
      EXPECT_EQ(std::memcmp(cpuOut.dense.raw(), gpuOut.dense.raw(),
                            static_cast<size_t>(cpuOut.dense.numBytes())),
                0);
      const int64_t rowBytes = in.numElements() * ir::dtypeBytes(in.dtype) / 5;
      EXPECT_EQ(std::memcmp(gpuOut.dense.raw(),
                            static_cast<const char *>(x.dense.raw()) + 2 * tower * rowBytes,
                            static_cast<size_t>(rows * rowBytes)),
                0);
    }
}

// The sparse-value ops on the sparse gradients of two gathers (repeated and missing rows), and
// the dynamic loss scale's update after a finite and after a non-finite step.
TEST(GpuOpKernels, SparseValuesAndTheLossScale) {
  EXPECT_GT(expectSameAsCpu(R"(model m {
  var t : f32[6, 3] = zeros
  input ids : i64[4]
  input ids2 : i32[3]
  var scale : f32[] = ones
  var good : f32[] = zeros
  var skipped : f32[] = zeros
  var scale2 : f32[] = ones
  var good2 : f32[] = zeros
  var skipped2 : f32[] = zeros
  %r = gather(t, ids)
  %g1 = gather_grad(%r, ids, num_rows = 6)
  %r2 = gather(t, ids2)
  %g2 = gather_grad(%r2, ids2, num_rows = 6)
  %sum = sparse_add(%g1, %g2)
  %dense = sparse_to_dense(%sum)
  %touched = touched_rows(%sum)
  %back = sparse_from_dense(%dense, %touched)
  %finite = constant(value = 1)
  %overflow = constant(value = 0)
  update_loss_scale(scale, good, skipped, %finite, growth_interval = 1)
  update_loss_scale(scale2, good2, skipped2, %overflow)
})"),
            0);
}
