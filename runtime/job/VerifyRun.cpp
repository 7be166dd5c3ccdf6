// `prism verify`'s runs and comparison (see VerifyRun.h).
#include "runtime/job/VerifyRun.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "plan/LearningRateScaling.h"
#include "plan/PartitionSearch.h"
#include "plan/Pipeline.h"
#include "plan/PlanFile.h"
#include "plan/PlanTasks.h"
#include "plan/PlanVariables.h"
#include "runtime/job/Launcher.h"
#include "runtime/job/Task.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Trainer.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

namespace prism::runtime::job {
namespace {

double elementAt(const Tensor &t, int64_t i) {
  return t.dtype() == ir::DType::F64 ? t.data<double>()[i] : t.data<float>()[i];
}

// A loss averaged over the positions it counts (ignore_index) is a mean over a number that
// depends on the data, and batch statistics are a function of the whole batch: the parts of a
// split batch compute both differently from one device. prism verify says so instead of
// reporting a difference.
llvm::Error checkSplitsExactly(const ir::Module &model) {
  // The model's ops and its functions' (every call expands to its function's body).
  std::vector<const ir::Op *> ops;
  for (const auto &op : model.ops())
    ops.push_back(op.get());
  for (const ir::Function &function : model.functions)
    for (const auto &op : function.body->ops())
      ops.push_back(op.get());
  for (const ir::Op *op : ops)
    if (const ir::Attr *ignore = op->attrs.find(ir::kIgnoreIndexAttr))
      return ir::makeError(
          model.sourceFile(), op->loc,
          "prism verify checks that a split batch trains exactly like one device, and " +
              op->name() + " with " + ir::kIgnoreIndexAttr + " = " + ignore->str() +
              " averages over the positions not ignored: workers and micro-batches each take the "
              "mean of their own positions and are weighted by their examples, which equals one "
              "device's mean only when every part ignores the same share (docs/ir.md, \"Losses "
              "over positions and ignored labels\"); verify the model without " +
              ir::kIgnoreIndexAttr);
  // Batch statistics are each part's own unless synchronized (sync = true: the whole step's
  // batch's, through replica_mean).
  auto synchronized = [](const ir::Op &op) {
    const ir::AttrMap attrs = ir::withDefaults(op.def(), op.attrs);
    const ir::Attr *sync = attrs.find(ir::kSyncAttr);
    return sync && sync->getBool();
  };
  for (const ir::Op *op : ops)
    if (op->def().has(ir::kBatchStatistics) && !synchronized(*op))
      return ir::makeError(
          model.sourceFile(), op->loc,
          "prism verify checks that a split batch trains exactly like one device, and " +
              op->name() +
              " normalizes with the statistics of its own part of the batch: each worker, tower "
              "and micro-batch computes its own mean and variance (as PyTorch's BatchNorm does), "
              "which differ from one device's over the whole batch (docs/ir.md, \"Training and "
              "evaluation\"); prism train --cluster and --accumulate train it so, with each part's "
              "statistics. Give it sync = true (prism import --sync-batch-norm) to normalize "
              "with the whole batch's statistics on every worker and tower");
  return llvm::Error::success();
}

std::string taskDir(llvm::StringRef root, llvm::StringRef task) {
  return root.str() + "/" + plan::taskFileName(task);
}

// The distributed run: the plan's tasks, writing worker:0's metrics and every task's variables
// into the work directory.
llvm::Error runDistributed(const plan::Plan &plan, const std::string &planPath,
                           const VerifyRunOptions &options) {
  JobOptions job = options.job;
  job.steps = plan.run().steps();
  job.epochs.reset();
  job.quiet = true;
  job.evaluate = false;
  job.metricsOut = options.workDir + "/distributed.jsonl";
  job.variablesDir = options.workDir + "/variables";
  if (auto ec = llvm::sys::fs::create_directories(job.variablesDir))
    return ir::makeError("cannot make " + job.variablesDir + ": " + ec.message());
  return runPlan(plan, planPath, job);
}

// A run on one device, with the passes `fuse` says, its losses written to `metricsOut`.
struct SingleDeviceRun {
  std::string data;
  int threads = 1;
  int64_t steps = 0, batch = 0, accumulate = 1;
  uint64_t seed = 0;
  bool fuse = true;
  ir::ComputePrecision precision = ir::ComputePrecision::F32;
  plan::LearningRateScaling lrScaling; // the model's lr scaled for `batch`, as the plan's was
  std::string metricsOut;
};

llvm::Expected<train::TrainResult> runSingleDevice(const ir::Module &model,
                                                   const SingleDeviceRun &run) {
  auto single = model.clone();
  single->setSourceFile(model.sourceFile());
  if (auto e = plan::scaleLearningRate(*single, run.lrScaling, run.batch))
    return std::move(e);
  if (auto e = plan::compileTrainingStep(*single, {run.fuse, run.precision}))
    return std::move(e);
  train::TrainOptions trainOptions;
  auto spec = data::parseDataSpec(run.data);
  if (!spec)
    return spec.takeError();
  trainOptions.data = *spec;
  trainOptions.steps = run.steps;
  trainOptions.batchSize = run.batch;
  trainOptions.accumulate = run.accumulate;
  trainOptions.seed = run.seed;
  trainOptions.threads = run.threads;
  trainOptions.quiet = true;
  trainOptions.evaluate = false;
  trainOptions.metricsOut = run.metricsOut;
  return train::train(*single, trainOptions);
}

// The same steps as the plan on one device, with the same passes, on the global batch at once.
llvm::Expected<train::TrainResult> runSingleDevice(const ir::Module &model, const plan::Plan &plan,
                                                   const VerifyRunOptions &options) {
  SingleDeviceRun run;
  run.data = options.job.data;
  run.threads = options.job.threads;
  run.steps = plan.run().steps();
  run.batch = plan.run().global_batch();
  run.seed = plan.run().seed();
  run.fuse = options.fuse;
  run.precision = options.precision;
  run.lrScaling = plan::lrScalingOf(plan.run());
  run.metricsOut = options.workDir + "/single.jsonl";
  return runSingleDevice(model, run);
}

// Both runs' losses from their metrics, compared.
llvm::Expected<LossComparison> compareLossFiles(const std::string &compared,
                                                const std::string &reference) {
  auto comparedLosses = readLosses(compared);
  if (!comparedLosses)
    return comparedLosses.takeError();
  auto referenceLosses = readLosses(reference);
  if (!referenceLosses)
    return referenceLosses.takeError();
  return compareLosses(*comparedLosses, *referenceLosses);
}

// Each holder's checkpoint in `dir`, read once.
class ShardCheckpoints {
public:
  explicit ShardCheckpoints(llvm::StringRef dir) : dir_(dir.str()) {}
  // What `task` wrote of `variable`: its rows of it.
  llvm::Expected<const Tensor *> part(const std::string &task, const std::string &variable) {
    auto loaded = checkpoints_.find(task);
    if (loaded == checkpoints_.end()) {
      auto checkpoint = train::loadCheckpoint(taskDir(dir_, task));
      if (!checkpoint)
        return checkpoint.takeError();
      loaded = checkpoints_.emplace(task, std::move(*checkpoint)).first;
    }
    auto found = loaded->second.variables.find(variable);
    if (found == loaded->second.variables.end())
      return ir::makeError(ir::ErrorCode::NotFound, task + " wrote no value of '" + variable + "'");
    return &found->second;
  }

private:
  std::string dir_;
  std::map<std::string, train::Checkpoint> checkpoints_;
};

} // namespace

llvm::Expected<std::vector<double>> readLosses(llvm::StringRef metricsPath) {
  std::ifstream in(metricsPath.str());
  if (!in)
    return ir::makeError(ir::ErrorCode::NotFound, "cannot read the metrics " + metricsPath);
  std::vector<double> losses;
  std::string line;
  while (std::getline(in, line)) {
    auto json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (json.is_object() && json.contains("loss") && json["loss"].is_number())
      losses.push_back(json["loss"].get<double>());
  }
  return losses;
}

double relativeDifference(const Tensor &a, const Tensor &b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < b.numElements(); ++i) {
    diff = std::max(diff, std::fabs(elementAt(a, i) - elementAt(b, i)));
    scale = std::max(scale, std::fabs(elementAt(b, i)));
  }
  return diff / std::max(scale, 1e-30);
}

