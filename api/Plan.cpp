// Plans: compiling a model for a cluster, plan files, and what a plan says.
#include <algorithm>

#include "api/Internal.h"
#include "cluster/ClusterParser.h"
#include "ir/Diagnostic.h"
#include "plan/CommunicationCost.h"
#include "plan/ElasticRange.h"
#include "plan/Partitioner.h"
#include "plan/PlanDump.h"
#include "plan/PlanFile.h"
#include "plan/PlanTasks.h"
#include "runtime/job/RowsPerStep.h"

namespace prism::api {
namespace {

llvm::Error badOption(const std::string &field, const std::string &expected,
                      const std::string &got) {
  return ir::makeError("compile option '" + field + "': expected " + expected + ", got " + got);
}

// A text option the caller set (not empty), parsed into `out`; an error names the field.
template <typename T, typename Parse>
llvm::Error parseSet(const std::string &text, Parse parse, const char *field, const char *expected,
                     T &out) {
  if (text.empty())
    return llvm::Error::success();
  auto parsed = parse(text);
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
    return badOption(field, expected, "'" + text + "'");
  }
  out = *parsed;
  return llvm::Error::success();
}

// How workers communicate and wait for each other: compression, local aggregation,
// synchronization, elastic membership.
llvm::Error communicationOptions(const CompileOptions &options, plan::PartitionOptions &result) {
  if (auto e = parseSet(options.compress, plan::parseCompression, "compress", "none, fp16 or bf16",
                        result.compress))
    return e;
  result.errorFeedback = options.errorFeedback;
  if (auto e = parseSet(options.localAggregation, plan::parseLocalAggregation, "localAggregation",
                        "auto, on or off", result.localAggregation))
    return e;
  if (auto e = parseSet(options.sync, plan::parseSyncMode, "sync", "sync or async",
                        result.synchronization.mode))
    return e;
  result.synchronization.maxStaleness = options.maxStaleness;
  result.synchronization.backupWorkers = options.backupWorkers.value_or(0);
  plan::ElasticRange elastic;
  if (auto e = parseSet(options.elastic, plan::parseElasticRange, "elastic", "MIN:MAX", elastic))
    return e;
  result.elasticMin = elastic.min;
  result.elasticMax = elastic.max;
  return llvm::Error::success();
}

// partitionSearch, searchPartitions and searchSteps.
llvm::Error partitionSearchOptions(const CompileOptions &options, plan::PartitionOptions &result) {
  if (!options.partitionSearch) {
    if (!options.searchPartitions.empty() || options.searchSteps)
      return badOption("searchPartitions", "partitionSearch set", "it unset");
    return llvm::Error::success();
  }
  plan::PartitionSearchOptions search;
  for (int64_t count : options.searchPartitions)
    if (count < 1)
      return badOption("searchPartitions", "counts of at least 1", std::to_string(count));
  search.candidates = options.searchPartitions;
  std::sort(search.candidates.begin(), search.candidates.end());
  search.candidates.erase(std::unique(search.candidates.begin(), search.candidates.end()),
                          search.candidates.end());
  if (options.searchSteps) {
    if (*options.searchSteps < 1)
      return badOption("searchSteps", "at least 1", std::to_string(*options.searchSteps));
    search.timedSteps = *options.searchSteps;
  }
  result.partitionSearch = std::move(search);
  return llvm::Error::success();
}

// The partitioner's options: its defaults, with the fields the caller set.
llvm::Expected<plan::PartitionOptions> partitionOptions(const CompileOptions &options) {
  plan::PartitionOptions result;
  // What the caller leaves unset (or "auto"), the partitioner chooses (plan/AutoParallel.h).
  result.automatic.strategy = options.strategy.empty() || options.strategy == "auto";
  if (!result.automatic.strategy) {
    auto strategy = passes::parseStrategy(options.strategy);
    if (!strategy) {
      llvm::consumeError(strategy.takeError());
      return badOption("strategy", "auto, hybrid, allreduce or ps", "'" + options.strategy + "'");
    }
    result.placement.strategy = *strategy;
  }
  result.automatic.partitions = !options.partitions;
  if (options.partitions) {
    if (*options.partitions < 0)
      return badOption("partitions", "0 or more", std::to_string(*options.partitions));
    result.placement.partitions = *options.partitions;
  }
  if (!options.profile.empty()) {
    auto profile = plan::readProfile(options.profile);
    if (!profile)
      return ir::withContext(profile.takeError(), "option profile");
    result.profile = std::make_shared<const plan::CostProfile>(std::move(*profile));
    result.profileSource = options.profile;
  }
  result.automatic.bucketMb = !options.bucketMb;
  if (auto e = partitionSearchOptions(options, result))
    return std::move(e);
  if (options.bucketMb) {
    if (!(*options.bucketMb > 0))
      return badOption("bucketMb", "a positive size", std::to_string(*options.bucketMb));
    result.routing.bucketMb = *options.bucketMb;
  }
  if (options.partitionThresholdMb) {
    if (!(*options.partitionThresholdMb > 0))
      return badOption("partitionThresholdMb", "a positive size",
                       std::to_string(*options.partitionThresholdMb));
    result.placement.partitionThresholdMb = *options.partitionThresholdMb;
  }
  if (options.batch) {
    if (*options.batch < 1)
      return badOption("batch", "at least 1", std::to_string(*options.batch));
    result.globalBatch = *options.batch;
  }
  if (options.steps) {
    if (*options.steps < 0)
      return badOption("steps", "0 or more", std::to_string(*options.steps));
    result.steps = *options.steps;
  }
  if (options.seed)
    result.seed = *options.seed;
  result.fuse = options.fuse;
  if (auto e = parseSet(options.lrScaleRule, plan::parseLrScaleRule, "lrScaleRule",
                        "none or linear", result.lrScaling.rule))
    return std::move(e);
  if (options.lrBaseBatch) {
    if (*options.lrBaseBatch < 1)
      return badOption("lrBaseBatch", "at least 1", std::to_string(*options.lrBaseBatch));
    result.lrScaling.baseBatch = *options.lrBaseBatch;
  }
  if (options.accumulate) {
    if (*options.accumulate < 1)
      return badOption("accumulate", "at least 1", std::to_string(*options.accumulate));
    result.accumulate = *options.accumulate;
  }
  if (auto e = parseSet(options.precision, ir::parsePrecision, "precision", "f32, bf16 or fp16",
                        result.precision))
    return std::move(e);
  if (auto e = communicationOptions(options, result))
    return std::move(e);
  return result;
}

llvm::Expected<cluster::Replication> replicationOf(const std::string &name) {
  if (name.empty() || name == cluster::replicationName(cluster::Replication::BetweenGraph))
    return cluster::Replication::BetweenGraph;
  if (name == cluster::replicationName(cluster::Replication::InGraph))
    return cluster::Replication::InGraph;
  return badOption("replication", "between-graph or in-graph", "'" + name + "'");
}

llvm::Expected<plan::Plan> compilePlan(const Model &model, const CompileOptions &options) {
  if (model.isTrainingStep())
    return ir::makeError("compile takes the model as written (forward, loss, optimizer), not "
                         "its training step");
  auto partition = partitionOptions(options);
  if (!partition)
    return partition.takeError();
  auto replication = replicationOf(options.replication);
  if (!replication)
    return replication.takeError();
  auto cluster = cluster::loadCluster(options.cluster, *replication);
  if (!cluster)
    return cluster.takeError();
  const ir::Module &module = ModelAccess::module(model);
  auto copy = module.clone();
  copy->setSourceFile(module.sourceFile());
  auto result =
      runtime::job::partitionWithData(std::move(copy), *cluster, *partition, options.data);
  if (!result)
    return result.takeError();
  return std::move(result->plan);
}

} // namespace

