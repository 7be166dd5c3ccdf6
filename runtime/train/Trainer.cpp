// Single-device training.
#include "runtime/train/Trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>

#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "nlohmann/json.hpp"
#include "runtime/BatchSplit.h"
#include "runtime/data/BatchIterator.h"
#include "runtime/exec/Executor.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Progress.h"
#include "support/Memory.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::runtime::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Wall-clock time in metrics lines: across processes and restarts, when each step ended.
double unixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The logits and labels behind the loss, when the loss is a cross-entropy of logits against an
// input of labels: then evaluation can report accuracy, over every position of the labels
// ([B] or [B, T, ...]) but the ignored ones.
struct Classifier {
  const ir::Value *logits = nullptr;
  const ir::Input *labels = nullptr;
  std::optional<int64_t> ignoredLabel;
};

// The loss this task computes itself: a worker's loss before it is all-reduced (evaluation runs
// on one worker alone).
const ir::Value *localLoss(const ir::Module &m) {
  const ir::Value *loss = m.loss->value;
  const ir::Op *op = loss->definingOp();
  if (op && op->def().has(ir::kCommunication) && op->numOperands() == 1 &&
      op->def().resultPerOperand)
    return op->operand(0);
  return loss;
}

Classifier findClassifier(const ir::Module &m) {
  Classifier c;
  if (!m.loss || !localLoss(m)->definingOp())
    return c;
  const ir::Op *op = localLoss(m)->definingOp();
  if (op->name() != "softmax_cross_entropy" || !op->operand(1)->input())
    return c;
  c.logits = op->operand(0);
  c.labels = op->operand(1)->input();
  if (const ir::Attr *ignore = op->attrs.find(ir::kIgnoreIndexAttr))
    c.ignoredLabel = ignore->getInt();
  return c;
}

int64_t labelAt(const Tensor &t, int64_t i) {
  return t.dtype() == ir::DType::I64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i];
}

// Rows [begin, begin + size) of a batch-major host tensor.
Tensor sliceRows(const Tensor &t, int64_t begin, int64_t size) {
  std::vector<int64_t> shape = t.shape();
  int64_t rowBytes = t.dim(0) > 0 ? t.numBytes() / t.dim(0) : 0;
  shape[0] = size;
  Tensor out(t.dtype(), shape);
  if (size > 0)
    std::memcpy(out.raw(), static_cast<const char *>(t.raw()) + begin * rowBytes,
                static_cast<size_t>(size * rowBytes));
  return out;
}

} // namespace

std::vector<runtime::Feeds> microBatches(const runtime::Feeds &batch, int64_t size, int64_t parts) {
  std::vector<runtime::Feeds> out;
  for (int64_t m = 0; m < parts; ++m) {
    BatchSlice slice = splitBatch(size, m, parts);
    if (slice.size == 0)
      continue;
    runtime::Feeds feeds;
    for (const auto &[name, tensor] : batch)
      feeds[name] = sliceRows(tensor, slice.begin, slice.size);
    out.push_back(std::move(feeds));
  }
  return out;
}

