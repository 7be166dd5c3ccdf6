// The GPU's generated elementwise kernels, tested without a GPU: the device math compiled for the
// host against the CPU kernels' float64 math, and every kernel the models under models/ need
// compiled by NVRTC to PTX and assembled by ptxas for sm_90 (and to a cubin by NVRTC itself).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>

#include "frontends/text/Parser.h"
#include "plan/Pipeline.h"
#include "runtime/cpu/kernels/ElementwiseMath.h"
#include "runtime/cuda/ElementwiseCodegen.h"
#include "runtime/cuda/Nvrtc.h"
#include "tests/cuda/PtxasCheck.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

// The device math, compiled for the host: the math functions come from <cmath>.
namespace host_device_math {
using std::erf;
using std::erfc;
using std::exp;
using std::log;
using std::sqrt;
using std::tanh;
#define PRISM_DEVICE inline
#include "runtime/cuda/ElementwiseDevice.cuh"
#undef PRISM_DEVICE
} // namespace host_device_math

using namespace prism;
using namespace prism::runtime::cuda;
using prism::testing::compileThroughPtxas;
using prism::testing::nvrtcOrFail;

namespace {

using Binary = std::function<float(float, float)>; // unary ops ignore the second operand

std::map<std::string, Binary> deviceMath() {
  using namespace host_device_math;
  auto unary = [](float (*f)(float)) { return Binary([f](float x, float) { return f(x); }); };
  return {{"add", prism_add<float>},
          {"sub", prism_sub<float>},
          {"mul", prism_mul<float>},
          {"div", prism_div<float>},
          {"maximum", prism_maximum<float>},
          {"minimum", prism_minimum<float>},
          {"neg", unary(prism_neg<float>)},
          {"exp", unary(prism_exp<float>)},
          {"log", unary(prism_log<float>)},
          {"sqrt", unary(prism_sqrt<float>)},
          {"relu", unary(prism_relu<float>)},
          {"sigmoid", unary(prism_sigmoid<float>)},
          {"tanh", unary(prism_tanh<float>)},
          {"erf", unary(prism_erf<float>)},
          {"gelu", unary(prism_gelu<float>)},
          {"relu_grad", prism_relu_grad<float>},
          {"sigmoid_grad", prism_sigmoid_grad<float>},
          {"tanh_grad", prism_tanh_grad<float>},
          {"erf_grad", prism_erf_grad<float>},
          {"gelu_grad", prism_gelu_grad<float>}};
}

// The CPU kernels' math of `op` in float64.
double cpuReference(llvm::StringRef op, double a, double b) {
  namespace ew = runtime::cpu::elementwise;
  return ew::visitOp(op, std::nan(""), [&](auto functor) {
    if constexpr (decltype(functor)::arity == 1)
      return functor(a);
    else
      return functor(a, b);
  });
}

llvm::Expected<ElementwiseKernelSource>
kernelOf(llvm::StringRef text, llvm::ArrayRef<bool> repeated, ir::DType dtype = ir::DType::F32) {
  auto expr = ir::parseElementwiseExpr(text);
  if (!expr)
    return expr.takeError();
  return generateElementwiseKernel(*expr, dtype, repeated);
}

} // namespace

TEST(ElementwiseDeviceMath, EveryFusableOpMatchesTheCpuMathInFloat64) {
  auto math = deviceMath();
  std::mt19937 random(7);
  std::uniform_real_distribution<float> wide(-6.0f, 6.0f), positive(0.01f, 50.0f);
  for (llvm::StringRef op : ir::fusableElementwiseOps()) {
    auto it = math.find(op.str());
    ASSERT_NE(it, math.end()) << "no device math for " << op.str();
    bool needsPositive = op == "log" || op == "sqrt" || op == "div";
    for (int i = 0; i < 2000; ++i) {
      float a = needsPositive && op != "div" ? positive(random) : wide(random);
      float b = op == "div" ? positive(random) : wide(random);
      if (i == 0 && !needsPositive) // ties go to the first operand; relu and its gradient at 0
        a = b = 0.0f;
      double want = cpuReference(op, a, b);
      double got = it->second(a, b);
      EXPECT_LE(std::fabs(got - want), 1e-5 * std::max(1.0, std::fabs(want)))
          << op.str() << "(" << a << ", " << b << "): " << got << " against " << want;
    }
  }
  // relu of NaN is 0, as on the CPU.
  EXPECT_EQ(math.at("relu")(std::nanf(""), 0.0f), 0.0f);
  // gelu's far left tail keeps its digits (erfc, not 1 + erf).
  double tail = cpuReference("gelu", -8.0, 0.0);
  EXPECT_NEAR(math.at("gelu")(-8.0f, 0.0f), tail, 1e-4 * std::fabs(tail));
}

