// The step simulator (see Simulator.h): each worker's program replayed in order on a compute
// stream and an all-reduce stream, PS calls on the worker's timeline, pushes at the step's end,
// the servers' updates after the pushes they wait for, transfers between hosts queued on each
// host's link.
#include "plan/Simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "ir/Collectives.h"
#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "plan/CommunicationCost.h"
#include "plan/Estimate.h"
#include "plan/PlanTasks.h"
#include "plan/PlanVariables.h"
#include "plan/PlanVerifier.h"
#include "plan/Synchronization.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"

namespace prism::plan {
namespace {

int64_t ceilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// One direction of a link: when it is busy, as disjoint intervals. A transfer takes the first
// free time from when it is offered, in the gaps between those offered before it too: workers are
// replayed one after another, so a later worker's message may be offered earlier than one already
// placed, and a queue in replay order would make a thousand workers' messages wait for each
// other's.
class Direction {
public:
  // Takes `seconds` of free time from `from` on, split over gaps as needed; returns its end.
  double fill(double from, double seconds) {
    if (seconds <= 0)
      return from;
    while (true) {
      auto next = busy_.upper_bound(from);
      if (next != busy_.begin() && std::prev(next)->second > from) {
        from = std::prev(next)->second; // inside a busy interval: its end
        continue;
      }
      if (next == busy_.end() || next->first - from >= seconds) {
        occupy(from, from + seconds);
        return from + seconds;
      }
      const double gapEnd = next->first; // before occupy(), which merges `next` away
      seconds -= gapEnd - from;
      occupy(from, gapEnd);
      from = gapEnd;
    }
  }
  // Where fill() would end, leaving it as it is.
  double endOfFill(double from, double seconds) const {
    if (seconds <= 0)
      return from;
    auto next = busy_.upper_bound(from);
    if (next != busy_.begin() && std::prev(next)->second > from)
      from = std::prev(next)->second;
    while (next != busy_.end() && next->first - from < seconds) {
      seconds -= std::max(0.0, next->first - from);
      from = std::max(from, next->second);
      ++next;
    }
    return from + seconds;
  }
  // When it is free for good.
  double end() const { return busy_.empty() ? 0 : busy_.rbegin()->second; }

private:
  // Marks [begin, end) busy, merging it with the intervals it touches.
  void occupy(double begin, double end) {
    auto it = busy_.lower_bound(begin);
    if (it != busy_.begin() && std::prev(it)->second >= begin)
      --it;
    while (it != busy_.end() && it->first <= end) {
      begin = std::min(begin, it->first);
      end = std::max(end, it->second);
      it = busy_.erase(it);
    }
    busy_.emplace(begin, end);
  }