namespace {

struct Evaluation {
  double loss = 0;
  std::optional<double> accuracy;
  int64_t examples = 0;
};

llvm::Expected<Evaluation> evaluate(runtime::Executor &exec, const data::Dataset &test,
                                    const std::vector<data::FieldRequest> &fields,
                                    const Classifier &classifier, const std::string &lossName,
                                    int64_t batchSize) {
  data::BatchOptions options;
  options.batchSize = batchSize;
  options.shuffle = false;
  options.fields = fields;
  auto it = data::BatchIterator::create(test, options);
  if (!it)
    return it.takeError();
  Evaluation result;
  int64_t correct = 0, positions = 0;
  double lossSum = 0;
  while (auto batch = it->next()) {
    if (batch->size() == 0)
      continue;
    if (auto err = exec.step(batch->tensors))
      return std::move(err);
    auto fetchedLoss = exec.fetch(lossName);
    if (!fetchedLoss)
      return fetchedLoss.takeError();
    const Tensor &loss = *fetchedLoss;
    double value = loss.dtype() == ir::DType::F64 ? *loss.data<double>() : *loss.data<float>();
    lossSum += value * static_cast<double>(batch->size());
    result.examples += batch->size();
    if (!classifier.logits)
      continue;
    auto fetchedLogits = exec.fetch(classifier.logits->name());
    if (!fetchedLogits)
      return fetchedLogits.takeError();
    const Tensor &logits = *fetchedLogits;
    const Tensor &labels = batch->at(classifier.labels->name());
    int64_t classes = logits.shape().back();
    for (int64_t r = 0; r < labels.numElements(); ++r) {
      int64_t label = labelAt(labels, r);
      if (classifier.ignoredLabel && label == *classifier.ignoredLabel)
        continue;
      const float *row = logits.data<float>() + r * classes;
      int64_t best = std::max_element(row, row + classes) - row;
      correct += best == label;
      ++positions;
    }
  }
  if (result.examples == 0)
    return ir::makeError("the test set " + test.description() + " is empty");
  result.loss = lossSum / static_cast<double>(result.examples);
  if (classifier.logits && positions > 0)
    result.accuracy = static_cast<double>(correct) / static_cast<double>(positions);
  return result;
}

llvm::Error restoreInto(runtime::VariableStore &store, const Checkpoint &ckpt,
                        const ir::Module &m) {
  for (const auto &var : m.variables()) {
    const Tensor *held = store.find(var->name());
    if (held && held->empty()) // on parameter servers: restored there
      continue;
    auto it = ckpt.variables.find(var->name());
    if (it == ckpt.variables.end())
      return ir::makeError("the checkpoint has no variable '" + var->name() + "'");
    const Tensor *current = store.find(var->name());
    if (it->second.dtype() != current->dtype() || it->second.shape() != current->shape())
      return ir::makeError("variable '" + var->name() + "' has another type in the checkpoint");
  }
  for (const auto &[name, value] : ckpt.variables) {
    if (!store.find(name))
      return ir::makeError("the checkpoint has variable '" + name + "', which the model lacks");
    store.set(name, value.clone());
  }
  return llvm::Error::success();
}

// One call of train(): its data, executors, position and outputs, and the steps of a run.
class TrainingRun {
public:
  TrainingRun(const ir::Module &module, const TrainOptions &options)
      : module_(module), options_(options), worker_(options.worker), progress_(options.quiet) {
    if (worker_) {
      rank_ = worker_->rank;
      workers_ = worker_->workers;
      outside_ = worker_->joining;
    }
  }

  llvm::Expected<TrainResult> run() {
    if (!module_.loss)
      return ir::makeError("the model has no loss to train");
    for (auto prepare :
         {&TrainingRun::openData, &TrainingRun::createExecutors, &TrainingRun::restore,
          &TrainingRun::prepareBatches, &TrainingRun::openMetrics})
      if (auto err = (this->*prepare)())
        return std::move(err);
    start_ = stepStart_ = windowStart_ = Clock::now();
    while (!trainedEnough()) {
      llvm::Error err = trainStep();
      if (!err)
        continue;
      if (!worker_ || !worker_->afterFailedStep)
        return std::move(err);
      auto membership = worker_->afterFailedStep(std::move(err), position_.globalStep, *store_);
      if (!membership)
        return membership.takeError();
      if (auto changed = changeMembership(*membership))
        return std::move(changed);
    }
    return finish();
  }

private:
  llvm::Error openData();
  llvm::Error createExecutors();
  llvm::Error restore();
  llvm::Error prepareBatches();
  llvm::Error openMetrics();
  llvm::Error trainStep();
  llvm::Error finishEpochAtItsEnd();
  // The target's steps are done, or the worker role says the job trained enough.
  bool trainedEnough() const {
    return worker_ && worker_->trainedEnough ? enough_ : position_.globalStep >= target_;
  }
  // Elastic membership: this worker's new rank and share, from the membership's step on.
  llvm::Error changeMembership(const Membership &membership);
  llvm::Error openBatches();
  // Whether this run reports (progress, metrics, evaluation): see WorkerRole::rankZeroReports.
  bool reports() const {
    return !worker_ || !worker_->rankZeroReports || (rank_ == 0 && !outside_);
  }
  void reportStep(int64_t examples, double loss);
  llvm::Error evaluateTestSet(const std::string &label);
  llvm::Expected<TrainResult> finish();

