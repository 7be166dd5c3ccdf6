// A session: one model's training step on one device, driven step by step by the caller.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "api/Internal.h"
#include "ir/Diagnostic.h"
#include "plan/PlanVerifier.h"
#include "runtime/exec/Executor.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Trainer.h"

namespace prism::api {

struct Session::Impl {
  Model model; // the training step; its module outlives the executors
  SessionOptions options;
  // The links a plan's worker program uses (null for a model's step); outlives the executors.
  std::unique_ptr<runtime::Communication> communication;
  std::shared_ptr<runtime::VariableStore> store;
  std::unique_ptr<runtime::Executor> trainer;
  // Evaluation executors by the values they compute (built on first use).
  std::map<std::vector<std::string>, std::unique_ptr<runtime::Executor>> evaluators;
  runtime::Feeds feeds;
  double loss = std::numeric_limits<double>::quiet_NaN();
  int64_t globalStep = 0;

  explicit Impl(Model m) : model(std::move(m)) {}
  const ir::Module &module() const { return ModelAccess::module(model); }
  runtime::ExecutorOptions executorOptions() const;
  llvm::Error start(uint64_t seed);
  llvm::Error checkFeed(const std::string &name, const runtime::Tensor &value) const;
  llvm::Error checkAllFed() const;
  // The fed batch as one step, or as options.accumulate micro-batches.
  llvm::Error runStep();
  llvm::Expected<runtime::Tensor *> variable(const std::string &name) const;
  llvm::Error overwrite(runtime::Tensor &target, const runtime::Tensor &value,
                        const std::string &name);
  llvm::Expected<runtime::Tensor> toHost(const runtime::Tensor &value) const;
};

runtime::ExecutorOptions Session::Impl::executorOptions() const {
  runtime::ExecutorOptions execOptions;
  execOptions.threads = options.threads;
  execOptions.communication = communication.get();
  execOptions.accumulate = options.accumulate > 1;
  return execOptions;
}

llvm::Error Session::Impl::runStep() {
  if (options.accumulate <= 1)
    return trainer->step(feeds);
  // Inputs are batch-major: the batch is the leading dimension of any of them.
  const int64_t batch = feeds.empty() ? 0 : feeds.begin()->second.dim(0);
  if (auto err = runtime::train::checkAccumulation(options.accumulate, batch))
    return err;
  return trainer->accumulatedStep(runtime::train::microBatches(feeds, batch, options.accumulate));
}

llvm::Error Session::Impl::checkFeed(const std::string &name, const runtime::Tensor &value) const {
  const ir::Input *input = nullptr;
  for (const auto &in : module().inputs())
    if (in->name() == name)
      input = in.get();
  if (!input) {
    std::string names;
    for (const auto &in : module().inputs())
      names += (names.empty() ? "" : ", ") + in->name();
    return ir::makeError(ir::ErrorCode::NotFound, "model '" + module().name() + "' has no input '" +
                                                      name + "' (its inputs: " + names + ")");
  }
  const ir::TensorType &type = input->type();
  bool fits = value.dtype() == type.dtype && static_cast<int64_t>(value.rank()) == type.rank();
  for (size_t i = 0; fits && i < value.rank(); ++i)
    fits = type.dims[i] == ir::kBatchDim ? value.dim(i) > 0 : type.dims[i] == value.dim(i);
  if (!fits) {
    std::string shape;
    for (size_t i = 0; i < value.rank(); ++i)
      shape += (i ? ", " : "") + std::to_string(value.dim(i));
    return ir::makeError("input '" + name + "' is " + type.str() + ", fed " +
                         ir::dtypeName(value.dtype()).str() + "[" + shape + "]");
  }
  return llvm::Error::success();
}

llvm::Error Session::Impl::checkAllFed() const {
  for (const auto &in : module().inputs())
    if (!feeds.count(in->name()))
      return ir::makeError(ir::ErrorCode::NotFound,
                           "input '" + in->name() + "' was not fed for this step");
  return llvm::Error::success();
}

llvm::Expected<runtime::Tensor *> Session::Impl::variable(const std::string &name) const {
  runtime::Tensor *t = store->find(name);
  if (!t || t->empty())
    return ir::makeError(ir::ErrorCode::NotFound,
                         "model '" + module().name() + "' has no variable '" + name + "'");
  return t;
}

// Writes `value` (on the host) into the variable: into its own storage on the host, where the
// executor reads it; a fresh copy on another device (the executor binds it at the next step).
llvm::Error Session::Impl::overwrite(runtime::Tensor &target, const runtime::Tensor &value,
                                     const std::string &name) {
  if (value.dtype() != target.dtype() || value.shape() != target.shape())
    return ir::makeError("variable '" + name +
                         "' has another dtype or shape than the value "
                         "given for it");
  if (target.onHost()) {
    std::memcpy(target.raw(), value.raw(), static_cast<size_t>(value.numBytes()));
    return llvm::Error::success();
  }
  auto onDevice = trainer->device().toDevice(value);
  if (!onDevice)
    return onDevice.takeError();
  store->set(name, std::move(*onDevice));
  return llvm::Error::success();
}

llvm::Expected<runtime::Tensor> Session::Impl::toHost(const runtime::Tensor &value) const {
  if (value.onHost())
    return value.clone();
  return trainer->device().toHost(value);
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::Session(Session &&) noexcept = default;
Session &Session::operator=(Session &&) noexcept = default;
Session::~Session() = default;

// The variables and the training executor of a session whose model and options are set.
llvm::Error Session::Impl::start(uint64_t seed) {
  const ir::Module &m = module();
  if (!m.loss)
    return ir::makeError("model '" + m.name() + "' has no loss to train");
  auto device = ir::DeviceId::parse(options.device);
  if (!device)
    return device.takeError();
  store = std::make_shared<runtime::VariableStore>();
  if (auto err = store->initialize(m, seed))
    return err;
  runtime::ExecutorOptions execOptions = executorOptions();
  execOptions.device = *device;
  execOptions.seed = seed;
  auto created = runtime::Executor::create(m, store, execOptions);
  if (!created)
    return created.takeError();
  trainer = std::move(*created);
  return llvm::Error::success();
}

Result<Session> Session::open(const Model &model, const SessionOptions &options) {
  if (options.accumulate < 1)
    return toStatus(ir::makeError("session option accumulate: expected at least 1, got " +
                                  std::to_string(options.accumulate)));
  auto step = model.trainingStep(options.fuse, options.precision);
  if (!step.ok())
    return step.status();
  auto impl = std::make_unique<Impl>(std::move(*step));
  impl->options = options;
  if (auto err = impl->start(options.seed))
    return toStatus(std::move(err));
  return Session(std::move(impl));
}

Result<Session> Session::open(const Plan &plan, const SessionOptions &options) {
  if (plan.workers() != 1 || plan.parameterServers() != 0)
    return toStatus(ir::makeError(
        ir::ErrorCode::Unsupported,
        "a session runs a plan of one worker and no parameter servers; this plan of " +
            plan.model() + " has " + std::to_string(plan.workers()) + " workers and " +
            std::to_string(plan.parameterServers()) +
            " parameter servers: run it with run() or prism run"));
  const plan::Plan &compiled = PlanAccess::plan(plan);
  const plan::Program *program = plan::findProgram(compiled, "worker:0");
  if (!program)
    return toStatus(ir::makeError(ir::ErrorCode::NotFound, "the plan has no program of worker:0"));
  auto module = plan::parseProgram(*program);
  if (!module)
    return toStatus(module.takeError());
  auto impl = std::make_unique<Impl>(ModelAccess::make(std::move(*module), true));
  impl->options = options;
  const int64_t planned = std::max(1, compiled.run().accumulate());
  if (options.accumulate > 1 && options.accumulate != planned)
    return toStatus(ir::makeError("session option accumulate " +
                                  std::to_string(options.accumulate) + " contradicts the plan's " +
                                  std::to_string(planned) + " micro-batches per step"));
  impl->options.accumulate = planned;
  impl->communication = std::make_unique<runtime::SoleWorkerCommunication>("a session");
  if (auto err = impl->start(compiled.run().seed()))
    return toStatus(std::move(err));
  return Session(std::move(impl));
}

const Model &Session::model() const {
  return impl_->model;
}

Status Session::feed(const std::string &name, Tensor value) {
  if (value.empty())
    return toStatus(ir::makeError("input '" + name + "' was fed an empty tensor"));
  const runtime::Tensor &tensor = TensorAccess::tensor(value);
  if (auto err = impl_->checkFeed(name, tensor))
    return toStatus(std::move(err));
  impl_->feeds[name] = tensor;
  return Status::success();
}

Status Session::step() {
  if (auto err = impl_->checkAllFed())
    return toStatus(std::move(err));
  impl_->trainer->setStepNumber(impl_->globalStep);
  if (auto err = impl_->runStep())
    return toStatus(std::move(err));
  impl_->feeds.clear();
  impl_->loss = impl_->trainer->loss().value_or(std::numeric_limits<double>::quiet_NaN());
  ++impl_->globalStep;
  return Status::success();
}

double Session::loss() const {
  return impl_->loss;
}

int64_t Session::globalStep() const {
  return impl_->globalStep;
}

Result<Tensor> Session::fetch(const std::string &name) const {
  auto variable = impl_->variable(name);
  if (!variable)
    return toStatus(variable.takeError());
  auto host = impl_->toHost(**variable);
  if (!host)
    return toStatus(host.takeError());
  return TensorAccess::make(std::move(*host));
}

Status Session::assign(const std::string &name, const Tensor &value) {
  auto variable = impl_->variable(name);
  if (!variable)
    return toStatus(variable.takeError());
  if (value.empty())
    return toStatus(ir::makeError("variable '" + name + "' was given an empty tensor"));
  return toStatus(impl_->overwrite(**variable, TensorAccess::tensor(value), name));
}

Result<std::map<std::string, Tensor>> Session::evaluate(const std::vector<std::string> &values) {
  if (values.empty())
    return std::map<std::string, Tensor>();
  if (auto err = impl_->checkAllFed())
    return toStatus(std::move(err));
  std::unique_ptr<runtime::Executor> &evaluator = impl_->evaluators[values];
  if (!evaluator) {
    runtime::ExecutorOptions execOptions = impl_->executorOptions();
    execOptions.device = impl_->trainer->device().id();
    execOptions.outputs = values;
    execOptions.mode = runtime::StepMode::Evaluation;
    auto created = runtime::Executor::create(impl_->module(), impl_->store, execOptions);
    if (!created) {
      impl_->evaluators.erase(values);
      return toStatus(created.takeError());
    }
    evaluator = std::move(*created);
  }
  if (auto err = evaluator->step(impl_->feeds))
    return toStatus(std::move(err));
  std::map<std::string, Tensor> results;
  for (const std::string &name : values) {
    const runtime::RuntimeValue *value = evaluator->output(name);
    if (!value || value->sparse)
      return toStatus(ir::makeError(ir::ErrorCode::Unsupported,
                                    "value '" + name + "' is sparse or was not computed"));
    auto host = impl_->toHost(value->dense);
    if (!host)
      return toStatus(host.takeError());
    results.emplace(name, TensorAccess::make(std::move(*host)));
  }
  return results;
}

Status Session::save(const std::string &dir) const {
  runtime::train::TrainingPosition position;
  position.globalStep = impl_->globalStep;
  position.seed = impl_->options.seed;
  position.model = impl_->module().name();
  llvm::StringMap<runtime::Tensor> variables;
  for (const auto &entry : impl_->store->all()) {
    auto host = impl_->toHost(entry.getValue());
    if (!host)
      return toStatus(host.takeError());
    variables[entry.getKey()] = std::move(*host);
  }
  return toStatus(runtime::train::saveCheckpoint(dir, position, variables));
}

Status Session::restore(const std::string &dir) {
  auto checkpoint = runtime::train::loadCheckpoint(dir);
  if (!checkpoint)
    return toStatus(checkpoint.takeError());
  const ir::Module &module = impl_->module();
  if (checkpoint->position.model != module.name())
    return toStatus(ir::makeError("the checkpoint in " + dir + " was made for model '" +
                                  checkpoint->position.model + "', not '" + module.name() + "'"));
  // Every check before the first write: a failed restore changes nothing.
  for (const auto &var : module.variables()) {
    auto it = checkpoint->variables.find(var->name());
    if (it == checkpoint->variables.end())
      return toStatus(
          ir::makeError("the checkpoint in " + dir + " has no variable '" + var->name() + "'"));
    const runtime::Tensor *current = impl_->store->find(var->name());
    if (it->second.dtype() != current->dtype() || it->second.shape() != current->shape())
      return toStatus(ir::makeError("variable '" + var->name() +
                                    "' has another dtype or shape in the checkpoint in " + dir));
  }
  for (const auto &var : module.variables())
    if (auto err = impl_->overwrite(*impl_->store->find(var->name()),
                                    checkpoint->variables.at(var->name()), var->name()))
      return toStatus(std::move(err));
  impl_->globalStep = checkpoint->position.globalStep;
  return Status::success();
}

} // namespace prism::api
