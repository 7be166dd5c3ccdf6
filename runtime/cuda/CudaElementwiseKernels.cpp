// Generated elementwise kernels on CUDA devices (see CudaElementwiseKernels.h). Kernels are loaded
// through the CUDA runtime's library API (cudaLibraryLoadData), so no driver library is linked:
// the prism tool starts on machines without a GPU.
#include "runtime/cuda/CudaElementwiseKernels.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ir/Diagnostic.h"
#include "ir/Module.h"
#include "runtime/cuda/ElementwiseCodegen.h"
#include "runtime/cuda/Nvrtc.h"
#include "runtime/exec/Device.h"

namespace prism::runtime::cuda {
namespace {

using KernelOrError = llvm::Expected<std::unique_ptr<Kernel>>;

constexpr int kThreadsPerBlock = 256;
constexpr int64_t kMaxBlocks = 4096; // the loop strides over the rest

llvm::Error check(cudaError_t status, const llvm::Twine &call) {
  if (status == cudaSuccess)
    return llvm::Error::success();
  return ir::makeError(call + " failed: " + cudaGetErrorName(status) + ": " +
                       cudaGetErrorString(status));
}

// The process's generated kernels: cubins by kernel name and architecture, and the kernels
// loaded from them by name and device. Entries live as long as the process.
class GeneratedKernels {
public:
  static GeneratedKernels &get() {
    static GeneratedKernels *kernels = new GeneratedKernels;
    return *kernels;
  }

  llvm::Expected<cudaKernel_t> load(const ElementwiseKernelSource &source, int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto key = std::make_pair(source.name, device);
    if (auto it = loaded_.find(key); it != loaded_.end())
      return it->second;
    auto arch = architectureOf(device);
    if (!arch)
      return arch.takeError();
    std::string &cubin = cubins_[source.name + "/" + *arch];
    if (cubin.empty()) {
      auto nvrtc = Nvrtc::get();
      if (!nvrtc)
        return nvrtc.takeError();
      auto compiled = (*nvrtc)->compile(source.source, source.name + ".cu", *arch);
      if (!compiled)
        return compiled.takeError();
      cubin = std::move(*compiled);
    }
    if (auto e = check(cudaSetDevice(device), "cudaSetDevice"))
      return std::move(e);
    cudaLibrary_t library = nullptr;
    if (auto e = check(
            cudaLibraryLoadData(&library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
            "cudaLibraryLoadData(" + source.name + ")"))
      return std::move(e);
    cudaKernel_t kernel = nullptr;
    if (auto e = check(cudaLibraryGetKernel(&kernel, library, source.name.c_str()),
                       "cudaLibraryGetKernel(" + source.name + ")"))
      return std::move(e);
    loaded_[key] = kernel;
    return kernel;
  }

private:
  // "sm_90" for a device of compute capability 9.0.
  static llvm::Expected<std::string> architectureOf(int device) {
    int major = 0, minor = 0;
    if (auto e = check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
                       "cudaDeviceGetAttribute(cuda:" + llvm::Twine(device) + ")"))
      return std::move(e);
    if (auto e = check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device),
                       "cudaDeviceGetAttribute(cuda:" + llvm::Twine(device) + ")"))
      return std::move(e);
    return "sm_" + std::to_string(major) + std::to_string(minor);
  }

  std::mutex mutex_;
  std::map<std::string, std::string> cubins_;
  std::map<std::pair<std::string, int>, cudaKernel_t> loaded_;
};

class GeneratedElementwiseKernel final : public Kernel {
public:
  GeneratedElementwiseKernel(cudaKernel_t kernel, int64_t elements, int device)
      : kernel_(kernel), elements_(elements), device_(device) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    if (elements_ == 0)
      return llvm::Error::success();
    std::vector<void *> pointers;
    pointers.push_back(outputs[0]->dense.raw());
    for (const RuntimeValue *input : inputs)
      pointers.push_back(const_cast<void *>(input->dense.raw()));
    long long n = elements_;
    std::vector<void *> arguments;
    for (void *&p : pointers)
      arguments.push_back(&p);
    arguments.push_back(&n);
    int64_t blocks =
        std::min<int64_t>(kMaxBlocks, (elements_ + kThreadsPerBlock - 1) / kThreadsPerBlock);
    cudaSetDevice(device_);
    return check(cudaLaunchKernel(reinterpret_cast<const void *>(kernel_),
                                  dim3(static_cast<unsigned>(blocks)), dim3(kThreadsPerBlock),
                                  arguments.data(), 0, nullptr),
                 "launching a generated elementwise kernel on cuda:" + llvm::Twine(device_));
  }

private:
  cudaKernel_t kernel_;
  int64_t elements_;
  int device_;
};

// A kernel computing `expr` over the spec's operands: each of the result's shape or a scalar.
KernelOrError makeKernel(const KernelSpec &spec, const ir::ElementwiseExpr &expr) {
  const ir::TensorType &result = spec.outputTypes[0];
  llvm::SmallVector<bool, 4> repeated;
  for (const ir::TensorType &operand : spec.inputTypes) {
    if (operand.sparse || operand.dtype != result.dtype ||
        !(operand.dims.empty() || operand.dims == result.dims))
      return ir::makeError(ir::ErrorCode::Unsupported, "the GPU's '" + spec.op->name() +
                                                           "' takes dense operands of its " +
                                                           "result's type " + result.str() +
                                                           " or scalars, not " + operand.str());
    repeated.push_back(operand.dims.empty() && result.numElements() != 1);
  }
  auto source = generateElementwiseKernel(expr, result.dtype, repeated);
  if (!source)
    return source.takeError();
  if (!spec.device || spec.device->id().kind != ir::DeviceKind::Cuda)
    return ir::makeError("a GPU kernel was asked for a device that is not a GPU");
  int device = spec.device->id().index;
  auto kernel = GeneratedKernels::get().load(*source, device);
  if (!kernel)
    return kernel.takeError();
  return std::make_unique<GeneratedElementwiseKernel>(*kernel, result.numElements(), device);
}

KernelOrError makeFusedElementwise(const KernelSpec &spec) {
  auto expr = ir::parseElementwiseExpr(spec.attrs.getString("expr"));
  if (!expr)
    return expr.takeError();
  return makeKernel(spec, *expr);
}

// A plain elementwise op as the expression op($0) or op($0, $1).
KernelOrError makePlainElementwise(const KernelSpec &spec) {
  std::string text = spec.op->name().str() + (spec.inputTypes.size() == 1 ? "($0)" : "($0, $1)");
  auto expr = ir::parseElementwiseExpr(text);
  if (!expr)
    return expr.takeError();
  return makeKernel(spec, *expr);
}

} // namespace

void registerElementwiseKernels(KernelRegistry &registry) {
  registry.add("fused_elementwise", makeFusedElementwise);
  for (llvm::StringRef op : ir::fusableElementwiseOps())
    registry.add(op, makePlainElementwise);
}

void registerCudaKernels() {
  static std::once_flag once;
  std::call_once(once,
                 [] { registerKernelFamily(ir::DeviceKind::Cuda, registerElementwiseKernels); });
}

} // namespace prism::runtime::cuda
