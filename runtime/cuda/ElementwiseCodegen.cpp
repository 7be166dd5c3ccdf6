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

// The loop body: a statement per node, each node's value an operand's (read once per element,
// or once per thread where it is repeated) or a temporary of its own. Returns the root's value.
llvm::Expected<std::string> writeLoopBody(const ir::ElementwiseExpr &expr,
                                          llvm::ArrayRef<bool> repeated, llvm::raw_ostream &os) {
  const size_t operands = repeated.size();
  std::vector<std::string> value(expr.nodes.size());
  std::vector<bool> loaded(operands, false);
  for (size_t n = 0; n < expr.nodes.size(); ++n) {
    const ir::ExprNode &node = expr.nodes[n];
    if (node.isOperand()) {
      size_t k = static_cast<size_t>(node.operand);
      if (k >= operands)
        return ir::makeError("the expression reads operand $" + llvm::Twine(k) + " of " +
                             llvm::Twine(operands));
      value[n] = (repeated[k] ? "s" : "a") + std::to_string(k);
      if (!repeated[k] && !loaded[k])
        os << "    const T a" << k << " = in" << k << "[i];\n";
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

llvm::Expected<ElementwiseKernelSource> generateElementwiseKernel(const ir::ElementwiseExpr &expr,
                                                                  ir::DType dtype,
                                                                  llvm::ArrayRef<bool> repeated) {
  if (dtype != ir::DType::F32 && dtype != ir::DType::F64)
    return ir::makeError(ir::ErrorCode::Unsupported,
                         "the GPU's elementwise kernels take f32 and f64, not " +
                             ir::dtypeName(dtype));
  if (expr.nodes.empty())
    return ir::makeError("an elementwise expression without nodes");
  const char *type = dtype == ir::DType::F32 ? "float" : "double";
  const size_t operands = repeated.size();

  std::string body;
  llvm::raw_string_ostream os(body);
  os << "typedef " << type << " T;\n";
  os << "extern \"C\" __global__ void KERNEL_NAME(T *__restrict__ out";
  for (size_t i = 0; i < operands; ++i)
    os << ", const T *__restrict__ in" << i;
  os << ", long long n) {\n";
  for (size_t i = 0; i < operands; ++i)
    if (repeated[i])
      os << "  const T s" << i << " = in" << i << "[0];\n";
  os << "  const long long stride = (long long)blockDim.x * gridDim.x;\n";
  os << "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; "
        "i += stride) {\n";
  auto result = writeLoopBody(expr, repeated, os);
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
