// Models: parsed text-format modules, and their single-device training steps.
#include "api/Internal.h"
#include "frontends/text/Parser.h"
#include "ir/Diagnostic.h"
#include "ir/Printer.h"
#include "plan/LearningRateScaling.h"
#include "plan/Pipeline.h"

namespace prism::api {
namespace {

ValueInfo describe(const std::string &name, const ir::TensorType &type) {
  ValueInfo info;
  info.name = name;
  info.dtype = TensorAccess::dtype(type.dtype);
  for (int64_t d : type.dims)
    info.shape.push_back(d == ir::kBatchDim ? kBatchDim : d);
  return info;
}

} // namespace

Model ModelAccess::make(std::unique_ptr<ir::Module> module, bool trainingStep) {
  auto impl = std::make_shared<Model::Impl>();
  impl->module = std::move(module);
  impl->trainingStep = trainingStep;
  return Model(std::move(impl));
}

Model::Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Result<Model> Model::load(const std::string &path) {
  auto module = frontends::parseModuleFile(path);
  if (!module)
    return toStatus(module.takeError());
  return ModelAccess::make(std::move(*module), false);
}

Result<Model> Model::parse(const std::string &text, const std::string &file) {
  auto module = frontends::parseModule(text, file);
  if (!module)
    return toStatus(module.takeError());
  return ModelAccess::make(std::move(*module), false);
}

const std::string &Model::name() const {
  return impl_->module->name();
}

std::vector<ValueInfo> Model::inputs() const {
  std::vector<ValueInfo> inputs;
  for (const auto &in : impl_->module->inputs())
    inputs.push_back(describe(in->name(), in->type()));
  return inputs;
}

std::vector<ValueInfo> Model::variables() const {
  std::vector<ValueInfo> variables;
  for (const auto &var : impl_->module->variables())
    variables.push_back(describe(var->name(), var->type()));
  return variables;
}

std::string Model::optimizer() const {
  const auto &optimizer = impl_->module->optimizer;
  return optimizer ? ir::printOptimizer(*optimizer) : "";
}

std::string Model::text() const {
  return ir::printModule(*impl_->module);
}

Result<Model> Model::scaledLearningRate(const std::string &rule, int64_t baseBatch,
                                        int64_t globalBatch) const {
  if (impl_->trainingStep)
    return toStatus(ir::makeError("the learning rate is scaled on the model as written, not on "
                                  "its training step"));
  auto parsed = plan::parseLrScaleRule(rule);
  if (!parsed)
    return toStatus(parsed.takeError());
  if (baseBatch < 1 || globalBatch < 1)
    return toStatus(ir::makeError("learning-rate scaling needs batches of at least 1, got base " +
                                  std::to_string(baseBatch) + " and global " +
                                  std::to_string(globalBatch)));
  plan::LearningRateScaling scaling;
  scaling.rule = *parsed;
  scaling.baseBatch = baseBatch;
  std::unique_ptr<ir::Module> scaled = impl_->module->clone();
  scaled->setSourceFile(impl_->module->sourceFile());
  if (auto err = plan::scaleLearningRate(*scaled, scaling, globalBatch))
    return toStatus(std::move(err));
  return ModelAccess::make(std::move(scaled), false);
}

Result<Model> Model::trainingStep(bool fuse, const std::string &precision) const {
  if (impl_->trainingStep)
    return *this;
  auto parsed = ir::parsePrecision(precision);
  if (!parsed)
    return toStatus(ir::withContext(parsed.takeError(), "precision"));
  std::unique_ptr<ir::Module> step = impl_->module->clone();
  step->setSourceFile(impl_->module->sourceFile());
  if (auto err = plan::compileTrainingStep(*step, {fuse, *parsed}))
    return toStatus(std::move(err));
  return ModelAccess::make(std::move(step), true);
}

bool Model::isTrainingStep() const {
  return impl_->trainingStep;
}

} // namespace prism::api
