// cuDNN's convolutions through dlopen (see Cudnn.h). Only its declarations come from cudnn.h.
#include "runtime/cuda/Cudnn.h"

#include <cudnn.h>
#include <dlfcn.h>

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "ir/Diagnostic.h"
#include "runtime/cuda/CudaModules.h"
#include "runtime/cuda/DynamicLibrary.h"

namespace prism::runtime::cuda {
namespace {

// The legacy convolution API of cuDNN 9 (libcudnn.so.9 forwards to its sub-libraries).
struct Functions {
  decltype(&::cudnnCreate) create = nullptr;
  decltype(&::cudnnSetStream) setStream = nullptr;
  decltype(&::cudnnGetErrorString) errorString = nullptr;
  decltype(&::cudnnCreateTensorDescriptor) createTensor = nullptr;
  decltype(&::cudnnSetTensor4dDescriptor) setTensor = nullptr;
  decltype(&::cudnnDestroyTensorDescriptor) destroyTensor = nullptr;
  decltype(&::cudnnCreateFilterDescriptor) createFilter = nullptr;
  decltype(&::cudnnSetFilter4dDescriptor) setFilter = nullptr;
  decltype(&::cudnnDestroyFilterDescriptor) destroyFilter = nullptr;
  decltype(&::cudnnCreateConvolutionDescriptor) createConvolution = nullptr;
  decltype(&::cudnnSetConvolution2dDescriptor) setConvolution = nullptr;
  decltype(&::cudnnSetConvolutionMathType) setMathType = nullptr;
  decltype(&::cudnnDestroyConvolutionDescriptor) destroyConvolution = nullptr;
  decltype(&::cudnnGetConvolution2dForwardOutputDim) outputDim = nullptr;
  decltype(&::cudnnGetConvolutionForwardAlgorithm_v7) forwardAlgorithms = nullptr;
  decltype(&::cudnnGetConvolutionBackwardDataAlgorithm_v7) inputAlgorithms = nullptr;
  decltype(&::cudnnGetConvolutionBackwardFilterAlgorithm_v7) filterAlgorithms = nullptr;
  decltype(&::cudnnConvolutionForward) forward = nullptr;
  decltype(&::cudnnConvolutionBackwardData) backwardInput = nullptr;
  decltype(&::cudnnConvolutionBackwardFilter) backwardFilter = nullptr;
};

template <typename F> bool bind(void *library, F &f, const char *name) {
  f = reinterpret_cast<F>(dlsym(library, name));
  return f != nullptr;
}

llvm::Expected<Functions> loadFunctions() {
  auto opened = openCudaLibrary("libcudnn.so.9", "cuDNN, which the GPU's convolutions run on");
  if (!opened)
    return opened.takeError();
  void *l = *opened;
  Functions f;
  const bool all = bind(l, f.create, "cudnnCreate") && bind(l, f.setStream, "cudnnSetStream") &&
                   bind(l, f.errorString, "cudnnGetErrorString") &&
                   bind(l, f.createTensor, "cudnnCreateTensorDescriptor") &&
                   bind(l, f.setTensor, "cudnnSetTensor4dDescriptor") &&
                   bind(l, f.destroyTensor, "cudnnDestroyTensorDescriptor") &&
                   bind(l, f.createFilter, "cudnnCreateFilterDescriptor") &&
                   bind(l, f.setFilter, "cudnnSetFilter4dDescriptor") &&
                   bind(l, f.destroyFilter, "cudnnDestroyFilterDescriptor") &&
                   bind(l, f.createConvolution, "cudnnCreateConvolutionDescriptor") &&
                   bind(l, f.setConvolution, "cudnnSetConvolution2dDescriptor") &&
                   bind(l, f.setMathType, "cudnnSetConvolutionMathType") &&
                   bind(l, f.destroyConvolution, "cudnnDestroyConvolutionDescriptor") &&
                   bind(l, f.outputDim, "cudnnGetConvolution2dForwardOutputDim") &&
                   bind(l, f.forwardAlgorithms, "cudnnGetConvolutionForwardAlgorithm_v7") &&
                   bind(l, f.inputAlgorithms, "cudnnGetConvolutionBackwardDataAlgorithm_v7") &&
                   bind(l, f.filterAlgorithms, "cudnnGetConvolutionBackwardFilterAlgorithm_v7") &&
                   bind(l, f.forward, "cudnnConvolutionForward") &&
                   bind(l, f.backwardInput, "cudnnConvolutionBackwardData") &&
                   bind(l, f.backwardFilter, "cudnnConvolutionBackwardFilter");
  if (!all)
    return ir::makeError(ir::ErrorCode::Unsupported,
                         "the loaded cuDNN lacks a function of its convolution API (cuDNN 9's "
                         "cudnnConvolutionForward and the calls around it)");
  return f;
}

struct Dnn {
  std::mutex mutex;
  std::optional<Functions> functions;
  std::string failure;
  std::map<int, cudnnHandle_t> handles; // by device

