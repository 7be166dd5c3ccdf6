// `prism calibrate [--threads T] [--quick] [-o FILE] [--cluster C [--launcher L]]`: measures this
// machine's kernels, Gloo all-reduce and parameter server on loopback, and a ring through each
// bandwidth of the cluster's links (CalibrateLinks.h), and writes the cost profile `prism
// simulate` reads (plan/CostProfile.h; docs/simulate.md "Calibrating").
#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <future>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "cluster/ClusterParser.h"
#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "plan/CommunicationCost.h"
#include "plan/CostProfile.h"
#include "plan/Partitioner.h"
#include "plan/PlanVerifier.h"
#include "plan/ProfileFit.h"
#include "plan/Simulator.h"
#include "runtime/data/BatchIterator.h"
#include "runtime/data/FashionMnist.h"
#include "runtime/dist/AllReduceTiming.h"
#include "runtime/dist/Collective.h"
#include "runtime/dist/Coordinator.h"
#include "runtime/dist/CoordinatorClient.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/Trace.h"
#include "runtime/job/JobOptions.h"
#include "runtime/ps/GradientAggregator.h"
#include "runtime/ps/ParameterServer.h"
#include "runtime/ps/PsClient.h"
#include "tools/CalibrateLinks.h"
#include "tools/CalibrateServer.h"
#include "tools/Commands.h"
#include "tools/Partition.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {
namespace {

using Clock = std::chrono::steady_clock;
using Samples = std::vector<plan::TimingSample>;

struct CalibrateArgs {
  int threads = runtime::job::JobOptions().threads;
  bool quick = false;
  std::string output;
  std::string models = PRISM_MODELS_DIR;
  std::string cluster;  // --cluster: its links are measured too
  std::string launcher; // --launcher: how a rank starts on a host
};

// What one run measures: the models and batch sizes whose ops are timed, the steps timed at
// each, and the all-reduce and PS message sizes.
struct Workload {
  std::vector<std::string> models;
  std::vector<int64_t> batches;
  int steps = 0;
  std::vector<size_t> messageBytes; // all-reduces
  std::vector<size_t> psBytes;      // PS pulls and pushes (each also an update)
  int repeats = 0;                  // per staging pass and PS message size
  std::vector<int64_t> psRows;      // row pulls and pushes: distinct rows a call moves
};

Workload workloadOf(bool quick) {
  if (quick)
    return {{"mlp", "cnn", "embedding_classifier"},
            {16, 64},
            6,
            {4, 4096, 262144, 1 << 20, 4 << 20},
            {4, 4096, 262144, 1 << 20},
            10,
            {64, 1024}};
  return {{"mlp", "cnn", "embedding_classifier", "lstm_lm", "transformer"},
          {16, 64, 128},
          10,
          {4, 1024, 16384, 262144, 1 << 20, 4 << 20, 16 << 20, 32 << 20},
          {4, 1024, 16384, 262144, 1 << 20, 4 << 20},
          15,
          {64, 256, 1024, 4096}};
}

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The worker program of `model` compiled for one worker with every variable all-reduced: the
// ops a plan's workers run, as the simulator costs them.
llvm::Expected<std::unique_ptr<ir::Module>> workerProgram(const std::string &path) {
  auto model = loadModule(path, /*inferShapes=*/false);
  if (!model)
    return model.takeError();
  CompileArgs compile;
  compile.strategy = "allreduce";
  auto options = compile.toOptions();
  if (!options)
    return options.takeError();
  auto cluster = cluster::loadCluster("local:1", compile.replicationKind());
  if (!cluster)
    return cluster.takeError();
  auto result = plan::partition(std::move(*model), *cluster, *options);
  if (!result)
    return result.takeError();
  return plan::parseProgram(*plan::findProgram(result->plan, "worker:0"));
}

// Feeds of `batch` examples: floats in [-1, 1), integers 0 or 1 (valid labels and token ids of
// every model).
runtime::Feeds randomFeeds(const ir::Module &m, int64_t batch) {
  std::mt19937_64 gen(7);
  runtime::Feeds feeds;
  for (const auto &in : m.inputs()) {
    std::vector<int64_t> shape(in->type().dims.begin(), in->type().dims.end());
    shape[0] = batch;
    runtime::Tensor t(in->type().dtype, shape);
    for (int64_t i = 0; i < t.numElements(); ++i) {
      if (in->type().dtype == ir::DType::F32)
        t.data<float>()[i] = static_cast<float>(static_cast<double>(gen() % 2000) / 1000.0 - 1.0);
      else if (in->type().dtype == ir::DType::I64)
        t.data<int64_t>()[i] = static_cast<int64_t>(gen() % 2);
      else
        t.data<int32_t>()[i] = static_cast<int32_t>(gen() % 2);
    }
    feeds[in->name()] = std::move(t);
  }
  return feeds;
}

// Each op's median times by signature (plan::opSignature) and batch.
using OpTimes = std::map<std::string, std::map<int64_t, std::vector<double>>>;

// Runs `steps` training steps of `program` at `batch` after one untimed step, and adds each op's
// median time with its cost rule's flops and bytes to `byOp` (by op name) and to `bySignature`
// (by its signature, at `batch`), the median of the steps' time beyond their ops' spans to
// `overheads` (against the program's ops), and each timed step's kernel time over the median
// step's to `stepRatios`.
llvm::Error timeOps(const ir::Module &program, int64_t batch, int steps, int threads,
                    std::map<std::string, Samples> &byOp, OpTimes &bySignature, Samples &overheads,
                    std::vector<double> &stepRatios) {
  auto store = std::make_shared<runtime::VariableStore>();
  if (auto e = store->initialize(program, 1))
    return e;
  runtime::SoleWorkerCommunication communication("prism calibrate");
  runtime::TraceRecorder trace("calibrate");
  runtime::ExecutorOptions options;
  options.threads = threads;
  options.communication = &communication;
  options.trace = &trace;
  auto executor = runtime::Executor::create(program, store, options);
  if (!executor)
    return executor.takeError();
  const runtime::Feeds feeds = randomFeeds(program, batch);
  std::vector<double> wall; // each timed step's, as a caller of the executor sees it
  for (int s = 0; s <= steps; ++s) {
    const auto started = Clock::now();
    if (auto e = (*executor)->step(feeds))
      return e;
    if (s > 0)
      wall.push_back(seconds(Clock::now() - started));
  }
  std::map<std::string, std::pair<const ir::Op *, int>> ops; // by span name; count 1: unique
  for (const auto &op : program.ops()) {
    auto &entry = ops[ir::opSpanName(*op)];
    entry = {op.get(), entry.second + 1};
  }
  // Each op's time in each timed step. Its median, not its mean: a step the machine took from
  // the program (another process, the hypervisor) would stretch the mean, and the simulator's
  // step is held against the median step of a run.
  std::map<std::string, std::vector<double>> times;
  const auto spans = trace.recorded();
  const size_t perStep = spans.size() / (steps + 1);
  std::vector<double> stepTimes(steps, 0.0);
  for (size_t i = perStep; i < spans.size(); ++i)
    if (std::string(spans[i].category) == "op") {
      times[spans[i].name].push_back(spans[i].durationMicros * 1e-6);
      stepTimes[std::min<size_t>(i / perStep - 1, steps - 1)] += spans[i].durationMicros * 1e-6;
    }
  if (const double middle = median(stepTimes); middle > 0)
    for (double t : stepTimes)
      stepRatios.push_back(t / middle);
  // The executor's own work: a step's time beyond its ops' spans, against its ops (as bytes).
  std::vector<double> beyond;
  for (size_t i = 0; i < wall.size(); ++i)
    beyond.push_back(std::max(0.0, wall[i] - stepTimes[i]));
  overheads.push_back({0, static_cast<double>(program.ops().size()), median(beyond)});
  for (const auto &[name, t] : times) {
    auto it = ops.find(name);
    if (it == ops.end() || it->second.second != 1)
      continue; // not one op of the program: its cost rule is unknown
    const llvm::StringRef op = it->second.first->name();
    if (op == "all_reduce" || op.startswith("ps_"))
      continue; // communication: the profile's all_reduce and ps figures cost it
    if (ir::isRowUpdate(*it->second.first))
      continue; // its rule counts the whole table, the update the rows of a step's batch
    const ir::OpCost cost = ir::opCost(*it->second.first, batch);
    byOp[op.str()].push_back(
        {static_cast<double>(cost.flops), static_cast<double>(cost.bytes), median(t)});
    bySignature[plan::opSignature(*it->second.first)][batch].push_back(median(t));
  }
  return llvm::Error::success();
}

// A family of its own needs shapes enough to tell its three coefficients apart; the others'
// ops are fitted together as `default`.
void fitKernels(const std::map<std::string, Samples> &byOp, plan::CostProfile &profile) {
  constexpr size_t kOwnFamily = 4;
  Samples rest, all;
  for (const auto &[name, samples] : byOp) {
    all.insert(all.end(), samples.begin(), samples.end());
    if (samples.size() >= kOwnFamily)
      profile.kernels[name] = plan::fitRoofline(samples);
    else
      rest.insert(rest.end(), samples.begin(), samples.end());
  }
  profile.defaultKernel = plan::fitRoofline(rest.size() >= kOwnFamily ? rest : all);
}

// The ratios' values at probabilities 0, 1/20, ..., 1 (linear between the sorted ratios), or
// none where there are too few to tell a twentieth apart.
std::vector<double> spreadOf(std::vector<double> ratios) {
  if (ratios.size() < static_cast<size_t>(plan::kStepSpreadPoints))
    return {};
  std::sort(ratios.begin(), ratios.end());
  std::vector<double> spread;
  for (int i = 0; i < plan::kStepSpreadPoints; ++i)
    spread.push_back(
        plan::valueAtProbability(ratios, static_cast<double>(i) / (plan::kStepSpreadPoints - 1)));
  return spread;
}

llvm::Error measureKernels(const CalibrateArgs &args, const Workload &w, plan::CostProfile &profile,
                           llvm::raw_ostream &log) {
  std::map<std::string, Samples> byOp;
  OpTimes bySignature;
  Samples overheads;
  std::vector<double> stepRatios;
  for (const std::string &name : w.models) {
    llvm::SmallString<256> path(args.models);
    llvm::sys::path::append(path, name + ".prism");
    auto program = workerProgram(std::string(path));
    if (!program)
      return program.takeError();
    const auto started = Clock::now();
    for (int64_t batch : w.batches)
      if (auto e = timeOps(**program, batch, w.steps, args.threads, byOp, bySignature, overheads,
                           stepRatios))
        return ir::withContext(std::move(e), "timing " + std::string(path));
    log << llvm::format("  kernels of %-22s %6.2f s\n", name.c_str(),
                        seconds(Clock::now() - started));
  }
  fitKernels(byOp, profile);
  // Ops of one signature in several places (two models, two layers): the median of theirs.
  for (auto &[signature, byBatch] : bySignature)
    for (auto &[batch, times] : byBatch)
      profile.ops[signature][batch] = median(std::move(times));
  profile.stepSpread = spreadOf(std::move(stepRatios));
  const plan::AllReduceCost executor = plan::fitLatencyPerByte(overheads);
  profile.executor = {executor.latency, executor.secondsPerByte};
  return llvm::Error::success();
}

// The seconds per byte of copying `count` buffers of `bytes` in turn, each into the next (the
// last into the first), every rank at once after a barrier; median of `repeats` copies.
llvm::Expected<double> timeCopies(runtime::dist::Collective &group, int repeats, size_t count,
                                  size_t bytes) {
  std::vector<std::vector<float>> buffers(count, std::vector<float>(bytes / sizeof(float), 1.0f));
  std::vector<double> times;
  for (int i = 0; i <= repeats; ++i) {
    if (auto e = group.barrier())
      return std::move(e);
    const std::vector<float> &from = buffers[static_cast<size_t>(i) % count];
    std::vector<float> &to = buffers[static_cast<size_t>(i + 1) % count];
    const auto started = Clock::now();
    std::memcpy(to.data(), from.data(), to.size() * sizeof(float));
    if (i > 0)
      times.push_back(seconds(Clock::now() - started));
  }
  // Read back, so the copies are not left out.
  for (const std::vector<float> &data : buffers)
    if (data[data.size() / 2] != 1.0f)
      return ir::makeError("the staging pass copied " + std::to_string(data[data.size() / 2]));
  return median(times) / static_cast<double>(buffers.front().size() * sizeof(float));
}

// The seconds per byte of one pass over a bucket on the communication thread, as the runtime
// copies the tensors of a bucket it gathers into its flat buffer and back
// (runtime/job/WorkerCommunication.cpp). A step's pass over a large bucket finds its gradient
// out of the caches (the step's other work evicted it), so each pass copies the next of 32 MiB
// buffers that together exceed the last-level cache twice over into the one after it: over one
// warm 32 MiB buffer again and again this VM measured 0.05-0.12 ns/B, and a step's pass over a
// 26 MB gradient took 0.22.
llvm::Expected<double> timeStagingPass(runtime::dist::Collective &group, int repeats) {
  constexpr size_t kBytes = size_t{32} << 20;
  constexpr size_t kMaxBuffers = 16; // 512 MiB a rank
  const long cache = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const size_t cacheBytes = cache > 0 ? static_cast<size_t>(cache) : size_t{64} << 20;
  return timeCopies(group, repeats, std::min(kMaxBuffers, 2 * cacheBytes / kBytes + 2), kBytes);
}

// A pass over a bucket that fits the core's cache with its buffer: backward just wrote its
// gradient, so the pass finds it there (0.03-0.05 ns/B on a 2-core Xeon VM, where buffers out of
// the caches took 0.14-0.19). Sets `bytes` to the largest such bucket, half the core's L2 (1 MiB
// where its size is unknown), and times copies between two buffers of a quarter of the L2 each,
// back and forth (at least 20).
llvm::Expected<double> timeWarmStagingPass(runtime::dist::Collective &group, int repeats,
                                           double &bytes) {
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const size_t cacheBytes = l2 > 0 ? static_cast<size_t>(l2) : size_t{2} << 20;
  bytes = static_cast<double>(cacheBytes / 2);
  return timeCopies(group, std::max(repeats, 20), 2, cacheBytes / 4);
}

// Sets `staging`'s per-byte figures (timeStagingPass, timeWarmStagingPass) from a group of two
// ranks (threads of this process, on 127.0.0.1, meeting through an in-process coordinator), as
// rank 0 sees them. The ring's own times come from two processes (timeLoopbackRings).
llvm::Error timeStaging(const Workload &w, plan::AllReduceCost &staging) {
  using namespace runtime::dist;
  constexpr int kRanks = 2;
  CoordinatorOptions options;
  options.jobToken = "calibrate";
  options.expectedTasks = {"worker:0", "worker:1"};
  options.heartbeatTimeout = std::chrono::minutes(5);
  auto coordinator = Coordinator::start(std::move(options));
  if (!coordinator)
    return coordinator.takeError();
  auto rank = [&](int r) -> llvm::Error {
    CoordinatorClientOptions client;
    client.address = (*coordinator)->address();
    client.jobToken = "calibrate";
    client.taskName = "worker:" + std::to_string(r);
    client.callTimeout = std::chrono::seconds(10);
    CoordinatorClient coordinatorClient(client);
    if (auto e = coordinatorClient.registerTask())
      return e;
    auto group = Collective::create(coordinatorClient, "calibrate", r, kRanks, "127.0.0.1",
                                    std::chrono::seconds(30));
    if (!group)
      return group.takeError();
    auto cold = timeStagingPass(**group, w.repeats);
    if (!cold)
      return cold.takeError();
    double warmBytes = 0;
    auto warm = timeWarmStagingPass(**group, w.repeats, warmBytes);
    if (!warm)
      return warm.takeError();
    if (r == 0) {
      staging.stagingSecondsPerByte = *cold;
      staging.warmStagingSecondsPerByte = *warm;
      staging.warmStagingBytes = warmBytes;
    }
    return llvm::Error::success();
  };
  auto other = std::async(std::launch::async, rank, 1);
  llvm::Error mine = rank(0);
  llvm::Error theirs = other.get();
  if (theirs) {
    llvm::consumeError(std::move(mine));
    return theirs;
  }
  return mine;
}

// `call()` after kCallGap of this thread's work; `took` is its time.
template <typename Call> auto afterWork(Call &&call, double &took) {
  runtime::dist::busyFor(kCallGap);
  const auto started = Clock::now();
  auto result = call();
  took = seconds(Clock::now() - started);
  return result;
}

// The times of a size's timed calls: pulls, pushes less the server's update, and the updates.
struct CallTimes {
  std::vector<double> pulls, pushes, applies;
};

// `repeats` + 1 steps from `step` on (advanced past them), each `prepare()` (untimed), then
// `pull(step)` and `push(step, pulled)` after the caller's work (afterWork); the first step's calls
// set up buffers and are not kept. A push returns once the server applied it, so its time less the
// update (`applied`: the server's update times, by step) is the call's.
template <typename Prepare, typename Pull, typename Push>
llvm::Expected<CallTimes> timePullsAndPushes(int repeats, int64_t &step, const UpdateTimes &applied,
                                             Prepare &&prepare, Pull &&pull, Push &&push) {
  CallTimes times;
  for (int i = 0; i <= repeats; ++i, ++step) {
    prepare();
    double pulled_s = 0, pushed_s = 0;
    auto pulled = afterWork([&] { return pull(step); }, pulled_s);
    if (!pulled)
      return pulled.takeError();
    if (auto e = afterWork([&] { return push(step, *pulled); }, pushed_s))
      return std::move(e);
    if (i == 0 || applied.count() != step + 1)
      continue;
    times.pulls.push_back(pulled_s);
    times.pushes.push_back(std::max(0.0, pushed_s - applied.at(step)));
    times.applies.push_back(applied.at(step));
  }
  return times;
}

// The variable two clients pull at once (timeConcurrentPulls): a dense model's weight matrix.
constexpr size_t kConcurrentBytes = 1 << 20;

// The table of row pulls and pushes: the embedding model's shape (100,000 rows of 64 floats).
constexpr int64_t kTableRows = 100000, kTableWidth = 64;
const char *const kTableName = "table";

// A row push's coalescing on the worker (ps::coalesceRows), for each count of w.psRows rows in:
// ids drawn at random from as many (about two in three distinct, as a step's Zipf ids of the
// embedding model are about half), the median of w.repeats, against the rows' bytes in.
Samples timeCoalescing(const Workload &w) {
  std::mt19937_64 gen(17);
  Samples samples;
  for (int64_t rows : w.psRows) {
    runtime::Tensor gradient(ir::DType::F32, {rows, kTableWidth});
    std::fill_n(gradient.data<float>(), gradient.numElements(), 1e-3f);
    runtime::Tensor indices(ir::DType::I64, {rows});
    std::vector<double> times;
    for (int i = 0; i < w.repeats; ++i) {
      for (int64_t k = 0; k < rows; ++k)
        indices.data<int64_t>()[k] = static_cast<int64_t>(gen() % static_cast<uint64_t>(rows));
      const auto started = Clock::now();
      // Its result freed within the time, where a push frees it after the step's call.
      runtime::ps::coalesceRows(indices, gradient);
      times.push_back(seconds(Clock::now() - started));
    }
    samples.push_back({0, static_cast<double>(rows * kTableWidth * 4), median(times)});
  }
  return samples;
}

// Row pulls and pushes of the table (kTableName) through `client`, from `step` on: for each
// count of w.psRows, distinct rows drawn at random anew each time (a step's rows are seldom the
// last step's), the median of w.repeats pulls and of as many pushes (timePullsAndPushes).
// Samples carry the rows as flops and the bytes each way. Then as many pulls asking for each of
// the rows twice: `repeatedRows` gets each count's rows and what the median pull took more.
llvm::Error timeRowCalls(const Workload &w, runtime::ps::PsClient &client,
                         const UpdateTimes &applied, int64_t step, Samples &rowCalls,
                         std::vector<std::pair<double, double>> &repeatedRows) {
  std::mt19937_64 gen(13);
  std::vector<int64_t> order(static_cast<size_t>(kTableRows));
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<int64_t>(i);
  for (int64_t rows : w.psRows) {
    runtime::Tensor gradient(ir::DType::F32, {rows, kTableWidth});
    std::fill_n(gradient.data<float>(), gradient.numElements(), 1e-3f);
    const double bytes = static_cast<double>(rows) * (kTableWidth * 4 + sizeof(int64_t));
    runtime::Tensor indices(ir::DType::I64, {rows});
    auto draw = [&] {
      for (int64_t k = 0; k < rows; ++k) { // the first `rows` of a shuffle
        const auto pick = static_cast<size_t>(k) + gen() % (order.size() - static_cast<size_t>(k));
        std::swap(order[static_cast<size_t>(k)], order[pick]);
        indices.data<int64_t>()[k] = order[static_cast<size_t>(k)];
      }
    };
    auto pull = [&](int64_t at) { return client.pullRows(kTableName, indices, at); };
    auto push = [&](int64_t at, const runtime::Tensor &) {
      return client.push(at, 1.0, 0,
                         {runtime::ps::Gradient::ofRows(kTableName, indices, gradient)});
    };
    auto times = timePullsAndPushes(w.repeats, step, applied, draw, pull, push);
    if (!times)
      return times.takeError();
    rowCalls.push_back({static_cast<double>(rows), bytes, median(times->pulls)});
    rowCalls.push_back({static_cast<double>(rows), bytes, median(times->pushes)});
    // The same count of distinct rows, each id asked for twice in a shuffled order, as a step's
    // ids repeat: the client sorts them all, asks for each row once and copies one per id.
    runtime::Tensor twice(ir::DType::I64, {2 * rows});
    int64_t *ids = twice.data<int64_t>();
    std::vector<double> repeated;
    for (int i = 0; i < w.repeats; ++i) {
      draw();
      std::copy_n(indices.data<int64_t>(), rows, ids);
      std::copy_n(indices.data<int64_t>(), rows, ids + rows);
      std::shuffle(ids, ids + 2 * rows, gen);
      double took = 0;
      auto pulled = afterWork([&] { return client.pullRows(kTableName, twice, step); }, took);
      if (!pulled)
        return pulled.takeError();
      repeated.push_back(took);
    }
    repeatedRows.push_back({static_cast<double>(rows), median(repeated) - median(times->pulls)});
  }
  return llvm::Error::success();
}

// The shards of the calibration's parameter server: a variable per size of w.psBytes and the
// table (kTableName).
std::vector<runtime::ps::PsShard> calibrationShards(const Workload &w) {
  std::vector<runtime::ps::PsShard> shards;
  for (size_t bytes : w.psBytes) {
    const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(bytes / sizeof(float)));
    shards.push_back({"v" + std::to_string(bytes), ir::DType::F32, 0, n, {n}});
  }
  shards.push_back({kTableName, ir::DType::F32, 0, kTableRows, {kTableRows, kTableWidth}});
  return shards;
}

