// One task of a plan, in its own process: a worker trains on its shard of the data; a parameter
// server serves and updates its shards; both stop when the job ends or aborts.
#include "runtime/job/Task.h"

#include <unistd.h>

#include <cstdio>
#include <thread>

#include "ir/Diagnostic.h"
#include "passes/Collectives.h"
#include "plan/PlanTasks.h"
#include "plan/PlanVerifier.h"
#include "runtime/dist/CoordinatorClient.h"
#include "runtime/job/WorkerCommunication.h"
#include "runtime/ps/ParameterServer.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Trainer.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::runtime::job {
namespace {

constexpr const char *kDoneKey = "job/done";

std::string endpointKey(llvm::StringRef task) {
  return "endpoint/" + task.str();
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
                           const cpu::VariableStore &store, int64_t steps) {
  train::TrainingPosition position;
  position.globalStep = steps;
  position.model = task;
  return train::saveCheckpoint(dir + "/" + plan::taskFileName(task), position, store.all());
}

llvm::Error runWorker(const plan::Plan &plan, const plan::Task &task,
                      dist::CoordinatorClient &client, const JobOptions &options) {
  const plan::Program *program = plan::findProgram(plan, task.name());
  auto module = plan::parseProgram(*program);
  if (!module)
    return module.takeError();
  auto collective = dist::Collective::create(client, passes::kWorkerGroup, task.index(),
                                             numWorkers(plan), task.address(), options.rpcTimeout);
  if (!collective)
    return collective.takeError();

  // The parameter servers publish where they listen.
  std::unique_ptr<ps::PsClient> psClient;
  ps::PsClientOptions psOptions;
  psOptions.jobToken = options.jobToken;
  psOptions.rpcDeadline = options.rpcTimeout;
  for (const plan::Variable &v : plan.variables()) {
    if (v.placement() != "ps" || !v.trainable())
      continue;
    ps::VariableLayout layout;
    layout.dtype = *ir::parseDType(v.dtype());
    layout.shape.assign(v.shape().begin(), v.shape().end());
    for (const plan::Shard &s : v.shards()) {
      auto endpoint = client.get(endpointKey(s.task()), options.rpcTimeout);
      if (!endpoint)
        return endpoint.takeError();
      layout.shards.push_back({*endpoint, s.row_begin(), s.row_end()});
    }
    psOptions.variables[v.name()] = std::move(layout);
  }
  if (!psOptions.variables.empty()) {
    auto created = ps::PsClient::create(std::move(psOptions));
    if (!created)
      return created.takeError();
    psClient = std::move(*created);
  }
  WorkerCommunication communication(task.index(), std::move(*collective), std::move(psClient));

  train::WorkerRole role;
  role.rank = task.index();
  role.workers = numWorkers(plan);
  role.communication = &communication;
  role.beforeStep = [&](int64_t step, int64_t examples, int64_t globalExamples) {
    communication.beginStep(step, examples, globalExamples);
    return llvm::Error::success();
  };
  role.afterStep = [&](int64_t) { return communication.finishStep(); };

  auto spec = data::parseDataSpec(options.data);
  if (!spec)
    return spec.takeError();
  train::TrainOptions train;
  train.data = *spec;
  train.steps = options.steps;
  if (!train.steps && plan.run().steps() > 0)
    train.steps = plan.run().steps();
  train.epochs = options.epochs;
  train.batchSize = plan.run().global_batch();
  train.threads = options.threads;
  train.seed = plan.run().seed();
  bool first = task.index() == 0;
  train.quiet = options.quiet || !first;
  train.evaluate = options.evaluate && first;
  if (first)
    train.metricsOut = options.metricsOut;
  train.worker = &role;
  if (!options.saveDir.empty() && first)
    train.saveDir = options.saveDir + "/worker";
  if (!options.restoreDir.empty())
    train.restoreDir = options.restoreDir + "/worker";
  // The store outlives training when the variables are to be written.
  auto result = train::train(**module, train);
  if (!result)
    return result.takeError();
  if (first) {
    if (!options.quiet)
      llvm::outs() << "done: " << result->steps << " steps, "
                   << llvm::format("%.0f", result->samplesPerSec) << " samples/s, loss "
                   << llvm::format("%.6f", result->lastLoss) << "\n";
    llvm::outs().flush();
    if (auto e = client.set(kDoneKey, "1"))
      return e;
  }
  if (!options.variablesDir.empty() && result->store)
    if (auto e =
            writeVariables(options.variablesDir, task.name(), *result->store, result->globalStep))
      return e;
  return llvm::Error::success();
}

llvm::Error runParameterServer(const plan::Plan &plan, const plan::Task &task,
                               dist::CoordinatorClient &client, const JobOptions &options) {
  const plan::Program *program = plan::findProgram(plan, task.name());
  auto module = plan::parseProgram(*program);
  if (!module)
    return module.takeError();
  auto store = std::make_shared<cpu::VariableStore>();
  if (auto e = store->initialize(**module, plan.run().seed()))
    return e;

  // The shards workers pull and push: the trained variables this task holds rows of.
  ps::ParameterServerOptions serverOptions;
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
      return ir::makeError("variable '" + v.name() + "' has " + std::to_string(mine.size()) +
                           " row ranges on " + task.name() +
                           "; a parameter server holds one range per variable (use --partitions "
                           "no larger than the number of PS tasks)");
    ps::PsShard shard;
    shard.name = v.name();
    shard.dtype = *ir::parseDType(v.dtype());
    shard.rowBegin = mine[0]->row_begin();
    shard.rowEnd = mine[0]->row_end();
    shard.fullShape.assign(v.shape().begin(), v.shape().end());
    serverOptions.shards.push_back(shard);
  }