  static Dnn &get() {
    static Dnn *dnn = new Dnn;
    return *dnn;
  }

  const Functions &f() const { return *functions; }

  // Success, or "<call> failed: cuDNN status N (<its description>)".
  llvm::Error check(cudnnStatus_t status, const llvm::Twine &call) const {
    if (status == CUDNN_STATUS_SUCCESS)
      return llvm::Error::success();
    return ir::makeError(call + " failed: cuDNN status " + llvm::Twine(static_cast<int>(status)) +
                         " (" + functions->errorString(status) + ")");
  }

  // cuDNN loaded once; the mutex held.
  llvm::Error load() {
    if (!functions && failure.empty()) {
      auto loaded = loadFunctions();
      if (loaded)
        functions = *loaded;
      else
        failure = llvm::toString(loaded.takeError());
    }
    if (!functions)
      return ir::makeError(ir::ErrorCode::Unsupported, failure);
    return llvm::Error::success();
  }

  // cuDNN loaded, and the handle of `device` (made current) on the device's stream.
  llvm::Expected<cudnnHandle_t> handle(int device) {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto e = load())
      return std::move(e);
    auto stream = deviceStream(device);
    if (!stream)
      return stream.takeError();
    auto it = handles.find(device);
    if (it == handles.end()) {
      cudnnHandle_t h = nullptr;
      if (auto e = check(functions->create(&h), "cudnnCreate on cuda:" + llvm::Twine(device)))
        return std::move(e);
      if (auto e = check(functions->setStream(h, *stream), "cudnnSetStream"))
        return std::move(e);
      it = handles.emplace(device, h).first;
    }
    return it->second;
  }
};

// One pass's admissible algorithm: deterministic, of the math asked for, within the workspace.
template <typename Perf>
bool admissible(const Perf &p, bool tf32, size_t workspaceLimit, std::initializer_list<int> algos) {
  // Without TF32 the descriptor asked for FMA math, and an algorithm offered in the default math
  // runs in it too; tensor-core math would round the operands.
  const bool math = tf32 || p.mathType == CUDNN_FMA_MATH || p.mathType == CUDNN_DEFAULT_MATH;
  return p.status == CUDNN_STATUS_SUCCESS && p.determinism == CUDNN_DETERMINISTIC && math &&
         p.memory <= workspaceLimit &&
         std::find(algos.begin(), algos.end(), static_cast<int>(p.algo)) != algos.end();
}

const char *forwardName(int algo) {
  switch (algo) {
  case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
    return "implicit GEMM";
  case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
    return "implicit precomputed GEMM";
  default:
    return "GEMM";
  }
}

} // namespace

llvm::Error loadCudnn() {
  Dnn &dnn = Dnn::get();
  std::lock_guard<std::mutex> lock(dnn.mutex);
  return dnn.load();
}

bool cudnnPadsAsWanted(const ConvolutionGeometry &g) {
  auto axis = [](int64_t in, int64_t window, int64_t stride, int64_t out, int64_t padBefore) {
    if (stride < 1 || out < 1)
      return false;
    // cuDNN's output size for the same padding on both sides must be the op's, and so its cells.
    const int64_t padded = in + 2 * padBefore - window;
    return padded >= 0 && padded / stride + 1 == out;
  };
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  return g.n <= kMax && g.h * g.w * g.c <= kMax && g.oh * g.ow * g.o <= kMax &&
         axis(g.h, g.kh, g.strideH, g.oh, g.padH) && axis(g.w, g.kw, g.strideW, g.ow, g.padW);
}

struct CudnnConvolution::Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t filter = nullptr;
  cudnnConvolutionDescriptor_t convolution = nullptr;
};

CudnnConvolution::CudnnConvolution() : descriptors_(std::make_unique<Descriptors>()) {}

