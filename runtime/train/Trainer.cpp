// Single-device training.
#include "runtime/train/Trainer.h"

#include <chrono>
#include <cmath>
#include <fstream>

#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "nlohmann/json.hpp"
#include "runtime/cpu/Executor.h"
#include "runtime/data/BatchIterator.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Progress.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::runtime::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// The logits and labels behind the loss, when the loss is a cross-entropy of logits against an
// input of labels: then evaluation can report accuracy.
struct Classifier {
  const ir::Value *logits = nullptr;
  const ir::Input *labels = nullptr;
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
  return c;
}

int64_t labelAt(const Tensor &t, int64_t i) {
  return t.dtype() == ir::DType::I64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i];
}

struct Evaluation {
  double loss = 0;
  std::optional<double> accuracy;
  int64_t examples = 0;
};

llvm::Expected<Evaluation> evaluate(cpu::Executor &exec, const data::Dataset &test,
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
  int64_t correct = 0;
  double lossSum = 0;
  while (auto batch = it->next()) {
    if (batch->size() == 0)
      continue;
    if (auto err = exec.step(batch->tensors))
      return std::move(err);
    const Tensor &loss = exec.output(lossName)->dense;
    double value = loss.dtype() == ir::DType::F64 ? *loss.data<double>() : *loss.data<float>();
    lossSum += value * static_cast<double>(batch->size());
    result.examples += batch->size();
    if (!classifier.logits)
      continue;
    const Tensor &logits = exec.output(classifier.logits->name())->dense;
    const Tensor &labels = batch->at(classifier.labels->name());
    int64_t classes = logits.dim(1);
    for (int64_t r = 0; r < logits.dim(0); ++r) {
      const float *row = logits.data<float>() + r * classes;
      int64_t best = std::max_element(row, row + classes) - row;
      correct += best == labelAt(labels, r);
    }
  }
  if (result.examples == 0)
    return ir::makeError("the test set " + test.description() + " is empty");
  result.loss = lossSum / static_cast<double>(result.examples);
  if (classifier.logits)
    result.accuracy = static_cast<double>(correct) / static_cast<double>(result.examples);
  return result;
}

llvm::Error restoreInto(cpu::VariableStore &store, const Checkpoint &ckpt, const ir::Module &m) {
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

} // namespace