// The calibration's parameter server (built in its own process: ServerProcess): the shards
// filled with 0.5, updated by SGD as the servers' update programs do, each update's time
// recorded in `updates`.
runtime::ps::ParameterServerOptions serverOptions(const Workload &w, UpdateTimes &updates) {
  using namespace runtime::ps;
  auto store = std::make_shared<runtime::VariableStore>();
  ParameterServerOptions options;
  options.jobToken = "calibrate";
  options.variables = store;
  options.waitTimeout = std::chrono::seconds(30);
  options.shards = calibrationShards(w);
  for (const PsShard &shard : options.shards) {
    runtime::Tensor value(ir::DType::F32, shard.shape());
    std::fill_n(value.data<float>(), value.numElements(), 0.5f);
    store->set(shard.name, std::move(value));
  }
  options.apply = [store, &updates](int64_t, const GradientSet &gradients) -> llvm::Error {
    const auto started = Clock::now();
    for (const auto &[name, g] : gradients) {
      runtime::Tensor *variable = store->find(name);
      float *v = variable->data<float>();
      if (g.isSparse()) { // its rows only
        const int64_t width = variable->numElements() / variable->shape().front();
        const float *rows = g.rows.data<float>();
        for (int64_t i = 0; i < g.indices.numElements(); ++i)
          for (int64_t j = 0; j < width; ++j)
            v[g.indices.data<int64_t>()[i] * width + j] -= 0.01f * rows[i * width + j];
        continue;
      }
      const float *d = g.dense.data<float>();
      for (int64_t i = 0; i < g.dense.numElements(); ++i)
        v[i] -= 0.01f * d[i];
    }
    updates.record(seconds(Clock::now() - started));
    return llvm::Error::success();
  };
  return options;
}

