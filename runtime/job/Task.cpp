// One task of a plan, in its own process: a worker trains on its shard of the data; a parameter
// server serves and updates its shards; both stop when the job ends or aborts.
#include "runtime/job/Task.h"

#include <unistd.h>

#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>

#include "ir/Collectives.h"
#include "ir/Device.h"
#include "ir/Diagnostic.h"
#include "plan/CommunicationCost.h"
#include "plan/LocalAggregation.h"
#include "plan/PartitionSearch.h"
#include "plan/PlanTasks.h"
#include "plan/PlanVerifier.h"
#include "plan/Synchronization.h"
#include "runtime/dist/CoordinatorClient.h"
#include "runtime/dist/Membership.h"
#include "runtime/job/ElasticWorker.h"
#include "runtime/job/InjectedFault.h"
#include "runtime/job/JobCheckpoints.h"
#include "runtime/job/TaskCommand.h"
#include "runtime/job/WorkerCommunication.h"
#include "runtime/ps/HostAggregator.h"
#include "runtime/ps/ParameterServer.h"
#include "runtime/ps/ShardCheckpoint.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/CheckpointDir.h"
#include "runtime/train/Trainer.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::runtime::job {
namespace {

constexpr const char *kDoneKey = dist::kJobDoneKey;

std::string endpointKey(llvm::StringRef task) {
  return "endpoint/" + task.str();
}

// How gradients travel (the plan is verified: run.compress is empty, fp16 or bf16).
ir::ComputePrecision compressionOf(const plan::Plan &plan) {
  auto compress = plan::parseCompression(plan.run().compress());
  if (!compress) {
    llvm::consumeError(compress.takeError());
    return ir::ComputePrecision::F32;
  }
  return *compress;
}

// A PS task's step after a restore, for the workers to compare with theirs.
std::string restoredStepKey(llvm::StringRef task) {
  return "restored-step/" + task.str();
}

// After a restore, before the first step: every PS task restored the step this worker did. A
// checkpoint directory whose files come from different saves would otherwise wait for pushes of
// a step that never comes.
llvm::Error checkRestoredSteps(const plan::Plan &plan, const plan::Task &worker, int64_t step,
                               dist::CoordinatorClient &client, const JobOptions &options) {
  for (const plan::Task &t : plan.cluster().tasks()) {
    if (t.role() != "ps")
      continue;
    auto theirs = client.get(restoredStepKey(t.name()), options.rpcTimeout);
    if (!theirs)
      return ir::withContext(theirs.takeError(), "the step " + t.name() + " restored");
    if (*theirs != std::to_string(step))
      return ir::makeError("the checkpoint in " + options.restoreDir +
                           " mixes saves: " + worker.name() + "'s files are at step " +
                           std::to_string(step) + ", " + t.name() + "'s at step " + *theirs);
  }
  return llvm::Error::success();
}

int numWorkers(const plan::Plan &plan) {
  return plan::countTasks(plan, "worker");
}

// The coordinator's verdict ends the task at once: the job is over for everyone.
void exitOnAbort(const std::string &task, const std::string &reason) {
  std::fprintf(stderr, "%s: the job stopped: %s\n", task.c_str(), reason.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

// The task's variables (those it holds: checkpoints leave out the PS-held ones a worker only
// names) in DIR/<task>.
llvm::Error writeVariables(const std::string &dir, const std::string &task,
                           const runtime::VariableStore &store, int64_t steps) {
  train::TrainingPosition position;
  position.globalStep = steps;
  position.model = task;
  return train::saveCheckpoint(dir + "/" + plan::taskFileName(task), position, store.all());
}

// After a task wrote its part of the periodic checkpoint of `step`: tells the launcher (an
// injected kill-in-checkpoint fault fires before).
llvm::Error reportCheckpointPart(dist::CoordinatorClient &client, llvm::StringRef task,
                                 int64_t step, const std::optional<InjectedFault> &fault) {
  if (fault && fault->kind == InjectedFault::Kind::KillCheckpoint && fault->step == step)
    fault->fire();
  return client.set(checkpointReportKey(task), std::to_string(step));
}

// An injected kill or stop fires when `step` steps are done; a slow worker sleeps before every
// step.
void injectAtStep(const std::optional<InjectedFault> &fault, int64_t step) {
  if (!fault || fault->kind == InjectedFault::Kind::KillCheckpoint)
    return;
  if (fault->kind == InjectedFault::Kind::Slow || fault->step == step)
    fault->fire();
}

// A worker that finished its steps (asynchronous training and backup workers, where workers
// finish at different times).
std::string finishedKey(llvm::StringRef task) {
  return "finished/" + task.str();
}

// Until every other worker finished its steps, so that worker:0 evaluates the final variables
// and says the job is done only when no push is still to come (each wait bounded; an abort ends
// the process).
llvm::Error waitForOtherWorkers(const plan::Plan &plan, dist::CoordinatorClient &client,
                                llvm::StringRef self) {
  for (const plan::Task &t : plan.cluster().tasks()) {
    if (t.role() != "worker" || t.name() == self)
      continue;
    for (;;) {
      auto finished = client.get(finishedKey(t.name()), std::chrono::seconds(5));
      if (finished)
        break;
      llvm::Error err = finished.takeError();
      if (ir::errorCode(err) != ir::ErrorCode::DeadlineExceeded)
        return ir::withContext(std::move(err), "waiting for " + t.name() + " to finish");
      llvm::consumeError(std::move(err));
    }
  }
  return llvm::Error::success();
}

// How a worker takes part when steps need not wait for every worker (plan/Synchronization.h):
// its loss stays its own, a worker whose push was dropped goes on at the servers' version, its
// metrics lines count dropped pushes and skipped steps, and worker:0 waits for the others at
// the end.
void joinUnsynchronizedSteps(const plan::Plan &plan, const plan::Task &task,
                             dist::CoordinatorClient &client, WorkerCommunication &communication,
                             train::WorkerRole &role) {
  communication.keepLossLocal();
  role.resumeAt = [&communication] { return communication.resumeAt(); };
  // Asynchronous workers that do not all-reduce run at their own pace: the job ends when the
  // servers applied a push for each worker and step (fast workers make more of them).
  const plan::Synchronization sync = plan::readSynchronization(plan.run());
  if (sync.mode == plan::SyncMode::Async && !plan::allReducesGradients(plan))
    role.trainedEnough = [&communication, workers = numWorkers(plan)](int64_t steps) {
      communication.setJobPushes(steps * workers);
      return communication.lastVersion() >= steps * workers;
    };
  if (task.index() == 0)
    role.afterLastStep = [&plan, &client, name = task.name()] {
      return waitForOtherWorkers(plan, client, name);
    };
  auto counters = role.stepMetrics;
  role.stepMetrics = [counters, &communication] {
    auto result = counters();
    result.push_back({"pushes_dropped", static_cast<double>(communication.droppedPushes())});
    result.push_back({"steps_skipped", static_cast<double>(communication.skippedSteps())});
    return result;
  };
}

// A client of the parameter servers that hold this plan's trained variables (they publish
// where they listen), or null when none does.
llvm::Expected<std::unique_ptr<ps::PsClient>>
connectToParameterServers(const plan::Plan &plan, dist::CoordinatorClient &client,
                          const JobOptions &options, const std::optional<dist::TlsIdentity> &tls,
                          llvm::StringRef keyPrefix = "") {
  ps::PsClientOptions psOptions;
  psOptions.jobToken = options.jobToken;
  psOptions.tls = tls;
  psOptions.rpcDeadline = options.rpcTimeout;
  psOptions.compress = compressionOf(plan);
  for (const plan::Variable &v : plan.variables()) {
    if (v.placement() != "ps" || !v.trainable())
      continue;
    ps::VariableLayout layout;
    layout.dtype = *ir::parseDType(v.dtype());
    layout.shape.assign(v.shape().begin(), v.shape().end());
    for (const plan::Shard &s : v.shards()) {
      auto endpoint = client.get(endpointKey(keyPrefix.str() + s.task()), options.rpcTimeout);
      if (!endpoint)
        return endpoint.takeError();
      psOptions.serverNames[*endpoint] = s.task();
      layout.shards.push_back({*endpoint, s.row_begin(), s.row_end()});
    }
    psOptions.variables[v.name()] = std::move(layout);
  }
  if (psOptions.variables.empty())
    return nullptr;
  return ps::PsClient::create(std::move(psOptions));
}

std::string hostAggregatorKey(llvm::StringRef host) {
  return "host-aggregator/" + host.str();
}

// Local aggregation (plan/LocalAggregation.h): a host's leader serves its members on loopback
// and publishes where; each of them then sends its steps' PS traffic through it. Returns the
// leader's aggregator (null elsewhere), to be destroyed before `communication`.
llvm::Expected<std::unique_ptr<ps::HostAggregator>>
joinHostAggregation(const plan::Plan &plan, const plan::Task &task, dist::CoordinatorClient &client,
                    const JobOptions &options, const std::optional<dist::TlsIdentity> &tls,
                    WorkerCommunication &communication) {
  const plan::HostAggregation *aggregation = plan::aggregationOf(plan, task.name());
  ps::PsClient *psClient = communication.psClient();
  if (!aggregation || !psClient)
    return nullptr;
  if (aggregation->leader() != task.name()) {
    auto endpoint = client.get(hostAggregatorKey(aggregation->host()), options.rpcTimeout);
    if (!endpoint)
      return ir::withContext(endpoint.takeError(),
                             "the host's leader " + aggregation->leader() + "'s endpoint");
    auto channel = ps::connectToHostAggregator(*endpoint, task.index(), psClient->variables(),
                                               options.jobToken, options.rpcTimeout, tls,
                                               aggregation->leader());
    if (!channel)
      return channel.takeError();
    communication.setHostChannel(std::move(*channel));
    return nullptr;
  }
  ps::HostAggregatorOptions aggregatorOptions;
  aggregatorOptions.host = aggregation->host();
  for (const std::string &member : aggregation->members())
    aggregatorOptions.members.push_back(plan::findTask(plan, member)->index());
  aggregatorOptions.ps = psClient;
  aggregatorOptions.jobToken = options.jobToken;
  aggregatorOptions.timeout = options.rpcTimeout;
  aggregatorOptions.tls = tls;
  auto aggregator = ps::HostAggregator::start(std::move(aggregatorOptions));
  if (!aggregator)
    return aggregator.takeError();
  if (auto e = client.set(hostAggregatorKey(aggregation->host()), (*aggregator)->endpoint()))
    return std::move(e);
  communication.setHostChannel((*aggregator)->leaderChannel());
  return aggregator;
}

// Where worker `task` runs its steps: its device (`gpu:N` is `cuda:N`), or the host's CPU when
// its devices are CPUs (in-graph towers then share its threads). A worker with several GPUs runs
// a tower on each (in-graph), its variables and shared ops on the first. A GPU the machine lacks
// is then the executor's error, naming it: never a silent fallback to the CPU.
llvm::Error setWorkerDevices(const plan::Task &task, train::TrainOptions &train) {
  std::vector<ir::DeviceId> devices;
  for (const std::string &name : task.devices()) {
    auto id = ir::DeviceId::parse(name);
    if (!id)
      return ir::withContext(id.takeError(), "the devices of " + task.name());
    devices.push_back(*id);
  }
  auto gpus =
      llvm::count_if(devices, [](const ir::DeviceId &d) { return d.kind != ir::DeviceKind::Cpu; });
  if (gpus == 0)
    return llvm::Error::success();
  if (static_cast<size_t>(gpus) != devices.size())
    return ir::makeError(ir::ErrorCode::Unsupported,
                         task.name() + " has the devices " + llvm::join(task.devices(), ", ") +
                             ": a worker's towers run on CPUs or on GPUs, not on both");
  train.device = devices.front();
  if (devices.size() > 1)
    train.towerDevices = devices;
  return llvm::Error::success();
}

// How worker `task` trains: the plan's run configuration, the job's options; worker:0 reports,
// evaluates and saves.
llvm::Expected<train::TrainOptions>
workerTrainOptions(const plan::Plan &plan, const plan::Task &task, const JobOptions &options) {
  auto spec = data::parseDataSpec(options.data);
  if (!spec)
    return spec.takeError();
  train::TrainOptions train;
  train.data = *spec;
  if (auto e = setWorkerDevices(task, train))
    return std::move(e);
  train.tf32 = options.tf32;
  train.cudaGraphs = options.cudaGraphs;
  train.steps = options.steps;
  if (!train.steps && plan.run().steps() > 0)
    train.steps = plan.run().steps();
  train.epochs = options.epochs;
  train.batchSize = plan.run().global_batch();
  train.accumulate = std::max(1, plan.run().accumulate());
  train.threads = options.threads;
  train.seed = plan.run().seed();
  // Under elastic membership every worker may come to hold rank 0, whose duties these are.
  bool first = task.index() == 0 || plan.run().elastic_max() > 0;
  train.quiet = options.quiet || !first;
  train.evaluate = options.evaluate && first;
  if (first)
    train.metricsOut = options.metricsOut;
  if (!options.saveDir.empty() && first)
    train.saveDir = options.saveDir + "/worker";
  if (!options.restoreDir.empty())
    train.restoreDir = options.restoreDir + "/worker";
  return train;
}

// The plan's first worker: a joining worker runs its program (every worker's is the same but
// for the name) on its host.
const plan::Task *firstWorker(const plan::Plan &plan) {
  for (const plan::Task &t : plan.cluster().tasks())
    if (t.role() == "worker")
      return &t;
  return nullptr;
}

// Elastic membership: the parameter servers, which each say at which step a new membership
// starts.
std::vector<std::string> parameterServerNames(const plan::Plan &plan) {
  std::vector<std::string> names;
  for (const plan::Task &t : plan.cluster().tasks())
    if (t.role() == "ps")
      names.push_back(t.name());
  return names;
}

// The group a worker starts in: the plan's worker group, or a joining worker's own group of one
// until it meets the others at a step boundary.
llvm::Expected<std::unique_ptr<dist::Collective>>
initialGroup(const plan::Plan &plan, const plan::Task &task, dist::CoordinatorClient &client,
             const JobOptions &options, std::optional<int64_t> joinEpoch) {
  if (joinEpoch)
    return dist::Collective::create(client, "join/" + task.name(), 0, 1, task.address(),
                                    options.rpcTimeout);
  return dist::Collective::create(client, ir::kWorkerGroup, task.index(), numWorkers(plan),
                                  task.address(), options.rpcTimeout);
}

// Elastic membership on this worker: it redoes a step a lost worker interrupted, and changes
// group when the membership changes.
std::unique_ptr<ElasticWorker> makeElasticWorker(const plan::Plan &plan, const plan::Task &task,
                                                 dist::CoordinatorClient &client,
                                                 WorkerCommunication &communication,
                                                 const JobOptions &options,
                                                 std::optional<int64_t> joinEpoch) {
  if (plan.run().elastic_max() == 0)
    return nullptr;
  ElasticOptions elastic;
  elastic.epoch = joinEpoch.value_or(0);
  elastic.joining = joinEpoch.has_value();
  elastic.rank = joinEpoch ? 0 : task.index();
  elastic.workers = joinEpoch ? 1 : numWorkers(plan);
  elastic.bindAddress = task.address();
  elastic.workerGroup = ir::kWorkerGroup;
  elastic.parameterServers = parameterServerNames(plan);
  elastic.lossTimeout = options.heartbeatTimeout + std::chrono::seconds(5);
  elastic.groupTimeout = options.rpcTimeout;
  return std::make_unique<ElasticWorker>(client, communication, std::move(elastic));
}

// After training: a GPU worker says what its device took; a worker that did not wait for the
// others says what it ran and marks itself finished; rank 0 prints the job's `done:` line and
// ends the job.
llvm::Error announceWorkerEnd(const plan::Task &task, dist::CoordinatorClient &client,
                              const JobOptions &options, const WorkerCommunication &communication,
                              const train::TrainResult &result, bool synchronized, bool rankZero) {
  // A GPU worker's memory and copies, a line per device (nothing for a CPU's).
  for (const std::string &use : train::describeDevices(result))
    if (!options.quiet)
      llvm::outs() << task.name() << " on " << use << "\n";
  if (!synchronized) {
    if (!options.quiet)
      llvm::outs() << task.name() << ": " << result.steps << " steps run, "
                   << communication.droppedPushes() << " pushes dropped (late), "
                   << communication.skippedSteps() << " steps skipped\n";
    llvm::outs().flush();
    if (auto e = client.set(finishedKey(task.name()), "1"))
      return e;
  }
  if (rankZero) {
    if (!options.quiet)
      llvm::outs() << "done: " << result.steps << " steps, "
                   << llvm::format("%.0f", result.samplesPerSec) << " samples/s, loss "
                   << llvm::format("%.6f", result.lastLoss) << "\n";
    llvm::outs().flush();
    if (auto e = client.set(kDoneKey, "1"))
      return e;
  }
  return llvm::Error::success();
}

// The variables a worker program pulls whole each step (its `ps_pull` ops), in program order.
std::vector<std::string> wholePulls(const ir::Module &module) {
  std::vector<std::string> names;
  for (const auto &op : module.ops())
    if (op->name() == "ps_pull" && !llvm::is_contained(names, op->operand(0)->name()))
      names.push_back(op->operand(0)->name());
  return names;
}

llvm::Error runWorker(const plan::Plan &plan, const plan::Task &task,
                      dist::CoordinatorClient &client, const JobOptions &options,
                      const std::optional<InjectedFault> &fault,
                      const std::optional<dist::TlsIdentity> &tls, TraceRecorder *trace,
                      std::optional<int64_t> joinEpoch) {
  auto module = plan::parseProgram(
      *plan::findProgram(plan, joinEpoch ? firstWorker(plan)->name() : task.name()));
  if (!module)
    return module.takeError();
  auto collective = initialGroup(plan, task, client, options, joinEpoch);
  if (!collective)
    return collective.takeError();
  auto psClient = connectToParameterServers(plan, client, options, tls);
  if (!psClient)
    return psClient.takeError();
  StallWatch stalls(kStallBound);
  const int64_t rank = joinEpoch ? 0 : task.index();
  WorkerCommunication communication(rank, std::move(*collective), std::move(*psClient),
                                    {compressionOf(plan), plan.run().error_feedback()});
  communication.setTrace(trace);
  communication.setStallWatch(&stalls);
  communication.setStepPulls(wholePulls(**module));
  auto aggregator = joinHostAggregation(plan, task, client, options, tls, communication);
  if (!aggregator)
    return aggregator.takeError();

  train::WorkerRole role;
  role.rank = rank;
  role.workers = joinEpoch ? 1 : numWorkers(plan);
  role.communication = &communication;
  std::unique_ptr<ElasticWorker> elastic =
      makeElasticWorker(plan, task, client, communication, options, joinEpoch);
  if (elastic)
    elastic->install(role);
  bool checkRestore = !options.restoreDir.empty();
  role.beforeStep = [&](int64_t step, int64_t examples, int64_t globalExamples) -> llvm::Error {
    injectAtStep(fault, step);
    if (checkRestore) {
      checkRestore = false;
      if (auto e = checkRestoredSteps(plan, task, step, client, options))
        return e;
    }
    communication.beginStep(step, examples, globalExamples);
    return llvm::Error::success();
  };
  role.afterStep = [&](int64_t) { return communication.finishStep(); };
  // What this worker sent and received in the step (worker:0's metrics lines carry it).
  uint64_t sentBefore = 0, receivedBefore = 0;
  role.stepMetrics = [&] {
    uint64_t sent = communication.bytesSent(), received = communication.bytesReceived();
    std::vector<std::pair<std::string, double>> counters = {
        {"bytes_sent", static_cast<double>(sent - sentBefore)},
        {"bytes_received", static_cast<double>(received - receivedBefore)},
        {"workers", static_cast<double>(elastic ? elastic->workers() : numWorkers(plan))}};
    sentBefore = sent;
    receivedBefore = received;
    return counters;
  };
  const plan::Synchronization sync = plan::readSynchronization(plan.run());
  if (!sync.exact())
    joinUnsynchronizedSteps(plan, task, client, communication, role);
  auto train = workerTrainOptions(plan, task, options);
  if (!train)
    return train.takeError();
  train->worker = &role;
  train->trace = trace;
  // worker:0 writes the workers' part of periodic checkpoints: every worker's state is its.
  const train::PeriodicCheckpoints &checkpoints = options.checkpoints;
  if (!checkpoints.dir.empty() && task.index() == 0) {
    train->checkpointEvery = checkpoints.every;
    train->checkpoint = [&](const train::TrainingPosition &position,
                            const llvm::StringMap<Tensor> &variables) -> llvm::Error {
      std::string dir = train::partialCheckpointDir(checkpoints.dir, position.globalStep);
      if (auto e = train::saveCheckpoint(dir + "/worker", position, variables))
        return e;
      return reportCheckpointPart(client, task.name(), position.globalStep, fault);
    };
  }
  auto result = train::train(**module, *train);
  if (!result)
    return result.takeError();
  // Rank 0 at the end: worker:0, unless elastic membership gave its duties to another.
  if (auto e = announceWorkerEnd(task, client, options, communication, *result, sync.exact(),
                                 elastic ? elastic->rank() == 0 : task.index() == 0))
    return e;
  if (!options.variablesDir.empty() && result->store)
    if (auto e =
            writeVariables(options.variablesDir, task.name(), *result->store, result->globalStep))
      return e;
  return llvm::Error::success();
}

// The shards workers pull and push on PS task `task`: the trained variables it holds rows of.
llvm::Expected<std::vector<ps::PsShard>> shardsOn(const plan::Plan &plan, const plan::Task &task) {
  std::vector<ps::PsShard> shards;
  for (const plan::Variable &v : plan.variables()) {
    if (v.placement() != "ps" || !v.trainable())
      continue;
    std::vector<const plan::Shard *> mine;
    for (const plan::Shard &s : v.shards())
      if (s.task() == task.name())
        mine.push_back(&s);
    if (mine.empty())
      continue;
    if (mine.size() > 1)
      return ir::makeError(ir::ErrorCode::Unsupported,
                           "variable '" + v.name() + "' has " + std::to_string(mine.size()) +
                               " row ranges on " + task.name() +
                               "; a parameter server holds one range per variable (use "
                               "--partitions no larger than the number of PS tasks)");
    ps::PsShard shard;
    shard.name = v.name();
    shard.dtype = *ir::parseDType(v.dtype());
    shard.rowBegin = mine[0]->row_begin();
    shard.rowEnd = mine[0]->row_end();
    shard.fullShape.assign(v.shape().begin(), v.shape().end());
    shards.push_back(shard);
  }
  return shards;
}

// What the PS program's communication ops see: the step's combined gradients (ps_gradient*).
class CombinedGradients : public runtime::Communication {
public:
  const ps::GradientSet *current = nullptr;

  llvm::Error allReduce(llvm::StringRef, int64_t, llvm::ArrayRef<Tensor *>) override {
    return ir::makeError(ir::ErrorCode::Internal, "a parameter server does not all-reduce");
  }
  llvm::Expected<Tensor> pull(llvm::StringRef) override {
    return ir::makeError(ir::ErrorCode::Internal, "a parameter server does not pull");
  }
  llvm::Expected<Tensor> pullRows(llvm::StringRef, const Tensor &) override {
    return ir::makeError(ir::ErrorCode::Internal, "a parameter server does not pull");
  }
  llvm::Error push(llvm::StringRef, const runtime::RuntimeValue &) override {
    return ir::makeError(ir::ErrorCode::Internal, "a parameter server does not push");
  }
  llvm::Expected<const runtime::RuntimeValue *> gradient(llvm::StringRef variable) override {
    auto it = current->find(variable.str());
    if (it == current->end())
      return ir::makeError(ir::ErrorCode::NotFound,
                           "no gradient of '" + variable.str() + "' arrived this step");
    runtime::RuntimeValue &value = values_[variable.str()];
    value.sparse = it->second.isSparse();
    value.dense = value.sparse ? it->second.rows : it->second.dense;
    value.indices = it->second.indices;
    return &value;
  }

private:
  std::map<std::string, runtime::RuntimeValue> values_;
};

// The variables of a PS task's checkpoint, into its store (each must be one the plan gives it);
// the step they were saved at.
llvm::Expected<int64_t> restoreVariables(const std::string &path, const plan::Task &task,
                                         runtime::VariableStore &store) {
  auto saved = train::loadCheckpoint(path);
  if (!saved)
    return saved.takeError();
  if (saved->position.model != task.name())
    return ir::makeError(path + " is the checkpoint of " + saved->position.model + ", not of " +
                         task.name() + ": the files of the checkpoint were moved or renamed");
  for (const auto &[name, value] : saved->variables) {
    const Tensor *current = store.find(name);
    if (!current || current->shape() != value.shape() || current->dtype() != value.dtype())
      return ir::makeError("the checkpoint of " + task.name() + " holds '" + name +
                           "', which this plan gives it in another shape or not at all");
    store.set(name, value.clone());
  }
  return saved->position.globalStep;
}

// Until worker:0 says the job is done (each wait bounded; an abort ends the process).
llvm::Error waitForJobEnd(dist::CoordinatorClient &client) {
  for (;;) {
    auto done = client.get(kDoneKey, std::chrono::seconds(5));
    if (done)
      return llvm::Error::success();
    llvm::Error err = done.takeError();
    if (ir::errorCode(err) != ir::ErrorCode::DeadlineExceeded)
      return ir::withContext(std::move(err), "waiting for the job to end");
    llvm::consumeError(std::move(err));
  }
}

// How a server turns pushes into steps: every worker's, the first workers - K (backup workers),
// or each on arrival (async).
ps::PushPolicy pushPolicy(const plan::Plan &plan) {
  const plan::Synchronization sync = plan::readSynchronization(plan.run());
  ps::PushPolicy policy;
  policy.async = sync.mode == plan::SyncMode::Async;
  policy.maxStaleness = sync.maxStaleness;
  if (sync.backupWorkers > 0)
    policy.quorum = numWorkers(plan) - sync.backupWorkers;
  return policy;
}

// The server's line at the end of a job: "version 120, applied pushes by worker 60 60 0,
// dropped 0 0 55, largest lead 0 steps, 7680 examples applied in 3.2 s".
std::string describePushes(const ps::ParameterServer &server) {
  ps::PushCounts counts = server.counts();
  auto list = [](const std::vector<int64_t> &values) {
    std::string text;
    for (int64_t v : values)
      text += " " + std::to_string(v);
    return text;
  };
  std::string line;
  llvm::raw_string_ostream(line) << "version " << server.version() << ", applied pushes by worker"
                                 << list(counts.applied) << ", dropped" << list(counts.dropped)
                                 << ", largest lead " << counts.maxLead << " steps, "
                                 << llvm::format("%.0f", counts.examples) << " examples applied in "
                                 << llvm::format("%.3f", counts.seconds) << " s";
  return line;
}
// Elastic membership on a parameter server: each new membership the coordinator publishes
// changes the server's contributors (dropping the pushes of the interrupted step), and the
// server says at which version the new membership starts.
class MembershipFollower {
public:
  MembershipFollower(dist::CoordinatorClient &client, ps::ParameterServer &server, std::string task)
      : client_(client), server_(server), task_(std::move(task)) {
    thread_ = std::thread([this] { follow(); });
  }
  ~MembershipFollower() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    stop_.notify_all();
    thread_.join();
  }

private:
  void follow() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_.wait_for(lock, std::chrono::milliseconds(50), [this] { return stopping_; })) {
      lock.unlock();
      if (auto e = followOnce()) // the heartbeats decide when the job is gone
        llvm::consumeError(std::move(e));
      lock.lock();
    }
  }
  llvm::Error followOnce() {
    auto text = client_.get(dist::kMembershipEpochKey, std::chrono::milliseconds(0));
    if (!text)
      return text.takeError();
    int64_t epoch = 0;
    if (llvm::StringRef(*text).getAsInteger(10, epoch) || epoch <= epoch_)
      return llvm::Error::success();
    auto members = client_.get(dist::membershipKey(epoch), std::chrono::milliseconds(0));
    if (!members)
      return members.takeError();
    auto contributors = static_cast<int64_t>(dist::splitMembers(*members).size());
    int64_t version = server_.changeMembership(epoch, contributors);
    if (auto e = client_.set(dist::membershipVersionKey(epoch, task_), std::to_string(version)))
      return e;
    epoch_ = epoch;
    return llvm::Error::success();
  }

