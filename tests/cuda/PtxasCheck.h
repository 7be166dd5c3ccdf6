// What the GPU code-generation tests share: NVRTC (which must load wherever the GPU path was
// built), and a kernel's source through NVRTC to PTX for compute_90 and then through ptxas, the
// toolkit's assembler, for sm_90: neither needs a GPU.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/cuda/Nvrtc.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::testing {

// NVRTC, or a failure of the running test: it is found wherever the GPU path builds.
inline const runtime::cuda::Nvrtc *nvrtcOrFail() {
  auto nvrtc = runtime::cuda::Nvrtc::get();
  if (!nvrtc) {
    std::string reason = llvm::toString(nvrtc.takeError());
    ADD_FAILURE() << reason; // the GPU path was built here, so NVRTC must load
    return nullptr;
  }
  return *nvrtc;
}

// NVRTC to PTX for compute_90, then ptxas for sm_90: an empty string, or what failed. The PTX must
// have an entry for each of `entries` (default: `name`).
inline std::string compileThroughPtxas(const runtime::cuda::Nvrtc &nvrtc, llvm::StringRef source,
                                       llvm::StringRef name,
                                       llvm::ArrayRef<std::string> entries = {}) {
  auto ptx = nvrtc.compile(source, (name + ".cu").str(), "compute_90");
  if (!ptx)
    return llvm::toString(ptx.takeError());
  std::vector<std::string> wanted(entries.begin(), entries.end());
  if (wanted.empty())
    wanted.push_back(name.str());
  for (const std::string &entry : wanted)
    if (ptx->find(".entry " + entry) == std::string::npos)
      return "the PTX has no entry " + entry;
  llvm::SmallString<128> ptxPath, cubinPath, logPath;
  llvm::sys::fs::createTemporaryFile("prism-kernel", "ptx", ptxPath);
  llvm::sys::fs::createTemporaryFile("prism-kernel", "cubin", cubinPath);
  llvm::sys::fs::createTemporaryFile("prism-ptxas", "log", logPath);
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(ptxPath, ec);
    out << *ptx;
  }
  llvm::StringRef args[] = {PRISM_PTXAS, "-arch=sm_90", ptxPath, "-o", cubinPath};
  llvm::Optional<llvm::StringRef> redirects[] = {llvm::None, llvm::StringRef(logPath),
                                                 llvm::StringRef(logPath)};
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(PRISM_PTXAS, args, llvm::None, redirects, 120, 0, &error);
  uint64_t cubinSize = 0;
  llvm::sys::fs::file_size(cubinPath, cubinSize);
  std::string result;
  if (rc != 0) {
    auto log = llvm::MemoryBuffer::getFile(logPath);
    result = "ptxas exited with " + std::to_string(rc) + " " + error + ": " +
             (log ? (*log)->getBuffer().str() : std::string());
  } else if (cubinSize == 0) {
    result = "ptxas wrote no cubin";
  }
  for (const auto &path : {ptxPath, cubinPath, logPath})
    llvm::sys::fs::remove(path);
  return result;
}

} // namespace prism::testing
