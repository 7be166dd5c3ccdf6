// The CPU kernel of fused_elementwise against the float64 reference interpreter: several
// expressions, f32 and f64, scalar operands, one and two threads, and a tensor large enough to
// be split between threads.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/OpTable.h"
#include "ir/ops/ElementwiseExpr.h"
#include "tests/cpu/ReferenceCheck.h"

using namespace prism;
using ir::DType;
using ir::kBatchDim;

namespace {

// Operand i of dims[i] (none of the expressions below is an op's name: each is a
// fused_elementwise).
using prism::testing::elementwiseModule;

struct ExprCase {
  const char *expr;
  std::vector<ir::Dims> dims;
  // log and sqrt need positive operands.
  bool positive = false;
};

const ExprCase kExprs[] = {
    {"mul(sigmoid($0), tanh($1))", {{kBatchDim, 7}, {kBatchDim, 7}}},
    {"add(mul(sigmoid($0), $1), mul(sigmoid($2), tanh($3)))",
     {{kBatchDim, 5}, {kBatchDim, 5}, {kBatchDim, 5}, {kBatchDim, 5}}},
    {"sub(exp(neg($0)), div($0, $1))", {{kBatchDim, 3, 4}, {}}},
    {"tanh_grad(sigmoid_grad(relu_grad($0, $1), sigmoid($1)), tanh($2))",
     {{kBatchDim, 9}, {kBatchDim, 9}, {kBatchDim, 9}}},
    {"add(log($0), sqrt(mul($0, $1)))", {{kBatchDim, 6}, {}}, true},
    {"relu(sub($0, $1))", {{}, {kBatchDim, 2}}},
    {"gelu_grad(erf($0), gelu($1))", {{kBatchDim, 11}, {kBatchDim, 11}}},
    {"erf_grad(gelu($0), add(erf($1), $2))", {{kBatchDim, 4}, {kBatchDim, 4}, {}}},
    {"maximum(relu($0), minimum($1, $2))", {{kBatchDim, 7}, {kBatchDim, 7}, {}}},
    {"mul($0, $1)", {{}, {}}},
    {"$0", {{kBatchDim, 3}}},
};

TEST(FusedElementwise, MatchesReference) {
  for (const ExprCase &c : kExprs)
    for (DType dtype : {DType::F32, DType::F64})
      for (int threads : {1, 2}) {
        SCOPED_TRACE(std::string(c.expr) + ", " + ir::dtypeName(dtype).str() + ", " +
                     std::to_string(threads) + " threads");
        auto module = elementwiseModule(c.expr, c.dims, dtype);
        ASSERT_TRUE(module);
        prism::testing::ReferenceCheckOptions options;
        options.threads = threads;
        if (c.positive)
          options.low = 0.1;
        options.tolerance = dtype == DType::F32 ? 1e-5 : 1e-12;
        prism::testing::expectMatchesReference(*module, {"y"}, options);
      }
}

// Above the parallel threshold, with a scalar and a tail that is not a whole block: the blocks
// of both threads and the scalar's repetition must line up.
TEST(FusedElementwise, LargeTensorOnTwoThreads) {
  for (DType dtype : {DType::F32, DType::F64}) {
    SCOPED_TRACE(ir::dtypeName(dtype).str());
    auto module = elementwiseModule("add(mul(tanh($0), $1), sigmoid(sub($2, $0)))",
                                    {{kBatchDim, 70001}, {}, {kBatchDim, 70001}}, dtype);
    ASSERT_TRUE(module);
    for (int threads : {1, 2}) {
      prism::testing::ReferenceCheckOptions options;
      options.threads = threads;
      options.batch = 2;
      options.tolerance = dtype == DType::F32 ? 1e-5 : 1e-12;
      prism::testing::expectMatchesReference(*module, {"y"}, options);
    }
  }
}

// The kernel evaluates every op an expression may call, each alone and with a scalar operand,
// through the same loops as the op's own kernel.
TEST(FusedElementwise, EveryFusableOpMatchesReference) {
  for (llvm::StringRef op : ir::fusableElementwiseOps()) {
    const ir::OpDef *def = ir::lookupOp(op);
    ASSERT_TRUE(def) << op.str();
    bool binary = def->operands.size() == 2;
    // log and sqrt need positive operands; the others take any but gelu_grad, whose factor
    // Phi(x) + x phi(x) crosses 0 at x = -0.75: there float32 cancels its two terms, and a scalar
    // x drawn within 0.01 of it scales every element by a factor off by more than the tolerance
    // (2 runs in 2,000; this tests the loops, not that cancellation).
    bool positive = op == "log" || op == "sqrt" || op == "gelu_grad";
    for (DType dtype : {DType::F32, DType::F64}) {
      std::string expr = op.str() + (binary ? "($0, $1)" : "($0)");
      SCOPED_TRACE(expr + ", " + ir::dtypeName(dtype).str());
      std::vector<ir::Dims> dims{{kBatchDim, 5, 3}};
      if (binary)
        dims.push_back({});
      auto module = elementwiseModule(expr.c_str(), dims, dtype);
      ASSERT_TRUE(module);
      prism::testing::ReferenceCheckOptions options;
      if (positive)
        options.low = 0.1;
      options.tolerance = dtype == DType::F32 ? 1e-5 : 1e-12;
      prism::testing::expectMatchesReference(*module, {"y"}, options);
    }
  }
}

} // namespace