  dist::CoordinatorClient &client_;
  ps::ParameterServer &server_;
  std::string task_;
  int64_t epoch_ = 0;
  std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  std::thread thread_;
};

// A restored server's shards: of the step its variables were saved at (else the checkpoint
// mixes saves), which it then tells the workers.
llvm::Error loadRestoredShards(ps::ParameterServer &server, const plan::Task &task,
                               dist::CoordinatorClient &client, const std::string &restoreDir,
                               int64_t restoredStep) {
  const std::string checkpointName = plan::taskFileName(task.name());
  const std::string shardsPath = restoreDir + "/" + checkpointName + ".shards";
  if (auto e = server.load(shardsPath))
    return e;
  if (server.version() != restoredStep)
    return ir::makeError("the checkpoint of " + task.name() + " mixes saves: " + shardsPath +
                         " is at step " + std::to_string(server.version()) + ", " + restoreDir +
                         "/" + checkpointName + " at step " + std::to_string(restoredStep));
  return client.set(restoredStepKey(task.name()), std::to_string(restoredStep));
}

// What a PS task serves for `plan`: its program's variables from the seed, the shards workers
// pull and push, and the update (the program) that applies their combined gradients.
struct ServerParts {
  std::unique_ptr<ir::Module> module; // the update's program, which must outlive it
  std::shared_ptr<runtime::VariableStore> store;
  std::shared_ptr<CombinedGradients> gradients;
  std::unique_ptr<runtime::Executor> update;
  ps::ParameterServerOptions serverOptions;
};

