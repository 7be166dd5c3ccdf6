// Run-time compiled modules on CUDA devices (see CudaModules.h).
#include "runtime/cuda/CudaModules.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "ir/Diagnostic.h"
#include "runtime/cuda/Nvrtc.h"

namespace prism::runtime::cuda {
namespace {

constexpr int kThreadsPerBlock = 256;
constexpr int64_t kMaxBlocks = 4096;

// "sm_90" for a device of compute capability 9.0.
llvm::Expected<std::string> architectureOf(int device) {
  int major = 0, minor = 0;
  const std::string call = "cudaDeviceGetAttribute(cuda:" + std::to_string(device) + ")";
  if (auto e = checkCuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
                         call))
    return std::move(e);
  if (auto e = checkCuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device),
                         call))
    return std::move(e);
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

// Cubins by module and architecture, libraries by module and device, kernels by module, device
// and name; they live as long as the process.
struct Modules {
  std::mutex mutex;
  std::map<std::string, std::string> cubins;
  std::map<std::pair<std::string, int>, cudaLibrary_t> libraries;
  std::map<std::string, cudaKernel_t> kernels;

  static Modules &get() {
    static Modules *modules = new Modules;
    return *modules;
  }

  llvm::Expected<cudaLibrary_t> library(llvm::StringRef module, llvm::StringRef source,
                                        int device) {
    auto key = std::make_pair(module.str(), device);
    if (auto it = libraries.find(key); it != libraries.end())
      return it->second;
    auto arch = architectureOf(device);
    if (!arch)
      return arch.takeError();
    std::string &cubin = cubins[module.str() + "/" + *arch];
    if (cubin.empty()) {
      auto nvrtc = Nvrtc::get();
      if (!nvrtc)
        return nvrtc.takeError();
      auto compiled = (*nvrtc)->compile(source, module.str() + ".cu", *arch);
      if (!compiled)
        return compiled.takeError();
      cubin = std::move(*compiled);
    }
    if (auto e = checkCuda(cudaSetDevice(device), "cudaSetDevice"))
      return std::move(e);
    cudaLibrary_t library = nullptr;
    if (auto e = checkCuda(
            cudaLibraryLoadData(&library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
            "cudaLibraryLoadData(" + module + ")"))
      return std::move(e);
    libraries[key] = library;
    return library;
  }
};

} // namespace

llvm::Error checkCuda(cudaError_t status, const llvm::Twine &call) {
  if (status == cudaSuccess)
    return llvm::Error::success();
  return ir::makeError(call + " failed: " + cudaGetErrorName(status) + ": " +
                       cudaGetErrorString(status));
}

llvm::Expected<cudaKernel_t> loadKernel(llvm::StringRef module, llvm::StringRef source,
                                        llvm::StringRef kernel, int device) {
  Modules &modules = Modules::get();
  std::lock_guard<std::mutex> lock(modules.mutex);
  std::string key = module.str() + "/" + std::to_string(device) + "/" + kernel.str();
  if (auto it = modules.kernels.find(key); it != modules.kernels.end())
    return it->second;
  auto library = modules.library(module, source, device);
  if (!library)
    return library.takeError();
  cudaKernel_t handle = nullptr;
  if (auto e = checkCuda(cudaLibraryGetKernel(&handle, *library, kernel.str().c_str()),
                         "cudaLibraryGetKernel(" + kernel + ")"))
    return std::move(e);
  modules.kernels[key] = handle;
  return handle;
}

llvm::Error launchKernel(cudaKernel_t kernel, int device, int64_t threads, void **arguments,
                         llvm::StringRef what) {
  if (threads <= 0)
    return llvm::Error::success();
  int64_t blocks =
      std::min<int64_t>(kMaxBlocks, (threads + kThreadsPerBlock - 1) / kThreadsPerBlock);
  auto stream = deviceStream(device);
  if (!stream)
    return stream.takeError();
  return checkCuda(cudaLaunchKernel(reinterpret_cast<const void *>(kernel),
                                    dim3(static_cast<unsigned>(blocks)), dim3(kThreadsPerBlock),
                                    arguments, 0, *stream),
                   "launching " + what + " on cuda:" + llvm::Twine(device));
}

llvm::Expected<cudaStream_t> deviceStream(int device) {
  static std::mutex mutex;
  static std::map<int, cudaStream_t> *streams = new std::map<int, cudaStream_t>;
  // The calling thread's current device becomes `device`, for what the caller does next.
  if (auto e = checkCuda(cudaSetDevice(device), "cudaSetDevice"))
    return std::move(e);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = streams->find(device); it != streams->end())
    return it->second;
  cudaStream_t stream = nullptr;
  if (auto e =
          checkCuda(cudaStreamCreate(&stream), "cudaStreamCreate on cuda:" + llvm::Twine(device)))
    return std::move(e);
  (*streams)[device] = stream;
  return stream;
}

} // namespace prism::runtime::cuda