TEST(ElementwiseCodegen, WritesOneStatementPerNodeAndReadsRepeatedOperandsOnce) {
  auto kernel = kernelOf("mul(sigmoid($0), add($1, $0))", {false, true});
  ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
  const std::string &s = kernel->source;
  EXPECT_NE(s.find("extern \"C\" __global__ void " + kernel->name +
                   "(T *__restrict__ out, const T *__restrict__ in0, const T *__restrict__ in1, "
                   "long long n)"),
            std::string::npos)
      << s;
  // The repeated operand is read once per thread, the other once per element.
  EXPECT_NE(s.find("const T s1 = in1[0];"), std::string::npos) << s;
  EXPECT_NE(s.find("const T a0 = in0[i];"), std::string::npos) << s;
  EXPECT_EQ(s.find("in0[i]"), s.rfind("in0[i]")) << s;
  EXPECT_NE(s.find("const T v1 = prism_sigmoid<T>(a0);"), std::string::npos) << s;
  EXPECT_NE(s.find("const T v4 = prism_add<T>(s1, a0);"), std::string::npos) << s;
  EXPECT_NE(s.find("const T v5 = prism_mul<T>(v1, v4);"), std::string::npos) << s;
  EXPECT_NE(s.find("out[i] = v5;"), std::string::npos) << s;
  EXPECT_NE(s.find("typedef float T;"), std::string::npos);

  // Equal expressions, equal kernels; another operand pattern or dtype is another kernel.
  auto again = kernelOf("mul(sigmoid($0), add($1, $0))", {false, true});
  auto dense = kernelOf("mul(sigmoid($0), add($1, $0))", {false, false});
  auto f64 = kernelOf("mul(sigmoid($0), add($1, $0))", {false, true}, ir::DType::F64);
  ASSERT_TRUE(again && dense && f64);
  EXPECT_EQ(again->name, kernel->name);
  EXPECT_NE(dense->name, kernel->name);
  EXPECT_NE(f64->name, kernel->name);
  EXPECT_NE(f64->source.find("typedef double T;"), std::string::npos);
}

TEST(ElementwiseCodegen, RefusesIntegersAndMissingOperands) {
  auto integers = kernelOf("add($0, $1)", {false, false}, ir::DType::I32);
  ASSERT_FALSE(bool(integers));
  EXPECT_NE(llvm::toString(integers.takeError()).find("take f32 and f64, not i32"),
            std::string::npos);
  auto missing = kernelOf("add($0, $2)", {false, false});
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("operand $2 of 2"), std::string::npos);
}

TEST(ElementwiseCodegen, NvrtcReportsItsLogOnBadSource) {
  const Nvrtc *nvrtc = nvrtcOrFail();
  if (!nvrtc)
    return;
  auto bad =
      nvrtc->compile("extern \"C\" __global__ void k() { undeclared(); }", "bad.cu", "compute_90");
  ASSERT_FALSE(bool(bad));
  std::string message = llvm::toString(bad.takeError());
  EXPECT_NE(message.find("NVRTC could not compile bad.cu for compute_90"), std::string::npos)
      << message;
  EXPECT_NE(message.find("undeclared"), std::string::npos) << message;
}

