// CUDA C++ for elementwise work: one kernel per fused_elementwise expression (or per plain
// elementwise op, as the expression `op($0, $1)`), written from the expression's nodes over the
// device math of ElementwiseDevice.cuh, for NVRTC to compile at run time (Nvrtc.h). The source
// names its kernel after a hash of itself, so equal expressions share one compiled kernel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/Type.h"
#include "ir/ops/ElementwiseExpr.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::cuda {

struct ElementwiseKernelSource {
  std::string name;   // the extern "C" kernel's name: "prism_elementwise_<16 hex digits>"
  std::string source; // the device math, then the kernel
};

// How an operand's elements line up with the result's.
struct ElementwiseOperand {
  enum class Layout {
    Same,      // the result's shape: element i
    Scalar,    // one element for every element of the result (read once per thread)
    Broadcast, // numpy broadcasting, aligned at the last dimension: `strides`
  };
  Layout layout = Layout::Same;
  std::vector<int64_t> strides; // Broadcast: along each result dimension, 0 where it repeats
};

// The layout of an operand of type `operand` in an elementwise op giving `result`; an error
// when they do not broadcast (or the operand is sparse).
llvm::Expected<ElementwiseOperand> elementwiseOperand(const ir::TensorType &operand,
                                                      const ir::TensorType &result);

// The kernel computes out[i] = expr(in0[...], in1[...], ...) for i in [0, n), over a grid-stride
// loop:
//   extern "C" __global__ void NAME(T *out, const T *in0, ..., long long n)
// `resultDims` are the result's dimensions (broadcast operands index by them). `dtype` is F32 or
// F64; anything else, or an op without device math, is an error naming it.
llvm::Expected<ElementwiseKernelSource>
generateElementwiseKernel(const ir::ElementwiseExpr &expr, ir::DType dtype,
                          llvm::ArrayRef<ElementwiseOperand> operands,
                          llvm::ArrayRef<int64_t> resultDims = {});

// The same with each operand of the result's shape, or a scalar where `repeated` says so.
llvm::Expected<ElementwiseKernelSource> generateElementwiseKernel(const ir::ElementwiseExpr &expr,
                                                                  ir::DType dtype,
                                                                  llvm::ArrayRef<bool> repeated);

// The device math alone (ElementwiseDevice.cuh), as NVRTC sees it.
llvm::StringRef elementwiseDeviceSource();

} // namespace prism::runtime::cuda