  const ir::Module &module_;
  const TrainOptions &options_;
  const WorkerRole *worker_;
  std::unique_ptr<data::Dataset> trainSet_, testSet_;
  std::vector<data::FieldRequest> fields_;
  std::shared_ptr<runtime::VariableStore> store_;
  std::unique_ptr<runtime::Executor> trainer_, evaluator_;
  Classifier classifier_;
  TrainingPosition position_;
  std::optional<data::BatchIterator> batches_;
  int64_t perEpoch_ = 0, target_ = 0, epochs_ = 0;
  bool enough_ = false; // the worker role's verdict after the last step
  std::unique_ptr<llvm::raw_fd_ostream> metrics_;
  ProgressLine progress_;
  TrainResult result_;
  Clock::time_point start_, stepStart_, windowStart_;
  int64_t windowSamples_ = 0, samples_ = 0;
  double rate_ = 0;
  // This worker's rank among how many (they change with elastic membership).
  int64_t rank_ = 0, workers_ = 1;
  bool outside_ = false; // a joining worker before its first membership
};

llvm::Error TrainingRun::openData() {
  auto trainSet = data::openDataset(options_.data, data::Split::Train, options_.seed);
  if (!trainSet)
    return trainSet.takeError();
  trainSet_ = std::move(*trainSet);
  if (options_.evaluate) {
    auto opened = data::openDataset(options_.data, data::Split::Test, options_.seed);
    if (!opened)
      return opened.takeError();
    testSet_ = std::move(*opened);
  }
  std::vector<data::InputSlot> slots;
  for (const auto &in : module_.inputs())
    slots.push_back({in->name(), in->type()});
  auto fields = data::requestsForInputs(*trainSet_, slots);
  if (!fields)
    return fields.takeError();
  fields_ = std::move(*fields);
  return llvm::Error::success();
}

// The training step and, with a test set, the evaluation step: one factory, one device.
llvm::Error TrainingRun::createExecutors() {
  store_ = std::make_shared<runtime::VariableStore>();
  if (auto err = store_->initialize(module_, options_.seed))
    return err;
  runtime::ExecutorOptions trainOptions;
  trainOptions.device = options_.device;
  trainOptions.towerDevices = options_.towerDevices;
  trainOptions.tf32 = options_.tf32;
  trainOptions.captureSteps = options_.cudaGraphs;
  trainOptions.threads = options_.threads;
  trainOptions.communication = worker_ ? worker_->communication : nullptr;
  trainOptions.trace = options_.trace;
  trainOptions.accumulate = options_.accumulate > 1;
  trainOptions.seed = options_.seed;
  auto trainer = runtime::Executor::create(module_, store_, trainOptions);
  if (!trainer)
    return trainer.takeError();
  trainer_ = std::move(*trainer);
  classifier_ = findClassifier(module_);
  if (!testSet_)
    return llvm::Error::success();
  runtime::ExecutorOptions evalOptions = trainOptions;
  evalOptions.trace = nullptr;
  evalOptions.outputs = {localLoss(module_)->name()};
  evalOptions.accumulate = false;
  evalOptions.mode = runtime::StepMode::Evaluation;
  if (classifier_.logits)
    evalOptions.outputs.push_back(classifier_.logits->name());
  auto evaluator = runtime::Executor::create(module_, store_, evalOptions);
  if (!evaluator)
    return evaluator.takeError();
  evaluator_ = std::move(*evaluator);
  return llvm::Error::success();
}

llvm::Error TrainingRun::restore() {
  position_.seed = options_.seed;
  position_.batchSize = options_.batchSize;
  position_.model = module_.name();
  position_.data = options_.data.str();
  if (options_.restoreDir.empty())
    return llvm::Error::success();
  auto ckpt = loadCheckpoint(options_.restoreDir);
  if (!ckpt)
    return ckpt.takeError();
  const TrainingPosition &saved = ckpt->position;
  if (saved.model != position_.model || saved.data != position_.data ||
      saved.seed != position_.seed || saved.batchSize != position_.batchSize)
    return ir::makeError("checkpoint in " + options_.restoreDir + " was made for model '" +
                         saved.model + "', data " + saved.data + ", seed " +
                         std::to_string(saved.seed) + ", batch " + std::to_string(saved.batchSize) +
                         "; this run has '" + position_.model + "', " + position_.data + ", seed " +
                         std::to_string(position_.seed) + ", batch " +
                         std::to_string(position_.batchSize));
  if (auto err = restoreInto(*store_, *ckpt, module_))
    return err;
  position_ = saved;
  return llvm::Error::success();
}

llvm::Error TrainingRun::prepareBatches() {
  if (trainSet_->size() > 0 && options_.batchSize > trainSet_->size())
    return ir::makeError("--batch " + llvm::Twine(options_.batchSize) +
                         " is larger than the training set " + trainSet_->description() + " (" +
                         llvm::Twine(trainSet_->size()) + " examples): use --batch " +
                         llvm::Twine(trainSet_->size()) + " or less");
  if (auto err = openBatches())
    return err;
  perEpoch_ = batches_->numBatches();
  if (perEpoch_ == 0)
    return ir::makeError("the training set " + trainSet_->description() + " is empty");
  if (auto err = checkAccumulation(options_.accumulate, options_.batchSize, workers_))
    return err;
  target_ = options_.steps ? *options_.steps : options_.epochs.value_or(1) * perEpoch_;
  epochs_ = (target_ + perEpoch_ - 1) / perEpoch_;
  // --steps and --epochs count from the start of training, restored steps included: a restored
  // run already there would train nothing and must not look like it succeeded.
  if (position_.globalStep >= target_)
    return ir::makeError(
        (options_.restoreDir.empty() ? std::string("the restored checkpoint")
                                     : "the checkpoint in " + options_.restoreDir) +
        " is at step " + llvm::Twine(position_.globalStep) + ", and " +
        (options_.steps ? "--steps " + std::to_string(*options_.steps)
                        : "--epochs " + std::to_string(options_.epochs.value_or(1)) + " (" +
                              std::to_string(target_) + " steps)") +
        " counts every step, those before the restore too: ask for more to train further");
  return llvm::Error::success();
}

// This worker's shard of each global batch, from the current epoch.
llvm::Error TrainingRun::openBatches() {
  data::BatchOptions batchOptions;
  batchOptions.batchSize = options_.batchSize;
  batchOptions.seed = options_.seed;
  batchOptions.fields = fields_;
  if (worker_) {
    batchOptions.rank = rank_;
    batchOptions.numShards = workers_;
    batchOptions.dropLast = true;
  }
  auto batches = data::BatchIterator::create(*trainSet_, batchOptions, position_.epoch);
  if (!batches)
    return batches.takeError();
  batches_.emplace(std::move(*batches));
  return llvm::Error::success();
}

llvm::Error TrainingRun::changeMembership(const Membership &membership) {
  const bool reported = reports();
  outside_ = false;
  rank_ = membership.rank;
  workers_ = membership.workers;
  // Batches of an epoch do not depend on the split: the step says where the data stands.
  position_.globalStep = membership.step;
  position_.epoch = membership.step / perEpoch_;
  position_.batchInEpoch = membership.step % perEpoch_;
  if (auto err = checkAccumulation(options_.accumulate, options_.batchSize, workers_))
    return err;
  if (auto err = openBatches())
    return err;
  // A worker that takes over rank 0's duties appends to the metrics rank 0 wrote so far.
  if (!reported && reports() && !options_.metricsOut.empty() && !metrics_) {
    std::error_code ec;
    metrics_ =
        std::make_unique<llvm::raw_fd_ostream>(options_.metricsOut, ec, llvm::sys::fs::OF_Append);
    if (ec)
      return ir::makeError("cannot write metrics to " + options_.metricsOut + ": " + ec.message());
  }
  if (!reports())
    metrics_.reset();
  return llvm::Error::success();
}

llvm::Error TrainingRun::openMetrics() {
  if (options_.metricsOut.empty() || !reports())
    return llvm::Error::success();
  std::error_code ec;
  metrics_ = std::make_unique<llvm::raw_fd_ostream>(
      options_.metricsOut, ec,
      options_.restoreDir.empty() ? llvm::sys::fs::OF_None : llvm::sys::fs::OF_Append);
  if (ec)
    return ir::makeError("cannot write metrics to " + options_.metricsOut + ": " + ec.message());
  return llvm::Error::success();
}

llvm::Error TrainingRun::trainStep() {
  // A step's time includes assembling its batch, as a user's loop would.
  runtime::TraceSpan stepSpan(options_.trace, "steps",
                              "step " + std::to_string(position_.globalStep), "step");
  runtime::TraceSpan loading(options_.trace, "steps", "load batch", "data");
  if (worker_ && worker_->atStepBoundary) {
    auto membership = worker_->atStepBoundary(position_.globalStep, *store_);
    if (!membership)
      return membership.takeError();
    if (*membership)
      if (auto err = changeMembership(**membership))
        return err;
  }
  data::Batch batch = batches_->batch(position_.batchInEpoch);
  loading.addArg("examples", static_cast<double>(batch.size()));
  loading.finish();
  if (worker_ && worker_->beforeStep)
    if (auto err = worker_->beforeStep(position_.globalStep, batch.size(), batch.globalSize))
      return err;
  // Every worker's share, so that loss scaling's seed makes the per-example gradients those of
  // one device on the whole batch (batch_share).
  trainer_->setGlobalBatch(worker_ ? batch.globalSize : 0);
  // Random ops draw by step and global example: the same on one device as on any split.
  trainer_->setStepNumber(position_.globalStep);
  trainer_->setExampleOffset(worker_ ? batch.offset : 0);
  if (auto err = options_.accumulate > 1 ? trainer_->accumulatedStep(microBatches(
                                               batch.tensors, batch.size(), options_.accumulate))
                                         : trainer_->step(batch.tensors))
    return err;
  if (worker_ && worker_->afterStep) {
    runtime::TraceSpan finishing(options_.trace, "steps", "after step", "after_step");
    if (auto err = worker_->afterStep(position_.globalStep))
      return err;
  }
  stepSpan.finish();
  // The step after this one, unless the job moved on without this worker (backup workers).
  int64_t next = position_.globalStep + 1;
  if (worker_ && worker_->resumeAt)
    next = std::clamp(worker_->resumeAt(), next, std::max(target_, next));
  if (worker_ && worker_->trainedEnough)
    enough_ = worker_->trainedEnough(target_);
  const bool last = worker_ && worker_->trainedEnough ? enough_ : next >= target_;
  if (last && worker_ && worker_->afterLastStep)
    if (auto err = worker_->afterLastStep())
      return err;
  double loss = *trainer_->loss();
  if (!std::isfinite(loss))
    return ir::makeError("the loss became " + std::to_string(loss) + " at step " +
                         std::to_string(position_.globalStep + 1) +
                         ": lower the learning rate or check the data");
  ++position_.globalStep;
  ++position_.batchInEpoch;
  ++result_.steps;
  result_.lastLoss = loss;
  // A worker counts the global batch: the job's rate, as one device would see it.
  reportStep(worker_ ? batch.globalSize : batch.size(), loss);
  if (auto err = finishEpochAtItsEnd())
    return err;
  while (position_.globalStep < next) {
    ++position_.globalStep;
    ++position_.batchInEpoch;
    if (auto err = finishEpochAtItsEnd())
      return err;
  }
  // After the epoch's end, so that a restore starts the next epoch as this run does; none at
  // the last step (a run restored there would have nothing to train).
  if (options_.checkpoint && options_.checkpointEvery > 0 && position_.globalStep < target_ &&
      position_.globalStep % options_.checkpointEvery == 0) {
    if (auto err = trainer_->variablesToHost())
      return err;
    return options_.checkpoint(position_, store_->all());
  }
  return llvm::Error::success();
}

// At an epoch's end: the evaluation and the next epoch's order.
llvm::Error TrainingRun::finishEpochAtItsEnd() {
  if (position_.batchInEpoch == perEpoch_) {
    if (auto err = evaluateTestSet("epoch " + std::to_string(position_.epoch + 1)))
      return err;
    ++position_.epoch;
    position_.batchInEpoch = 0;
    batches_->startEpoch(position_.epoch);
  }
  return llvm::Error::success();
}

// The progress line (rate over windows of at least 0.5 s) and the step's metrics line.
void TrainingRun::reportStep(int64_t examples, double loss) {
  samples_ += examples;
  windowSamples_ += examples;
  auto now = Clock::now();
  double window = seconds(now - windowStart_);
  if (window >= 0.5 || rate_ == 0) {
    rate_ = static_cast<double>(windowSamples_) / std::max(window, 1e-9);
    windowStart_ = now;
    windowSamples_ = 0;
  }
  double elapsed = seconds(now - start_);
  // An asynchronous worker may run past the target (its share of the job's pushes is larger).
  double eta = static_cast<double>(std::max<int64_t>(target_ - position_.globalStep, 0)) * elapsed /
               static_cast<double>(result_.steps);
  if (reports())
    progress_.step(position_.epoch + 1, epochs_, position_.batchInEpoch, perEpoch_,
                   position_.globalStep, target_, loss, rate_, eta);
  if (metrics_) {
    nlohmann::json line = {{"step", position_.globalStep},
                           {"epoch", position_.epoch + 1},
                           {"loss", loss},
                           {"samples_per_sec", examples / seconds(now - stepStart_)},
                           {"time", unixSeconds()}};
    if (worker_ && worker_->stepMetrics)
      for (const auto &[name, value] : worker_->stepMetrics())
        line[name] = value;
    *metrics_ << line.dump() << "\n";
    // Under elastic membership a reporting worker may be lost: its lines so far stay.
    if (worker_ && worker_->rankZeroReports)
      metrics_->flush();
  }
  stepStart_ = Clock::now();
}

llvm::Error TrainingRun::evaluateTestSet(const std::string &label) {
  if (!evaluator_ || !reports())
    return llvm::Error::success();
  auto eval = evaluate(*evaluator_, *testSet_, fields_, classifier_, localLoss(module_)->name(),
                       options_.evalBatchSize);
  if (!eval)
    return eval.takeError();
  result_.testLoss = eval->loss;
  result_.testAccuracy = eval->accuracy;
  progress_.evaluation(label, eval->loss, eval->accuracy, eval->examples);
  if (metrics_) {
    nlohmann::json line = {{"step", position_.globalStep},
                           {"epoch", position_.epoch + 1},
                           {"test_loss", eval->loss},
                           {"test_examples", eval->examples}};
    if (eval->accuracy)
      line["test_accuracy"] = *eval->accuracy;
    *metrics_ << line.dump() << "\n";
    metrics_->flush();
  }
  return llvm::Error::success();
}

llvm::Expected<TrainResult> TrainingRun::finish() {
  if (reports())
    progress_.finish();
  result_.globalStep = position_.globalStep;
  result_.samplesPerSec =
      static_cast<double>(samples_) / std::max(seconds(Clock::now() - start_), 1e-9);
  // A run that stopped mid-epoch still reports where the model stands.
  if (position_.batchInEpoch != 0 && result_.steps > 0)
    if (auto err = evaluateTestSet("step " + std::to_string(position_.globalStep)))
      return std::move(err);
  // The trained variables in host memory (from a GPU: one counted copy each).
  if (auto err = trainer_->variablesToHost())
    return std::move(err);
  if (!options_.saveDir.empty())
    if (auto err = saveCheckpoint(options_.saveDir, position_, store_->all()))
      return std::move(err);
  result_.peakArenaBytes = trainer_->arenaBytes();
  std::vector<runtime::Device *> devices = trainer_->devices();
  for (runtime::Device *device : devices) {
    DeviceUse use{device->id(),
                  result_.steps,
                  trainer_->arenaBytes(device),
                  device->workspaceBytes(),
                  device->copies(),
                  "",
                  ""};
    if (device == devices.front()) {
      use.capture = trainer_->captureReport();
      use.kernels = trainer_->kernelChoices();
      result_.device = use;
    } else {
      result_.towerDevices.push_back(use);
    }
  }
  result_.store = store_;
  return std::move(result_);
}

} // namespace