// `t` on the steady clock, in nanoseconds: the same clock in every process of this machine, so
// the second client's times and this process's compare.
int64_t sinceEpochNs(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// The second client of timeConcurrentPulls, in a process of its own (ChildProcess): it answers
// "connect ENDPOINT NAME ELEMENTS" (a float32 variable of ELEMENTS on the server at ENDPOINT) with
// "ok", and each "pull STEP" after kCallGap of its own work with "ok STARTED ENDED", the pull's
// start and end on this machine's steady clock in nanoseconds; an error with "error MESSAGE".
ChildProcess::Handler secondClient() {
  auto client = std::make_shared<std::unique_ptr<runtime::ps::PsClient>>();
  auto name = std::make_shared<std::string>();
  return [client, name](const std::string &line) -> std::string {
    std::istringstream in(line);
    std::string verb;
    in >> verb;
    if (verb == "connect") {
      std::string endpoint;
      int64_t elements = 0;
      in >> endpoint >> *name >> elements;
      runtime::ps::PsClientOptions options;
      options.jobToken = "calibrate";
      options.variables[*name] = {ir::DType::F32, {elements}, {{endpoint, 0, elements}}};
      auto created = runtime::ps::PsClient::create(options);
      if (!created)
        return "error " + llvm::toString(created.takeError());
      *client = std::move(*created);
      return "ok";
    }
    int64_t step = 0;
    if (verb != "pull" || !(in >> step) || !*client)
      return "error expected connect, then pull STEP, got '" + line + "'";
    runtime::dist::busyFor(kCallGap);
    const auto started = Clock::now();
    auto value = (*client)->pull(*name, step);
    const auto ended = Clock::now();
    if (!value)
      return "error " + llvm::toString(value.takeError());
    return "ok " + std::to_string(sinceEpochNs(started)) + " " +
           std::to_string(sinceEpochNs(ended));
  };
}

// The child's answer to a line: what follows "ok", or its error.
llvm::Expected<std::string> askChild(ChildProcess &child, const std::string &line) {
  if (auto e = child.send(line))
    return std::move(e);
  auto answer = child.answer(std::chrono::seconds(30));
  if (!answer)
    return answer.takeError();
  if (answer->rfind("ok", 0) != 0)
    return ir::makeError("the second client: " +
                         (answer->rfind("error ", 0) == 0 ? answer->substr(6) : *answer));
  return answer->size() > 3 ? answer->substr(3) : "";
}

// Two clients pulling `shard` (a dense variable) at once, this process's and `second`'s (a
// worker's process each, as in a job), each after kCallGap of its own work, in w.repeats + 1
// rounds (the first sets the second's connection up): the server's serial share, the median
// round's time from the first pull's start to the later one's end over `alone` (one pull's
// median), less one, within [0, 1] (plan::PsCost).
llvm::Expected<double> timeConcurrentPulls(const Workload &w, ChildProcess &second,
                                           const std::string &endpoint,
                                           runtime::ps::PsClient &first,
                                           const runtime::ps::PsShard &shard, int64_t step,
                                           double alone) {
  if (auto connected = askChild(second, "connect " + endpoint + " " + shard.name + " " +
                                            std::to_string(shard.rowEnd));
      !connected)
    return connected.takeError();
  std::vector<double> both;
  for (int i = 0; i <= w.repeats; ++i) {
    if (auto e = second.send("pull " + std::to_string(step)))
      return std::move(e);
    runtime::dist::busyFor(kCallGap);
    const auto started = Clock::now();
    auto value = first.pull(shard.name, step);
    const auto ended = Clock::now();
    if (!value)
      return value.takeError();
    auto answer = second.answer(std::chrono::seconds(30));
    if (!answer)
      return answer.takeError();
    std::istringstream in(*answer);
    std::string ok;
    int64_t theirStart = 0, theirEnd = 0;
    if (!(in >> ok >> theirStart >> theirEnd) || ok != "ok")
      return ir::makeError("the second client: " + *answer);
    if (i > 0)
      both.push_back(static_cast<double>(std::max(sinceEpochNs(ended), theirEnd) -
                                         std::min(sinceEpochNs(started), theirStart)) *
                     1e-9);
  }
  if (both.empty() || !(alone > 0))
    return 1.0;
  return std::clamp(median(both) / alone - 1, 0.0, 1.0);
}

// The calibration's parameter server on 127.0.0.1, in `server`'s process, and one worker's
// client here. Each step pulls a variable and pushes its gradient (the push returns once the
// server applied it, so its time less the apply is the call's); then each step pulls and pushes
// distinct random rows of the table; before those, two clients pull the variable of
// kConcurrentBytes at once (timeConcurrentPulls).
struct PsTimes {
  Samples calls, applies, rowCalls; // the row calls' rows as flops
  double serialShare = 1;
  std::vector<std::pair<double, double>> repeatedRows; // timeRowCalls
};
llvm::Error timeParameterServer(const Workload &w, ServerProcess &server, ChildProcess &second,
                                PsTimes &out) {
  using namespace runtime::ps;
  auto endpoint = server.start(std::chrono::seconds(30));
  if (!endpoint)
    return endpoint.takeError();
  PsClientOptions clientOptions;
  clientOptions.jobToken = "calibrate";
  const std::vector<PsShard> shards = calibrationShards(w);
  for (const PsShard &shard : shards)
    clientOptions.variables[shard.name] = {
        ir::DType::F32, shard.fullShape, {{*endpoint, 0, shard.rowEnd}}};
  auto client = PsClient::create(clientOptions);
  if (!client)
    return client.takeError();
  int64_t step = 0;
  std::pair<const PsShard *, double> concurrent = {nullptr, 0}; // the shard, one pull's median
  for (const PsShard &shard : shards) {
    if (shard.name == kTableName)
      continue;
    const double bytes = static_cast<double>(shard.rowEnd * 4);
    auto times = timePullsAndPushes(
        w.repeats, step, server.updates(), [] {},
        [&](int64_t at) { return (*client)->pull(shard.name, at); },
        [&](int64_t at, const runtime::Tensor &pulled) {
          return (*client)->push(at, 1.0, 0, {Gradient::ofDense(shard.name, pulled)});
        });
    if (!times)
      return times.takeError();
    for (double seconds : times->applies)
      out.applies.push_back({0, bytes, seconds});
    out.calls.push_back({0, bytes, median(times->pulls)});
    out.calls.push_back({0, bytes, median(times->pushes)});
    if (static_cast<size_t>(bytes) == kConcurrentBytes)
      concurrent = {&shard, median(times->pulls)};
  }
  if (concurrent.first) {
    auto share = timeConcurrentPulls(w, second, *endpoint, **client, *concurrent.first, step,
                                     concurrent.second);
    if (!share)
      return share.takeError();
    out.serialShare = *share;
  }
  return timeRowCalls(w, **client, server.updates(), step, out.rowCalls, out.repeatedRows);
}

// Assembling batches as the trainer does (runtime/data/BatchIterator.h) from a data set of
// Fashion-MNIST's size and kind, held in memory: 60,000 random 28x28 images kept as bytes and
// scaled as they are copied out, with their labels. The batch's median time per size against its
// bytes (float32 images and int32 labels) gives the profile's `data` figures.
llvm::Expected<Samples> timeBatches(const Workload &w) {
  constexpr int64_t kExamples = 60000, kSide = 28;
  std::mt19937 gen(11);
  std::vector<uint8_t> pixels(static_cast<size_t>(kExamples * kSide * kSide));
  for (size_t i = 0; i < pixels.size(); i += sizeof(uint32_t)) { // four pixels a draw
    const uint32_t draw = static_cast<uint32_t>(gen());
    std::memcpy(&pixels[i], &draw, std::min(sizeof(draw), pixels.size() - i));
  }
  std::vector<int32_t> labels(static_cast<size_t>(kExamples));
  for (int32_t &l : labels)
    l = static_cast<int32_t>(gen() % runtime::data::kFashionMnistClasses);
  const runtime::data::ImageDataset dataset("calibration images", kSide, kSide, 1,
                                            std::move(pixels), std::move(labels));
  Samples samples;
  for (int64_t batch : w.batches) {
    runtime::data::BatchOptions options;
    options.batchSize = batch;
    auto batches = runtime::data::BatchIterator::create(dataset, options);
    if (!batches)
      return batches.takeError();
    std::vector<double> times;
    double bytes = 0;
    // The epoch's first batches, shuffled as in training: each gathers examples no batch before
    // it read, from a data set larger than the caches, as a step does.
    const int64_t count = std::min<int64_t>(batches->numBatches(), 4 * w.repeats);
    for (int64_t step = 0; step < count; ++step) {
      const auto started = Clock::now();
      const runtime::data::Batch b = batches->batch(step);
      times.push_back(seconds(Clock::now() - started));
      bytes = 0;
      for (const auto &[key, tensor] : b.tensors)
        bytes += static_cast<double>(tensor.numBytes());
    }
    samples.push_back({0, bytes, median(times)});
  }
  return samples;
}

std::string cpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
      return line.substr(line.find(':') + 2);
  return "unknown";
}

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0')
    return "localhost";
  return name;
}

