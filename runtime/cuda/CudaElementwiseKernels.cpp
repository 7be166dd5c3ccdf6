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
#include "runtime/cuda/CudaModules.h"
#include "runtime/cuda/CudaOpKernels.h"
#include "runtime/cuda/ElementwiseCodegen.h"
#include "runtime/exec/Device.h"
#include "runtime/exec/StagedCommunication.h"

namespace prism::runtime::cuda {
namespace {

using KernelOrError = llvm::Expected<std::unique_ptr<Kernel>>;

class GeneratedElementwiseKernel final : public Kernel {
public:
  GeneratedElementwiseKernel(cudaKernel_t kernel, int64_t elements, int device)
      : kernel_(kernel), elements_(elements), device_(device) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    std::vector<void *> pointers;
    pointers.push_back(outputs[0]->dense.raw());
    for (const RuntimeValue *input : inputs)
      pointers.push_back(const_cast<void *>(input->dense.raw()));
    long long n = elements_;
    std::vector<void *> arguments;
    for (void *&p : pointers)
      arguments.push_back(&p);
    arguments.push_back(&n);
    return launchKernel(kernel_, device_, elements_, arguments.data(),
                        "a generated elementwise kernel");
  }

private:
  cudaKernel_t kernel_;
  int64_t elements_;
  int device_;
};

// The source of the kernel computing `expr` over the spec's operands: each of the result's
// shape, a scalar, or broadcast to it (numpy's rules).
llvm::Expected<ElementwiseKernelSource> sourceFor(const KernelSpec &spec,
                                                  const ir::ElementwiseExpr &expr) {
  const ir::TensorType &result = spec.outputTypes[0];
  std::vector<ElementwiseOperand> views;
  for (const ir::TensorType &operand : spec.inputTypes) {
    auto view = operand.dtype == result.dtype
                    ? elementwiseOperand(operand, result)
                    : llvm::Expected<ElementwiseOperand>(
                          ir::makeError(ir::ErrorCode::Unsupported, "a different dtype"));
    if (!view)
      return ir::makeError(ir::ErrorCode::Unsupported,
                           "the GPU's '" + spec.op->name() + "' takes dense operands of " +
                               ir::dtypeName(result.dtype) + " that broadcast to " + result.str() +
                               ", not " + operand.str() + " (" + ir::messageOf(view.takeError()) +
                               ")");
    views.push_back(std::move(*view));
  }
  std::vector<int64_t> dims(result.dims.begin(), result.dims.end());
  return generateElementwiseKernel(expr, result.dtype, views, dims);
}

// The expression of fused_elementwise, or of a plain elementwise op: op($0) or op($0, $1)
// (bias_add is add, its bias broadcast along the last dimension).
llvm::Expected<ir::ElementwiseExpr> expressionOf(const KernelSpec &spec) {
  if (spec.op->name() == "fused_elementwise")
    return ir::parseElementwiseExpr(spec.attrs.getString("expr"));
  if (spec.op->name() == "bias_add")
    return ir::parseElementwiseExpr("add($0, $1)");
  return ir::parseElementwiseExpr(spec.op->name().str() +
                                  (spec.inputTypes.size() == 1 ? "($0)" : "($0, $1)"));
}

KernelOrError makeElementwise(const KernelSpec &spec) {
  auto expr = expressionOf(spec);
  if (!expr)
    return expr.takeError();
  auto source = sourceFor(spec, *expr);
  if (!source)
    return source.takeError();
  if (!spec.device || spec.device->id().kind != ir::DeviceKind::Cuda)
    return ir::makeError("a GPU kernel was asked for a device that is not a GPU");
  int device = spec.device->id().index;
  auto kernel = loadKernel(source->name, source->source, source->name, device);
  if (!kernel)
    return kernel.takeError();
  return std::make_unique<GeneratedElementwiseKernel>(*kernel, spec.outputTypes[0].numElements(),
                                                      device);
}

} // namespace

llvm::Expected<ElementwiseKernelSource> elementwiseKernelSource(const KernelSpec &spec) {
  auto expr = expressionOf(spec);
  if (!expr)
    return expr.takeError();
  return sourceFor(spec, *expr);
}

void registerElementwiseKernels(KernelRegistry &registry) {
  registry.add("fused_elementwise", makeElementwise);
  registry.add("bias_add", makeElementwise);
  for (llvm::StringRef op : ir::fusableElementwiseOps())
    registry.add(op, makeElementwise);
}

void registerCudaKernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerKernelFamily(ir::DeviceKind::Cuda, registerElementwiseKernels);
    registerKernelFamily(ir::DeviceKind::Cuda, registerOpKernels);
    registerKernelFamily(ir::DeviceKind::Cuda, registerStagedCommunicationKernels);
  });
}

} // namespace prism::runtime::cuda