llvm::Expected<ServerParts> prepareServer(const plan::Plan &plan, const plan::Task &task,
                                          const JobOptions &options,
                                          const std::optional<dist::TlsIdentity> &tls,
                                          TraceRecorder *trace) {
  ServerParts parts;
  auto module = plan::parseProgram(*plan::findProgram(plan, task.name()));
  if (!module)
    return module.takeError();
  parts.module = std::move(*module);
  auto store = std::make_shared<runtime::VariableStore>();
  if (auto e = store->initialize(*parts.module, plan.run().seed()))
    return std::move(e);
  parts.store = store;
  auto shards = shardsOn(plan, task);
  if (!shards)
    return shards.takeError();
  // The update: the PS program, reading the combined gradients through ps_gradient*.
  auto gradients = std::make_shared<CombinedGradients>();
  parts.gradients = gradients;
  runtime::ExecutorOptions execOptions;
  execOptions.threads = options.threads;
  execOptions.communication = gradients.get();
  auto executor = runtime::Executor::create(*parts.module, store, execOptions);
  if (!executor)
    return executor.takeError();
  parts.update = std::move(*executor);

  ps::ParameterServerOptions &serverOptions = parts.serverOptions;
  serverOptions.shards = std::move(*shards);
  serverOptions.address =
      task.address() + ":" + (plan::onLoopback(plan) ? "0" : std::to_string(task.port()));
  serverOptions.jobToken = options.jobToken;
  serverOptions.tls = tls;
  serverOptions.variables = store;
  serverOptions.contributors = numWorkers(plan);
  if (plan.host_aggregation_size() > 0)
    serverOptions.contributorIds = plan::psContributors(plan);
  // How many pushes each step combined (one per aggregating host), for the trace's apply spans.
  auto combinedPushes = std::make_shared<size_t>(0);
  serverOptions.combined = [combinedPushes](int64_t, llvm::ArrayRef<int64_t> contributors) {
    *combinedPushes = contributors.size();
  };
  serverOptions.policy = pushPolicy(plan);
  serverOptions.waitTimeout = options.rpcTimeout;
  runtime::Executor *update = parts.update.get();
  serverOptions.apply = [gradients, update, trace,
                         combinedPushes](int64_t step, const ps::GradientSet &set) -> llvm::Error {
    TraceSpan span(trace, "apply", "apply step " + std::to_string(step), "ps_apply");
    span.addArg("variables", static_cast<double>(set.size()));
    span.addArg("contributors", static_cast<double>(*combinedPushes));
    gradients->current = &set;
    auto e = update->step({});
    gradients->current = nullptr;
    return e;
  };
  return std::move(parts);
}