// `rings`: the cluster's links to time too, or null.
llvm::Expected<plan::CostProfile> calibrate(const CalibrateArgs &args, const LinkRings *rings,
                                            llvm::raw_ostream &log) {
  const Workload w = workloadOf(args.quick);
  // First, while this process runs no other thread and no gRPC.
  auto server =
      ServerProcess::fork([w](UpdateTimes &updates) { return serverOptions(w, updates); });
  if (!server)
    return server.takeError();
  auto second = ChildProcess::fork(secondClient);
  if (!second)
    return second.takeError();
  plan::CostProfile profile;
  profile.host = hostName();
  profile.cpu = cpuModel();
  profile.threads = args.threads;
  profile.cores = static_cast<int>(std::thread::hardware_concurrency());
  if (auto e = measureKernels(args, w, profile, log))
    return std::move(e);
  auto started = Clock::now();
  auto ring = timeLoopbackRings(w.messageBytes, args.quick);
  if (!ring)
    return ir::withContext(ring.takeError(), "timing all-reduces");
  profile.allReduce = std::move(*ring);
  if (auto e = timeStaging(w, profile.allReduce))
    return ir::withContext(std::move(e), "timing all-reduces' passes");
  log << llvm::format("  all-reduce %27.2f s\n", seconds(Clock::now() - started));
  started = Clock::now();
  PsTimes ps;
  if (auto e = timeParameterServer(w, **server, **second, ps))
    return ir::withContext(std::move(e), "timing a parameter server");
  server->reset(); // the children stop
  second->reset();
  const plan::AllReduceCost call = plan::fitLatencyPerByte(ps.calls);
  const plan::AllReduceCost apply = plan::fitLatencyPerByte(ps.applies);
  // What a pull took more per id asked for again: over the counts, their extra time over their
  // rows (the larger counts weigh more), never below 0.
  double extra = 0, repeated = 0;
  for (const auto &[rows, seconds] : ps.repeatedRows) {
    extra += seconds;
    repeated += rows;
  }
  const plan::AllReduceCost coalesce = plan::fitLatencyPerByte(timeCoalescing(w));
  profile.ps = {call.latency,
                call.secondsPerByte > 0 ? 1 / call.secondsPerByte : 1e12,
                apply.latency,
                apply.secondsPerByte,
                plan::fitSecondsPerRow(ps.rowCalls, call),
                ps.serialShare,
                coalesce.latency,
                coalesce.secondsPerByte,
                repeated > 0 ? std::max(0.0, extra / repeated) : 0};
  log << llvm::format("  parameter server %21.2f s\n", seconds(Clock::now() - started));
  started = Clock::now();
  auto batches = timeBatches(w);
  if (!batches)
    return ir::withContext(batches.takeError(), "timing batches");
  const plan::AllReduceCost data = plan::fitLatencyPerByte(*batches);
  profile.data = {data.latency, data.secondsPerByte};
  log << llvm::format("  batches %30.2f s\n", seconds(Clock::now() - started));
  if (rings) {
    started = Clock::now();
    auto links = measureLinks(*rings, {args.launcher, args.quick}, log);
    if (!links)
      return links.takeError();
    profile.links = std::move(*links);
    log << llvm::format("  links %32.2f s\n", seconds(Clock::now() - started));
  }
  return profile;
}

