// The GPU's elementwise kernel family (runtime/cuda/CudaElementwiseKernels.h): which programs it
// lets the executor build, its errors, and, on a machine with a GPU, every generated kernel
// against the float64 reference interpreter on fresh random inputs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "CudaTestSupport.h"
#include "frontends/text/Parser.h"
#include "ir/ops/ElementwiseExpr.h"
#include "plan/Pipeline.h"
#include "runtime/cuda/CudaElementwiseKernels.h"
#include "runtime/cuda/CudaRuntimeDevice.h"
#include "tests/cpu/ReferenceCheck.h"

using namespace prism;
using ir::DType;
using ir::kBatchDim;
using ir::TensorType;

namespace {

void registerGpu() {
  runtime::cuda::registerCudaDevice();
  runtime::cuda::registerCudaKernels();
}

using prism::testing::elementwiseModule;

bool isUnary(llvm::StringRef op) {
  return !ir::parseElementwiseExpr((op + "($0, $1)").str()) ? true : false;
}

struct ExprCase {
  const char *expr;
  std::vector<ir::Dims> dims;
  bool positive = false; // log and sqrt need positive operands
};

const ExprCase kExprs[] = {
    {"mul(sigmoid($0), tanh($1))", {{kBatchDim, 7}, {kBatchDim, 7}}},
    {"sub(exp(neg($0)), div($0, $1))", {{kBatchDim, 3, 4}, {}}},
    {"tanh_grad(sigmoid_grad(relu_grad($0, $1), sigmoid($1)), tanh($2))",
     {{kBatchDim, 9}, {kBatchDim, 9}, {kBatchDim, 9}}},
    {"add(log($0), sqrt(mul($0, $1)))", {{kBatchDim, 6}, {}}, true},
    {"relu(sub($0, $1))", {{}, {kBatchDim, 2}}},
    {"gelu_grad(erf($0), gelu($1))", {{kBatchDim, 11}, {kBatchDim, 11}}},
    {"maximum(relu($0), minimum($1, $2))", {{kBatchDim, 7}, {kBatchDim, 7}, {}}},
    {"$0", {{kBatchDim, 3}}},
    // Plain ops broadcast (fused_elementwise takes one shape or scalars): a row along the last
    // dimension, a middle dimension of 1, a column.
    {"mul", {{kBatchDim, 4, 5}, {5}}},
    {"sub", {{kBatchDim, 3, 2}, {kBatchDim, 1, 2}}},
    {"maximum", {{kBatchDim, 1}, {kBatchDim, 6}}},
    // More elements than one launch's threads: the grid-stride loop covers the rest.
    {"add(mul(tanh($0), $1), sigmoid(sub($2, $0)))",
     {{kBatchDim, 700001}, {}, {kBatchDim, 700001}}},
};

} // namespace

TEST(CudaKernelFamilies, TrainingStepsPassTheKernelCheckOrNameTheirFirstOpWithout) {
  registerGpu();
  for (const ExprCase &c : kExprs) {
    auto module = elementwiseModule(c.expr, c.dims, DType::F32);
    ASSERT_TRUE(module);
    llvm::Error err = runtime::checkKernels(*module, ir::DeviceKind::Cuda);
    EXPECT_FALSE(bool(err)) << c.expr << ": " << llvm::toString(std::move(err));
  }
  for (llvm::StringRef op : ir::fusableElementwiseOps()) {
    std::vector<ir::Dims> dims(isUnary(op) ? 1 : 2, ir::Dims{kBatchDim, 4});
    auto module = elementwiseModule(op.str(), dims, DType::F32);
    ASSERT_TRUE(module);
    EXPECT_FALSE(bool(runtime::checkKernels(*module, ir::DeviceKind::Cuda))) << op.str();
  }
  // Which models' training steps have every GPU kernel, and where the others stop: before a
  // step, at the first op without one, at its model line.
  auto check = [](const std::string &name) -> std::string {
    auto model = frontends::parseModuleFile(PRISM_SOURCE_DIR "/models/" + name + ".prism");
    if (!model)
      return llvm::toString(model.takeError());
    if (llvm::Error e = plan::compileTrainingStep(**model))
      return llvm::toString(std::move(e));
    llvm::Error checked = runtime::checkKernels(**model, ir::DeviceKind::Cuda);
    return checked ? llvm::toString(std::move(checked)) : "";
  };
  for (const char *name :
       {"mlp", "cnn", "embedding_classifier", "lstm_lm", "resnet", "transformer", "resnet18"})
    EXPECT_EQ(check(name), "") << name;
  // An op without one (a parameter server's ps_gradient: servers run on the CPU) is refused at
  // its model line.
  auto pool = frontends::parseModule("model m {\n  var t : f32[5, 2] = zeros\n"
                                     "  %g = ps_gradient(t)\n}\n",
                                     "server.prism");
  ASSERT_TRUE(bool(pool)) << llvm::toString(pool.takeError());
  ASSERT_FALSE(bool(plan::runPipeline(**pool, "infer-shapes")));
  llvm::Error refused = runtime::checkKernels(**pool, ir::DeviceKind::Cuda);
  ASSERT_TRUE(bool(refused));
  EXPECT_EQ(ir::errorCode(refused), ir::ErrorCode::Unsupported);
  EXPECT_EQ(llvm::toString(std::move(refused)),
            "server.prism:3:3: error: no cuda kernel for 'ps_gradient' in model 'm'");
}

