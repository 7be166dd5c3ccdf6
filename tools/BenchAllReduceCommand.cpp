// `prism bench-allreduce --rank R --coordinator HOST:PORT --bytes LIST`: one rank of a group of
// processes timing ring all-reduces (Gloo's, with --ring weighted the one a step's buckets take,
// with --ring worker that one handed to a worker's all-reduce thread as a step hands it) of each
// size over a window (bench/allreduce_bandwidth, docs/distributed.md "All-reduce effective
// bandwidth"); each rank prints a JSON line per size.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/Collectives.h"
#include "ir/Diagnostic.h"
#include "runtime/dist/AllReduceTiming.h"
#include "runtime/dist/Collective.h"
#include "runtime/dist/Coordinator.h"
#include "runtime/dist/CoordinatorClient.h"
#include "runtime/job/WorkerCommunication.h"
#include "support/Memory.h"
#include "tools/Commands.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {
namespace {

using namespace runtime::dist;

constexpr const char *kToken = "bench-allreduce";
constexpr int kProbeRepeats = 3;

struct BenchAllReduceArgs {
  int rank = -1;
  int ranks = 2;
  std::string coordinator;        // host:port; rank 0 serves it
  std::string bind = "127.0.0.1"; // this rank's address for the ring
  std::string bytes;              // comma-separated sizes
  double seconds = 10;            // timed window per size
  double timeout = 60;            // rendezvous and every collective
  int64_t workMicros = 0;         // each rank's own work before each timed all-reduce
  std::string ring = "gloo";      // gloo, weighted or worker
  bool joinCoordinator = false;   // the coordinator runs elsewhere: rank 0 serves none
};

llvm::Expected<std::vector<size_t>> parseSizes(llvm::StringRef text) {
  llvm::SmallVector<llvm::StringRef, 8> parts;
  text.split(parts, ',', -1, /*KeepEmpty=*/false);
  if (parts.empty())
    return ir::makeError("option --bytes: expected sizes such as 45096,4M, got '" + text + "'");
  std::vector<size_t> sizes;
  for (llvm::StringRef part : parts) {
    auto size = support::parseByteSize(part.trim());
    if (!size)
      return ir::withContext(size.takeError(), "option --bytes");
    if (*size < sizeof(float))
      return ir::makeError("option --bytes: " + part + " is less than one float32 (4 bytes)");
    sizes.push_back(static_cast<size_t>(*size));
  }
  return sizes;
}

// How a rank calls the all-reduce it times.
enum class Caller {
  Direct, // this thread calls the ring (Ring::Gloo or Ring::Weighted)
  Worker, // the weighted ring, handed to a worker's all-reduce thread and waited for, as a
          // training step's executor does (WorkerCommunication::allReduce, then synchronize)
};

llvm::Expected<std::pair<Ring, Caller>> parseRing(llvm::StringRef name) {
  for (Ring ring : {Ring::Gloo, Ring::Weighted})
    if (name == ringName(ring))
      return std::pair{ring, Caller::Direct};
  if (name == "worker")
    return std::pair{Ring::Weighted, Caller::Worker};
  return ir::makeError("option --ring: expected gloo, weighted or worker, got '" + name + "'");
}

llvm::Error checkArgs(const BenchAllReduceArgs &args) {
  if (args.ranks < 2)
    return ir::makeError("option --ranks: expected at least 2, got " + llvm::Twine(args.ranks));
  if (args.rank < 0 || args.rank >= args.ranks)
    return ir::makeError("option --rank: expected 0 to " + llvm::Twine(args.ranks - 1) + ", got " +
                         llvm::Twine(args.rank));
  if (!(args.seconds > 0))
    return ir::makeError("option --seconds: expected a positive time, got " +
                         std::to_string(args.seconds));
  if (args.workMicros < 0 || args.workMicros > 1000000)
    return ir::makeError("option --work-us: expected 0 to 1000000 microseconds, got " +
                         llvm::Twine(args.workMicros));
  if (!(args.timeout > 0))
    return ir::makeError("option --timeout: expected a positive time, got " +
                         std::to_string(args.timeout));
  auto [host, port] = llvm::StringRef(args.coordinator).rsplit(':');
  unsigned portNumber = 0;
  if (host.empty() || port.getAsInteger(10, portNumber) || portNumber == 0 || portNumber > 65535)
    return ir::makeError("option --coordinator: expected HOST:PORT with a port from 1 to 65535, "
                         "got '" +
                         args.coordinator + "'");
  return llvm::Error::success();
}

// A round of timed all-reduces of one size: each call's time and, for Caller::Worker, the part
// of it the caller spent handing the bucket over (WorkerCommunication::allReduce's return).
struct Calls {
  std::vector<double> times, handovers;
};
using TimeCalls = std::function<llvm::Expected<Calls>(int repeats)>;

// `repeats` all-reduces of `bytes` through `communication`'s all-reduce thread, each after a
// barrier and `work` of this thread's own, as timeAllReduces times a direct call: from the
// handover (a gradient bucket of one tensor, reduced where it lies, as a step's large tensors
// are) to synchronize()'s return; the first call, untimed, sets the ring's buffers up.
llvm::Expected<Calls> timeWorkerAllReduces(runtime::job::WorkerCommunication &communication,
                                           size_t bytes, int repeats,
                                           std::chrono::microseconds work) {
  using Clock = std::chrono::steady_clock;
  const auto ranks = communication.group().size();
  runtime::Tensor data(ir::DType::F32, {static_cast<int64_t>(std::max<size_t>(1, bytes / 4))});
  std::fill_n(data.data<float>(), data.numElements(), 1.0f);
  runtime::Tensor *bucket[] = {&data};
  Calls calls;
  for (int i = 0; i <= repeats; ++i) {
    if (auto e = communication.group().barrier())
      return std::move(e);
    // Each rank's share of a global batch of one example per rank.
    communication.beginStep(i, 1, ranks);
    if (work.count() > 0)
      busyFor(work);
    const auto started = Clock::now();
    if (auto e = communication.allReduce(ir::kWorkerGroup, 0, bucket))
      return std::move(e);
    const auto handed = Clock::now();
    if (auto e = communication.synchronize())
      return std::move(e);
    if (i > 0) {
      calls.times.push_back(std::chrono::duration<double>(Clock::now() - started).count());
      calls.handovers.push_back(std::chrono::duration<double>(handed - started).count());
    }
  }
  return calls;
}

// Repeats of `bytes`, each after `work`, that fill about `seconds`, from rank 0's probe of a
// few, broadcast so that every rank runs as many.
llvm::Expected<int64_t> repeatsFor(Collective &group, const TimeCalls &timeCalls, double seconds,
                                   std::chrono::microseconds work) {
  auto probe = timeCalls(kProbeRepeats);
  if (!probe)
    return probe.takeError();
  std::vector<double> &times = probe->times;
  std::sort(times.begin(), times.end());
  const double each =
      std::max(times[times.size() / 2] + std::chrono::duration<double>(work).count(), 1e-6);
  int64_t repeats = std::max<int64_t>(kProbeRepeats, std::llround(seconds / each));
  if (auto e = group.broadcast(&repeats, sizeof(repeats), 0))
    return std::move(e);
  return repeats;
}

// The all-reduces of one size's window: rounds of a twentieth of `repeats` (the probe's
// estimate), as long as rank 0 has seen less than `seconds` pass and fewer than `repeats` run, its
// verdict broadcast after each round so that every rank runs as many. A probe that met the ranks
// all awake can be a hundred times faster than the calls that follow on a loaded machine (4 B
// rings through namespaces probed at 80 us then took 8 ms a call: the repeats planned for 0.5 s
// would have taken about 50): the clock bounds the window to a round past `seconds`.
llvm::Expected<Calls> timeWindow(Collective &group, const TimeCalls &timeCalls, int64_t repeats,
                                 double seconds) {
  const int64_t round = std::max<int64_t>(kProbeRepeats, repeats / 20);
  const auto started = std::chrono::steady_clock::now();
  Calls calls;
  for (;;) {
    auto some = timeCalls(static_cast<int>(round));
    if (!some)
      return some.takeError();
    calls.times.insert(calls.times.end(), some->times.begin(), some->times.end());
    calls.handovers.insert(calls.handovers.end(), some->handovers.begin(), some->handovers.end());
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - started;
    int64_t more = elapsed.count() < seconds && static_cast<int64_t>(calls.times.size()) < repeats;
    if (auto e = group.broadcast(&more, sizeof(more), 0))
      return std::move(e);
    if (!more)
      return calls;
  }
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// {"rank", "bytes", "repeats", "seconds" (their sum), "median_s", "min_s", "max_s"}, and
// "handover_median_s" where the calls were handed to a worker's all-reduce thread.
void printTimes(int rank, size_t bytes, const Calls &calls) {
  double sum = 0;
  for (double t : calls.times)
    sum += t;
  nlohmann::ordered_json line = {
      {"rank", rank},
      {"bytes", bytes},
      {"repeats", calls.times.size()},
      {"seconds", sum},
      {"median_s", median(calls.times)},
      {"min_s", *std::min_element(calls.times.begin(), calls.times.end())},
      {"max_s", *std::max_element(calls.times.begin(), calls.times.end())}};
  if (!calls.handovers.empty())
    line["handover_median_s"] = median(calls.handovers);
  llvm::outs() << line.dump() << "\n";
  llvm::outs().flush();
}

llvm::Error benchAllReduce(const BenchAllReduceArgs &args, Ring ring, Caller caller,
                           const std::vector<size_t> &sizes) {
  const auto timeout = std::chrono::milliseconds(std::llround(args.timeout * 1000));
  std::unique_ptr<Coordinator> coordinator;
  if (args.rank == 0 && !args.joinCoordinator) {
    CoordinatorOptions options;
    options.listenAddress = args.coordinator;
    options.jobToken = kToken;
    for (int r = 0; r < args.ranks; ++r)
      options.expectedTasks.push_back("worker:" + std::to_string(r));
    // Ranks timing a long window send no heartbeats worth watching; the collectives' timeout
    // bounds every wait instead.
    options.heartbeatTimeout = std::chrono::hours(1);
    auto started = Coordinator::start(std::move(options));
    if (!started)
      return ir::withContext(started.takeError(), "option --coordinator " + args.coordinator);
    coordinator = std::move(*started);
  }
  CoordinatorClientOptions clientOptions;
  clientOptions.address = args.coordinator;
  clientOptions.jobToken = kToken;
  clientOptions.taskName = "worker:" + std::to_string(args.rank);
  clientOptions.callTimeout = timeout;
  CoordinatorClient client(clientOptions);
  if (auto e = client.registerTask())
    return e;
  auto group = Collective::create(client, kToken, args.rank, args.ranks, args.bind, timeout);
  if (!group)
    return group.takeError();
  const std::chrono::microseconds work(args.workMicros);
  std::unique_ptr<runtime::job::WorkerCommunication> communication;
  Collective *collective = group->get();
  if (caller == Caller::Worker)
    communication =
        std::make_unique<runtime::job::WorkerCommunication>(args.rank, std::move(*group), nullptr);
  for (size_t bytes : sizes) {
    TimeCalls timeCalls = [&](int repeats) -> llvm::Expected<Calls> {
      if (communication)
        return timeWorkerAllReduces(*communication, bytes, repeats, work);
      auto times = timeAllReduces(*collective, ring, bytes, repeats, work);
      if (!times)
        return times.takeError();
      return Calls{std::move(*times), {}};
    };
    auto repeats = repeatsFor(*collective, timeCalls, args.seconds, work);
    if (!repeats)
      return repeats.takeError();
    auto calls = timeWindow(*collective, timeCalls, *repeats, args.seconds);
    if (!calls)
      return calls.takeError();
    printTimes(args.rank, bytes, *calls);
  }
  // Rank 0 may serve the coordinator: it leaves only once every rank is done.
  return collective->barrier();
}

int runBenchAllReduce(const BenchAllReduceArgs &args) {
  if (auto e = checkArgs(args))
    return reportError(std::move(e));
  auto sizes = parseSizes(args.bytes);
  if (!sizes)
    return reportError(sizes.takeError());
  auto ring = parseRing(args.ring);
  if (!ring)
    return reportError(ring.takeError());
  if (auto e = benchAllReduce(args, ring->first, ring->second, *sizes))
    return reportError(std::move(e));
  return 0;
}

} // namespace

void registerBenchAllReduceCommand(CLI::App &app) {
  auto args = std::make_shared<BenchAllReduceArgs>();
  auto *cmd = app.add_subcommand("bench-allreduce",
                                 "Time ring all-reduces between processes, one rank each (each "
                                 "prints a JSON line per size)");
  cmd->add_option("--rank", args->rank, "This process's rank")->required();
  cmd->add_option("--ranks", args->ranks, "Processes in the group")->capture_default_str();
  cmd->add_option("--coordinator", args->coordinator,
                  "HOST:PORT where rank 0 serves the rendezvous and the others reach it")
      ->required();
  cmd->add_flag("--join-coordinator", args->joinCoordinator,
                "The coordinator at --coordinator runs elsewhere (token bench-allreduce, tasks "
                "worker:0 ...): rank 0 joins it as the others do");
  cmd->add_option("--bind", args->bind, "This rank's IPv4 address that peers reach it at")
      ->capture_default_str();
  cmd->add_option("--bytes", args->bytes, "Sizes to all-reduce, comma-separated (4M, 45096)")
      ->required();
  cmd->add_option("--seconds", args->seconds, "Timed window per size")->capture_default_str();
  cmd->add_option("--timeout", args->timeout, "Seconds the rendezvous and each collective may take")
      ->capture_default_str();
  cmd->add_option("--work-us", args->workMicros,
                  "Microseconds of each rank's own work (computing) before each timed "
                  "all-reduce, as a training step's all-reduces follow its kernels; untimed")
      ->capture_default_str();
  cmd->add_option("--ring", args->ring,
                  "gloo: Gloo's ring (Collective::allReduceSum); weighted: the weighted ring a "
                  "training step's buckets take, over the group's own connections; worker: that "
                  "ring handed to a worker's all-reduce thread and waited for, as a step's "
                  "executor does (each line adds the handover's median, handover_median_s)")
      ->capture_default_str();
  cmd->callback([args]() {
    if (int status = runBenchAllReduce(*args))
      throw CLI::RuntimeError(status);
  });
}

} // namespace prism::tools