  std::map<double, double> busy_; // begin -> end
};

// A host's link, each direction on its own (full duplex). Hosts on 127.0.0.1 and hosts of
// unknown bandwidth move bytes at the profile's loopback figures, without a queue.
struct Link {
  double bytesPerSecond = 0;  // 0: loopback figures
  uint64_t bitsPerSecond = 0; // the nominal bandwidth, as the cluster gives it
  Direction out, in;
  LinkPrediction prediction;
};

// One worker's step so far.
struct Timeline {
  std::vector<double> ready; // op results, by slot (valueSlots_): when they are computed
  double compute = 0;        // the compute stream is free from
  double communicate = 0;    // the all-reduce stream is free from
  std::map<std::string, double> pushBytes;  // by PS task: what the step's push carries
  std::map<std::string, double> pushRows;   // by PS task: the rows in it
  std::map<std::string, double> applyBytes; // by PS task: its bytes as its update reads them
  double stepPulledAt = -1; // when the step's whole variables came (-1: not pulled yet)
  double slowdown = 1; // its kernels' time over the profile's (cores shared with other workers)
  bool gpu = false;    // its devices are GPUs: kernels at the profile's GPU figures
  TaskPrediction prediction;
};

// What the servers' update programs cost besides the per-byte apply (serverUpdates).
struct ServerUpdates {
  std::map<std::string, double> kernelSeconds; // by PS task: its dense updates' kernels
  // By variable updated from pushed rows: its update's bytes per pushed byte over the
  // calibration's SGD, 1 + 2 × the variables it writes (the variable and its state slots), over
  // 3 (SGD writes the variable only).
  std::map<std::string, double> rowUpdateFactor;
};

} // namespace

// P(at least k of n draws fall below the q-quantile) = 1/2, solved for q: the quantile of one
// draw at which the median of the k-th smallest of n lies.
double orderStatisticQuantile(int64_t k, int64_t n) {
  if (n <= 1 || k <= 0)
    return 0.5;
  k = std::min(k, n);
  auto atLeastK = [&](double q) {
    double sum = 0;
    const double lq = std::log(q), lr = std::log1p(-q);
    for (int64_t j = k; j <= n; ++j) {
      const double dj = static_cast<double>(j), dn = static_cast<double>(n);
      sum += std::exp(std::lgamma(dn + 1) - std::lgamma(dj + 1) - std::lgamma(dn - dj + 1) +
                      dj * lq + (dn - dj) * lr);
    }
    return sum;
  };
  double lo = 0, hi = 1;
  for (int i = 0; i < 60; ++i) {
    const double mid = (lo + hi) / 2;
    (atLeastK(mid) < 0.5 ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

namespace {

class StepSimulator {
public:
  StepSimulator(const Plan &plan, const ir::Module &worker, const CostProfile &profile,
                const SimulateOptions &options, ServerUpdates updates)
      : plan_(plan), worker_(worker), profile_(profile), options_(options),
        updates_(std::move(updates)) {
    for (const Variable &v : plan.variables())
      variables_[v.name()] = &v;
    for (const Task &task : plan.cluster().tasks()) {
      hostOf_[task.name()] = task.host();
      machineOf_[task.name()] = machineOfTask(plan, task);
      if (task.role() == "worker") {
        workers_.push_back(task.name());
        gpuWorker_.push_back(onGpu(task));
      } else if (task.role() == "ps") {
        servers_.push_back(task.name());
        serving_[task.name()];
      }
    }
    for (const Host &host : plan.cluster().hosts()) {
      Link link;
      link.prediction.host = host.name();
      if (host.address().rfind("127.", 0) != 0) {
        link.bitsPerSecond = host.bandwidth_bits_per_sec();
        link.bytesPerSecond = static_cast<double>(link.bitsPerSecond) / 8;
      }
      links_.push_back(link);
    }
    for (size_t w = 0; w < workers_.size(); ++w) {
      cpuWorkersOn_[machineOf(workers_[w])] += !gpuWorker_[w];
      if (gpuWorker_[w])
        gpuMachines_.insert(machineOf(workers_[w]));
    }
    const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(workers_.size()));
    localBatch_ = ceilDiv(plan.run().global_batch(), n);
    towerBatch_ = ceilDiv(localBatch_, std::max(1, plan.run().towers_per_worker()));
    for (const TableEstimate &t : plan.estimate().tables())
      rowsOf_[t.variable()] = t;
    for (const auto &op : worker.ops())
      if (op->name() == "gather" && op->numOperands() > 1 && op->operand(1)->hasType())
        gatheredIndices_[op->operand(0)->name()] +=
            static_cast<double>(op->operand(1)->type().numElements(localBatch_));
    batchBytes_ = inputBytes(worker, localBatch_);
    // Results are numbered once, so a worker's timeline is a vector, not a map per worker.
    for (const auto &op : worker.ops())
      for (unsigned i = 0; i < op->numResults(); ++i)
        valueSlots_.emplace(op->result(i), static_cast<int>(valueSlots_.size()));
    timelines_.resize(workers_.size());
    const bool cpuWorkers =
        std::find(gpuWorker_.begin(), gpuWorker_.end(), false) != gpuWorker_.end();
    slowest_ = cpuWorkers ? slowestWorkerRatio(worker) : 1;
    for (size_t r = 0; r < workers_.size(); ++r) {
      timelines_[r].ready.assign(valueSlots_.size(), 0);
      timelines_[r].prediction.task = workers_[r];
      timelines_[r].gpu = gpuWorker_[r];
      timelines_[r].slowdown = gpuWorker_[r] ? 1 : coreSharing(r) * slowest_;
    }
  }

  Prediction run() {
    for (size_t r = 0; r < timelines_.size(); ++r)
      loadBatch(r);
    for (const auto &op : worker_.ops())
      step(*op);
    finishStep();
    return predict();
  }

private:
  static bool onGpu(const Task &task) {
    return std::any_of(task.devices().begin(), task.devices().end(),
                       [](const std::string &d) { return llvm::StringRef(d).startswith("gpu:"); });
  }

  // The machine a task runs on (hosts of one machine share its cores).
  const std::string &machineOf(const std::string &task) const { return machineOf_.at(task); }

  // A machine's cores as the PS calls' CPU work finds them: a call's part runs on the core that
  // frees first. Unknown cores (0) are as many as the calls need, and so are a GPU machine's
  // (the profile's cores are those of the CPU machine it was measured on).
  double onCores(const std::string &task, double from, double seconds) {
    const std::string &machine = machineOf(task);
    if (profile_.cores <= 0 || gpuMachines_.count(machine))
      return from + seconds;
    std::vector<Direction> &cores = cores_[machine];
    cores.resize(static_cast<size_t>(profile_.cores));
    Direction *first = &cores.front();
    double end = std::numeric_limits<double>::infinity();
    for (Direction &core : cores)
      if (const double e = core.endOfFill(from, seconds); e < end) {
        end = e;
        first = &core;
      }
    return first->fill(from, seconds);
  }

  // The CPU workers on worker `r`'s machine (GPU workers run their kernels on their GPUs, not
  // the machine's cores).
  int cpuWorkersBeside(size_t r) const { return cpuWorkersOn_.at(machineOf(workers_[r])); }

  // A synchronous step waits for the slowest of the workers it combines (the first workers −
  // backup_workers, under backup workers), so where a CPU worker's step varies from step to step
  // (the profile's stepSpread), the median step is one worker's at the quantile where the k-th
  // fastest of n lies in half of the steps (orderStatisticQuantile): for two workers its 71st
  // percentile, for four its 84th. Asynchronous workers that all-reduce nothing wait for none.
  double slowestWorkerRatio(const ir::Module &worker) const {
    const int64_t n = static_cast<int64_t>(workers_.size());
    const bool allReduces =
        llvm::any_of(worker.ops(), [](const auto &op) { return op->name() == "all_reduce"; });
    if (n < 2 || (plan_.run().sync() == syncModeName(SyncMode::Async) && !allReduces))
      return 1;
    const int64_t k = std::clamp<int64_t>(n - plan_.run().backup_workers(), 1, n);
    return profile_.stepRatioAt(orderStatisticQuantile(k, n));
  }

  // Workers on one machine share its cores: when they need more threads than it has, each runs
  // its kernels that much slower than the profile, timed alone, says (processor sharing).
  // Unknown cores (0) share nothing.
  double coreSharing(size_t r) const {
    if (profile_.cores <= 0)
      return 1;
    const double threads = static_cast<double>(cpuWorkersBeside(r)) * std::max(1, profile_.threads);
    return std::max(1.0, threads / profile_.cores);
  }

  // Whether the CPU workers on worker `r`'s machine need every core it has for their kernels:
  // nothing is left for their collectives' own work. Unknown cores (0): never.
  bool coresFilled(size_t r) const {
    return profile_.cores > 0 && !gpuWorker_[r] &&
           cpuWorkersBeside(r) * std::max(1, profile_.threads) >= profile_.cores;
  }

  // Likewise for a CPU worker's part of a collective on loopback (the ring's hops, its wake-ups,
  // the passes over a bucket): the profile timed two ranks on a machine of at least two cores, a
  // core each; a machine holding more workers than cores moves its ring that much slower.
  double communicationSharing(size_t r) const {
    if (profile_.cores <= 0 || gpuWorker_[r])
      return 1;
    return std::max(1.0, static_cast<double>(cpuWorkersBeside(r)) / profile_.cores);
  }

  // The trainer assembles the worker's batch before its first kernel, on the same thread: CPU
  // work, slowed as a CPU worker's kernels are where workers share the machine's cores.
  void loadBatch(size_t r) {
    Timeline &t = timelines_[r];
    const double seconds = profile_.data.seconds(batchBytes_) * t.slowdown;
    t.compute = seconds;
    t.prediction.computeSeconds += seconds;
    if (options_.spans)
      span(t.prediction.task, "steps", "load batch", "data", 0, seconds);
    // The executor's own part of the step (a CPU worker's; none measured for GPUs).
    if (!t.gpu) {
      const double own = profile_.executor.stepLatency * t.slowdown;
      t.compute += own;
      t.prediction.computeSeconds += own;
    }
  }

  void step(const ir::Op &op) {
    operandSlots_.clear();
    for (const ir::Value *v : op.operands())
      if (auto it = valueSlots_.find(v); it != valueSlots_.end())
        operandSlots_.push_back(it->second);
    if (op.numResults() > 0)
      resultSlot_ = valueSlots_.at(op.result(0));
    if (op.name() == "all_reduce") {
      allReduce(op);
      return;
    }
    auto transfer = psTransferOf(op.name());
    const Variable *v = transfer ? variables_.lookup(op.operand(0)->name()) : nullptr;
    for (size_t r = 0; r < timelines_.size(); ++r) {
      if (v && onParameterServers(*v))
        psOp(r, op, *transfer, *v);
      else
        computeOp(r, op);
    }
  }

  // When the operands of the op being replayed are computed on `t` (operands that no op
  // computes, inputs and variables, are ready at 0).
  double readyOf(const Timeline &t, const ir::Op &) const {
    double ready = 0;
    for (int slot : operandSlots_)
      ready = std::max(ready, t.ready[slot]);
    return ready;
  }
  void setResults(Timeline &t, const ir::Op &op, double at) {
    for (unsigned i = 0; i < op.numResults(); ++i)
      t.ready[resultSlot_ + i] = at;
  }

  // An op's cost rule at `batch`; an update from a sparse gradient (ir::isRowUpdate) touches
  // the rows a step reads, not the whole table the rule counts: the plan's estimate of a table
  // on servers, else uniform draws of every worker's indices of its `gather`s (a table all-reduced
  // is updated in the rows any worker read).
  ir::OpCost costOf(const ir::Op &op, int64_t batch) const {
    ir::OpCost cost = ir::opCost(op, batch);
    if (!ir::isRowUpdate(op) || op.numOperands() == 0 || !op.operand(0)->hasType())
      return cost;
    const std::string &name = op.operand(0)->name();
    const ir::TensorType &table = op.operand(0)->type();
    if (table.dims.empty() || table.dims.front() <= 0)
      return cost;
    const auto tableRows = static_cast<double>(table.dims.front());
    double rows = tableRows;
    if (auto estimate = rowsOf_.find(name); estimate != rowsOf_.end())
      rows = estimate->second.rows_per_step();
    else if (auto indices = gatheredIndices_.find(name); indices != gatheredIndices_.end())
      rows = expectedDistinct(tableRows, indices->second * static_cast<double>(timelines_.size()));
    const double share = std::min(1.0, rows / tableRows);
    cost.flops *= share;
    cost.bytes *= share;
    return cost;
  }

  // An op's time on `t`'s device at `batch`, before sharing: where the profile timed a CPU op of
  // its signature, from those times (measuredOpSeconds); else its kernel family's roofline.
  double kernelSeconds(const Timeline &t, const ir::Op &op, int64_t batch) {
    const KernelCost &kernel = t.gpu ? profile_.gpu.kernel(op.name()) : profile_.kernel(op.name());
    auto roofline = [&](int64_t b) { return kernel.seconds(costOf(op, b)); };
    if (t.gpu || profile_.ops.empty() || ir::isRowUpdate(op))
      return roofline(batch);
    auto signature = signatures_.find(&op);
    if (signature == signatures_.end())
      signature = signatures_.emplace(&op, opSignature(op)).first;
    return measuredOpSeconds(profile_.ops, signature->second, batch, roofline)
        .value_or(roofline(batch));
  }

  void computeOp(size_t r, const ir::Op &op) {
    Timeline &t = timelines_[r];
    const int64_t batch = op.attrs.has(ir::kDeviceAttr) ? towerBatch_ : localBatch_;
    // The executor's dispatch to the kernel (a CPU worker's), then the kernel.
    const double dispatch = t.gpu ? 0 : profile_.executor.opLatency * t.slowdown;
    const double begin = std::max(t.compute, readyOf(t, op)) + dispatch;
    const double seconds = kernelSeconds(t, op, batch) * t.slowdown;
    t.compute = begin + seconds;
    t.prediction.computeSeconds += dispatch + seconds;
    setResults(t, op, t.compute);
    if (!options_.spans)
      return;
    span(t.prediction.task, "ops", ir::opSpanName(op), "op", begin, t.compute);
  }

  // The loss (bucket -1) in float32, gradient buckets as the plan's compression says.
  double bucketBytes(const ir::Op &op) const {
    const std::string group = op.attrs.getString("group");
    const int64_t id = op.attrs.getInt("bucket");
    for (const CollectiveGroup &g : plan_.groups())
      if (g.name() == group)
        for (const Bucket &b : g.buckets())
          if (b.id() == id)
            return bucketWireBytes(plan_, b);
    return 0;
  }

  // The collective calls a bucket takes and the bytes of the passes the communication thread
  // makes over it around them, as the runtime reduces it (ir::reducedInPlace): one call, its
  // large tensors (or its only one, or the only one left) reduced where they lie, the weighted
  // ring weighting them as it goes (no pass); the others gathered into one buffer and copied back
  // (two passes). A compressed bucket is gathered whole. A bucket of no elements takes no call.
  struct BucketWork {
    int calls = 0;
    int passes = 0;       // over the gathered bytes: into the bucket's buffer and back
    double passBytes = 0; // each
  };
  BucketWork bucketWork(const ir::Op &op) const {
    const bool compressed = !plan_.run().compress().empty() && op.attrs.getInt("bucket") >= 0;
    BucketWork work;
    double gathered = 0, total = 0;
    size_t gatheredTensors = 0;
    for (const ir::Value *v : op.operands()) {
      const auto bytes =
          static_cast<double>(v->type().numElements(localBatch_) * ir::dtypeBytes(v->type().dtype));
      total += bytes;
      if (compressed ||
          !ir::reducedInPlace(static_cast<int64_t>(bytes), static_cast<int64_t>(workers_.size()))) {
        gathered += bytes;
        ++gatheredTensors;
      }
    }
    work.calls = total > 0 ? 1 : 0;
    work.passes = gatheredTensors > 1 || compressed ? 2 : 0;
    work.passBytes = gathered;
    return work;
  }

  // A ring all-reduce: it starts when every rank produced the bucket's last gradient and the
  // stream finished the bucket before; each rank sends 2(N−1)/N of it to the next rank, in
  // 2(N−1) steps, in each of the bucket's calls. The profile's latency was fitted on two ranks
  // (2 steps): N ranks take N−1 times that per call.
  void allReduce(const ir::Op &op) {
    const size_t n = timelines_.size();
    double begin = 0;
    for (const Timeline &t : timelines_)
      begin = std::max({begin, t.communicate, readyOf(t, op)});
    const double ring = ringAllReduceBytes(bucketBytes(op), static_cast<int64_t>(n));
    // The ring moves at its slowest pair: a link between hosts, NVLink between two GPUs of one
    // host, or the profile's loopback rate. Hops at the loopback rate, the ring's wake-ups and
    // the passes over the bucket slow down on machines with more workers than cores
    // (communicationSharing).
    double perByte = 0, sharing = 1;
    bool loopback = true;               // every hop at the loopback rate (no link between hosts)
    const LinkCost *measured = nullptr; // the slowest measured link class the ring crosses
    for (size_t r = 0; n > 1 && r < n; ++r) {
      const size_t next = (r + 1) % n;
      const int from = hostOf_[workers_[r]], to = hostOf_[workers_[next]];
      const double bandwidth = linkBandwidth(from, to, ring);
      if (bandwidth > 0)
        begin = std::max({begin, links_[from].out.end(), links_[to].in.end()});
      loopback = loopback && bandwidth <= 0;
      perByte = std::max(perByte, ringSecondsPerByte(r, next, ring));
      sharing = std::max(sharing, communicationSharing(r));
      if (const LinkCost *link = measuredLink(from, to);
          link && (!measured || unitLatency(*link) > unitLatency(*measured)))
        measured = link;
    }
    const BucketWork work = bucketWork(op);
    const double calls = static_cast<double>(work.calls) * static_cast<double>(n - 1);
    // Where a machine holds more workers than cores, none of them is idle and its ranks' threads
    // are awake: a call's latency is the back-to-back one (slowed by the sharing). Elsewhere the
    // ranks' threads slept while the workers computed, and a call pays for their waking (where
    // the profile measured it). A ring over measured links pays their latency after the ranks'
    // work, which was measured through them with the machines' cores as they are.
    const double latency = sharing > 1 || profile_.allReduce.wakeLatency <= 0
                               ? profile_.allReduce.latency
                               : profile_.allReduce.wakeLatency;
    const double latencies = measured ? unitLatency(*measured) * calls : sharing * latency * calls;
    // The ranks' CPU work in the ring: the passes over the bucket, and its bytes through the
    // kernel where they move at the loopback rate.
    const double cpuSeconds =
        n < 2 ? 0
              : sharing * work.passes * profile_.allReduce.stagingSeconds(work.passBytes) +
                    (loopback ? ring * perByte : 0);
    const double seconds = n < 2 ? 0 : latencies + cpuSeconds + (loopback ? 0 : ring * perByte);
    for (size_t r = 0; n > 1 && r < n; ++r) {
      const int from = hostOf_[workers_[r]], to = hostOf_[workers_[(r + 1) % n]];
      if (from != to)
        useLink(from, to, begin, ring, /*ringHop=*/true);
    }
    const double end = begin + seconds;
    for (size_t r = 0; r < n; ++r) {
      Timeline &t = timelines_[r];
      // Where the machine's cores are all taken by its workers' kernels, the ring's CPU work
      // takes its worker's core from the kernels that follow: they finish that much later (its
      // latencies are waits, which take no core).
      if (coresFilled(r))
        t.compute = std::max(t.compute, begin) + cpuSeconds;
      t.communicate = end;
      t.prediction.communicationSeconds += seconds;
      if (n > 1) {
        t.prediction.bytesSent += ring;
        t.prediction.bytesReceived += ring;
      }
      setResults(t, op, end);
      span(t.prediction.task, "all-reduce", ir::bucketName(op.attrs.getInt("bucket")), "all_reduce",
           begin, end, ring);
    }
  }

  // The profile's ring measured over links of the bandwidth between hosts `from` and `to`, or
  // null (one host, a loopback or unknown link, or a bandwidth not measured).
  const LinkCost *measuredLink(int from, int to) const {
    if (from == to || links_[from].bitsPerSecond == 0 || links_[to].bitsPerSecond == 0)
      return nullptr;
    return profile_.link(std::min(links_[from].bitsPerSecond, links_[to].bitsPerSecond));
  }
  // A measured ring's latency per call and hop pair, as a step's rings follow the ranks'
  // kernels (after their work, where the profile measured it): it was measured on `ranks` ranks,
  // which take ranks − 1 of them (as the loopback latency, fitted on two ranks, is one).
  static double unitLatency(const LinkCost &link) {
    const double latency = link.wakeLatency > 0 ? link.wakeLatency : link.latency;
    return latency / static_cast<double>(std::max(1, link.ranks - 1));
  }

  // Seconds per byte of the hop from worker `r` to worker `next` of a ring whose ranks each send
  // `bytes`: a link's (linkBandwidth), NVLink's, or the profile's loopback rate as the machine's
  // cores allow (communicationSharing).
  double ringSecondsPerByte(size_t r, size_t next, double bytes) const {
    const int from = hostOf_.at(workers_[r]), to = hostOf_.at(workers_[next]);
    if (const double bandwidth = linkBandwidth(from, to, bytes); bandwidth > 0)
      return 1 / bandwidth;
    if (from == to && gpuWorker_[r] && gpuWorker_[next] && profile_.gpu.nvlinkBytesPerSecond > 0)
      return 1 / profile_.gpu.nvlinkBytesPerSecond;
    return profile_.allReduce.ringSecondsPerByte(bytes) * communicationSharing(r);
  }

  // Bytes per second between two hosts' tasks on their links: as the profile measured links of
  // their bandwidth (a ring through them: `prism calibrate --cluster`), else the bandwidth; 0
  // when the profile's loopback figures apply (one host, or a loopback or unknown link). A ring
  // whose ranks each send `ringBytes` moves at the measured rings' rate at that size; a PS
  // message (`ringBytes` 0), one flow where the ring has one a host, at the fit's. No
  // measurement moves bytes faster than the wire: a fit over small rings, or a shaper's burst,
  // can give a rate above it that a step's megabytes never see.
  double linkBandwidth(int from, int to, double ringBytes = 0) const {
    if (from == to)
      return 0;
    const double a = links_[from].bytesPerSecond, b = links_[to].bytesPerSecond;
    if (a <= 0 || b <= 0)
      return 0;
    const double wire = std::min(a, b);
    if (const LinkCost *link = measuredLink(from, to); link && link->secondsPerByte > 0)
      return std::min(
          wire, 1 / (ringBytes > 0 ? link->ringSecondsPerByte(ringBytes) : link->secondsPerByte));
    return wire;
  }
  // Takes `bytes` from host `from` to host `to` from `begin`: it leaves in the sender's outgoing
  // direction's free time, and is taken in in the receiver's incoming direction's free time from
  // then. The two directions are apart: holding a sender's direction until the receiver's is
  // free would chain every host's link to every other's. Returns when it starts, as seen from its
  // arrival (arrival − its time on the wire). `ringHop`: the bytes are a ring's (linkBandwidth).
  double useLink(int from, int to, double begin, double bytes, bool ringHop = false) {
    const double bandwidth = linkBandwidth(from, to, ringHop ? bytes : 0);
    Link &out = links_[from], &in = links_[to];
    out.prediction.bytesOut += bytes;
    in.prediction.bytesIn += bytes;
    if (bandwidth <= 0)
      return begin;
    const double seconds = bytes / bandwidth;
    const double sent = out.out.fill(begin, seconds);
    const double arrived = std::max(sent, in.in.fill(sent - seconds, seconds));
    out.prediction.busySeconds += seconds;
    in.prediction.busySeconds += seconds;
    return arrived - seconds;
  }
  // One message of `bytes` between a worker and a server, sent at `begin`; returns its arrival.
  // Without a link between them (one host, or loopback addresses) it moves at the profile's PS
  // rate, measured with one client: a server moves the profile's serial share of it one message
  // at a time and the rest beside its other messages, so that workers on one machine pulling
  // from one server at once wait for each other that much (two at once: the second done after
  // 1 + serial_share times one's).
  double message(const std::string &from, const std::string &to, double begin, double bytes) {
    const int a = hostOf_[from], b = hostOf_[to];
    const double bandwidth = linkBandwidth(a, b);
    if (a != b) // a link carries it only between two hosts
      begin = useLink(a, b, begin, bytes);
    if (bandwidth > 0)
      return begin + bytes / bandwidth;
    const double seconds = bytes / profile_.ps.bytesPerSecond;
    auto server = serving_.find(serving_.count(from) ? from : to);
    if (server == serving_.end())
      return begin + seconds;
    const double serial = seconds * profile_.ps.serialShare;
    return std::max(begin + seconds, server->second.fill(begin, serial) + (seconds - serial));
  }

  // The rows a row pull or push of `v` moves per step (the plan's estimate).
  double rowsOf(PsTransfer transfer, const Variable &v) const {
    auto it = rowsOf_.find(v.name());
    if (it == rowsOf_.end())
      return 0;
    if (transfer == PsTransfer::PullRows && it->second.rows_pulled_per_step() > 0)
      return it->second.rows_pulled_per_step();
    return it->second.rows_per_step();
  }

  // What an op moves to and from each server holding a shard of `v`.
  std::map<std::string, ShardTraffic> trafficByTask(PsTransfer transfer, const Variable &v) const {
    const double rows = movesRows(transfer) ? rowsOf(transfer, v) : 0;
    llvm::ArrayRef<double> shares;
    if (auto it = rowsOf_.find(v.name()); it != rowsOf_.end())
      shares = rowSharesOf(it->second);
    std::map<std::string, ShardTraffic> byTask;
    for (const Shard &s : v.shards()) {
      ShardTraffic traffic = psShardTraffic(plan_.run(), transfer, v, s, rows, shares);
      byTask[s.task()].toPs += traffic.toPs;
      byTask[s.task()].fromPs += traffic.fromPs;
      byTask[s.task()].rows += traffic.rows;
    }
    return byTask;
  }

  // The variables the step pulls whole, as the runtime pulls them: one call per server at the
  // step's first such pull (runtime/job/WorkerCommunication.h), what each server sends summed.
  void planStepPulls() {
    for (const auto &op : worker_.ops()) {
      auto transfer = psTransferOf(op->name());
      if (transfer != PsTransfer::Pull)
        continue;
      const Variable *v = variables_.lookup(op->operand(0)->name());
      if (!v || !onParameterServers(*v) || llvm::is_contained(stepPullNames_, v->name()))
        continue;
      stepPullNames_.push_back(v->name());
      for (const auto &[task, traffic] : trafficByTask(PsTransfer::Pull, *v)) {
        stepPulls_[task].toPs += traffic.toPs;
        stepPulls_[task].fromPs += traffic.fromPs;
      }
    }
  }

  // A PS call's CPU work on one side, half its calibrated latency and per-row work for `rows`
  // rows (measured between two tasks of an idle machine, the caller's and the server's parts one
  // after the other), on the cores of `task`'s machine from `from`; returns when it is done. A
  // call costs its latency on machines with cores to spare, and more where the calls of the
  // tasks beside it take their cores.
  double callWork(const std::string &task, double from, double rows) {
    return onCores(task, from, (profile_.ps.latency + rows * profile_.ps.secondsPerRow) / 2);
  }

  // The bytes of the rows a row push's gradient (`op`'s second operand) holds before it is
  // coalesced: one row of its table's width per index of the gather_grad that computed it
  // (duplicates included), 0 where it is not one's.
  double rowsInBytes(const ir::Op &op) const {
    if (op.numOperands() < 2 || !op.operand(1)->hasType())
      return 0;
    const ir::Op *grad = op.operand(1)->definingOp();
    if (!grad || grad->name() != "gather_grad" || grad->numOperands() < 2 ||
        !grad->operand(1)->hasType())
      return 0;
    const ir::TensorType &table = op.operand(1)->type();
    if (table.dims.empty() || table.dims.front() <= 0)
      return 0;
    const double rowBytes = static_cast<double>(table.numElements(localBatch_) /
                                                table.dims.front() * ir::dtypeBytes(table.dtype));
    return static_cast<double>(grad->operand(1)->type().numElements(localBatch_)) * rowBytes;
  }

  // A pull is a call the worker waits for (its shards' tasks answer in parallel); the step's
  // whole variables come in the call of its first such pull. A push records the gradient, which
  // the step's one push call sends at the end; a row push coalesces its rows first, on the
  // compute thread (a CPU worker's: the profile's coalesce figures, slowed as its kernels are).
  void psOp(size_t r, const ir::Op &op, PsTransfer transfer, const Variable &v) {
    Timeline &t = timelines_[r];
    double begin = std::max(t.compute, readyOf(t, op));
    if (transfer == PsTransfer::PushRows && !t.gpu &&
        (profile_.ps.coalesceLatency > 0 || profile_.ps.coalesceSecondsPerByte > 0)) {
      const double seconds =
          (profile_.ps.coalesceLatency + profile_.ps.coalesceSecondsPerByte * rowsInBytes(op)) *
          t.slowdown;
      if (options_.spans)
        span(t.prediction.task, "ops", ir::opSpanName(op), "op", begin, begin + seconds);
      begin += seconds;
      t.compute = begin;
      t.prediction.computeSeconds += seconds;
    }
    if (transfer == PsTransfer::Push || transfer == PsTransfer::PushRows) {
      auto factor = updates_.rowUpdateFactor.find(v.name());
      const double applied =
          transfer == PsTransfer::PushRows && factor != updates_.rowUpdateFactor.end()
              ? factor->second
              : 1;
      for (const auto &[task, traffic] : trafficByTask(transfer, v)) {
        t.pushBytes[task] += traffic.toPs;
        t.pushRows[task] += traffic.rows;
        t.applyBytes[task] += traffic.toPs * applied;
      }
      setResults(t, op, begin);
      return;
    }
    if (transfer == PsTransfer::Pull && t.stepPulledAt >= 0) {
      setResults(t, op, std::max(begin, t.stepPulledAt));
      return;
    }
    if (transfer == PsTransfer::Pull && stepPullNames_.empty())
      planStepPulls();
    const bool whole = transfer == PsTransfer::Pull;
    const std::map<std::string, ShardTraffic> byTask =
        whole ? stepPulls_ : trafficByTask(transfer, v);
    double end = begin;
    double moved = 0;
    for (const auto &[task, traffic] : byTask) {
      const double request = message(
          t.prediction.task, task, callWork(t.prediction.task, begin, traffic.rows), traffic.toPs);
      end = std::max(end, message(task, t.prediction.task, callWork(task, request, traffic.rows),
                                  traffic.fromPs));
      t.prediction.bytesSent += traffic.toPs;
      t.prediction.bytesReceived += traffic.fromPs;
      moved += traffic.toPs + traffic.fromPs;
    }
    // A CPU worker's client asks for each id once and copies a row per id asked for: the ids
    // beyond the rows it moves cost the profile's seconds_per_repeated_row each.
    if (transfer == PsTransfer::PullRows && !t.gpu && profile_.ps.secondsPerRepeatedRow > 0 &&
        op.numOperands() > 1 && op.operand(1)->hasType()) {
      const auto ids = static_cast<double>(op.operand(1)->type().numElements(localBatch_));
      end +=
          std::max(0.0, ids - rowsOf(transfer, v)) * profile_.ps.secondsPerRepeatedRow * t.slowdown;
    }
    t.compute = end;
    t.prediction.communicationSeconds += end - begin;
    setResults(t, op, end);
    if (whole)
      t.stepPulledAt = end;
    span(t.prediction.task, "ps",
         whole ? "pull " + llvm::join(stepPullNames_, ", ") : "pull rows of " + v.name(),
         whole ? "ps_pull" : "ps_pull_rows", begin, end, moved);
  }

  // Each worker waits for its all-reduces, then pushes; a server updates once the pushes of the
  // step arrived (each push on arrival in asynchronous training).
  void finishStep() {
    struct Arrival {
      double time, bytes, applyBytes;
      bool operator<(const Arrival &o) const { return time < o.time; }
    };
    std::map<std::string, std::vector<Arrival>> arrivals; // by PS task
    for (Timeline &t : timelines_) {
      const double begin = std::max(t.compute, t.communicate);
      double end = begin;
      for (const auto &[task, bytes] : t.pushBytes) {
        const double rows = t.pushRows[task];
        const double arrival = callWork(
            task, message(t.prediction.task, task, callWork(t.prediction.task, begin, rows), bytes),
            rows);
        arrivals[task].push_back({arrival, bytes, t.applyBytes[task]});
        end = std::max(end, arrival);
        t.prediction.bytesSent += bytes;
      }
      if (!t.pushBytes.empty()) {
        t.prediction.communicationSeconds += end - begin;
        span(t.prediction.task, "ps", "push step 0", "ps_push", begin, end);
      }
      stepEnd_ = std::max(stepEnd_, end);
    }
    const bool async = plan_.run().sync() == syncModeName(SyncMode::Async);
    for (const std::string &server : servers_) {
      TaskPrediction p;
      p.task = server;
      auto &pushes = arrivals[server];
      std::sort(pushes.begin(), pushes.end());
      double free = 0, combined = 0, last = 0;
      for (const Arrival &push : pushes) {
        p.bytesReceived += push.bytes;
        combined += push.applyBytes;
        last = push.time;
        if (async) {
          free = apply(p, std::max(free, push.time), push.applyBytes);
          combined = 0;
        }
      }
      if (!async && !pushes.empty())
        free = apply(p, last, combined);
      stepEnd_ = std::max(stepEnd_, free);
      serverPredictions_.push_back(p);
    }
  }
  // A server's update: combining what was pushed and updating pushed rows (per byte, as
  // calibrated; `bytes` as the update reads them: ServerUpdates::rowUpdateFactor) and its update
  // program's dense kernels.
  double apply(TaskPrediction &p, double begin, double bytes) {
    auto kernels = updates_.kernelSeconds.find(p.task);
    const double seconds = profile_.ps.applyLatency + bytes * profile_.ps.applySecondsPerByte +
                           (kernels != updates_.kernelSeconds.end() ? kernels->second : 0);
    p.computeSeconds += seconds;
    const double end = onCores(p.task, begin, seconds);
    span(p.task, "apply", "apply step 0", "ps_apply", end - seconds, end);
    return end;
  }

  Prediction predict() {
    Prediction out;
    out.globalBatch = plan_.run().global_batch();
    out.slowestWorkerRatio = slowest_;
    out.stepSeconds = stepEnd_;
    for (const Timeline &t : timelines_)
      out.stepSeconds = std::max(out.stepSeconds, std::max(t.compute, t.communicate));
    out.samplesPerSecond =
        out.stepSeconds > 0 ? static_cast<double>(out.globalBatch) / out.stepSeconds : 0;
    for (const Timeline &t : timelines_)
      out.tasks.push_back(t.prediction);
    for (TaskPrediction &p : serverPredictions_)
      out.tasks.push_back(p);
    for (TaskPrediction &p : out.tasks)
      p.idleSeconds = std::max(0.0, out.stepSeconds - p.computeSeconds);
    for (const Link &link : links_)
      out.links.push_back(link.prediction);
    // A worker's step, as the measured traces have it: a synchronous step ends for every worker
    // when the job's does.
    for (const Timeline &t : timelines_)
      span(t.prediction.task, "steps", "step 0", "step", 0, out.stepSeconds);
    out.spans = std::move(spans_);
    return out;
  }

  void span(const std::string &task, const char *track, std::string name, const char *category,
            double begin, double end, double bytes = 0) {
    if (options_.spans)
      spans_.push_back({task, track, std::move(name), category, begin, end, bytes});
  }

  const Plan &plan_;
  const ir::Module &worker_;
  const CostProfile &profile_;
  const SimulateOptions options_;
  const ServerUpdates updates_;
  std::unordered_map<const ir::Value *, int> valueSlots_; // every op result's slot
  std::vector<int> operandSlots_; // the slots of the op being replayed's computed operands
  int resultSlot_ = 0;            // its first result's (the others follow)
  llvm::StringMap<const Variable *> variables_;
  std::map<std::string, int> hostOf_;
  std::map<std::string, std::string> machineOf_;        // by task
  std::map<std::string, int> cpuWorkersOn_;             // by machine
  std::map<std::string, std::vector<Direction>> cores_; // by machine: PS calls' CPU work
  std::set<std::string> gpuMachines_;                   // machines with GPU workers
  std::map<std::string, TableEstimate> rowsOf_;
  std::map<std::string, double> gatheredIndices_; // by table: a worker's indices of its gathers
  std::unordered_map<const ir::Op *, std::string> signatures_; // opSignature, as ops are costed
  std::vector<std::string> stepPullNames_;        // what the step pulls whole, in order
  std::map<std::string, ShardTraffic> stepPulls_; // by PS task: its call's bytes
  std::vector<std::string> workers_, servers_;
  std::vector<bool> gpuWorker_; // by worker index
  double slowest_ = 1;          // the CPU workers' kernels' slowing for the slowest worker
  std::vector<Link> links_;
  std::map<std::string, Direction> serving_; // by PS task: its messages without a link
  std::vector<Timeline> timelines_;
  std::vector<TaskPrediction> serverPredictions_;
  std::vector<SimulatedSpan> spans_;
  int64_t localBatch_ = 0, towerBatch_ = 0;
  double batchBytes_ = 0; // a worker's batch: its inputs' bytes at localBatch_
  double stepEnd_ = 0;
};

// What each server's update program costs its kernels once a step, at the profile's figures (as
// a worker's kernels are costed): its dense updates, such as Adam over a whole variable. Reading
// the combined gradients (`ps_gradient*`) and updates of pushed rows are the per-byte apply's,
// which `prism calibrate` times with SGD: a row update that writes state slots too (lazy Adam
// writes the row, m and v) reads and writes that many bytes more per pushed byte.
llvm::Expected<ServerUpdates> serverUpdates(const Plan &plan, const CostProfile &profile) {
  ServerUpdates updates;
  for (const Task &task : plan.cluster().tasks()) {
    const Program *program = task.role() == "ps" ? findProgram(plan, task.name()) : nullptr;
    if (!program)
      continue;
    auto module = parseProgram(*program);
    if (!module)
      return module.takeError();
    for (const auto &op : (*module)->ops()) {
      const bool sparse = llvm::any_of(
          op->operands(), [](const ir::Value *v) { return v->hasType() && v->type().sparse; });
      if (ir::isRowUpdate(*op) && op->numOperands() > 0) {
        const auto written = static_cast<double>(llvm::countPopulation(op->def().writtenOperands));
        updates.rowUpdateFactor[op->operand(0)->name()] = (1 + 2 * written) / 3;
      } else if (!sparse && !op->name().startswith("ps_gradient")) {
        updates.kernelSeconds[task.name()] +=
            profile.kernel(op->name()).seconds(ir::opCost(*op, 1));
      }
    }
  }
  return updates;
}

// A table's row shares (TableEstimate.row_shares) are fractions that sum to 1; others would split
// its rows over its shards into more or fewer than there are.
llvm::Error checkRowShares(const Plan &plan) {
  auto text = [](double value) {
    std::ostringstream os;
    os << value;
    return os.str();
  };
  for (const TableEstimate &t : plan.estimate().tables()) {
    double sum = 0;
    for (int i = 0; i < t.row_shares_size(); ++i) {
      const double share = t.row_shares(i);
      if (!std::isfinite(share) || share < 0)
        return ir::makeError(ir::ErrorCode::Invalid,
                             "estimate.tables (" + t.variable() + "): row_shares[" +
                                 llvm::Twine(i) + "] is " + text(share) + ", not a fraction");
      sum += share;
    }
    if (t.row_shares_size() > 0 && std::abs(sum - 1) > 1e-6)
      return ir::makeError(ir::ErrorCode::Invalid, "estimate.tables (" + t.variable() +
                                                       "): row_shares sum to " + text(sum) +
                                                       ", not 1");
  }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<Prediction> simulateStep(const Plan &plan, const ir::Module &worker,
                                        const CostProfile &profile,
                                        const SimulateOptions &options) {
  if (plan.run().global_batch() <= 0)
    return ir::makeError(ir::ErrorCode::Invalid,
                         "the plan has no global batch: partition it with --batch");
  if (auto e = checkRowShares(plan))
    return std::move(e);
  auto updates = serverUpdates(plan, profile);
  if (!updates)
    return updates.takeError();
  return StepSimulator(plan, worker, profile, options, std::move(*updates)).run();
}

llvm::Expected<Prediction> simulateStep(const Plan &plan, const CostProfile &profile,
                                        const SimulateOptions &options) {
  for (const Program &program : plan.programs()) {
    if (program.name() != "worker")
      continue;
    auto module = parseProgram(program);
    if (!module)
      return module.takeError();
    return simulateStep(plan, **module, profile, options);
  }
  return ir::makeError(ir::ErrorCode::Invalid, "the plan has no worker program");
}

} // namespace prism::plan