llvm::Error runParameterServer(const plan::Plan &plan, const plan::Task &task,
                               dist::CoordinatorClient &client, const JobOptions &options,
                               const std::optional<InjectedFault> &fault,
                               const std::optional<dist::TlsIdentity> &tls, TraceRecorder *trace) {
  auto parts = prepareServer(plan, task, options, tls, trace);
  if (!parts)
    return parts.takeError();
  ps::ParameterServerOptions &serverOptions = parts->serverOptions;
  std::shared_ptr<runtime::VariableStore> store = parts->store;
  const std::string checkpointName = plan::taskFileName(task.name());
  // Its part of the periodic checkpoint of `version`, written while the server holds its lock:
  // variables, optimizer state and shards of one version.
  serverOptions.afterApply = [&, shards = serverOptions.shards](int64_t version) -> llvm::Error {
    injectAtStep(fault, version);
    const train::PeriodicCheckpoints &checkpoints = options.checkpoints;
    if (checkpoints.dir.empty() || version % checkpoints.every != 0)
      return llvm::Error::success();
    std::string dir = train::partialCheckpointDir(checkpoints.dir, version);
    if (auto e = writeVariables(dir, task.name(), *store, version))
      return e;
    if (auto e = ps::writeShardCheckpoint(dir + "/" + checkpointName + ".shards", version, shards,
                                          *store))
      return e;
    return reportCheckpointPart(client, task.name(), version, fault);
  };
  std::optional<int64_t> restoredStep;
  if (!options.restoreDir.empty()) {
    auto step = restoreVariables(options.restoreDir + "/" + checkpointName, task, *store);
    if (!step)
      return step.takeError();
    restoredStep = *step;
  }
  auto server = ps::ParameterServer::start(std::move(serverOptions));
  if (!server)
    return server.takeError();
  if (restoredStep)
    if (auto e = loadRestoredShards(**server, task, client, options.restoreDir, *restoredStep))
      return e;
  if (auto e = client.set(endpointKey(task.name()), (*server)->endpoint()))
    return e;
  std::optional<MembershipFollower> follower;
  if (plan.run().elastic_max() > 0)
    follower.emplace(client, **server, task.name());
  if (auto e = waitForJobEnd(client))
    return e;
  if (!options.quiet)
    llvm::outs() << task.name() << ": " << describePushes(**server) << "\n";
  llvm::outs().flush();
  follower.reset();
  for (const std::string &dir : {options.variablesDir, options.saveDir})
    if (!dir.empty())
      if (auto e = writeVariables(dir, task.name(), *store, (*server)->version()))
        return e;
  if (!options.saveDir.empty())
    if (auto e = (*server)->save(options.saveDir + "/" + checkpointName + ".shards"))
      return e;
  (*server)->shutdown();
  return llvm::Error::success();
}