int runCalibrate(const CalibrateArgs &args) {
  if (args.threads < 1)
    return reportError(ir::makeError("option --threads: expected at least 1, got " +
                                     std::to_string(args.threads)));
  if (!llvm::sys::fs::is_directory(args.models))
    return reportError(ir::makeError("option --models: " + args.models + " is not a directory"));
  const std::string output = args.output.empty() ? plan::cachedProfilePath() : args.output;
  // Checked before measuring, so a bad path fails at once rather than after the run.
  llvm::StringRef dir = llvm::sys::path::parent_path(output);
  if (!dir.empty() && (llvm::sys::fs::create_directories(dir) || !llvm::sys::fs::is_directory(dir)))
    return reportError(
        ir::makeError("cannot write the profile " + output + ": " + dir + " is not a directory"));
  // The cluster is read first too: its errors need no measuring.
  llvm::Optional<LinkRings> rings;
  if (!args.cluster.empty()) {
    auto read = linkRings(args.cluster);
    if (!read)
      return reportError(read.takeError());
    rings = std::move(*read);
  }
  llvm::errs() << "calibrating " << (args.quick ? "(quick) " : "") << "with " << args.threads
               << " thread(s)\n";
  const auto started = Clock::now();
  auto profile = calibrate(args, rings ? &*rings : nullptr, llvm::errs());
  if (!profile)
    return reportError(profile.takeError());
  if (auto e = plan::writeProfile(*profile, output))
    return reportError(ir::withContext(std::move(e), "writing the profile " + output));
  llvm::outs() << llvm::format(
      "wrote %s in %.1f s: %zu kernel families, %zu ops timed as they are, all-reduce %.1f us "
      "(%.1f after work) + "
      "%.3f ns/B (staging %.3f ns/B a pass, %.3f within %.0f KiB), ps call %.1f us at %.0f "
      "MB/s + %.2f us a row, %.3f us an id asked again (two at once %.2fx one; coalescing rows "
      "%.1f us + %.3f ns/B), batches "
      "%.1f us + %.3f ns/B, the executor "
      "%.1f us a step + %.2f us "
      "an op",
      output.c_str(), seconds(Clock::now() - started), profile->kernels.size() + 1,
      profile->ops.size(), profile->allReduce.latency * 1e6, profile->allReduce.wakeLatency * 1e6,
      profile->allReduce.secondsPerByte * 1e9, profile->allReduce.stagingSecondsPerByte * 1e9,
      profile->allReduce.warmStagingSecondsPerByte * 1e9,
      profile->allReduce.warmStagingBytes / 1024, profile->ps.latency * 1e6,
      profile->ps.bytesPerSecond / 1e6, profile->ps.secondsPerRow * 1e6,
      profile->ps.secondsPerRepeatedRow * 1e6, 1 + profile->ps.serialShare,
      profile->ps.coalesceLatency * 1e6, profile->ps.coalesceSecondsPerByte * 1e9,
      profile->data.latency * 1e6, profile->data.secondsPerByte * 1e9,
      profile->executor.stepLatency * 1e6, profile->executor.opLatency * 1e6);
  if (!profile->allReduce.rings.empty()) {
    const double largest = profile->allReduce.rings.back().first;
    llvm::outs() << llvm::format("; the all-reduce's largest ring %.3f ns/B (%.1f MB a rank)",
                                 profile->allReduce.ringSecondsPerByte(largest) * 1e9,
                                 largest / 1e6);
  }
  if (!profile->stepSpread.empty())
    llvm::outs() << llvm::format(
        "; the slowest of 2 and 4 workers' steps %.2fx and %.2fx the median",
        profile->stepRatioAt(plan::orderStatisticQuantile(2, 2)),
        profile->stepRatioAt(plan::orderStatisticQuantile(4, 4)));
  llvm::outs() << "\n";
  for (const plan::LinkCost &link : profile->links)
    llvm::outs() << "  " << describeLink(link) << "\n";
  return 0;
}

} // namespace

