// Cost profiles (see CostProfile.h): the JSON form, the default, the cache path.
#include "plan/CostProfile.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "ir/Diagnostic.h"
#include "ir/Module.h"
#include "ir/OpTable.h"
#include "support/AtomicFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

namespace prism::plan {

using Json = nlohmann::ordered_json;

double KernelCost::seconds(const ir::OpCost &cost) const {
  double s = latency;
  if (flopsPerSecond > 0)
    s += cost.flops / flopsPerSecond;
  if (bytesPerSecond > 0)
    s += cost.bytes / bytesPerSecond;
  return s;
}

const KernelCost &CostProfile::kernel(llvm::StringRef op) const {
  auto it = kernels.find(op.str());
  return it == kernels.end() ? defaultKernel : it->second;
}

std::string opSignature(const ir::Op &op) {
  std::string s = op.name().str() + "(";
  for (unsigned i = 0; i < op.numOperands(); ++i)
    s += (i ? ", " : "") + op.operand(i)->type().str();
  s += ") -> (";
  for (unsigned i = 0; i < op.numResults(); ++i)
    s += (i ? ", " : "") + op.result(i)->type().str();
  s += ")";
  std::string attrs;
  for (const auto &[name, value] : op.attrs)
    if (value.kind() != ir::AttrKind::Float && name != ir::kDeviceAttr)
      attrs += (attrs.empty() ? "" : ", ") + name + " = " + value.str();
  return attrs.empty() ? s : s + " {" + attrs + "}";
}

std::optional<double> measuredOpSeconds(const MeasuredOps &measured, const std::string &signature,
                                        int64_t batch,
                                        llvm::function_ref<double(int64_t)> roofline) {
  auto entry = measured.find(signature);
  if (entry == measured.end() || entry->second.empty())
    return std::nullopt;
  const std::map<int64_t, double> &at = entry->second;
  auto above = at.lower_bound(batch);
  if (above != at.end() && above->first == batch)
    return above->second;
  if (above != at.end() && above != at.begin()) {
    auto below = std::prev(above);
    const double f = static_cast<double>(batch - below->first) /
                     static_cast<double>(above->first - below->first);
    return below->second + f * (above->second - below->second);
  }
  auto nearest = above == at.end() ? std::prev(at.end()) : above;
  const double from = roofline(nearest->first);
  return from > 0 ? nearest->second * roofline(batch) / from : nearest->second;
}

double valueAtProbability(const std::vector<double> &sorted, double p) {
  const double at = std::clamp(p, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  const size_t below = std::min(static_cast<size_t>(at), sorted.size() - 2);
  const double f = at - static_cast<double>(below);
  return sorted[below] + f * (sorted[below + 1] - sorted[below]);
}

double CostProfile::stepRatioAt(double p) const {
  return stepSpread.size() < 2 ? 1 : valueAtProbability(stepSpread, p);
}

double timedSecondsPerByte(const std::vector<std::pair<double, double>> &times, double latency,
                           double fitted, double bytes) {
  if (times.size() < 2 || bytes <= times.front().first)
    return fitted;
  auto upper = std::lower_bound(times.begin(), times.end(), bytes,
                                [](const auto &time, double b) { return time.first < b; });
  if (upper == times.end())
    --upper; // beyond the largest: the last two sizes' slope
  const auto &[b1, t1] = *upper;
  const auto &[b0, t0] = *std::prev(upper);
  const double seconds = t0 + (t1 - t0) * (bytes - b0) / (b1 - b0);
  return std::max(fitted, (seconds - latency) / bytes);
}

const LinkCost *CostProfile::link(uint64_t bitsPerSec) const {
  for (const LinkCost &l : links)
    if (l.bandwidthBitsPerSec == bitsPerSec)
      return &l;
  return nullptr;
}

const KernelCost &GpuCost::kernel(llvm::StringRef op) const {
  auto it = kernels.find(op.str());
  return it == kernels.end() ? defaultKernel : it->second;
}

GpuCost nominalGpu() {
  // Peak figures of NVIDIA's H100 SXM datasheet, not measured ones: a roofline at peak is the
  // most a kernel can do, so predictions from it are optimistic (docs/simulate.md).
  GpuCost g;
  g.name = "nominal H100 SXM";
  g.defaultKernel = {5e-6, 67e12, 3.35e12};
  g.nvlinkBytesPerSecond = 450e9;
  return g;
}

CostProfile defaultProfile() {
  // Hand-set, order-of-magnitude figures for a small x86-64 machine, not measured ones: a
  // calibrated profile replaces them (docs/simulate.md).
  CostProfile p;
  p.host = "built-in";
  p.threads = 1;
  p.defaultKernel = {3e-6, 2e9, 4e9};
  // The matrix and convolution families, forward and backward, fused or not, at a few tens
  // of GFLOP/s (a calibration of a 2-core AMD EPYC measured 1.0e11 to 1.25e11 with 2 threads;
  // without the backward and fused entries the cnn's step came out 50 times too long).
  for (const char *op : {"matmul", "fused_matmul", "batch_matmul"})
    p.kernels[op] = {5e-6, 3e10, 8e9};
  for (const char *op :
       {"conv2d", "fused_conv2d", "conv2d_backprop_input", "conv2d_backprop_filter"})
    p.kernels[op] = {2e-5, 3e10, 8e9};
  // Staging: one pass (read and write) over a bucket larger than the caches at 5 GB/s.
  // A call after the ranks' work as one back to back (calibrations of a 2-core Intel Xeon VM
  // measured 140-220 us back to back and 260-480 us after 1 ms of work).
  p.allReduce = {1e-4, 1e-9, 2e-10, 1e-4};
  // A row pull or push costs its bytes and nothing per row: not measured (calibrations of a 2-core
  // Intel Xeon VM measured 0.04-0.26 us a row).
  p.ps = {3e-4, 4e8, 2e-5, 2e-9, 0};
  // A batch of images kept as bytes and scaled as they are copied out, gathered from a data set
  // larger than the caches: about 1 GB/s of the batch's float32 bytes.
  p.data = {5e-6, 1e-9};
  return p;
}

namespace {

// Reads a field of a profile, naming it (a.b.c) in errors.
class Reader {
public:
  explicit Reader(llvm::StringRef file) : file_(file.str()) {}

  llvm::Error fail(const std::string &field, const llvm::Twine &what) const {
    return ir::makeError(ir::ErrorCode::Invalid, file_ + ": field '" + field + "': " + what);
  }
  // A non-negative finite number.
  llvm::Error number(const Json &object, const std::string &path, const char *key,
                     double &out) const {
    const std::string field = path.empty() ? key : path + "." + key;
    auto it = object.find(key);
    if (it == object.end())
      return fail(field, "missing");
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0)
      return fail(field, "expected a non-negative number, got " + it->dump());
    out = it->get<double>();
    return llvm::Error::success();
  }
  // The optional "rings" of `object` (at `path`): [{"bytes": B, "seconds": S}, ...], bytes
  // increasing.
  llvm::Error rings(const Json &object, const std::string &path,
                    std::vector<std::pair<double, double>> &out) const {
    auto rings = object.find("rings");
    if (rings == object.end())
      return llvm::Error::success();
    if (!rings->is_array())
      return fail(path + ".rings", "expected an array");
    for (size_t k = 0; k < rings->size(); ++k) {
      const Json &ring = (*rings)[k];
      const std::string at = path + ".rings[" + std::to_string(k) + "]";
      if (!ring.is_object())
        return fail(at, "expected an object");
      double bytes = 0, seconds = 0;
      if (auto e = number(ring, at, "bytes", bytes))
        return e;
      if (auto e = number(ring, at, "seconds", seconds))
        return e;
      if (!out.empty() && bytes <= out.back().first)
        return fail(at + ".bytes",
                    "expected more than the size before it, got " + ring["bytes"].dump());
      out.emplace_back(bytes, seconds);
    }
    return llvm::Error::success();
  }
  const Json *object(const Json &parent, const std::string &field, const char *key,
                     llvm::Error &err) const {
    auto it = parent.find(key);
    if (it == parent.end() || !it->is_object()) {
      err = fail(field, it == parent.end() ? "missing" : "expected an object");
      return nullptr;
    }
    return &*it;
  }
  llvm::Error kernel(const Json &object, const std::string &path, KernelCost &out) const {
    if (!object.is_object())
      return fail(path, "expected an object");
    if (auto e = number(object, path, "latency", out.latency))
      return e;
    if (auto e = number(object, path, "flops_per_second", out.flopsPerSecond))
      return e;
    return number(object, path, "bytes_per_second", out.bytesPerSecond);
  }

private:
  std::string file_;
};

llvm::Error parseMachine(const Reader &r, const Json &root, CostProfile &p) {
  llvm::Error err = llvm::Error::success();
  const Json *machine = r.object(root, "machine", "machine", err);
  if (!machine)
    return err;
  for (const char *key : {"host", "cpu"}) {
    auto it = machine->find(key);
    if (it == machine->end() || !it->is_string())
      return r.fail(std::string("machine.") + key, "expected a string");
    (std::string(key) == "host" ? p.host : p.cpu) = it->get<std::string>();
  }
  auto threads = machine->find("threads");
  if (threads == machine->end() || !threads->is_number_integer() || threads->get<int64_t>() < 1)
    return r.fail("machine.threads", "expected a positive integer");
  p.threads = static_cast<int>(threads->get<int64_t>());
  // Optional: profiles written before it was measured leave it out (unknown).
  if (auto cores = machine->find("cores"); cores != machine->end()) {
    if (!cores->is_number_integer() || cores->get<int64_t>() < 0)
      return r.fail("machine.cores", "expected a non-negative integer");
    p.cores = static_cast<int>(cores->get<int64_t>());
  }
  // Optional: profiles written before it was measured leave it out (no variation).
  if (auto spread = machine->find("step_spread"); spread != machine->end()) {
    const std::string field = "machine.step_spread";
    if (!spread->is_array() || spread->size() != static_cast<size_t>(kStepSpreadPoints))
      return r.fail(field, "expected an array of " + std::to_string(kStepSpreadPoints) +
                               " numbers (probabilities 0, 1/20, ..., 1)");
    for (size_t i = 0; i < spread->size(); ++i) {
      const Json &v = (*spread)[i];
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
        return r.fail(field + "[" + std::to_string(i) + "]",
                      "expected a positive number, got " + v.dump());
      if (i > 0 && v.get<double>() < p.stepSpread.back())
        return r.fail(field + "[" + std::to_string(i) + "]",
                      v.dump() + " is below the value before it (the ratios rise)");
      p.stepSpread.push_back(v.get<double>());
    }
  }
  return llvm::Error::success();
}

// A table of kernel rooflines by op name, with its required `default` entry; `path` names it.
llvm::Error parseKernelTable(const Reader &r, const Json &kernels, const std::string &path,
                             KernelCost &defaultKernel, std::map<std::string, KernelCost> &out) {
  if (!kernels.contains("default"))
    return r.fail(path + ".default", "missing");
  for (const auto &[name, entry] : kernels.items()) {
    KernelCost cost;
    if (auto e = r.kernel(entry, path + "." + name, cost))
      return e;
    if (name == "default")
      defaultKernel = cost;
    else
      out[name] = cost;
  }
  return llvm::Error::success();
}

llvm::Error parseKernels(const Reader &r, const Json &root, CostProfile &p) {
  llvm::Error err = llvm::Error::success();
  const Json *kernels = r.object(root, "kernels", "kernels", err);
  if (!kernels)
    return err;
  return parseKernelTable(r, *kernels, "kernels", p.defaultKernel, p.kernels);
}

// Optional: without it the profile keeps nominalGpu().
llvm::Error parseGpu(const Reader &r, const Json &root, CostProfile &p) {
  auto it = root.find("gpu");
  if (it == root.end())
    return llvm::Error::success();
  if (!it->is_object())
    return r.fail("gpu", "expected an object");
  GpuCost gpu;
  auto name = it->find("name");
  if (name == it->end() || !name->is_string())
    return r.fail("gpu.name", "expected a string");
  gpu.name = name->get<std::string>();
  llvm::Error err = llvm::Error::success();
  const Json *kernels = r.object(*it, "gpu.kernels", "kernels", err);
  if (!kernels)
    return err;
  if (auto e = parseKernelTable(r, *kernels, "gpu.kernels", gpu.defaultKernel, gpu.kernels))
    return e;
  if (auto e = r.number(*it, "gpu", "nvlink_bytes_per_second", gpu.nvlinkBytesPerSecond))
    return e;
  if (gpu.nvlinkBytesPerSecond <= 0)
    return r.fail("gpu.nvlink_bytes_per_second", "must be positive");
  p.gpu = std::move(gpu);
  return llvm::Error::success();
}

llvm::Error parseCommunication(const Reader &r, const Json &root, CostProfile &p) {
  llvm::Error err = llvm::Error::success();
  const Json *allReduce = r.object(root, "all_reduce", "all_reduce", err);
  if (!allReduce)
    return err;
  if (auto e = r.number(*allReduce, "all_reduce", "latency", p.allReduce.latency))
    return e;
  if (auto e = r.number(*allReduce, "all_reduce", "seconds_per_byte", p.allReduce.secondsPerByte))
    return e;
  // Optional: profiles written before it was measured leave it out (the built-in figure).
  p.allReduce.stagingSecondsPerByte = defaultProfile().allReduce.stagingSecondsPerByte;
  if (allReduce->contains("staging_seconds_per_byte"))
    if (auto e = r.number(*allReduce, "all_reduce", "staging_seconds_per_byte",
                          p.allReduce.stagingSecondsPerByte))
      return e;
  // Optional: profiles written before it was measured have calls cost `latency` either way.
  p.allReduce.wakeLatency = p.allReduce.latency;
  if (allReduce->contains("wake_latency"))
    if (auto e = r.number(*allReduce, "all_reduce", "wake_latency", p.allReduce.wakeLatency))
      return e;
  // Optional, together: profiles written before the warm pass was measured cost every byte of
  // a pass at staging_seconds_per_byte.
  if (allReduce->contains("warm_staging_seconds_per_byte") ||
      allReduce->contains("warm_staging_bytes")) {
    if (auto e = r.number(*allReduce, "all_reduce", "warm_staging_seconds_per_byte",
                          p.allReduce.warmStagingSecondsPerByte))
      return e;
    if (auto e =
            r.number(*allReduce, "all_reduce", "warm_staging_bytes", p.allReduce.warmStagingBytes))
      return e;
  }
  if (auto e = r.rings(*allReduce, "all_reduce", p.allReduce.rings))
    return e;
  const Json *ps = r.object(root, "ps", "ps", err);
  if (!ps)
    return err;
  if (auto e = r.number(*ps, "ps", "latency", p.ps.latency))
    return e;
  if (auto e = r.number(*ps, "ps", "bytes_per_second", p.ps.bytesPerSecond))
    return e;
  if (p.ps.bytesPerSecond <= 0)
    return r.fail("ps.bytes_per_second", "must be positive");
  if (auto e = r.number(*ps, "ps", "apply_latency", p.ps.applyLatency))
    return e;
  if (auto e = r.number(*ps, "ps", "apply_seconds_per_byte", p.ps.applySecondsPerByte))
    return e;
  // Optional: profiles written before row calls were timed leave it out (the built-in figure).
  p.ps.secondsPerRow = defaultProfile().ps.secondsPerRow;
  if (ps->contains("seconds_per_row"))
    if (auto e = r.number(*ps, "ps", "seconds_per_row", p.ps.secondsPerRow))
      return e;
  // Optional, together: profiles written before coalescing was timed leave them out (free).
  if (ps->contains("coalesce_latency") || ps->contains("coalesce_seconds_per_byte")) {
    if (auto e = r.number(*ps, "ps", "coalesce_latency", p.ps.coalesceLatency))
      return e;
    if (auto e = r.number(*ps, "ps", "coalesce_seconds_per_byte", p.ps.coalesceSecondsPerByte))
      return e;
  }
  // Optional: profiles written before repeated ids were timed leave it out (free).
  if (ps->contains("seconds_per_repeated_row"))
    if (auto e = r.number(*ps, "ps", "seconds_per_repeated_row", p.ps.secondsPerRepeatedRow))
      return e;
  // Optional: profiles written before concurrent calls were timed leave it out (one at a time).
  p.ps.serialShare = 1;
  if (!ps->contains("serial_share"))
    return llvm::Error::success();
  if (auto e = r.number(*ps, "ps", "serial_share", p.ps.serialShare))
    return e;
  if (p.ps.serialShare < 0 || p.ps.serialShare > 1)
    return r.fail("ps.serial_share",
                  "must be from 0 to 1, got " + llvm::formatv("{0}", p.ps.serialShare).str());
  return llvm::Error::success();
}

// Optional: profiles written before the executor's own work was timed leave it out (none).
llvm::Error parseExecutor(const Reader &r, const Json &root, CostProfile &p) {
  auto executor = root.find("executor");
  if (executor == root.end())
    return llvm::Error::success();
  if (!executor->is_object())
    return r.fail("executor", "expected an object");
  if (auto e = r.number(*executor, "executor", "step_latency", p.executor.stepLatency))
    return e;
  return r.number(*executor, "executor", "op_latency", p.executor.opLatency);
}

// Optional: profiles written before batches were timed leave it out (the built-in figures).
llvm::Error parseData(const Reader &r, const Json &root, CostProfile &p) {
  p.data = defaultProfile().data;
  auto data = root.find("data");
  if (data == root.end())
    return llvm::Error::success();
  if (!data->is_object())
    return r.fail("data", "expected an object");
  if (auto e = r.number(*data, "data", "latency", p.data.latency))
    return e;
  return r.number(*data, "data", "seconds_per_byte", p.data.secondsPerByte);
}

Json kernelJson(const KernelCost &k) {
  return Json{{"latency", k.latency},
              {"flops_per_second", k.flopsPerSecond},
              {"bytes_per_second", k.bytesPerSecond}};
}

Json kernelTableJson(const KernelCost &defaultKernel, const std::map<std::string, KernelCost> &k) {
  Json kernels = {{"default", kernelJson(defaultKernel)}};
  for (const auto &[name, cost] : k)
    kernels[name] = kernelJson(cost);
  return kernels;
}

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0')
    return "localhost";
  return name;
}

// Optional: profiles written before ops were timed as they are have none (every op by its
// family's roofline).
llvm::Error parseOps(const Reader &r, const Json &root, CostProfile &p) {
  auto ops = root.find("ops");
  if (ops == root.end())
    return llvm::Error::success();
  if (!ops->is_object())
    return r.fail("ops", "expected an object of op signatures");
  for (const auto &[signature, times] : ops->items()) {
    const std::string path = "ops[" + ir::quoted(signature) + "]";
    if (!times.is_object() || times.empty())
      return r.fail(path, "expected an object of batches and seconds");
    for (const auto &[key, seconds] : times.items()) {
      int64_t batch = 0;
      if (llvm::StringRef(key).getAsInteger(10, batch) || batch <= 0)
        return r.fail(path + "." + key, "expected a batch (a positive integer) as the key");
      if (!seconds.is_number() || !(seconds.get<double>() >= 0))
        return r.fail(path + "." + key, "expected seconds (a number, 0 or more)");
      p.ops[signature][batch] = seconds.get<double>();
    }
  }
  return llvm::Error::success();
}

// Optional: profiles measured without --cluster have no measured links.
llvm::Error parseLinks(const Reader &r, const Json &root, CostProfile &p) {
  auto links = root.find("links");
  if (links == root.end())
    return llvm::Error::success();
  if (!links->is_array())
    return r.fail("links", "expected an array");
  for (size_t i = 0; i < links->size(); ++i) {
    const Json &entry = (*links)[i];
    const std::string path = "links[" + std::to_string(i) + "]";
    if (!entry.is_object())
      return r.fail(path, "expected an object");
    LinkCost link;
    auto bandwidth = entry.find("bandwidth_bits_per_sec");
    if (bandwidth == entry.end() || !bandwidth->is_number_unsigned() ||
        bandwidth->get<uint64_t>() == 0)
      return r.fail(path + ".bandwidth_bits_per_sec", "expected a positive integer");
    link.bandwidthBitsPerSec = bandwidth->get<uint64_t>();
    if (p.link(link.bandwidthBitsPerSec))
      return r.fail(path + ".bandwidth_bits_per_sec",
                    "a second entry for " + std::to_string(link.bandwidthBitsPerSec));
    auto ranks = entry.find("ranks");
    if (ranks == entry.end() || !ranks->is_number_integer() || ranks->get<int64_t>() < 2)
      return r.fail(path + ".ranks", "expected an integer of at least 2");
    link.ranks = static_cast<int>(ranks->get<int64_t>());
    if (auto e = r.number(entry, path, "latency", link.latency))
      return e;
    if (auto e = r.number(entry, path, "seconds_per_byte", link.secondsPerByte))
      return e;
    // Optional: profiles written before it was measured have calls cost `latency` either way.
    link.wakeLatency = link.latency;
    if (entry.contains("wake_latency"))
      if (auto e = r.number(entry, path, "wake_latency", link.wakeLatency))
        return e;
    // Optional too: the sizes the ring was timed at, by bytes.
    if (auto e = r.rings(entry, path, link.rings))
      return e;
    p.links.push_back(link);
  }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<CostProfile> parseProfile(llvm::StringRef text, llvm::StringRef file) {
  Reader r(file);
  Json root = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object())
    return r.fail("(file)", "not a JSON object");
  auto format = root.find("format");
  if (format == root.end() || *format != "prism-profile")
    return r.fail("format", "expected \"prism-profile\"");
  auto version = root.find("version");
  if (version == root.end() || !version->is_number_integer() ||
      version->get<int64_t>() != kProfileVersion)
    return r.fail("version", "expected " + std::to_string(kProfileVersion));
  CostProfile p;
  if (auto e = parseMachine(r, root, p))
    return std::move(e);
  if (auto e = parseKernels(r, root, p))
    return std::move(e);
  if (auto e = parseCommunication(r, root, p))
    return std::move(e);
  if (auto e = parseData(r, root, p))
    return std::move(e);
  if (auto e = parseExecutor(r, root, p))
    return std::move(e);
  if (auto e = parseGpu(r, root, p))
    return std::move(e);
  if (auto e = parseLinks(r, root, p))
    return std::move(e);
  if (auto e = parseOps(r, root, p))
    return std::move(e);
  return p;
}

llvm::Expected<CostProfile> readProfile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return ir::makeError(ir::ErrorCode::NotFound,
                         path + ": cannot read the profile: " + buffer.getError().message());
  return parseProfile((*buffer)->getBuffer(), path);
}