// --partitions search (plan/PartitionSearch.h): each candidate has its own servers, group and
// keys, all under this prefix.
std::string searchKey(size_t candidate, llvm::StringRef what) {
  return "partition-search/" + std::to_string(candidate) + "/" + what.str();
}
constexpr const char *kSearchChoiceKey = "partition-search/choice";

// Worker `task` runs the warm-up and timed steps of the search's candidate `index` from the
// initial values and the first batch, on the candidate's own servers; returns the timed steps'
// seconds.
llvm::Expected<std::vector<double>> timeCandidate(const plan::Plan &plan, size_t index,
                                                  const plan::Task &task,
                                                  dist::CoordinatorClient &client,
                                                  const JobOptions &options,
                                                  const std::optional<dist::TlsIdentity> &tls) {
  const plan::Plan candidate = plan::candidatePlan(plan, index);
  const plan::PartitionSearch &search = plan.partition_search();
  auto module = plan::parseProgram(*plan::findProgram(candidate, task.name()));
  if (!module)
    return module.takeError();
  auto collective =
      dist::Collective::create(client, searchKey(index, ir::kWorkerGroup), task.index(),
                               numWorkers(candidate), task.address(), options.rpcTimeout);
  if (!collective)
    return collective.takeError();
  auto psClient = connectToParameterServers(candidate, client, options, tls, searchKey(index, ""));
  if (!psClient)
    return psClient.takeError();
  WorkerCommunication communication(task.index(), std::move(*collective), std::move(*psClient),
                                    {compressionOf(candidate), candidate.run().error_feedback()});
  communication.setStepPulls(wholePulls(**module));
  std::vector<double> seconds;
  std::chrono::steady_clock::time_point start;
  train::WorkerRole role;
  role.rank = task.index();
  role.workers = numWorkers(candidate);
  role.communication = &communication;
  role.beforeStep = [&](int64_t step, int64_t examples, int64_t globalExamples) -> llvm::Error {
    start = std::chrono::steady_clock::now();
    communication.beginStep(step, examples, globalExamples);
    return llvm::Error::success();
  };
  role.afterStep = [&](int64_t step) -> llvm::Error {
    if (auto e = communication.finishStep())
      return e;
    if (step >= search.warmup_steps())
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return llvm::Error::success();
  };
  auto train = workerTrainOptions(candidate, task, options);
  if (!train)
    return train.takeError();
  train->steps = search.warmup_steps() + search.timed_steps();
  train->epochs.reset();
  train->quiet = true;
  train->evaluate = false;
  train->metricsOut.clear();
  train->saveDir.clear();
  train->restoreDir.clear();
  train->worker = &role;
  auto result = train::train(**module, *train);
  if (!result)
    return ir::withContext(
        result.takeError(),
        "timing " + std::to_string(search.candidates(static_cast<int>(index)).partitions()) +
            " partitions");
  return seconds;
}

