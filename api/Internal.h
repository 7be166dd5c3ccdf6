// What the library's sources (and the `prism` command, which prints plan summaries) share
// behind the public headers: the Impl structs, access to the internal objects, and the
// conversion of llvm::Error into Status. Not installed.
#pragma once

#include <memory>
#include <string>

#include "ir/Module.h"
#include "plan/plan.pb.h"
#include "prism/Prism.h"
#include "runtime/Tensor.h"
#include "runtime/job/JobOptions.h"
#include "llvm/Support/Error.h"

namespace prism::api {

// Success becomes an ok Status; an error its code and its message as `prism` prints it.
Status toStatus(llvm::Error err);
template <typename T> Result<T> toResult(llvm::Expected<T> value) {
  if (!value)
    return toStatus(value.takeError());
  return std::move(*value);
}

// The runtime's options of a job: its defaults, with the fields the caller set.
runtime::job::JobOptions toJobOptions(const RunOptions &options);

// The data set the commands train on when neither --data nor the model names one.
constexpr const char *kDefaultData = "fashion-mnist";

// The data set without an explicit one: `given` when not empty, else the one the model names
// (`data "..."`, whose errors are placed at that statement), else fashion-mnist.
llvm::Expected<std::string> dataFor(llvm::StringRef given, const ir::Module &model);
// The same for a plan: the `data` its worker program keeps.
llvm::Expected<std::string> dataFor(llvm::StringRef given, const plan::Plan &plan);

struct Tensor::Impl {
  runtime::Tensor tensor;
};

struct TensorAccess {
  static const runtime::Tensor &tensor(const Tensor &t) { return t.impl_->tensor; }
  // Shares `tensor`'s elements; `tensor` must be on the host.
  static Tensor make(runtime::Tensor tensor);
  static ir::DType dtype(DType dtype);
  static DType dtype(ir::DType dtype);
};

struct Model::Impl {
  std::unique_ptr<ir::Module> module;
  bool trainingStep = false;
};

struct ModelAccess {
  static const ir::Module &module(const Model &m) { return *m.impl_->module; }
  static Model make(std::unique_ptr<ir::Module> module, bool trainingStep);
};

struct Plan::Impl {
  plan::Plan plan;
  std::string path;
};

struct PlanAccess {
  static const plan::Plan &plan(const Plan &p) { return p.impl_->plan; }
  static Plan make(plan::Plan plan, std::string path);
};

} // namespace prism::api