TEST(ElementwiseCodegen, EveryFusableOpCompilesToACubinForSm90) {
  const Nvrtc *nvrtc = nvrtcOrFail();
  if (!nvrtc)
    return;
  for (llvm::StringRef op : ir::fusableElementwiseOps()) {
    for (ir::DType dtype : {ir::DType::F32, ir::DType::F64}) {
      auto kernel = kernelOf((op + "($0, $1)").str(), {false, false}, dtype);
      if (!kernel) { // unary
        llvm::consumeError(kernel.takeError());
        kernel = kernelOf((op + "($0)").str(), {false}, dtype);
      }
      ASSERT_TRUE(bool(kernel)) << op.str() << ": " << llvm::toString(kernel.takeError());
      auto cubin = nvrtc->compile(kernel->source, kernel->name + ".cu", "sm_90");
      ASSERT_TRUE(bool(cubin)) << op.str() << ": " << llvm::toString(cubin.takeError());
      EXPECT_EQ(cubin->substr(0, 4), "\x7f"
                                     "ELF")
          << op.str();
    }
  }
}

// Every elementwise kernel a model's training step needs on the GPU: each fused_elementwise
// expression and each plain fusable op, with its operands' layouts (broadcasts too), through
// NVRTC and ptxas.
TEST(ElementwiseCodegen, EveryKernelOfEveryModelAssemblesForSm90) {
  const Nvrtc *nvrtc = nvrtcOrFail();
  if (!nvrtc)
    return;
  std::error_code ec;
  int models = 0;
  std::set<std::string> compiled;
  for (llvm::sys::fs::directory_iterator it(PRISM_SOURCE_DIR "/models", ec), end; it != end && !ec;
       it.increment(ec)) {
    if (llvm::sys::path::extension(it->path()) != ".prism")
      continue;
    auto module = frontends::parseModuleFile(it->path());
    ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
    llvm::Error stepped = plan::compileTrainingStep(**module);
    ASSERT_FALSE(bool(stepped)) << it->path() << ": " << llvm::toString(std::move(stepped));
    ++models;
    int kernels = 0;
    for (const auto &op : (*module)->ops()) {
      std::string text;
      if (op->name() == "fused_elementwise")
        text = op->attrs.getString("expr");
      else if (ir::isFusableElementwiseOp(op->name()))
        text = std::string(op->name()) + (op->operands().size() == 1 ? "($0)" : "($0, $1)");

      else
        continue;
      const ir::TensorType &result = op->result(0)->type();
      if (result.dtype != ir::DType::F32 || result.sparse)
        continue;
      // The types of a step of batch 32, as the executor binds them.
      auto bound = [](ir::TensorType type) {
        for (auto &d : type.dims)
          if (d == ir::kBatchDim)
            d = 32;
        return type;
      };
      std::vector<ElementwiseOperand> views;
      for (const auto *operand : op->operands()) {
        auto view = elementwiseOperand(bound(operand->type()), bound(result));
        ASSERT_TRUE(bool(view)) << it->path() << ": " << llvm::toString(view.takeError());
        views.push_back(*view);
      }
      auto expr = ir::parseElementwiseExpr(text);
      ASSERT_TRUE(bool(expr)) << llvm::toString(expr.takeError());
      const ir::TensorType resultType = bound(result);
      std::vector<int64_t> dims(resultType.dims.begin(), resultType.dims.end());
      auto kernel = generateElementwiseKernel(*expr, ir::DType::F32, views, dims);
      ASSERT_TRUE(bool(kernel)) << it->path() << ": " << text << ": "
                                << llvm::toString(kernel.takeError());
      ++kernels;
      if (!compiled.insert(kernel->name).second)
        continue; // the same kernel as another op's
      std::string failure = compileThroughPtxas(*nvrtc, kernel->source, kernel->name);
      EXPECT_EQ(failure, "") << it->path() << ": " << text;
    }
    EXPECT_GT(kernels, 0) << it->path() << " needs no elementwise kernel";
  }
  EXPECT_GE(models, 7);
  std::cout << compiled.size() << " distinct kernels for " << models << " models (NVRTC "
            << nvrtc->version() << ")\n";
}