llvm::Expected<TrainResult> train(const ir::Module &module, const TrainOptions &options) {
  if (!module.loss)
    return ir::makeError("the model has no loss to train");
  auto trainSet = data::openDataset(options.data, data::Split::Train, options.seed);
  if (!trainSet)
    return trainSet.takeError();
  std::unique_ptr<data::Dataset> testSet;
  if (options.evaluate) {
    auto opened = data::openDataset(options.data, data::Split::Test, options.seed);
    if (!opened)
      return opened.takeError();
    testSet = std::move(*opened);
  }
  std::vector<data::InputSlot> slots;
  for (const auto &in : module.inputs())
    slots.push_back({in->name(), in->type()});
  auto fields = data::requestsForInputs(**trainSet, slots);
  if (!fields)
    return fields.takeError();

  auto store = std::make_shared<cpu::VariableStore>();
  if (auto err = store->initialize(module, options.seed))
    return std::move(err);
  const WorkerRole *worker = options.worker;
  cpu::ExecutorOptions trainOptions;
  trainOptions.threads = options.threads;
  trainOptions.communication = worker ? worker->communication : nullptr;
  auto trainer = cpu::Executor::create(module, store, trainOptions);
  if (!trainer)
    return trainer.takeError();
  Classifier classifier = findClassifier(module);
  std::unique_ptr<cpu::Executor> evaluator;
  if (testSet) {
    cpu::ExecutorOptions evalOptions;
    evalOptions.threads = options.threads;
    evalOptions.communication = trainOptions.communication;
    evalOptions.outputs = {localLoss(module)->name()};
    if (classifier.logits)
      evalOptions.outputs.push_back(classifier.logits->name());
    auto created = cpu::Executor::create(module, store, evalOptions);
    if (!created)
      return created.takeError();
    evaluator = std::move(*created);
  }

  TrainingPosition position;
  position.seed = options.seed;
  position.batchSize = options.batchSize;
  position.model = module.name();
  position.data = options.data.str();
  if (!options.restoreDir.empty()) {
    auto ckpt = loadCheckpoint(options.restoreDir);
    if (!ckpt)
      return ckpt.takeError();
    const TrainingPosition &saved = ckpt->position;
    if (saved.model != position.model || saved.data != position.data ||
        saved.seed != position.seed || saved.batchSize != position.batchSize)
      return ir::makeError("checkpoint in " + options.restoreDir + " was made for model '" +
                           saved.model + "', data " + saved.data + ", seed " +
                           std::to_string(saved.seed) + ", batch " +
                           std::to_string(saved.batchSize) + "; this run has '" + position.model +
                           "', " + position.data + ", seed " + std::to_string(position.seed) +
                           ", batch " + std::to_string(position.batchSize));
    if (auto err = restoreInto(*store, *ckpt, module))
      return std::move(err);
    position = saved;
  }

  data::BatchOptions batchOptions;
  batchOptions.batchSize = options.batchSize;
  batchOptions.seed = options.seed;
  batchOptions.fields = *fields;
  if (worker) {
    batchOptions.rank = worker->rank;
    batchOptions.numShards = worker->workers;
    batchOptions.dropLast = true;
  }
  auto batches = data::BatchIterator::create(**trainSet, batchOptions, position.epoch);
  if (!batches)
    return batches.takeError();
  const int64_t perEpoch = batches->numBatches();
  if (perEpoch == 0)
    return ir::makeError("the training set " + (*trainSet)->description() + " is empty");
  const int64_t target = options.steps ? *options.steps : options.epochs.value_or(1) * perEpoch;
  const int64_t epochs = (target + perEpoch - 1) / perEpoch;

  std::unique_ptr<llvm::raw_fd_ostream> metrics;
  if (!options.metricsOut.empty()) {
    std::error_code ec;
    metrics = std::make_unique<llvm::raw_fd_ostream>(
        options.metricsOut, ec,
        options.restoreDir.empty() ? llvm::sys::fs::OF_None : llvm::sys::fs::OF_Append);
    if (ec)
      return ir::makeError("cannot write metrics to " + options.metricsOut + ": " + ec.message());
  }
  ProgressLine progress(options.quiet);

  TrainResult result;
  auto runEvaluation = [&](const std::string &label) -> llvm::Error {
    if (!evaluator)
      return llvm::Error::success();
    auto eval = evaluate(*evaluator, *testSet, *fields, classifier, localLoss(module)->name(),
                         options.evalBatchSize);
    if (!eval)
      return eval.takeError();
    result.testLoss = eval->loss;
    result.testAccuracy = eval->accuracy;
    progress.evaluation(label, eval->loss, eval->accuracy, eval->examples);
    if (metrics) {
      nlohmann::json line = {{"step", position.globalStep},
                             {"epoch", position.epoch + 1},
                             {"test_loss", eval->loss},
                             {"test_examples", eval->examples}};
      if (eval->accuracy)
        line["test_accuracy"] = *eval->accuracy;
      *metrics << line.dump() << "\n";
      metrics->flush();
    }
    return llvm::Error::success();
  };

  const auto start = Clock::now();
  auto windowStart = start;
  int64_t windowSamples = 0, samples = 0;
  double rate = 0;
  auto stepStart = Clock::now();
  while (position.globalStep < target) {
    // A step's time includes assembling its batch, as a user's loop would.
    data::Batch batch = batches->batch(position.batchInEpoch);
    if (worker && worker->beforeStep)
      if (auto err = worker->beforeStep(position.globalStep, batch.size(), batch.globalSize))
        return std::move(err);
    if (auto err = (*trainer)->step(batch.tensors))
      return std::move(err);
    if (worker && worker->afterStep)
      if (auto err = worker->afterStep(position.globalStep))
        return std::move(err);
    double loss = *(*trainer)->loss();
    if (!std::isfinite(loss))
      return ir::makeError("the loss became " + std::to_string(loss) + " at step " +
                           std::to_string(position.globalStep + 1) +
                           ": lower the learning rate or check the data");
    ++position.globalStep;
    ++position.batchInEpoch;
    ++result.steps;
    result.lastLoss = loss;
    // A worker counts the global batch: the job's rate, as one device would see it.
    int64_t examples = worker ? batch.globalSize : batch.size();
    samples += examples;
    windowSamples += examples;
    auto now = Clock::now();
    double window = seconds(now - windowStart);
    if (window >= 0.5 || rate == 0) {
      rate = static_cast<double>(windowSamples) / std::max(window, 1e-9);
      windowStart = now;
      windowSamples = 0;
    }
    double elapsed = seconds(now - start);
    double eta = static_cast<double>(target - position.globalStep) * elapsed /
                 static_cast<double>(result.steps);
    progress.step(position.epoch + 1, epochs, position.batchInEpoch, perEpoch, position.globalStep,
                  target, loss, rate, eta);
    if (metrics) {
      *metrics << nlohmann::json({{"step", position.globalStep},
                                  {"epoch", position.epoch + 1},
                                  {"loss", loss},
                                  {"samples_per_sec", examples / seconds(now - stepStart)}})
                      .dump()
               << "\n";
    }
    stepStart = Clock::now();
    if (position.batchInEpoch == perEpoch) {
      if (auto err = runEvaluation("epoch " + std::to_string(position.epoch + 1)))
        return std::move(err);
      ++position.epoch;
      position.batchInEpoch = 0;
      batches->startEpoch(position.epoch);
    }
  }
  progress.finish();
  result.globalStep = position.globalStep;
  result.samplesPerSec =
      static_cast<double>(samples) / std::max(seconds(Clock::now() - start), 1e-9);
  // A run that stopped mid-epoch still reports where the model stands.
  if (position.batchInEpoch != 0 && result.steps > 0)
    if (auto err = runEvaluation("step " + std::to_string(position.globalStep)))
      return std::move(err);
  if (!options.saveDir.empty())
    if (auto err = saveCheckpoint(options.saveDir, position, store->all()))
      return std::move(err);
  result.peakArenaBytes = (*trainer)->arenaBytes();
  result.store = store;
  return result;
}

} // namespace prism::runtime::train