// Rank 0's lines on the search: each candidate's median step, the fitted curve, the choice.
void reportSearch(const plan::PartitionSearch &search, llvm::ArrayRef<double> medians,
                  const std::optional<plan::PartitionCurve> &curve, size_t chosen,
                  double searchSeconds) {
  auto ms = [](double seconds) { return llvm::format("%.3f ms", seconds * 1e3); };
  for (size_t i = 0; i < medians.size(); ++i)
    llvm::outs() << "partition search: " << search.candidates(static_cast<int>(i)).partitions()
                 << " partitions: median step " << ms(medians[i]) << " over "
                 << search.timed_steps() << " steps\n";
  if (curve)
    llvm::outs() << "partition search: fit t(P) = a (P - 1) + b / P + c: a = " << ms(curve->a)
                 << ", b = " << ms(curve->b) << ", c = " << ms(curve->c) << "\n";
  else
    llvm::outs() << "partition search: no fit (fewer than 3 counts): the fastest measured\n";
  llvm::outs() << "partition search: chose "
               << search.candidates(static_cast<int>(chosen)).partitions() << " partitions ("
               << llvm::format("%.1f", searchSeconds) << " s of search)\n";
  llvm::outs().flush();
}

// A worker's part of the search: time every candidate; rank 0 fits, chooses and publishes the
// choice, and returns it (the others return none).
llvm::Expected<std::optional<size_t>> searchOnWorker(const plan::Plan &plan, const plan::Task &task,
                                                     dist::CoordinatorClient &client,
                                                     const JobOptions &options,
                                                     const std::optional<dist::TlsIdentity> &tls) {
  const auto start = std::chrono::steady_clock::now();
  const plan::PartitionSearch &search = plan.partition_search();
  std::vector<int64_t> counts;
  std::vector<double> medians;
  for (int i = 0; i < search.candidates_size(); ++i) {
    auto seconds = timeCandidate(plan, static_cast<size_t>(i), task, client, options, tls);
    if (!seconds)
      return seconds.takeError();
    if (auto e = client.set(searchKey(static_cast<size_t>(i), "finished/" + task.name()), "1"))
      return std::move(e);
    counts.push_back(search.candidates(i).partitions());
    medians.push_back(plan::medianOf(*seconds));
  }
  if (task.index() != 0)
    return std::nullopt;
  const std::optional<plan::PartitionCurve> curve = plan::fitPartitionCurve(counts, medians);
  const size_t chosen = plan::choosePartitions(counts, medians, curve);
  if (!options.quiet)
    reportSearch(search, medians, curve, chosen,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (!options.variablesDir.empty()) {
    std::error_code ec = llvm::sys::fs::create_directories(options.variablesDir);
    llvm::raw_fd_ostream out(options.variablesDir + "/" + kPartitionSearchChoiceFile, ec);
    if (ec)
      return ir::makeError("cannot write " + options.variablesDir + "/" +
                           kPartitionSearchChoiceFile + ": " + ec.message());
    out << counts[chosen] << "\n";
  }
  if (auto e = client.set(kSearchChoiceKey, std::to_string(chosen)))
    return std::move(e);
  return chosen;
}

// A PS task's part of the search: serve each candidate's shards from the initial values until
// every worker has timed it.
llvm::Error searchOnServer(const plan::Plan &plan, const plan::Task &task,
                           dist::CoordinatorClient &client, const JobOptions &options,
                           const std::optional<dist::TlsIdentity> &tls) {
  const plan::PartitionSearch &search = plan.partition_search();
  // Each of a candidate's steps waits at most rpcTimeout for its pulls, pushes and all-reduces.
  const auto bound = options.rpcTimeout * (search.warmup_steps() + search.timed_steps() + 1);
  for (int i = 0; i < search.candidates_size(); ++i) {
    const size_t index = static_cast<size_t>(i);
    const plan::Plan candidate = plan::candidatePlan(plan, index);
    auto parts = prepareServer(candidate, task, options, tls, nullptr);
    if (!parts)
      return parts.takeError();
    auto server = ps::ParameterServer::start(std::move(parts->serverOptions));
    if (!server)
      return server.takeError();
    if (auto e = client.set(endpointKey(searchKey(index, task.name())), (*server)->endpoint()))
      return e;
    for (const plan::Task &t : plan.cluster().tasks()) {
      if (t.role() != "worker")
        continue;
      auto finished = client.get(searchKey(index, "finished/" + t.name()),
                                 std::chrono::duration_cast<std::chrono::milliseconds>(bound));
      if (!finished)
        return ir::withContext(finished.takeError(),
                               "waiting for " + t.name() + " to time " +
                                   std::to_string(search.candidates(i).partitions()) +
                                   " partitions");
    }
    (*server)->shutdown();
  }
  return llvm::Error::success();
}

// With --partitions search: times the candidates, then `chosen` becomes the plan of the one the
// job trains with (left empty for a plan without a search).
llvm::Error searchPartitions(const plan::Plan &plan, const plan::Task &task,
                             dist::CoordinatorClient &client, const JobOptions &options,
                             const std::optional<dist::TlsIdentity> &tls,
                             std::optional<plan::Plan> &chosen) {
  if (!plan.has_partition_search())
    return llvm::Error::success();
  if (auto e = checkPartitionSearchRun(plan, options))
    return e;
  const bool worker = task.role() == "worker";
  if (worker) {
    auto index = searchOnWorker(plan, task, client, options, tls);
    if (!index)
      return index.takeError();
    if (*index) {
      chosen = plan::candidatePlan(plan, **index);
      return llvm::Error::success();
    }
  } else if (auto e = searchOnServer(plan, task, client, options, tls)) {
    return e;
  }
  auto text = client.get(kSearchChoiceKey, options.rpcTimeout);
  if (!text)
    return ir::withContext(text.takeError(), "waiting for worker:0's partition choice");
  size_t index = 0;
  if (llvm::StringRef(*text).getAsInteger(10, index) ||
      index >= static_cast<size_t>(plan.partition_search().candidates_size()))
    return ir::makeError("worker:0's partition choice '" + *text + "' is no candidate");
  chosen = plan::candidatePlan(plan, index);
  return llvm::Error::success();
}

// Joins an elastic job as a new worker: `joined` becomes its task (the plan's first worker's,
// renamed as the coordinator says) and `options` the job's flags. Returns the first membership
// epoch the worker is in.
llvm::Expected<int64_t> joinAsWorker(dist::CoordinatorClient &client, const plan::Task &model,
                                     JobOptions &options, plan::Task &joined) {
  auto epoch = client.join();
  if (!epoch)
    return epoch.takeError();
  auto args = client.get(kTaskArgsKey, options.rpcTimeout);
  if (!args)
    return ir::withContext(args.takeError(), "the job's task flags");
  llvm::SmallVector<llvm::StringRef, 16> lines;
  llvm::StringRef(*args).split(lines, '\n');
  auto job = TaskCommand::parse(std::vector<std::string>(lines.begin(), lines.end()));
  if (!job)
    return ir::withContext(job.takeError(), "the job's task flags");
  JobOptions mine = options;
  options = job->options;
  options.jobToken = mine.jobToken;
  options.join = true;
  options.traceDir = mine.traceDir.empty() ? options.traceDir : mine.traceDir;
  joined = model;
  joined.set_name(client.taskName());
  int64_t index = 0;
  llvm::StringRef(client.taskName()).rsplit(':').second.getAsInteger(10, index);
  joined.set_index(static_cast<int32_t>(index));
  return *epoch;
}

} // namespace

