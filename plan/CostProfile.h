// A cost profile: what this machine's kernels, all-reduces and parameter servers cost, measured by
// `prism calibrate` and read by the simulator (plan/Simulator.h). docs/simulate.md gives the JSON
// format and the built-in default.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/OpTable.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::ir {
class Op;
}

namespace prism::plan {

// The profile format this build writes and reads.
constexpr int kProfileVersion = 1;

// A kernel family's roofline: seconds = latency + flops / flops_per_second + bytes /
// bytes_per_second.
struct KernelCost {
  double latency = 0;
  double flopsPerSecond = 0;
  double bytesPerSecond = 0;
  double seconds(const ir::OpCost &cost) const;
};

// Seconds per byte of a ring whose ranks each send `bytes`, from `times` (the bytes each rank
// sent and the seconds, at each size the ring was timed at, by bytes): linear between the sizes
// around `bytes`, the last two's slope beyond the largest, less the ring's `latency`, and never
// below `fitted` (the fit's slope over the same sizes, weighted by relative error to hold latency
// and per-byte from a float to megabytes), which applies alone below the smallest size and with
// fewer than two.
double timedSecondsPerByte(const std::vector<std::pair<double, double>> &times, double latency,
                           double fitted, double bytes);

// A ring all-reduce of a bucket: latency + seconds_per_byte × the bytes each rank sends
// (2(N−1)/N of the bucket), a latency per collective call; and the passes over the bucket's bytes
// around the ring on the communication thread (a gathered bucket's copies into its buffer and
// back; the ring weights each worker's share as it goes): staging_seconds_per_byte per pass.
// `latency` is a call's on a machine whose cores are all busy (calls back to back);
// `wakeLatency` one's after the ranks' own work on a machine with cores to spare, whose waiting
// threads went to sleep meanwhile (as a step's all-reduces follow its kernels); 0: not measured,
// such calls cost `latency` too. A pass over a bucket that fits the core's cache with its buffer
// (at most `warmStagingBytes`) finds its gradient there, just written by backward, and costs
// warm_staging_seconds_per_byte; the bytes beyond, staging_seconds_per_byte (0: not measured,
// every byte at that).
//
// `rings`: each size `prism calibrate` timed the ring at, the bytes each rank sent and the
// median seconds, by bytes (empty in profiles written before: the fit alone). A ring's seconds
// per byte at a bucket's size come from them (ringSecondsPerByte): the fit over a float to
// 32 MB, weighted by relative error, gave 0.31 ns a byte where rings of 26 MB took 0.52 (the
// caches hold the small ones).
struct AllReduceCost {
  double latency = 0;
  double secondsPerByte = 0;
  double stagingSecondsPerByte = 0;
  double wakeLatency = 0;
  double warmStagingSecondsPerByte = 0;
  double warmStagingBytes = 0;
  std::vector<std::pair<double, double>> rings = {};
  double ringSecondsPerByte(double bytes) const {
    return timedSecondsPerByte(rings, latency, secondsPerByte, bytes);
  }
  // One pass over `bytes` of a bucket.
  double stagingSeconds(double bytes) const {
    const double warm = warmStagingSecondsPerByte > 0 ? std::min(bytes, warmStagingBytes) : 0;
    return warm * warmStagingSecondsPerByte + (bytes - warm) * stagingSecondsPerByte;
  }
};

// A parameter-server call (pull or push) on loopback: latency + bytes / bytes_per_second, and a
// row pull's or push's seconds_per_row × its distinct rows on top (the indices, the server's
// gather or scatter of rows, the client's bookkeeping); and the server's update of what a step's
// pushes brought: apply_latency + apply_seconds_per_byte × bytes.
//
// On loopback a server moves `serial_share` of each message's bytes / bytes_per_second one
// message at a time, and the rest beside its other messages: `prism calibrate` timed two clients
// pulling the same variable at once, both done after (1 + serial_share) × one pull alone (1 in
// profiles written before: one message at a time).
//
// A row push's gradient is coalesced on the worker's compute thread as its op runs (each row id
// once, its rows summed: ps::coalesceRows): coalesce_latency + coalesce_seconds_per_byte × the
// bytes of the rows in, duplicates included (0 in profiles written before: free). A row pull
// asking for an id more than once (a step's ids repeat) costs seconds_per_repeated_row for each
// id beyond its distinct rows, on the worker (the client sorts every id asked for and copies a
// row per id; 0 in profiles written before).
struct PsCost {
  double latency = 0;
  double bytesPerSecond = 0;
  double applyLatency = 0;
  double applySecondsPerByte = 0;
  double secondsPerRow = 0;
  double serialShare = 1;
  double coalesceLatency = 0;
  double coalesceSecondsPerByte = 0;
  double secondsPerRepeatedRow = 0;
};

// Assembling a worker's batch at the start of its step (gathering its examples from the data
// set, converting as they are copied): latency + seconds_per_byte × the batch's bytes (every
// model input at the worker's batch). It runs on the worker's compute thread before its first
// kernel, as the trainer does.
struct DataCost {
  double latency = 0;
  double secondsPerByte = 0;
  double seconds(double bytes) const { return latency + secondsPerByte * bytes; }
};

// What a CPU worker's executor spends on a step beyond its kernels, on the compute thread: a
// fixed part (binding the step's feeds and variables, its end) and a part per op (the dispatch
// from one kernel to the next). 0: not measured.
struct ExecutorCost {
  double stepLatency = 0;
  double opLatency = 0;
};

// A GPU device class, used for the kernels of workers whose devices are GPUs, and for the ring's
// hops between two GPUs of one host (NVLink). No GPU is measured here: the default is
// nominalGpu(), from published figures (docs/simulate.md).
struct GpuCost {
  std::string name;                          // what the figures describe
  KernelCost defaultKernel;                  // ops without an entry of their own
  std::map<std::string, KernelCost> kernels; // by op name
  double nvlinkBytesPerSecond = 0;           // per direction between two GPUs of a host
  const KernelCost &kernel(llvm::StringRef op) const;
};

// An H100 SXM's published peak figures: FP32 67 TFLOP/s (Prism's kernels compute in f32, no
// tensor cores), HBM3 3.35 TB/s, 5 us per kernel launch, NVLink 900 GB/s (450 GB/s each way).
GpuCost nominalGpu();

// A ring all-reduce over links between hosts of one bandwidth, measured through them (`prism
// calibrate --cluster`): one rank on each of `ranks` hosts, the ring's latency per call and its
// seconds per byte each rank sends. Where hosts' links have that bandwidth the simulator moves
// every byte between them at the measured rate (the ring's and the parameter servers' messages)
// and the ring pays the measured latency, in place of the nominal bandwidth and the loopback
// latency: on links whose kernel work shares the ranks' cores (network namespaces of one
// machine), a byte costs more than the wire's rate says.
struct LinkCost {
  uint64_t bandwidthBitsPerSec = 0; // the links' nominal bandwidth, as the cluster file gives it
  int ranks = 2;                    // the ring measured (one rank per host)
  double latency = 0;               // per call of the ring of `ranks`, calls back to back
  double secondsPerByte = 0;        // per byte each rank sends
  // Per call of that ring after each rank's own work, as a step's all-reduces follow its
  // kernels; 0: not measured, such calls cost `latency`.
  double wakeLatency = 0;
  // Each size the ring was timed at: the bytes each rank sent and the slowest rank's median
  // seconds, by bytes; empty in profiles written before (the fit alone then).
  std::vector<std::pair<double, double>> rings = {};

