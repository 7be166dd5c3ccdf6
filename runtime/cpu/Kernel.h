// The CPU kernel families (oneDNN and vectorized OpenMP loops). Each adds its kernels to the
// CPU registry (runtime/exec/Kernel.h), once, from runtime/exec/KernelRegistry.cpp.
#pragma once

#include "runtime/exec/Kernel.h"

namespace prism::runtime::cpu {

void registerElementwiseKernels(KernelRegistry &registry);
void registerDenseKernels(KernelRegistry &registry);     // matmul, conv, pools (oneDNN)
void registerShapeKernels(KernelRegistry &registry);     // reshape, transpose, concat, slice, sums
void registerLossKernels(KernelRegistry &registry);      // softmax, log_softmax, cross-entropy
void registerSparseKernels(KernelRegistry &registry);    // gather, gather_grad, sparse_*
void registerOptimizerKernels(KernelRegistry &registry); // apply_*, assign, clipping
void registerCommunicationKernels(KernelRegistry &registry); // all_reduce, ps_*, towers
void registerTrainingModeKernels(KernelRegistry &registry);  // dropout
void registerFusedKernels(
    KernelRegistry &registry); // fused_matmul, fused_conv2d, fused_elementwise

} // namespace prism::runtime::cpu