void registerCalibrateCommand(CLI::App &app) {
  auto args = std::make_shared<CalibrateArgs>();
  auto *cmd = app.add_subcommand(
      "calibrate", "Measure this machine's kernels, all-reduce and parameter server into a cost "
                   "profile for prism simulate");
  cmd->add_option("--threads", args->threads, "Kernel threads (as prism train --threads)")
      ->capture_default_str();
  cmd->add_flag("--quick", args->quick, "Fewer models, sizes and repeats (a few seconds)");
  cmd->add_option("-o,--output", args->output,
                  "Where to write the profile (default: this machine's cached profile, which "
                  "prism simulate reads)");
  cmd->add_option("--models", args->models, "The models whose ops are timed")
      ->capture_default_str();
  auto *cluster = cmd->add_option(
      "--cluster", args->cluster,
      "Also time a ring all-reduce through each bandwidth of this cluster's links (a rank on each "
      "of its hosts, at most " +
          std::to_string(kMaxLinkRanks) + ")");
  cmd->add_option("--launcher", args->launcher,
                  "How a rank starts on a host, as prism run --launcher ({host}, {address})")
      ->needs(cluster);
  cmd->callback([args]() {
    if (int status = runCalibrate(*args))
      throw CLI::RuntimeError(status);
  });
}

} // namespace prism::tools
