// CUDA C++ for elementwise work: one kernel per fused_elementwise expression (or per plain
// elementwise op, as the expression `op($0, $1)`), written from the expression's nodes over the
// device math of ElementwiseDevice.cuh, for NVRTC to compile at run time (Nvrtc.h). The source
// names its kernel after a hash of itself, so equal expressions share one compiled kernel.
#pragma once

#include <string>

#include "ir/Type.h"
#include "ir/ops/ElementwiseExpr.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::cuda {

struct ElementwiseKernelSource {
  std::string name;   // the extern "C" kernel's name: "prism_elementwise_<16 hex digits>"
  std::string source; // the device math, then the kernel
};

// The kernel computes out[i] = expr(in0[i], in1[i], ...) for i in [0, n), over a grid-stride loop:
//   extern "C" __global__ void NAME(T *out, const T *in0, ..., long long n)
// An operand marked in `repeated` is one element standing for every element (a scalar operand of
// a larger result). `dtype` is F32 or F64; anything else, or an op without device math, is an
// error naming it.
llvm::Expected<ElementwiseKernelSource> generateElementwiseKernel(const ir::ElementwiseExpr &expr,
                                                                  ir::DType dtype,
                                                                  llvm::ArrayRef<bool> repeated);

// The device math alone (ElementwiseDevice.cuh), as NVRTC sees it.
llvm::StringRef elementwiseDeviceSource();

} // namespace prism::runtime::cuda
