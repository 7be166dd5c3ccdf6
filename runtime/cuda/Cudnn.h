// cuDNN's convolutions, loaded when first needed (dlopen of libcudnn.so.9) as cuBLAS and NVRTC are:
// x and y NHWC, the filter [O, KH, KW, C] (cuDNN's NHWC filter layout), float32, the algorithm
// chosen once per shape among cuDNN's deterministic ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "llvm/Support/Error.h"

namespace prism::runtime::cuda {

// A convolution's geometry: x [n, h, w, c], a filter of kh x kw over c channels giving o, y [n, oh,
// ow, o], strides, and the zero padding before the first row and column.
struct ConvolutionGeometry {
  int64_t n = 0, h = 0, w = 0, c = 0, kh = 0, kw = 0, o = 0, oh = 0, ow = 0;
  int64_t strideH = 1, strideW = 1, padH = 0, padW = 0;
};

enum class ConvolutionPass {
  Forward,        // y from x and the filter
  BackwardInput,  // dx from dy and the filter
  BackwardFilter, // the filter's gradient from x and dy
};

// Loads cuDNN and finds the functions of its convolution API (needs no GPU), once; an error
// naming what could not be loaded or found.
llvm::Error loadCudnn();

// Whether cuDNN's convolution computes `g`: it pads as much after as before, so a `same`
// convolution whose padding is odd in total (TensorFlow pads the extra row or column after)
// is not one of its own.
bool cudnnPadsAsWanted(const ConvolutionGeometry &g);

// One pass of one convolution as a library computes it: x and y NHWC, the filter [O, KH, KW, C].
// Forward writes y (`out`) from x and the filter, backward input dx from dy and the filter,
// backward filter the filter's gradient from x and dy; `workspace` holds workspaceBytes().
class LibraryConvolution {
public:
  virtual ~LibraryConvolution() = default;
  // What computes it, for the run's report: "cuDNN's implicit precomputed GEMM".
  virtual std::string name() const = 0;
  virtual size_t workspaceBytes() const = 0;
  virtual llvm::Error run(const float *x, const float *filter, const float *dy, float *out,
                          void *workspace) const = 0;
};

// One pass of one convolution through cuDNN on one device, its algorithm and workspace chosen.
class CudnnConvolution final : public LibraryConvolution {
public:
  // The pass of `g` on `device` (float32 math, or TF32 on the tensor cores with `tf32`), with the
  // first deterministic algorithm by cuDNN's heuristics that takes at most `workspaceLimit`
  // bytes of workspace: forward by implicit GEMM (precomputed or not) or explicit GEMM, the
  // backward passes by their deterministic algorithm 1 (no atomics: the same bits every run, as
  // Prism's own kernels). Null where cuDNN offers none of those for the shape (the caller has a
  // kernel of its own); an error where cuDNN cannot be loaded or refuses the descriptors.
  static llvm::Expected<std::unique_ptr<CudnnConvolution>> plan(int device, bool tf32,
                                                                ConvolutionPass pass,
                                                                const ConvolutionGeometry &g,
                                                                size_t workspaceLimit);
  ~CudnnConvolution() override;
  CudnnConvolution(const CudnnConvolution &) = delete;
  CudnnConvolution &operator=(const CudnnConvolution &) = delete;

  std::string name() const override { return "cuDNN's " + algorithm_; }
  size_t workspaceBytes() const override { return workspaceBytes_; }

  // On the device's stream.
  llvm::Error run(const float *x, const float *filter, const float *dy, float *out,
                  void *workspace) const override;

private:
  struct Descriptors;
  CudnnConvolution();
  // The descriptors of x, y, the filter and the convolution; false where cuDNN's output size is
  // not g's.
  llvm::Expected<bool> describe(const ConvolutionGeometry &g, bool tf32);
  // The pass's algorithm; false where none is admissible.
  llvm::Expected<bool> choose(bool tf32, size_t workspaceLimit);
  int device_ = 0;
  ConvolutionPass pass_ = ConvolutionPass::Forward;
  int algo_ = 0;
  size_t workspaceBytes_ = 0;
  std::string algorithm_;
  std::unique_ptr<Descriptors> descriptors_;
};

} // namespace prism::runtime::cuda