llvm::Expected<LossComparison> compareLosses(llvm::ArrayRef<double> distributed,
                                             llvm::ArrayRef<double> single) {
  if (distributed.size() != single.size())
    return ir::makeError("the distributed run logged " + std::to_string(distributed.size()) +
                         " steps, the single-device run " + std::to_string(single.size()));
  LossComparison result;
  result.steps = single.size();
  for (size_t i = 0; i < single.size(); ++i) {
    double d = std::fabs(distributed[i] - single[i]) / std::max(std::fabs(single[i]), 1e-30);
    if (d > result.largest) {
      result.largest = d;
      result.step = i + 1;
    }
  }
  return result;
}

llvm::Expected<VariableComparison>
compareVariables(const std::map<std::string, Tensor> &distributed,
                 const llvm::StringMap<Tensor> &single) {
  VariableComparison result;
  result.variables = distributed.size();
  for (const auto &entry : single) {
    std::string name = entry.getKey().str();
    auto it = distributed.find(name);
    if (it == distributed.end())
      return ir::makeError("the distributed run has no value of '" + name + "'");
    if (it->second.numElements() != entry.getValue().numElements())
      return ir::makeError("'" + name + "' has " + std::to_string(it->second.numElements()) +
                           " elements in the distributed run, " +
                           std::to_string(entry.getValue().numElements()) + " on one device");
    double d = relativeDifference(it->second, entry.getValue());
    if (d >= result.largest) {
      result.largest = d;
      result.variable = name;
    }
  }
  return result;
}