Plan PlanAccess::make(plan::Plan plan, std::string path) {
  auto impl = std::make_shared<Plan::Impl>();
  impl->plan = std::move(plan);
  impl->path = std::move(path);
  return Plan(std::move(impl));
}

Plan::Plan(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<Plan> compile(const Model &model, const CompileOptions &options) {
  auto plan = compilePlan(model, options);
  if (!plan)
    return toStatus(plan.takeError());
  return PlanAccess::make(std::move(*plan), "");
}

Result<Plan> Plan::load(const std::string &path) {
  auto plan = plan::readPlan(path);
  if (!plan)
    return toStatus(plan.takeError());
  return PlanAccess::make(std::move(*plan), path);
}

Status Plan::save(const std::string &path) const {
  // A Plan is made by compile or load, both of which verify it.
  if (auto err = plan::writePlan(impl_->plan, path, plan::PlanCheck::AlreadyVerified))
    return toStatus(std::move(err));
  impl_->path = path;
  return Status::success();
}

std::string Plan::path() const {
  return impl_->path;
}

const std::string &Plan::model() const {
  return impl_->plan.model();
}

std::string Plan::strategy() const {
  return impl_->plan.strategy();
}

std::string Plan::replication() const {
  return impl_->plan.replication();
}

int64_t Plan::globalBatch() const {
  return impl_->plan.run().global_batch();
}

std::vector<std::string> Plan::tasks() const {
  std::vector<std::string> names;
  for (const plan::Task &t : impl_->plan.cluster().tasks())
    names.push_back(t.name());
  return names;
}

int Plan::workers() const {
  return plan::countTasks(impl_->plan, "worker");
}

int Plan::parameterServers() const {
  return plan::countTasks(impl_->plan, "ps");
}

Result<std::string> Plan::dump(const std::string &format) const {
  auto parsed = plan::parseDumpFormat(format);
  if (!parsed)
    return toStatus(parsed.takeError());
  return toResult(plan::dumpPlan(impl_->plan, *parsed));
}

} // namespace prism::api
