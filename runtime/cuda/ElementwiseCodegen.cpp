// Writes the CUDA C++ of an elementwise expression (see ElementwiseCodegen.h).
#include "runtime/cuda/ElementwiseCodegen.h"

#include <vector>

#include "ir/Diagnostic.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::runtime::cuda {
namespace {

// ElementwiseDevice.cuh as a string literal, written by CMake at configure time.
constexpr char kDeviceSource[] =
#include "ElementwiseDevice.inc"
    ;

// FNV-1a, 64 bits: stable across runs and builds, so a kernel's name is too.
uint64_t hashOf(llvm::StringRef text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool hasDeviceMath(llvm::StringRef op) {
  return llvm::is_contained(ir::fusableElementwiseOps(), op);
}

// `const T aK = inK[...];` for element i of the result: i itself, or a broadcast operand's offset
// from i's coordinates (the result's dimensions are constants of the kernel).
void writeLoad(size_t k, const ElementwiseOperand &view, llvm::ArrayRef<int64_t> resultDims,
               llvm::raw_ostream &os) {
  if (view.layout != ElementwiseOperand::Layout::Broadcast) {
    os << "    const T a" << k << " = in" << k << "[i];\n";
    return;
  }
  os << "    long long r" << k << " = i, b" << k << " = 0;\n";
  for (size_t d = resultDims.size(); d-- > 0;) {
    if (view.strides[d] != 0)
      os << "    b" << k << " += (r" << k << " % " << resultDims[d] << "LL) * " << view.strides[d]
         << "LL;\n";
    if (d > 0)
      os << "    r" << k << " /= " << resultDims[d] << "LL;\n";
  }
  os << "    const T a" << k << " = in" << k << "[b" << k << "];\n";
}

// The loop body: a statement per node, each node's value an operand's (read once per element,
// or once per thread where it is repeated) or a temporary of its own. Returns the root's value.
llvm::Expected<std::string> writeLoopBody(const ir::ElementwiseExpr &expr,
                                          llvm::ArrayRef<ElementwiseOperand> views,
                                          llvm::ArrayRef<int64_t> resultDims,
                                          llvm::raw_ostream &os) {
  using Layout = ElementwiseOperand::Layout;
  const size_t operands = views.size();
  std::vector<std::string> value(expr.nodes.size());
  std::vector<bool> loaded(operands, false);
  for (size_t n = 0; n < expr.nodes.size(); ++n) {
    const ir::ExprNode &node = expr.nodes[n];
    if (node.isOperand()) {
      size_t k = static_cast<size_t>(node.operand);
      if (k >= operands)
        return ir::makeError("the expression reads operand $" + llvm::Twine(k) + " of " +
                             llvm::Twine(operands));
      const bool scalar = views[k].layout == Layout::Scalar;
      value[n] = (scalar ? "s" : "a") + std::to_string(k);
      if (!scalar && !loaded[k])
        writeLoad(k, views[k], resultDims, os);
      loaded[k] = true;
      continue;
    }
    if (!hasDeviceMath(node.op))
      return ir::makeError(ir::ErrorCode::Unsupported,
                           "no GPU math for elementwise op '" + node.op + "'");
    value[n] = "v" + std::to_string(n);
    os << "    const T " << value[n] << " = prism_" << node.op << "<T>(";
    for (size_t a = 0; a < node.args.size(); ++a)
      os << (a ? ", " : "") << value[node.args[a]];
    os << ");\n";
  }
  return value.back();
}

} // namespace

llvm::StringRef elementwiseDeviceSource() {
  return kDeviceSource;
}

llvm::Expected<ElementwiseOperand> elementwiseOperand(const ir::TensorType &operand,
                                                      const ir::TensorType &result) {
  ElementwiseOperand view;
  if (operand.sparse)
    return ir::makeError(ir::ErrorCode::Unsupported,
                         "a sparse operand " + operand.str() + " of an elementwise kernel");
  if (operand.dims == result.dims)
    return view;
  if (operand.numElements() == 1) {
    view.layout = ElementwiseOperand::Layout::Scalar;
    return view;
  }
  if (operand.rank() > result.rank())
    return ir::makeError(ir::ErrorCode::Unsupported,
                         operand.str() + " does not broadcast to " + result.str());
  view.layout = ElementwiseOperand::Layout::Broadcast;
  view.strides.assign(result.dims.size(), 0);
  const size_t lead = result.dims.size() - operand.dims.size();
  int64_t stride = 1;
  for (size_t d = operand.dims.size(); d-- > 0;) {
    int64_t dim = operand.dims[d], out = result.dims[lead + d];
    if (dim != out && dim != 1)
      return ir::makeError(ir::ErrorCode::Unsupported,
                           operand.str() + " does not broadcast to " + result.str());
    view.strides[lead + d] = dim == 1 ? 0 : stride;
    stride *= dim;
  }
  return view;
}

llvm::Expected<ElementwiseKernelSource> generateElementwiseKernel(const ir::ElementwiseExpr &expr,
                                                                  ir::DType dtype,
                                                                  llvm::ArrayRef<bool> repeated) {
  std::vector<ElementwiseOperand> views(repeated.size());
  for (size_t i = 0; i < repeated.size(); ++i)
    if (repeated[i])
      views[i].layout = ElementwiseOperand::Layout::Scalar;
  return generateElementwiseKernel(expr, dtype, views);
}

llvm::Expected<ElementwiseKernelSource>
generateElementwiseKernel(const ir::ElementwiseExpr &expr, ir::DType dtype,
                          llvm::ArrayRef<ElementwiseOperand> views,
                          llvm::ArrayRef<int64_t> resultDims) {
  if (dtype != ir::DType::F32 && dtype != ir::DType::F64)
    return ir::makeError(ir::ErrorCode::Unsupported,
                         "the GPU's elementwise kernels take f32 and f64, not " +
                             ir::dtypeName(dtype));
  if (expr.nodes.empty())
    return ir::makeError("an elementwise expression without nodes");
  const char *type = dtype == ir::DType::F32 ? "float" : "double";
  const size_t operands = views.size();
  for (const ElementwiseOperand &view : views)
    if (view.layout == ElementwiseOperand::Layout::Broadcast &&
        view.strides.size() != resultDims.size())
      return ir::makeError(ir::ErrorCode::Internal,
                           "a broadcast operand needs the result's dimensions");

  std::string body;
  llvm::raw_string_ostream os(body);
  os << "typedef " << type << " T;\n";
  os << "extern \"C\" __global__ void KERNEL_NAME(T *__restrict__ out";
  for (size_t i = 0; i < operands; ++i)
    os << ", const T *__restrict__ in" << i;
  os << ", long long n) {\n";
  for (size_t i = 0; i < operands; ++i)
    if (views[i].layout == ElementwiseOperand::Layout::Scalar)
      os << "  const T s" << i << " = in" << i << "[0];\n";
  os << "  const long long stride = (long long)blockDim.x * gridDim.x;\n";
  os << "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; "
        "i += stride) {\n";
  auto result = writeLoopBody(expr, views, resultDims, os);
  if (!result)
    return result.takeError();
  os << "    out[i] = " << *result << ";\n  }\n}\n";
  os.flush();

  ElementwiseKernelSource kernel;
  kernel.name = "prism_elementwise_" + llvm::utohexstr(hashOf(body), /*LowerCase=*/true, 16);
  size_t at = body.find("KERNEL_NAME");
  body.replace(at, llvm::StringRef("KERNEL_NAME").size(), kernel.name);
  kernel.source = std::string(kDeviceSource) + "\n" + body;
  return kernel;
}

} // namespace prism::runtime::cuda