std::string describeDeviceUse(const DeviceUse &use) {
  if (use.device.kind == ir::DeviceKind::Cpu)
    return "";
  const CopyCounters &c = use.copies;
  return use.device.str() + ": arena " + support::formatBytes(double(use.arenaBytes)) +
         ", workspace " + support::formatBytes(double(use.workspaceBytes)) + "; " +
         std::to_string(c.toDeviceCopies) + " copies to the device (" +
         support::formatBytes(double(c.toDeviceBytes)) + ")" +
         (c.fromPeerCopies ? ", " + std::to_string(c.fromPeerCopies) + " from other devices (" +
                                 support::formatBytes(double(c.fromPeerBytes)) + ")"
                           : "") +
         " and " + std::to_string(c.toHostCopies) + " to the host (" +
         support::formatBytes(double(c.toHostBytes)) + ") in " + std::to_string(use.steps) +
         (use.steps == 1 ? " step" : " steps") +
         (use.capture.empty() ? "" : "; captured: " + use.capture) +
         (use.kernels.empty() ? "" : "; kernels: " + use.kernels);
}

std::vector<std::string> describeDevices(const TrainResult &result) {
  std::vector<std::string> lines;
  auto add = [&](const DeviceUse &use) {
    if (std::string line = describeDeviceUse(use); !line.empty())
      lines.push_back(std::move(line));
  };
  add(result.device);
  for (const DeviceUse &use : result.towerDevices)
    add(use);
  return lines;
}

llvm::Error checkAccumulation(int64_t accumulate, int64_t batchSize, int64_t workers) {
  if (accumulate < 1)
    return ir::makeError("--accumulate " + std::to_string(accumulate) +
                         ": expected a number of micro-batches per step, at least 1");
  int64_t share = batchSize / std::max<int64_t>(workers, 1);
  if (accumulate > share)
    return ir::makeError(
        "--accumulate " + std::to_string(accumulate) + " splits " +
        (workers > 1
             ? "each worker's " + std::to_string(share) + " examples of a step (batch " +
                   std::to_string(batchSize) + " over " + std::to_string(workers) + " workers)"
             : "each step's " + std::to_string(share) + " examples") +
        " into micro-batches: give at most " + std::to_string(share) + ", or a larger --batch");
  return llvm::Error::success();
}

llvm::Expected<TrainResult> train(const ir::Module &module, const TrainOptions &options) {
  return TrainingRun(module, options).run();
}

} // namespace prism::runtime::train
