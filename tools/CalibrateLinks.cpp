// Ring all-reduces timed through a cluster's links (CalibrateLinks.h): `prism bench-allreduce`
// ranks on the hosts, each writing a JSON line per size, fitted as the loopback all-reduce is.
#include "tools/CalibrateLinks.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/ClusterParser.h"
#include "ir/Diagnostic.h"
#include "plan/CommunicationCost.h"
#include "plan/ProfileFit.h"
#include "runtime/dist/Coordinator.h"
#include "runtime/job/Launcher.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

namespace prism::tools {
namespace {

// What each rank runs: the sizes, the window per size, the bound on each collective, and each
// rank's own work before each timed all-reduce.
struct RingWork {
  std::vector<size_t> bytes;
  double seconds = 0;
  int collectiveTimeout = 30;
  std::chrono::microseconds work{0};
};

// From a float to 16 MB (a step's loss is one float, its buckets up to 25 MB): a fit over 64 KB
// and more alone gave the 4 namespace hosts of a 2-core machine a latency of 0.35 ms, where a
// ring of 64 B took 1.9 ms and one of 4 KB 1.8; the sizes' own times hold the per-byte cost of
// megabytes, which the fit's slope can miss (LinkCost::ringSecondsPerByte: on those hosts, 6.5
// ns a byte fitted, 15.5 in rings of 4 and 16 MB).
RingWork ringWorkOf(bool quick) {
  if (quick)
    return {{4, 64 << 10, 1 << 20}, 0.5, 30};
  return {{4, 4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20}, 2, 30};
}

// The latency of a step's rings, which follow the ranks' kernels (kCallGap, as on loopback): on
// those namespace hosts a ring of up to 64 KB took 2.8-3.2 ms after 1 ms of each rank's work, 1.9
// back to back.
RingWork wakeWorkOf(bool quick) {
  if (quick)
    return {{4, 64 << 10}, 0.5, 30, kCallGap};
  return {{4, 4 << 10, 64 << 10}, 1, 30, kCallGap};
}

// A rank's process and the files its output goes to, removed when it goes.
struct RankProcess {
  std::string host;
  llvm::SmallString<128> out, err;
  llvm::sys::ProcessInfo process;
  ~RankProcess() {
    if (!out.empty())
      llvm::sys::fs::remove(out);
    if (!err.empty())
      llvm::sys::fs::remove(err);
  }
};

std::string readText(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

// The last few lines of `text`, indented, for an error.
std::string lastLines(const std::string &text) {
  llvm::SmallVector<llvm::StringRef, 16> lines;
  llvm::StringRef(text).rtrim().split(lines, '\n', -1, /*KeepEmpty=*/false);
  std::string tail;
  for (size_t i = lines.size() > 4 ? lines.size() - 4 : 0; i < lines.size(); ++i)
    tail += "\n    " + lines[i].str();
  return tail;
}

llvm::Error start(RankProcess &rank, const std::vector<std::string> &argv) {
  if (auto ec = llvm::sys::fs::createTemporaryFile("prism-calibrate-rank", "out", rank.out))
    return ir::makeError("cannot make a file for a rank's output: " + ec.message());
  if (auto ec = llvm::sys::fs::createTemporaryFile("prism-calibrate-rank", "err", rank.err))
    return ir::makeError("cannot make a file for a rank's errors: " + ec.message());
  std::vector<llvm::StringRef> args(argv.begin(), argv.end());
  const llvm::Optional<llvm::StringRef> redirects[] = {llvm::StringRef(""), rank.out.str(),
                                                       rank.err.str()};
  std::string message;
  bool failed = false;
  rank.process =
      llvm::sys::ExecuteNoWait(argv.front(), args, llvm::None, redirects, 0, &message, &failed);
  if (failed)
    return ir::makeError("cannot start a rank on " + rank.host + " (" + argv.front() +
                         "): " + message);
  return llvm::Error::success();
}

// Waits for every rank until `seconds` have passed in all (then they are killed); the first
// failure names its host and its last words.
llvm::Error waitForAll(std::vector<std::unique_ptr<RankProcess>> &ranks, unsigned seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  llvm::Error first = llvm::Error::success();
  for (auto &rank : ranks) {
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(
        deadline - std::chrono::steady_clock::now());
    std::string message;
    const llvm::sys::ProcessInfo done = llvm::sys::Wait(
        rank->process, static_cast<unsigned>(std::max<int64_t>(1, left.count())), false, &message);
    if (done.ReturnCode == 0 || first)
      continue;
    const std::string why = done.ReturnCode == -2
                                ? "did not finish within " + std::to_string(seconds) + " s"
                                : "exited with status " + std::to_string(done.ReturnCode);
    first = ir::makeError("the rank on " + rank->host + " " + why + lastLines(readText(rank->err)));
  }
  return first;
}

// Each size's slowest rank's median, as samples of the bytes each rank sends in the ring.
llvm::Expected<std::vector<plan::TimingSample>>
readTimes(const std::vector<std::unique_ptr<RankProcess>> &ranks) {
  std::map<size_t, double> slowest;
  for (const auto &rank : ranks) {
    llvm::SmallVector<llvm::StringRef, 8> lines;
    const std::string text = readText(rank->out);
    llvm::StringRef(text).split(lines, '\n', -1, false);
    for (llvm::StringRef line : lines) {
      auto json = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
      if (json.is_discarded() || !json.is_object() || !json.contains("bytes") ||
          !json["bytes"].is_number_unsigned() || !json.contains("median_s") ||
          !json["median_s"].is_number())
        return ir::makeError("the rank on " + rank->host + " printed '" + line +
                             "', not a size's times");
      auto bytes = json["bytes"].get<size_t>();
      slowest[bytes] = std::max(slowest[bytes], json["median_s"].get<double>());
    }
  }
  std::vector<plan::TimingSample> samples;
  for (const auto &[bytes, seconds] : slowest)
    samples.push_back({0, static_cast<double>(bytes), seconds});
  return samples;
}

// Where a ring's ranks run: each rank's host (name and address, for the launcher and --bind),
// and the coordinator they meet at (served by rank 0, or by the caller where `joined`).
struct RingRanks {
  std::vector<std::pair<std::string, std::string>> hosts;
  std::string coordinator;
  bool joined = false;
};

// One `prism bench-allreduce --ring weighted` rank on each of `where`'s hosts, started through
// `launcher`: the fit of each size's slowest rank's median, each size's time in its `rings`.
llvm::Expected<plan::AllReduceCost> timeRing(const std::string &launcher, const RingRanks &where,
                                             const RingWork &work) {
  std::vector<std::string> sizes;
  for (size_t b : work.bytes)
    sizes.push_back(std::to_string(b));
  const int ranks = static_cast<int>(where.hosts.size());
  std::vector<std::unique_ptr<RankProcess>> processes;
  for (int r = 0; r < ranks; ++r) {
    const auto &[name, address] = where.hosts[r];
    auto rank = std::make_unique<RankProcess>();
    rank->host = name;
    std::vector<std::string> argv = {runtime::job::taskProgram(),
                                     "bench-allreduce",
                                     "--rank",
                                     std::to_string(r),
                                     "--ranks",
                                     std::to_string(ranks),
                                     "--coordinator",
                                     where.coordinator,
                                     "--bind",
                                     address,
                                     "--bytes",
                                     llvm::join(sizes, ","),
                                     "--seconds",
                                     llvm::formatv("{0}", work.seconds).str(),
                                     "--timeout",
                                     std::to_string(work.collectiveTimeout),
                                     "--work-us",
                                     std::to_string(work.work.count()),
                                     "--ring",
                                     "weighted"};
    if (where.joined)
      argv.push_back("--join-coordinator");
    llvm::Error e = start(*rank, runtime::job::onHost(launcher, name, address, std::move(argv)));
    processes.push_back(std::move(rank));
    if (e) {
      processes.pop_back();
      llvm::consumeError(waitForAll(processes, 1));
      return std::move(e);
    }
  }
  // The windows (each may run a round of calls past its time: bench-allreduce's timeWindow),
  // each size's probe and the rendezvous, with room to spare.
  const auto bound = static_cast<unsigned>(
      2 * (static_cast<double>(work.bytes.size()) * work.seconds * 2 + work.collectiveTimeout) +
      10);
  if (auto e = waitForAll(processes, bound))
    return std::move(e);
  auto samples = readTimes(processes);
  if (!samples)
    return samples.takeError();
  if (samples->size() != work.bytes.size())
    return ir::makeError("the ranks timed " + std::to_string(samples->size()) + " of " +
                         std::to_string(work.bytes.size()) + " sizes");
  for (plan::TimingSample &s : *samples)
    s.bytes = plan::ringAllReduceBytes(s.bytes, ranks);
  plan::AllReduceCost cost = plan::fitLatencyPerByte(*samples);
  for (const plan::TimingSample &s : *samples)
    cost.rings.emplace_back(s.bytes, s.seconds);
  return cost;
}

// One ring over `hosts` (indices into cluster.hosts, one per address), the coordinator on the
// first host's first port.
llvm::Expected<plan::AllReduceCost> measureRing(const LinkCalibration &calibration,
                                                const cluster::Cluster &cluster,
                                                const std::vector<int> &hosts,
                                                const RingWork &work) {
  const cluster::Host &first = cluster.hosts[hosts.front()];
  const auto onFirst = cluster.tasksOnHost(hosts.front());
  RingRanks where;
  where.coordinator =
      first.address + ":" +
      std::to_string(onFirst.empty() ? cluster::kDefaultBasePort : onFirst.front()->port);
  for (int h : hosts)
    where.hosts.emplace_back(cluster.hosts[h].name, cluster.hosts[h].address);
  return timeRing(calibration.launcher, where, work);
}

// Two ranks on 127.0.0.1 meeting at a coordinator of this process's on a free port (several
// calibrations may share the machine).
llvm::Expected<plan::AllReduceCost> timeLoopbackRing(const RingWork &work) {
  runtime::dist::CoordinatorOptions options;
  options.listenAddress = "127.0.0.1:0";
  options.jobToken = "bench-allreduce";
  options.expectedTasks = {"worker:0", "worker:1"};
  options.heartbeatTimeout = std::chrono::hours(1); // the collectives' timeout bounds each wait
  auto coordinator = runtime::dist::Coordinator::start(std::move(options));
  if (!coordinator)
    return coordinator.takeError();
  RingRanks where;
  where.hosts = {{"127.0.0.1", "127.0.0.1"}, {"127.0.0.1", "127.0.0.1"}};
  where.coordinator = (*coordinator)->address();
  where.joined = true;
  return timeRing("", where, work);
}

} // namespace

llvm::Expected<plan::AllReduceCost> timeLoopbackRings(const std::vector<size_t> &bytes,
                                                      bool quick) {
  const double seconds = quick ? 0.2 : 0.6;
  auto ring = timeLoopbackRing({bytes, seconds, 30});
  if (!ring)
    return ir::withContext(ring.takeError(), "timing the ring between two processes");
  auto woken = timeLoopbackRing({bytes, seconds / 2, 30, kCallGap});
  if (!woken)
    return ir::withContext(woken.takeError(),
                           "timing the ring between two processes after their work");
  ring->wakeLatency = woken->latency;
  return ring;
}

std::string describeLink(const plan::LinkCost &link) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::format(
      "links of %s: a ring of %d, %.1f us (%.1f after work) + %.3f ns/B (the wire: %.3f ns/B)",
      cluster::formatBandwidth(link.bandwidthBitsPerSec).c_str(), link.ranks, link.latency * 1e6,
      link.wakeLatency * 1e6, link.secondsPerByte * 1e9,
      8e9 / static_cast<double>(link.bandwidthBitsPerSec));
  if (!link.rings.empty()) {
    const double largest = link.rings.back().first;
    os << llvm::format("; %.3f ns/B in its largest ring (%.1f MB a rank)",
                       link.ringSecondsPerByte(largest) * 1e9, largest / 1e6);
  }
  return text;
}

llvm::Expected<LinkRings> linkRings(llvm::StringRef clusterSpec) {
  auto cluster = cluster::loadCluster(clusterSpec, cluster::Replication::BetweenGraph);
  if (!cluster)
    return ir::withContext(cluster.takeError(), "option --cluster");
  LinkRings rings{std::move(*cluster), {}};
  std::map<uint64_t, std::vector<std::string>> addresses;
  for (size_t h = 0; h < rings.cluster.hosts.size(); ++h) {
    const cluster::Host &host = rings.cluster.hosts[h];
    if (host.bandwidthBitsPerSec == 0 || llvm::StringRef(host.address).startswith("127."))
      continue;
    auto &seen = addresses[host.bandwidthBitsPerSec];
    if (llvm::is_contained(seen, host.address) || static_cast<int>(seen.size()) >= kMaxLinkRanks)
      continue;
    seen.push_back(host.address);
    rings.hosts[host.bandwidthBitsPerSec].push_back(static_cast<int>(h));
  }
  for (auto it = rings.hosts.begin(); it != rings.hosts.end();)
    it = it->second.size() < 2 ? rings.hosts.erase(it) : std::next(it);
  if (rings.hosts.empty())
    return ir::makeError("option --cluster: " + clusterSpec +
                         " has no links to measure: no two hosts of one bandwidth on addresses "
                         "other than 127.x");
  return rings;
}

llvm::Expected<std::vector<plan::LinkCost>>
measureLinks(const LinkRings &rings, const LinkCalibration &calibration, llvm::raw_ostream &log) {
  const RingWork work = ringWorkOf(calibration.quick), wake = wakeWorkOf(calibration.quick);
  std::vector<plan::LinkCost> links;
  for (const auto &[bandwidth, hosts] : rings.hosts) {
    const std::string name = cluster::formatBandwidth(bandwidth);
    auto ring = measureRing(calibration, rings.cluster, hosts, work);
    if (!ring)
      return ir::withContext(ring.takeError(), "timing a ring over the links of " + name);
    auto woken = measureRing(calibration, rings.cluster, hosts, wake);
    if (!woken)
      return ir::withContext(woken.takeError(),
                             "timing a ring after the ranks' work over the links of " + name);
    plan::LinkCost link;
    link.bandwidthBitsPerSec = bandwidth;
    link.ranks = static_cast<int>(hosts.size());
    link.latency = ring->latency;
    link.secondsPerByte = ring->secondsPerByte;
    link.wakeLatency = woken->latency;
    link.rings = std::move(ring->rings);
    log << "  " << describeLink(link) << "\n";
    links.push_back(link);
  }
  return links;
}

} // namespace prism::tools