llvm::Error checkPartitionSearchRun(const plan::Plan &plan, const JobOptions &options) {
  if (!plan.has_partition_search())
    return llvm::Error::success();
  const char *flag = "--partitions search";
  if (!options.restoreDir.empty())
    return ir::makeError(std::string("--restore with a plan made with ") + flag +
                         ": a restored job would search again and may choose another count "
                         "(make the plan with --partitions N)");
  if (!options.checkpoints.dir.empty())
    return ir::makeError(std::string("--checkpoint-every with a plan made with ") + flag +
                         ": restarting from a checkpoint is not supported after a search (make "
                         "the plan with --partitions N)");
  if (options.join)
    return ir::makeError(std::string("prism task --join with a plan made with ") + flag);
  return llvm::Error::success();
}

int runTask(const plan::Plan &plan, llvm::StringRef taskName, const std::string &coordinator,
            const JobOptions &jobOptions) {
  // A peer that goes away (a lost worker, under elastic membership too) closes its sockets:
  // writes to them must fail as errors the collective reports, not end this task by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  JobOptions options = jobOptions;
  if (options.jobToken.empty())
    options.jobToken = plan::jobToken(plan);
  const plan::Task *task = options.join ? firstWorker(plan) : plan::findTask(plan, taskName);
  auto fail = [&](llvm::Error e) {
    std::string message = llvm::toString(std::move(e));
    std::fprintf(stderr, "%s: %s\n", options.join ? "prism task --join" : taskName.str().c_str(),
                 message.c_str());
    return 1;
  };
  if (!task || task->role() == "coordinator")
    return fail(ir::makeError("the plan has no worker or PS task '" + taskName.str() + "'"));
  std::optional<InjectedFault> fault;
  if (!options.injectFault.empty()) {
    auto parsed = parseInjectedFault(options.injectFault);
    if (!parsed)
      return fail(parsed.takeError());
    fault = *parsed;
  }
  auto tls = dist::readTlsFiles(options.tls);
  if (!tls)
    return fail(tls.takeError());
  dist::CoordinatorClientOptions clientOptions;
  clientOptions.tls = *tls;
  clientOptions.coordinatorTask = options.coordinatorTask;
  if (clientOptions.coordinatorTask.empty())
    for (const plan::Task &t : plan.cluster().tasks())
      if (t.role() == "coordinator")
        clientOptions.coordinatorTask = t.name();
  clientOptions.address = coordinator;
  clientOptions.jobToken = options.jobToken;
  clientOptions.taskName = options.join ? "a joining worker" : task->name();
  dist::CoordinatorClient client(clientOptions);
  std::optional<int64_t> joinEpoch;
  plan::Task joined;
  if (options.join) {
    auto epoch = joinAsWorker(client, *task, options, joined);
    if (!epoch)
      return fail(epoch.takeError());
    joinEpoch = *epoch;
    task = &joined;
  } else if (auto e = client.registerTask()) {
    return fail(std::move(e));
  }
  std::string name = task->name();
  if (auto e = client.startHeartbeats(
          std::chrono::milliseconds(500), [name](std::string reason) { exitOnAbort(name, reason); },
          options.heartbeatTimeout))
    return fail(std::move(e));
  std::unique_ptr<TraceRecorder> trace;
  if (!options.traceDir.empty()) {
    trace = std::make_unique<TraceRecorder>(name);
    auto offset = client.clockOffsetMicros();
    if (!offset)
      return fail(ir::withContext(offset.takeError(), "aligning the trace's clock"));
    trace->setClockOffset(*offset);
  }
  // --partitions search: the candidates are timed first, and the job runs the chosen one's plan.
  std::optional<plan::Plan> searched;
  llvm::Error e = searchPartitions(plan, *task, client, options, *tls, searched);
  const plan::Plan &chosen = searched ? *searched : plan;
  if (!e)
    e = task->role() == "worker"
            ? runWorker(chosen, *task, client, options, fault, *tls, trace.get(), joinEpoch)
            : runParameterServer(chosen, *task, client, options, fault, *tls, trace.get());
  // The timeline is written however the task ended: a failed one is what it is for.
  if (trace) {
    std::string path = options.traceDir + "/" + plan::taskFileName(name) + ".json";
    llvm::Error written =
        llvm::errorCodeToError(llvm::sys::fs::create_directories(options.traceDir));
    if (!written)
      written = trace->write(path);
    if (written) {
      std::string message = llvm::toString(std::move(written));
      std::fprintf(stderr, "%s: the trace: %s\n", name.c_str(), message.c_str());
    }
  }
  if (e) {
    std::string message = llvm::toString(std::move(e));
    std::fprintf(stderr, "%s: %s\n", name.c_str(), message.c_str());
    std::fflush(stderr);
    llvm::consumeError(client.reportFailure(message));
    client.stopHeartbeats();
    return 1;
  }
  llvm::consumeError(client.finish());
  return 0;
}

} // namespace prism::runtime::job