namespace {

// Each size a ring was timed at, as `rings` (the reader's Reader::rings).
Json ringsJson(const std::vector<std::pair<double, double>> &rings) {
  Json out = Json::array();
  for (const auto &[bytes, seconds] : rings)
    out.push_back({{"bytes", bytes}, {"seconds", seconds}});
  return out;
}

} // namespace

std::string profileToJson(const CostProfile &p) {
  Json kernels = kernelTableJson(p.defaultKernel, p.kernels);
  Json root = {
      {"format", "prism-profile"},
      {"version", kProfileVersion},
      {"machine", {{"host", p.host}, {"cpu", p.cpu}, {"threads", p.threads}, {"cores", p.cores}}},
      {"kernels", kernels},
      {"all_reduce",
       {{"latency", p.allReduce.latency},
        {"seconds_per_byte", p.allReduce.secondsPerByte},
        {"staging_seconds_per_byte", p.allReduce.stagingSecondsPerByte},
        {"wake_latency", p.allReduce.wakeLatency},
        {"warm_staging_seconds_per_byte", p.allReduce.warmStagingSecondsPerByte},
        {"warm_staging_bytes", p.allReduce.warmStagingBytes}}},
      {"ps",
       {{"latency", p.ps.latency},
        {"bytes_per_second", p.ps.bytesPerSecond},
        {"apply_latency", p.ps.applyLatency},
        {"apply_seconds_per_byte", p.ps.applySecondsPerByte},
        {"seconds_per_row", p.ps.secondsPerRow},
        {"serial_share", p.ps.serialShare},
        {"coalesce_latency", p.ps.coalesceLatency},
        {"coalesce_seconds_per_byte", p.ps.coalesceSecondsPerByte},
        {"seconds_per_repeated_row", p.ps.secondsPerRepeatedRow}}},
      {"data", {{"latency", p.data.latency}, {"seconds_per_byte", p.data.secondsPerByte}}}};
  if (!p.allReduce.rings.empty())
    root["all_reduce"]["rings"] = ringsJson(p.allReduce.rings);
  if (!p.stepSpread.empty())
    root["machine"]["step_spread"] = p.stepSpread;
  if (p.executor.stepLatency > 0 || p.executor.opLatency > 0)
    root["executor"] = {{"step_latency", p.executor.stepLatency},
                        {"op_latency", p.executor.opLatency}};
  // The nominal GPU is the default: only other figures are written (prism calibrate measures no
  // GPU).
  if (p.gpu.name != nominalGpu().name)
    root["gpu"] = {{"name", p.gpu.name},
                   {"kernels", kernelTableJson(p.gpu.defaultKernel, p.gpu.kernels)},
                   {"nvlink_bytes_per_second", p.gpu.nvlinkBytesPerSecond}};
  if (!p.links.empty()) {
    Json links = Json::array();
    for (const LinkCost &l : p.links) {
      Json link = {{"bandwidth_bits_per_sec", l.bandwidthBitsPerSec},
                   {"ranks", l.ranks},
                   {"latency", l.latency},
                   {"seconds_per_byte", l.secondsPerByte},
                   {"wake_latency", l.wakeLatency}};
      if (!l.rings.empty())
        link["rings"] = ringsJson(l.rings);
      links.push_back(std::move(link));
    }
    root["links"] = std::move(links);
  }
  if (!p.ops.empty()) {
    Json ops = Json::object();
    for (const auto &[signature, times] : p.ops)
      for (const auto &[batch, seconds] : times)
        ops[signature][std::to_string(batch)] = seconds;
    root["ops"] = std::move(ops);
  }
  return root.dump(2) + "\n";
}

llvm::Error writeProfile(const CostProfile &profile, llvm::StringRef path) {
  llvm::StringRef dir = llvm::sys::path::parent_path(path);
  if (!dir.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(dir))
      return ir::makeError(ir::ErrorCode::Invalid,
                           dir + ": cannot create the directory: " + ec.message());
  return support::writeFileAtomically(path, profileToJson(profile));
}

std::string cachedProfilePath() {
  llvm::SmallString<256> path;
  if (const char *cache = std::getenv("XDG_CACHE_HOME"); cache && *cache)
    path = cache;
  else if (const char *home = std::getenv("HOME"); home && *home)
    llvm::sys::path::append(path, home, ".cache");
  else
    path = "/tmp";
  llvm::sys::path::append(path, "prism", "profile-" + hostName() + ".json");
  return std::string(path);
}

llvm::Expected<CostProfile> cachedOrDefaultProfile(std::string &source) {
  std::string cached = cachedProfilePath();
  if (!llvm::sys::fs::exists(cached)) {
    source = "built-in";
    return defaultProfile();
  }
  source = cached;
  return readProfile(cached);
}

} // namespace prism::plan