  // Seconds per byte of a ring whose ranks each send `bytes` (timedSecondsPerByte). The fit can
  // give a slope below what rings of megabytes take (a shaper's burst lets small ones through at
  // the veth's speed).
  double ringSecondsPerByte(double bytes) const {
    return timedSecondsPerByte(rings, latency, secondsPerByte, bytes);
  }
};

// Ops `prism calibrate` timed as they are, by signature (opSignature): each batch it timed one at
// (the worker's batch) and the median seconds there. Where a plan's op has a measured signature,
// the simulator takes its time from here in place of its family's roofline.
using MeasuredOps = std::map<std::string, std::map<int64_t, double>>;

// What an op's time depends on: its name, its operands' and results' types (`B` for the batch)
// and its attributes but the floating-point ones (rates, scales) and the device:
// "matmul(f32[B, 784], f32[784, 256]) -> (f32[B, 256]) {transpose_b = false}".
std::string opSignature(const ir::Op &op);

// The seconds of an op of `signature` at `batch` from `measured`, or none where it has no entry:
// at a timed batch its time; between two, linear between them; beyond them, the nearest one's
// scaled by roofline(batch) / roofline(nearest) (its kernel family's, for the batch's shapes).
std::optional<double> measuredOpSeconds(const MeasuredOps &measured, const std::string &signature,
                                        int64_t batch,
                                        llvm::function_ref<double(int64_t)> roofline);

// How many values StepSpread holds: probabilities 0, 1/20, ..., 1.
constexpr int kStepSpreadPoints = 21;

// The value at probability `p` in [0, 1] of `sorted` (at least two values, rising, the first at
// probability 0 and the last at 1, evenly between), linear between neighbours.
double valueAtProbability(const std::vector<double> &sorted, double p);

struct CostProfile {
  std::string host; // the machine it was measured on ("built-in" for the default)
  std::string cpu;  // its processor's model name
  int threads = 0;  // the kernels' threads
  // The machine's cores; 0: unknown. Workers on one machine share them (docs/simulate.md).
  int cores = 0;
  // How a CPU worker's step varies from step to step on this machine: the ratio of a step's
  // kernel time to the median step's at probabilities 0, 1/20, ..., 1 (kStepSpreadPoints values,
  // rising), over the calibration's timed steps; empty: not measured (every step the median).
  // A synchronous step waits for its slowest worker (docs/simulate.md, "Workers").
  std::vector<double> stepSpread;
  // The ratio at probability `p` in [0, 1], linear between the measured points; 1 when empty.
  double stepRatioAt(double p) const;
  KernelCost defaultKernel;                  // ops without an entry of their own
  std::map<std::string, KernelCost> kernels; // by op name
  AllReduceCost allReduce;
  PsCost ps;
  DataCost data;
  ExecutorCost executor;       // optional
  GpuCost gpu = nominalGpu();  // the profile's optional "gpu" section replaces it
  std::vector<LinkCost> links; // measured link classes, by bandwidth; optional
  MeasuredOps ops;             // ops timed as they are; optional

  const KernelCost &kernel(llvm::StringRef op) const;
  // The measured links of `bitsPerSec`, or null.
  const LinkCost *link(uint64_t bitsPerSec) const;
};

// The figures used without a measured profile (docs/simulate.md says where they come from).
CostProfile defaultProfile();

// Parses a profile; errors name `file` and the field at fault.
llvm::Expected<CostProfile> parseProfile(llvm::StringRef text, llvm::StringRef file);
llvm::Expected<CostProfile> readProfile(llvm::StringRef path);
std::string profileToJson(const CostProfile &profile);
llvm::Error writeProfile(const CostProfile &profile, llvm::StringRef path);

// Where `prism calibrate` keeps this machine's profile when it is given no -o:
// $XDG_CACHE_HOME/prism/profile-HOST.json, or ~/.cache/prism/profile-HOST.json.
std::string cachedProfilePath();
// The cached profile when there is one, else the default; `source` says which (a path or
// "built-in").
llvm::Expected<CostProfile> cachedOrDefaultProfile(std::string &source);

} // namespace prism::plan
