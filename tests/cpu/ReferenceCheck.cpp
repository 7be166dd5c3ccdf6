// Checks CPU kernels against the reference interpreter.
#include "tests/cpu/ReferenceCheck.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ir/Builder.h"
#include "ir/ops/ElementwiseExpr.h"
#include "runtime/exec/Executor.h"
#include "runtime/reference/ReferenceInterpreter.h"

namespace prism::testing {
namespace {

using runtime::Tensor;
namespace ref = runtime::reference;

double toDouble(const Tensor &t, int64_t i) {
  switch (t.dtype()) {
  case ir::DType::F32:
    return t.data<float>()[i];
  case ir::DType::F64:
    return t.data<double>()[i];
  case ir::DType::I32:
    return t.data<int32_t>()[i];
  case ir::DType::I64:
    return static_cast<double>(t.data<int64_t>()[i]);
  case ir::DType::Bool:
    return t.data<uint8_t>()[i];
  }
  return 0;
}

// The dense double values of a runtime value (sparse: scattered into zeros).
std::vector<double> denseValues(const runtime::RuntimeValue &v,
                                const std::vector<int64_t> &denseShape) {
  if (!v.sparse) {
    std::vector<double> out(v.dense.numElements());
    for (int64_t i = 0; i < v.dense.numElements(); ++i)
      out[i] = toDouble(v.dense, i);
    return out;
  }
  int64_t total = 1;
  for (int64_t d : denseShape)
    total *= d;
  std::vector<double> out(total, 0.0);
  int64_t rowSize = denseShape.empty() ? 1 : total / denseShape[0];
  for (int64_t r = 0; r < v.numRows(); ++r) {
    int64_t index = v.indices.data<int64_t>()[r];
    for (int64_t j = 0; j < rowSize; ++j)
      out[index * rowSize + j] += toDouble(v.rows(), r * rowSize + j);
  }
  return out;
}

double relativeError(const std::vector<double> &a, const std::vector<double> &b) {
  double diff = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return std::sqrt(diff) / std::max({std::sqrt(na), std::sqrt(nb), 1e-12});
}

} // namespace

std::unique_ptr<ir::Module> elementwiseModule(const std::string &expr,
                                              const std::vector<ir::Dims> &dims, ir::DType dtype) {
  ir::ModuleBuilder b("elementwise");
  std::vector<ir::Value *> operands;
  for (size_t i = 0; i < dims.size(); ++i)
    operands.push_back(b.input("x" + std::to_string(i), ir::TensorType(dtype, dims[i])));
  if (ir::isFusableElementwiseOp(expr))
    b.op(expr, operands, {}, "y");
  else
    b.op("fused_elementwise", operands, ir::attrs({{"expr", ir::Attr::string(expr)}}), "y");
  auto m = b.finish();
  EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
  return m ? std::move(*m) : nullptr;
}

void expectMatchesReference(const ir::Module &module, const std::vector<std::string> &outputs,
                            const ReferenceCheckOptions &options) {
  uint64_t seed = std::random_device{}();
  SCOPED_TRACE("random seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);

  ref::ReferenceInterpreter reference(module, options.context);
  ASSERT_FALSE(bool(reference.initializeVariables(seed))) << "reference initialization failed";
  auto store = std::make_shared<runtime::VariableStore>();
  if (auto err = store->initialize(module, seed))
    FAIL() << llvm::toString(std::move(err));
  runtime::ExecutorOptions execOptions;
  execOptions.threads = options.threads;
  execOptions.outputs = outputs;
  execOptions.mode = options.context.mode;
  execOptions.seed = options.context.seed;
  execOptions.device = options.device;
  auto exec = runtime::Executor::create(module, store, execOptions);
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  (*exec)->setStepNumber(options.context.step);
  (*exec)->setExampleOffset(options.context.exampleOffset);

  for (int step = 0; step < options.steps; ++step) {
    ref::Feeds refFeeds;
    runtime::Feeds feeds;
    for (const auto &in : module.inputs()) {
      std::vector<int64_t> shape;
      for (int64_t d : in->type().dims)
        shape.push_back(d == ir::kBatchDim ? options.batch : d);
      Tensor t(in->type().dtype, shape);
      std::vector<double> values(t.numElements());
      for (int64_t i = 0; i < t.numElements(); ++i) {
        if (ir::isFloat(in->type().dtype)) {
          double x = 0;
          while (x == 0)
            x = std::uniform_real_distribution<double>(options.low, options.high)(rng);
          values[i] = in->type().dtype == ir::DType::F32 ? static_cast<float>(x) : x;
        } else {
          auto bound = options.intBound.count(in->name()) ? options.intBound.at(in->name()) : 10;
          values[i] =
              static_cast<double>(std::uniform_int_distribution<int64_t>(0, bound - 1)(rng));
        }
        switch (t.dtype()) {
        case ir::DType::F32:
          t.data<float>()[i] = static_cast<float>(values[i]);
          break;
        case ir::DType::F64:
          t.data<double>()[i] = values[i];
          break;
        case ir::DType::I32:
          t.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
          break;
        case ir::DType::I64:
          t.data<int64_t>()[i] = static_cast<int64_t>(values[i]);
          break;
        case ir::DType::Bool:
          t.data<uint8_t>()[i] = values[i] != 0;
          break;
        }
      }
      refFeeds[in->name()] = ref::Tensor(in->type().dtype, shape, values);
      feeds[in->name()] = t;
    }
    auto refStep = reference.step(refFeeds);
    ASSERT_TRUE(bool(refStep)) << llvm::toString(refStep.takeError());
    if (auto err = (*exec)->step(feeds))
      FAIL() << llvm::toString(std::move(err));

    for (const std::string &name : outputs) {
      const ref::Tensor *expected = reference.value(name);
      const runtime::RuntimeValue *actual = (*exec)->output(name);
      ASSERT_NE(expected, nullptr) << name;
      ASSERT_NE(actual, nullptr) << name;
      runtime::RuntimeValue onHost = *actual;
      for (Tensor *t : {&onHost.dense, &onHost.indices}) {
        if (t->numElements() == 0 || t->onHost())
          continue;
        auto copied = (*exec)->device().toHost(*t);
        ASSERT_TRUE(bool(copied)) << name << ": " << llvm::toString(copied.takeError());
        *t = std::move(*copied);
      }
      actual = &onHost;
      std::vector<int64_t> shape(expected->shape().begin(), expected->shape().end());
      std::vector<double> want = expected->toDense().data();
      std::vector<double> got = denseValues(*actual, shape);
      ASSERT_EQ(want.size(), got.size()) << name;
      EXPECT_LT(relativeError(want, got), options.tolerance) << "output " << name;
    }
    if (outputs.empty()) {
      llvm::Error toHost = (*exec)->variablesToHost(); // from a GPU
      ASSERT_FALSE(bool(toHost)) << llvm::toString(std::move(toHost));
    }
    if (outputs.empty())
      for (const auto &var : module.variables()) {
        const ref::Tensor *expected = reference.variable(var->name());
        const Tensor *actual = store->find(var->name());
        ASSERT_NE(expected, nullptr);
        ASSERT_NE(actual, nullptr);
        runtime::RuntimeValue v;
        v.dense = *actual;
        std::vector<double> got = denseValues(v, {});
        EXPECT_LT(relativeError(expected->data(), got), options.tolerance)
            << "variable " << var->name() << " after step " << step + 1;
      }
  }
}

} // namespace prism::testing