CudnnConvolution::~CudnnConvolution() {
  Dnn &dnn = Dnn::get();
  if (!dnn.functions)
    return;
  if (descriptors_->x)
    dnn.f().destroyTensor(descriptors_->x);
  if (descriptors_->y)
    dnn.f().destroyTensor(descriptors_->y);
  if (descriptors_->filter)
    dnn.f().destroyFilter(descriptors_->filter);
  if (descriptors_->convolution)
    dnn.f().destroyConvolution(descriptors_->convolution);
}

llvm::Expected<bool> CudnnConvolution::describe(const ConvolutionGeometry &g, bool tf32) {
  Dnn &dnn = Dnn::get();
  const Functions &f = dnn.f();
  Descriptors &d = *descriptors_;
  auto n = [](int64_t v) { return static_cast<int>(v); };
  if (auto e = dnn.check(f.createTensor(&d.x), "cudnnCreateTensorDescriptor"))
    return std::move(e);
  if (auto e = dnn.check(f.createTensor(&d.y), "cudnnCreateTensorDescriptor"))
    return std::move(e);
  if (auto e = dnn.check(f.createFilter(&d.filter), "cudnnCreateFilterDescriptor"))
    return std::move(e);
  if (auto e = dnn.check(f.createConvolution(&d.convolution), "cudnnCreateConvolutionDescriptor"))
    return std::move(e);
  if (auto e = dnn.check(
          f.setTensor(d.x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n(g.n), n(g.c), n(g.h), n(g.w)),
          "cudnnSetTensor4dDescriptor of x"))
    return std::move(e);
  if (auto e = dnn.check(
          f.setTensor(d.y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n(g.n), n(g.o), n(g.oh), n(g.ow)),
          "cudnnSetTensor4dDescriptor of y"))
    return std::move(e);
  if (auto e = dnn.check(f.setFilter(d.filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, n(g.o), n(g.c),
                                     n(g.kh), n(g.kw)),
                         "cudnnSetFilter4dDescriptor"))
    return std::move(e);
  if (auto e =
          dnn.check(f.setConvolution(d.convolution, n(g.padH), n(g.padW), n(g.strideH),
                                     n(g.strideW), 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                    "cudnnSetConvolution2dDescriptor"))
    return std::move(e);
  // The heuristics then offer algorithms of this math (TF32 only where asked for).
  if (auto e = dnn.check(f.setMathType(d.convolution, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH),
                         "cudnnSetConvolutionMathType"))
    return std::move(e);
  int on = 0, oc = 0, oh = 0, ow = 0;
  if (auto e = dnn.check(f.outputDim(d.convolution, d.x, d.filter, &on, &oc, &oh, &ow),
                         "cudnnGetConvolution2dForwardOutputDim"))
    return std::move(e);
  return on == g.n && oc == g.o && oh == g.oh && ow == g.ow;
}

namespace {

// The first admissible of the algorithms `query(count, &returned, perf)` offers, in cuDNN's
// heuristics' order (by expected speed), or none.
template <typename Perf, typename Query>
llvm::Expected<std::optional<Perf>> firstAdmissible(Query &&query, const char *call, bool tf32,
                                                    size_t workspaceLimit,
                                                    std::initializer_list<int> algos) {
  constexpr int kAlgorithms = 16;
  Perf perf[kAlgorithms];
  int returned = 0;
  if (auto e = Dnn::get().check(query(kAlgorithms, &returned, perf), call))
    return std::move(e);
  for (int i = 0; i < returned && i < kAlgorithms; ++i)
    if (admissible(perf[i], tf32, workspaceLimit, algos))
      return std::optional<Perf>(perf[i]);
  return std::optional<Perf>();
}

} // namespace

llvm::Expected<bool> CudnnConvolution::choose(bool tf32, size_t workspaceLimit) {
  Dnn &dnn = Dnn::get();
  auto handle = dnn.handle(device_);
  if (!handle)
    return handle.takeError();
  const Functions &f = dnn.f();
  const Descriptors &d = *descriptors_;
  std::optional<cudnnMathType_t> math;
  // The first admissible algorithm of those `query` offers (of perf type `Perf`), taken.
  auto pick = [&](auto perfType, auto query, const char *call, std::initializer_list<int> algos,
                  auto name) -> llvm::Error {
    using Perf = decltype(perfType);
    auto perf = firstAdmissible<Perf>(query, call, tf32, workspaceLimit, algos);
    if (!perf)
      return perf.takeError();
    if (*perf) {
      algo_ = static_cast<int>((*perf)->algo);
      workspaceBytes_ = (*perf)->memory;
      algorithm_ = name(algo_);
      math = (*perf)->mathType;
    }
    return llvm::Error::success();
  };
  switch (pass_) {
  case ConvolutionPass::Forward:
    if (auto e = pick(
            cudnnConvolutionFwdAlgoPerf_t{},
            [&](int count, int *returned, cudnnConvolutionFwdAlgoPerf_t *out) {
              return f.forwardAlgorithms(*handle, d.x, d.filter, d.convolution, d.y, count,
                                         returned, out);
            },
            "cudnnGetConvolutionForwardAlgorithm_v7",
            {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
             CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_GEMM},
            forwardName))
      return std::move(e);
    break;
  case ConvolutionPass::BackwardInput:
    if (auto e = pick(
            cudnnConvolutionBwdDataAlgoPerf_t{},
            [&](int count, int *returned, cudnnConvolutionBwdDataAlgoPerf_t *out) {
              return f.inputAlgorithms(*handle, d.filter, d.y, d.convolution, d.x, count, returned,
                                       out);
            },
            "cudnnGetConvolutionBackwardDataAlgorithm_v7", {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1},
            [](int) { return "backward data algorithm 1"; }))
      return std::move(e);
    break;
  case ConvolutionPass::BackwardFilter:
    if (auto e = pick(
            cudnnConvolutionBwdFilterAlgoPerf_t{},
            [&](int count, int *returned, cudnnConvolutionBwdFilterAlgoPerf_t *out) {
              return f.filterAlgorithms(*handle, d.x, d.y, d.convolution, d.filter, count, returned,
                                        out);
            },
            "cudnnGetConvolutionBackwardFilterAlgorithm_v7", {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1},
            [](int) { return "backward filter algorithm 1"; }))
      return std::move(e);
    break;
  }
  if (!math)
    return false;
  // With TF32 the algorithm runs in the math it was offered in; without, in FMA math, as asked.
  if (auto e = dnn.check(f.setMathType(d.convolution, tf32 ? *math : CUDNN_FMA_MATH),
                         "cudnnSetConvolutionMathType"))
    return std::move(e);
  return true;
}

llvm::Expected<std::unique_ptr<CudnnConvolution>>
CudnnConvolution::plan(int device, bool tf32, ConvolutionPass pass, const ConvolutionGeometry &g,
                       size_t workspaceLimit) {
  if (!cudnnPadsAsWanted(g))
    return nullptr;
  auto handle = Dnn::get().handle(device); // cuDNN loaded, the device current
  if (!handle)
    return handle.takeError();
  std::unique_ptr<CudnnConvolution> c(new CudnnConvolution);
  c->device_ = device;
  c->pass_ = pass;
  auto described = c->describe(g, tf32);
  if (!described)
    return described.takeError();
  if (!*described)
    return nullptr;
  auto chosen = c->choose(tf32, workspaceLimit);
  if (!chosen)
    return chosen.takeError();
  if (!*chosen)
    return nullptr;
  return c;
}

llvm::Error CudnnConvolution::run(const float *x, const float *filter, const float *dy, float *out,
                                  void *workspace) const {
  Dnn &dnn = Dnn::get();
  auto handle = dnn.handle(device_);
  if (!handle)
    return handle.takeError();
  const Functions &f = dnn.f();
  const Descriptors &d = *descriptors_;
  const float one = 1.0f, zero = 0.0f;
  const std::string where = " on cuda:" + std::to_string(device_);
  switch (pass_) {
  case ConvolutionPass::Forward:
    return dnn.check(f.forward(*handle, &one, d.x, x, d.filter, filter, d.convolution,
                               static_cast<cudnnConvolutionFwdAlgo_t>(algo_), workspace,
                               workspaceBytes_, &zero, d.y, out),
                     "cudnnConvolutionForward" + where);
  case ConvolutionPass::BackwardInput:
    return dnn.check(f.backwardInput(*handle, &one, d.filter, filter, d.y, dy, d.convolution,
                                     static_cast<cudnnConvolutionBwdDataAlgo_t>(algo_), workspace,
                                     workspaceBytes_, &zero, d.x, out),
                     "cudnnConvolutionBackwardData" + where);
  case ConvolutionPass::BackwardFilter:
    return dnn.check(f.backwardFilter(*handle, &one, d.x, x, d.y, dy, d.convolution,
                                      static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo_),
                                      workspace, workspaceBytes_, &zero, d.filter, out),
                     "cudnnConvolutionBackwardFilter" + where);
  }
  return llvm::Error::success();
}

} // namespace prism::runtime::cuda