llvm::Expected<Tensor> assembleShards(const plan::Variable &variable,
                                      const std::map<std::string, Tensor> &parts) {
  auto dtype = ir::parseDType(variable.dtype());
  if (!dtype)
    return ir::makeError("'" + variable.name() + "' has an unknown dtype " + variable.dtype());
  std::vector<int64_t> shape(variable.shape().begin(), variable.shape().end());
  Tensor whole(*dtype, shape);
  const int64_t rowBytes = shape.empty() ? whole.numBytes() : whole.numBytes() / shape[0];
  std::map<std::string, int64_t> used; // rows of each task's part taken so far
  for (const plan::Shard &s : variable.shards()) {
    auto part = parts.find(s.task());
    if (part == parts.end())
      return ir::makeError(ir::ErrorCode::NotFound,
                           s.task() + " wrote no value of '" + variable.name() + "'");
    const int64_t rows = s.row_end() - s.row_begin();
    int64_t &at = used[s.task()];
    if (part->second.dtype() != *dtype || (at + rows) * rowBytes > part->second.numBytes())
      return ir::makeError(s.task() + "'s part of '" + variable.name() +
                           "' does not hold the rows the plan gives it");
    std::memcpy(static_cast<char *>(whole.raw()) + s.row_begin() * rowBytes,
                static_cast<const char *>(part->second.raw()) + at * rowBytes,
                static_cast<size_t>(rows * rowBytes));
    at += rows;
  }
  return std::move(whole);
}

// With --partitions search: the plan of the count the job chose, which worker:0 wrote to `dir`.
llvm::Expected<plan::Plan> chosenPlan(const plan::Plan &plan, llvm::StringRef dir) {
  const std::string path = dir.str() + "/" + kPartitionSearchChoiceFile;
  auto text = llvm::MemoryBuffer::getFile(path);
  if (!text)
    return ir::makeError("cannot read " + path +
                         " (the partition count the job chose): " + text.getError().message());
  int64_t count = 0;
  if ((*text)->getBuffer().trim().getAsInteger(10, count))
    return ir::makeError(path + ": expected a partition count");
  const plan::PartitionSearch &search = plan.partition_search();
  for (int i = 0; i < search.candidates_size(); ++i)
    if (search.candidates(i).partitions() == count)
      return plan::candidatePlan(plan, static_cast<size_t>(i));
  return ir::makeError(path + ": " + std::to_string(count) + " partitions is no candidate");
}