  // The update: the PS program, reading the combined gradients through ps_gradient*.
  class Gradients : public cpu::Communication {
  public:
    const ps::GradientSet *current = nullptr;
    std::map<std::string, cpu::RuntimeValue> values;
    llvm::Error allReduce(llvm::StringRef, int64_t, llvm::ArrayRef<Tensor *>) override {
      return ir::makeError("a parameter server does not all-reduce");
    }
    llvm::Expected<Tensor> pull(llvm::StringRef) override {
      return ir::makeError("a parameter server does not pull");
    }
    llvm::Expected<Tensor> pullRows(llvm::StringRef, const Tensor &) override {
      return ir::makeError("a parameter server does not pull");
    }
    llvm::Error push(llvm::StringRef, const cpu::RuntimeValue &) override {
      return ir::makeError("a parameter server does not push");
    }
    llvm::Expected<const cpu::RuntimeValue *> gradient(llvm::StringRef variable) override {
      auto it = current->find(variable.str());
      cpu::RuntimeValue &value = values[variable.str()];
      if (it == current->end())
        return ir::makeError("no gradient of '" + variable.str() + "' arrived this step");
      value.sparse = it->second.isSparse();
      value.dense = value.sparse ? it->second.rows : it->second.dense;
      value.indices = it->second.indices;
      return &value;
    }
  };
  auto gradients = std::make_shared<Gradients>();
  cpu::ExecutorOptions execOptions;
  execOptions.threads = options.threads;
  execOptions.communication = gradients.get();
  auto executor = cpu::Executor::create(**module, store, execOptions);
  if (!executor)
    return executor.takeError();

  std::string host = task.address();
  serverOptions.address = host + ":" + (plan::onLoopback(plan) ? "0" : std::to_string(task.port()));
  serverOptions.jobToken = options.jobToken;
  serverOptions.variables = store;
  serverOptions.contributors = numWorkers(plan);
  serverOptions.waitTimeout = options.rpcTimeout;
  cpu::Executor *update = executor->get();
  serverOptions.apply = [gradients, update](int64_t, const ps::GradientSet &set) -> llvm::Error {
    gradients->current = &set;
    auto e = update->step({});
    gradients->current = nullptr;
    return e;
  };
  std::string checkpointName = plan::taskFileName(task.name());
  if (!options.restoreDir.empty()) {
    auto saved = train::loadCheckpoint(options.restoreDir + "/" + checkpointName);
    if (!saved)
      return saved.takeError();
    for (const auto &[name, value] : saved->variables) {
      const Tensor *current = store->find(name);
      if (!current || current->shape() != value.shape() || current->dtype() != value.dtype())
        return ir::makeError("the checkpoint of " + task.name() + " holds '" + name +
                             "', which this plan gives it in another shape or not at all");
      store->set(name, value.clone());
    }
  }
  auto server = ps::ParameterServer::start(std::move(serverOptions));
  if (!server)
    return server.takeError();
  if (!options.restoreDir.empty())
    if (auto e = (*server)->load(options.restoreDir + "/" + checkpointName + ".shards"))
      return e;
  if (auto e = client.set(endpointKey(task.name()), (*server)->endpoint()))
    return e;

  // Serve until worker:0 says the job is done (each wait bounded; an abort ends the process).
  for (;;) {
    auto done = client.get(kDoneKey, std::chrono::seconds(5));
    if (done)
      break;
    llvm::Error err = done.takeError();
    if (ir::errorCode(err) != ir::ErrorCode::DeadlineExceeded)
      return ir::withContext(std::move(err), "waiting for the job to end");
    llvm::consumeError(std::move(err));
  }
  if (!options.variablesDir.empty())
    if (auto e = writeVariables(options.variablesDir, task.name(), *store, (*server)->version()))
      return e;
  if (!options.saveDir.empty()) {
    if (auto e = writeVariables(options.saveDir, task.name(), *store, (*server)->version()))
      return e;
    if (auto e = (*server)->save(options.saveDir + "/" + checkpointName + ".shards"))
      return e;
  }
  (*server)->shutdown();
  return llvm::Error::success();
}

} // namespace

int runTask(const plan::Plan &plan, llvm::StringRef taskName, const std::string &coordinator,
            const JobOptions &jobOptions) {
  JobOptions options = jobOptions;
  if (options.jobToken.empty())
    options.jobToken = plan::jobToken(plan);
  const plan::Task *task = plan::findTask(plan, taskName);
  auto fail = [&](llvm::Error e) {
    std::string message = llvm::toString(std::move(e));
    std::fprintf(stderr, "%s: %s\n", taskName.str().c_str(), message.c_str());
    return 1;
  };
  if (!task || task->role() == "coordinator")
    return fail(ir::makeError("the plan has no worker or PS task '" + taskName.str() + "'"));
  dist::CoordinatorClientOptions clientOptions;
  clientOptions.address = coordinator;
  clientOptions.jobToken = options.jobToken;
  clientOptions.taskName = task->name();
  dist::CoordinatorClient client(clientOptions);
  if (auto e = client.registerTask())
    return fail(std::move(e));
  std::string name = task->name();
  if (auto e = client.startHeartbeats(
          std::chrono::milliseconds(500), [name](std::string reason) { exitOnAbort(name, reason); },
          options.heartbeatTimeout))
    return fail(std::move(e));
  llvm::Error e = task->role() == "worker" ? runWorker(plan, *task, client, options)
                                           : runParameterServer(plan, *task, client, options);
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
