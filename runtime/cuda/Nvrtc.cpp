// NVRTC through dlopen (see Nvrtc.h). Only its declarations come from nvrtc.h.
#include "runtime/cuda/Nvrtc.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <mutex>
#include <vector>

#include "ir/Diagnostic.h"
#include "runtime/cuda/DynamicLibrary.h"

namespace prism::runtime::cuda {

struct Nvrtc::Functions {
  decltype(&::nvrtcVersion) version = nullptr;
  decltype(&::nvrtcGetErrorString) errorString = nullptr;
  decltype(&::nvrtcCreateProgram) createProgram = nullptr;
  decltype(&::nvrtcDestroyProgram) destroyProgram = nullptr;
  decltype(&::nvrtcCompileProgram) compileProgram = nullptr;
  decltype(&::nvrtcGetProgramLogSize) logSize = nullptr;
  decltype(&::nvrtcGetProgramLog) log = nullptr;
  decltype(&::nvrtcGetPTXSize) ptxSize = nullptr;
  decltype(&::nvrtcGetPTX) ptx = nullptr;
  decltype(&::nvrtcGetCUBINSize) cubinSize = nullptr;
  decltype(&::nvrtcGetCUBIN) cubin = nullptr;
};

namespace {

template <typename F> bool bind(void *library, const char *symbol, F &f) {
  f = reinterpret_cast<F>(dlsym(library, symbol));
  return f != nullptr;
}

llvm::Expected<Nvrtc::Functions> loadFunctions() {
  auto opened =
      openCudaLibrary("libnvrtc.so.13", "NVRTC, which compiles the GPU's generated kernels");
  if (!opened)
    return opened.takeError();
  void *library = *opened;
  Nvrtc::Functions f;
  const char *missing = nullptr;
  auto need = [&](const char *symbol, auto &function) {
    if (!missing && !bind(library, symbol, function))
      missing = symbol;
  };
  need("nvrtcVersion", f.version);
  need("nvrtcGetErrorString", f.errorString);
  need("nvrtcCreateProgram", f.createProgram);
  need("nvrtcDestroyProgram", f.destroyProgram);
  need("nvrtcCompileProgram", f.compileProgram);
  need("nvrtcGetProgramLogSize", f.logSize);
  need("nvrtcGetProgramLog", f.log);
  need("nvrtcGetPTXSize", f.ptxSize);
  need("nvrtcGetPTX", f.ptx);
  need("nvrtcGetCUBINSize", f.cubinSize);
  need("nvrtcGetCUBIN", f.cubin);
  if (missing)
    return ir::makeError(ir::ErrorCode::Unsupported,
                         llvm::Twine("the loaded NVRTC has no ") + missing);
  return f;
}

} // namespace

llvm::Expected<const Nvrtc *> Nvrtc::get() {
  static std::once_flag once;
  static Functions *functions = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    auto loaded = loadFunctions();
    if (loaded)
      functions = new Functions(*loaded);
    else
      failure = llvm::toString(loaded.takeError());
  });
  if (!functions)
    return ir::makeError(ir::ErrorCode::Unsupported, failure);
  static const Nvrtc nvrtc(functions);
  return &nvrtc;
}

std::string Nvrtc::version() const {
  int major = 0, minor = 0;
  functions_->version(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

llvm::Expected<std::string> Nvrtc::compile(llvm::StringRef source, llvm::StringRef name,
                                           llvm::StringRef architecture) const {
  const Functions &f = *functions_;
  std::string text = source.str(), file = name.str();
  nvrtcProgram program = nullptr;
  if (nvrtcResult r = f.createProgram(&program, text.c_str(), file.c_str(), 0, nullptr, nullptr);
      r != NVRTC_SUCCESS)
    return ir::makeError(llvm::Twine("nvrtcCreateProgram failed: ") + f.errorString(r));
  std::string arch = "--gpu-architecture=" + architecture.str();
  std::vector<const char *> options = {arch.c_str(), "--std=c++17", "-default-device"};
  nvrtcResult compiled =
      f.compileProgram(program, static_cast<int>(options.size()), options.data());
  size_t logSize = 0;
  f.logSize(program, &logSize);
  std::string log(logSize, '\0');
  if (logSize > 0)
    f.log(program, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n'))
    log.pop_back();

  std::string out;
  if (compiled == NVRTC_SUCCESS) {
    bool ptx = architecture.startswith("compute_");
    size_t size = 0;
    nvrtcResult r = ptx ? f.ptxSize(program, &size) : f.cubinSize(program, &size);
    if (r == NVRTC_SUCCESS) {
      out.resize(size);
      r = ptx ? f.ptx(program, out.data()) : f.cubin(program, out.data());
    }
    if (r != NVRTC_SUCCESS)
      compiled = r;
    if (ptx && !out.empty() && out.back() == '\0')
      out.pop_back();
  }
  f.destroyProgram(&program);
  if (compiled != NVRTC_SUCCESS)
    return ir::makeError("NVRTC could not compile " + name + " for " + architecture + ": " +
                         f.errorString(compiled) + (log.empty() ? "" : "\n" + log));
  return out;
}

} // namespace prism::runtime::cuda