llvm::Expected<std::map<std::string, Tensor>> collectVariables(const plan::Plan &searched,
                                                               llvm::StringRef dir) {
  std::optional<plan::Plan> chosen;
  if (searched.has_partition_search()) {
    auto candidate = chosenPlan(searched, dir);
    if (!candidate)
      return candidate.takeError();
    chosen = std::move(*candidate);
  }
  const plan::Plan &plan = chosen ? *chosen : searched;
  auto worker = train::loadCheckpoint(taskDir(dir, "worker:0"));
  if (!worker)
    return worker.takeError();
  std::map<std::string, Tensor> values = worker->variables;
  ShardCheckpoints checkpoints(dir);
  for (const plan::Variable &v : plan.variables()) {
    if (!plan::onParameterServers(v))
      continue;
    std::map<std::string, Tensor> parts;
    for (const plan::Shard &s : v.shards()) {
      auto part = checkpoints.part(s.task(), v.name());
      if (!part)
        return part.takeError();
      parts[s.task()] = **part;
    }
    auto whole = assembleShards(v, parts);
    if (!whole)
      return whole.takeError();
    values[v.name()] = std::move(*whole);
  }
  return values;
}

llvm::Expected<VerifyResult> verifyRun(const ir::Module &model, const plan::Plan &plan,
                                       const VerifyRunOptions &options) {
  if (plan.run().steps() < 1)
    return ir::makeError("prism verify needs a plan with a number of steps (--steps)");
  if (auto e = checkSplitsExactly(model))
    return std::move(e);
  std::string planPath = options.workDir + "/plan.pb";
  if (auto e = plan::writePlan(plan, planPath))
    return std::move(e);
  if (auto e = runDistributed(plan, planPath, options))
    return std::move(e);
  auto trained = runSingleDevice(model, plan, options);
  if (!trained)
    return trained.takeError();

  auto losses =
      compareLossFiles(options.workDir + "/distributed.jsonl", options.workDir + "/single.jsonl");
  if (!losses)
    return losses.takeError();
  auto distributed = collectVariables(plan, options.workDir + "/variables");
  if (!distributed)
    return distributed.takeError();
  auto variables = compareVariables(*distributed, trained->store->all());
  if (!variables)
    return variables.takeError();
  return VerifyResult{*losses, *variables};
}

llvm::Expected<VerifyResult> verifyAccumulation(const ir::Module &model,
                                                const AccumulationVerifyOptions &options) {
  if (options.accumulate < 2)
    return ir::makeError("verifying accumulation needs --accumulate 2 or more, got " +
                         std::to_string(options.accumulate));
  if (auto e = checkSplitsExactly(model))
    return std::move(e);
  SingleDeviceRun run;
  run.data = options.data;
  run.threads = options.threads;
  run.steps = options.steps;
  run.batch = options.batch;
  run.seed = options.seed;
  run.fuse = options.fuse;
  run.precision = options.precision;
  run.accumulate = options.accumulate;
  run.metricsOut = options.workDir + "/accumulated.jsonl";
  auto accumulated = runSingleDevice(model, run);
  if (!accumulated)
    return accumulated.takeError();
  run.accumulate = 1;
  run.metricsOut = options.workDir + "/single.jsonl";
  auto whole = runSingleDevice(model, run);
  if (!whole)
    return whole.takeError();
  auto losses =
      compareLossFiles(options.workDir + "/accumulated.jsonl", options.workDir + "/single.jsonl");
  if (!losses)
    return losses.takeError();
  std::map<std::string, Tensor> values;
  for (const auto &entry : accumulated->store->all())
    values[entry.getKey().str()] = entry.getValue();
  auto variables = compareVariables(values, whole->store->all());
  if (!variables)
    return variables.takeError();
  return VerifyResult{*losses, *variables};
}

} // namespace prism::runtime::job