// Operands broadcast as numpy's (aligned at the last dimension); one that does not is refused
// when the kernel is built, before any GPU is touched.
TEST(CudaKernelFamilies, OperandsThatDoNotBroadcastAreAClearErrorWhenTheKernelIsBuilt) {
  registerGpu();
  auto module = elementwiseModule("add", {{2, 3}, {3}}, DType::F32);
  ASSERT_TRUE(module);
  const ir::Op &op = **module->ops().begin();
  runtime::KernelSpec spec;
  spec.op = &op;
  spec.inputTypes = {TensorType(DType::F32, {2, 3}), TensorType(DType::F32, {3})};
  spec.outputTypes = {TensorType(DType::F32, {2, 3})};
  auto broadcast = runtime::cuda::elementwiseKernelSource(spec);
  ASSERT_TRUE(bool(broadcast)) << llvm::toString(broadcast.takeError());
  EXPECT_NE(broadcast->source.find("b1 += (r1 % 3LL) * 1LL;"), std::string::npos)
      << broadcast->source;

  spec.inputTypes[1] = TensorType(DType::F32, {2});
  runtime::KernelFactory factory = runtime::findKernel("add", ir::DeviceKind::Cuda);
  ASSERT_NE(factory, nullptr);
  auto kernel = factory(spec);
  ASSERT_FALSE(bool(kernel));
  llvm::Error err = kernel.takeError();
  EXPECT_EQ(ir::errorCode(err), ir::ErrorCode::Unsupported);
  std::string text = llvm::toString(std::move(err));
  EXPECT_NE(text.find("the GPU's 'add' takes dense operands of f32 that broadcast to f32[2, 3], "
                      "not f32[2] (f32[2] does not broadcast to f32[2, 3])"),
            std::string::npos)
      << text;
}

// On a GPU: every expression above and every fusable op alone, f32 and f64, against the float64
// reference interpreter (relative error below 1e-4 for f32, 1e-10 for f64).
TEST(CudaKernelFamilies, EveryKernelMatchesTheReferenceOnTheGpu) {
  std::string reason = runtime::cuda::testing::noDeviceReason();
  if (!reason.empty())
    GTEST_SKIP() << "no CUDA device: " << reason;
  registerGpu();
  std::vector<ExprCase> cases(std::begin(kExprs), std::end(kExprs));
  for (llvm::StringRef op : ir::fusableElementwiseOps()) {
    bool positive = op == "log" || op == "sqrt";
    cases.push_back(
        {op.data(), std::vector<ir::Dims>(isUnary(op) ? 1 : 2, {kBatchDim, 33}), positive});
    // With a scalar operand, where the op takes one (a gradient op needs its forward value's
    // shape).
    if (!isUnary(op) && !op.endswith("_grad"))
      cases.push_back({op.data(), {{kBatchDim, 33}, {}}, positive});
  }
  for (const ExprCase &c : cases)
    for (DType dtype : {DType::F32, DType::F64}) {
      SCOPED_TRACE(std::string(c.expr) + ", " + ir::dtypeName(dtype).str());
      auto module = elementwiseModule(c.expr, c.dims, dtype);
      ASSERT_TRUE(module);
      prism::testing::ReferenceCheckOptions options;
      options.device = ir::DeviceId{ir::DeviceKind::Cuda, 0};
      options.low = c.positive ? 0.1 : -1.0;
      options.tolerance = dtype == DType::F32 ? 1e-4 : 1e-10;
      prism::testing::expectMatchesReference(*module, {"y"}, options);
    }
}
