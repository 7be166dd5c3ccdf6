// `prism calibrate --cluster C [--launcher L]`: ring all-reduces timed through the links between
// a cluster's hosts, one measurement per link bandwidth (plan::LinkCost; docs/simulate.md
// "Calibrating").
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cluster/Cluster.h"
#include "plan/CostProfile.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {

// A training step's PS calls and all-reduces follow its kernels: the callers compute while the
// other side's threads wait. Such calls are timed after this much of the callers' work, as in a
// step (on this machine's virtual cores, a small call took 100-300 us back to back and 450-600 us
// after 1-3 ms of work: the waiting threads had gone to sleep), on loopback and through links.
constexpr std::chrono::milliseconds kCallGap(1);

struct LinkCalibration {
  std::string launcher; // as `prism run --launcher`: a prefix with {host} and {address}
  bool quick = false;   // fewer sizes, shorter windows
};

// The rings to time: per bandwidth of the cluster's hosts, one host per address (at most
// kMaxLinkRanks), in file order; a bandwidth that fewer than two addresses have has no ring.
// Loopback hosts (127.x) and hosts of unknown bandwidth have no links to measure.
struct LinkRings {
  cluster::Cluster cluster;
  std::map<uint64_t, std::vector<int>> hosts; // by bandwidth: indices into cluster.hosts
};

// Reads `--cluster`; an error when it has no two hosts of one bandwidth on addresses other than
// 127.x.
llvm::Expected<LinkRings> linkRings(llvm::StringRef cluster);

// Times each ring: one `prism bench-allreduce` rank on each of its hosts, started through the
// launcher, the coordinator on the first host's first port; a ring's figures are fitted as the
// loopback all-reduce's are (plan::LinkCost).
llvm::Expected<std::vector<plan::LinkCost>>
measureLinks(const LinkRings &rings, const LinkCalibration &calibration, llvm::raw_ostream &log);

// The loopback all-reduce as a job's workers run it: the weighted ring between two `prism
// bench-allreduce` processes on 127.0.0.1 at each of `bytes`, back to back (the fit's latency
// and per-byte, each size's time in `rings`) and after kCallGap of each rank's work (the fit's
// latency is `wakeLatency`); the staging figures are left 0. Between two threads of one process
// a ring of 32 MB took 12.2 ms where processes took 17.2, and a job's 26 MB bucket 13.4-13.8.
llvm::Expected<plan::AllReduceCost> timeLoopbackRings(const std::vector<size_t> &bytes, bool quick);

// "links of 1gbit: a ring of 4, 367.4 us + 11.244 ns/B (the wire: 8.000 ns/B)"
std::string describeLink(const plan::LinkCost &link);

constexpr int kMaxLinkRanks = 8;

} // namespace prism::tools
