// Devices, bandwidths and the resolution of a parsed cluster description into tasks and ports.
#include "cluster/Cluster.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

namespace prism::cluster {

namespace {

constexpr int kMaxPort = 65535;

bool parseDecimal(llvm::StringRef text, uint64_t &value) {
  if (text.empty() || text.size() > 18 || !llvm::all_of(text, llvm::isDigit))
    return false;
  return !text.getAsInteger(10, value);
}

} // namespace

std::string Device::str() const {
  return (kind == DeviceKind::Cpu ? "cpu:" : "gpu:") + std::to_string(index);
}

std::optional<Device> parseDevice(llvm::StringRef text) {
  Device device;
  if (text.consume_front("cpu:"))
    device.kind = DeviceKind::Cpu;
  else if (text.consume_front("gpu:"))
    device.kind = DeviceKind::Gpu;
  else
    return std::nullopt;
  uint64_t index = 0;
  if (!parseDecimal(text, index) || index > static_cast<uint64_t>(kMaxPort))
    return std::nullopt;
  device.index = static_cast<int>(index);
  return device;
}

std::optional<uint64_t> parseBandwidth(llvm::StringRef text) {
  text = text.trim();
  llvm::StringRef number = text.take_while([](char c) { return llvm::isDigit(c) || c == '.'; });
  std::string unit = text.drop_front(number.size()).ltrim().lower();
  uint64_t multiplier = 0;
  if (unit.empty() || unit == "bit")
    multiplier = 1;
  else if (unit == "kbit")
    multiplier = 1000;
  else if (unit == "mbit")
    multiplier = 1000 * 1000;
  else if (unit == "gbit")
    multiplier = 1000 * 1000 * 1000;
  else if (unit == "tbit")
    multiplier = 1000ULL * 1000 * 1000 * 1000;
  else
    return std::nullopt;

  auto [whole, fraction] = number.split('.');
  uint64_t wholeValue = 0;
  if (!parseDecimal(whole, wholeValue))
    return std::nullopt;
  uint64_t bits = 0;
  if (__builtin_mul_overflow(wholeValue, multiplier, &bits))
    return std::nullopt;
  if (number.contains('.')) {
    // A fraction must come to whole bits: 1.5gbit is fine, 1.5bit is not.
    uint64_t fractionValue = 0;
    if (fraction.size() > 12 || !parseDecimal(fraction, fractionValue))
      return std::nullopt;
    uint64_t scale = 1;
    for (size_t i = 0; i < fraction.size(); ++i)
      scale *= 10;
    uint64_t scaled = 0;
    if (__builtin_mul_overflow(fractionValue, multiplier, &scaled) || scaled % scale != 0 ||
        __builtin_add_overflow(bits, scaled / scale, &bits))
      return std::nullopt;
  }
  if (bits == 0)
    return std::nullopt;
  return bits;
}

std::string formatBandwidth(uint64_t bitsPerSec) {
  static const std::pair<uint64_t, const char *> units[] = {{1000ULL * 1000 * 1000 * 1000, "tbit"},
                                                            {1000 * 1000 * 1000, "gbit"},
                                                            {1000 * 1000, "mbit"},
                                                            {1000, "kbit"}};
  for (const auto &[size, name] : units)
    if (bitsPerSec >= size && bitsPerSec % size == 0)
      return std::to_string(bitsPerSec / size) + name;
  return std::to_string(bitsPerSec) + "bit";
}

llvm::StringRef roleName(Role role) {
  switch (role) {
  case Role::Worker:
    return "worker";
  case Role::ParameterServer:
    return "ps";
  case Role::Coordinator:
    return "coordinator";
  }
  llvm_unreachable("unknown role");
}

llvm::StringRef replicationName(Replication replication) {
  return replication == Replication::BetweenGraph ? "between-graph" : "in-graph";
}

namespace {

Task makeTask(Role role, int index, int host, const Host &hostInfo, std::vector<Device> devices) {
  Task task;
  task.name = (roleName(role) + ":" + llvm::Twine(index)).str();
  task.role = role;
  task.index = index;
  task.host = host;
  task.address = hostInfo.address;
  task.devices = std::move(devices);
  return task;
}

ir::SourceLoc locationAt(const std::vector<ir::SourceLoc> &locations, size_t i) {
  return i < locations.size() ? locations[i] : ir::SourceLoc{};
}

bool writtenBefore(ir::SourceLoc a, ir::SourceLoc b) {
  return a.line < b.line || (a.line == b.line && a.column < b.column);
}

// Why a task has the port the file fixed for it, for clash messages.
struct PortClaim {
  size_t task = 0;
  ir::SourceLoc loc;
  std::string origin;
};

struct AddressPorts {
  llvm::DenseMap<int, size_t> fixedClaim; // port -> index of its PortClaim
  int nextAssigned = kDefaultBasePort;
};

} // namespace

llvm::Expected<Cluster> Cluster::resolve(const ClusterSpec &spec, Replication replication) {
  if (spec.hosts.empty())
    return ir::makeError(spec.source, {}, "the cluster has no hosts");
  for (size_t h = 0; h < spec.hosts.size(); ++h) {
    const Host &host = spec.hosts[h];
    if (host.devices.empty())
      return ir::makeError(spec.source, locationAt(spec.hostLocations, h),
                           "host '" + host.name + "' has no worker device");
    if (host.psTasks < 0)
      return ir::makeError(spec.source, locationAt(spec.hostLocations, h),
                           "host '" + host.name + "' has a negative number of ps tasks");
  }

  size_t taskCount = 1;
  for (const Host &host : spec.hosts)
    taskCount += (replication == Replication::InGraph ? 1 : host.devices.size()) + host.psTasks;
  Cluster cluster;
  cluster.tasks.reserve(taskCount);
  cluster.hosts = spec.hosts;
  cluster.replication = replication;
  cluster.tasks.push_back(makeTask(Role::Coordinator, 0, 0, spec.hosts[0], {}));
  int workerIndex = 0;
  for (size_t h = 0; h < spec.hosts.size(); ++h) {
    const Host &host = spec.hosts[h];
    if (replication == Replication::InGraph) {
      cluster.tasks.push_back(makeTask(Role::Worker, workerIndex++, h, host, host.devices));
      continue;
    }
    for (const Device &device : host.devices)
      cluster.tasks.push_back(makeTask(Role::Worker, workerIndex++, h, host, {device}));
  }
  int psIndex = 0;
  for (size_t h = 0; h < spec.hosts.size(); ++h)
    for (int k = 0; k < spec.hosts[h].psTasks; ++k)
      cluster.tasks.push_back(makeTask(Role::ParameterServer, psIndex++, h, spec.hosts[h], {}));

  // Ports the file fixes (the coordinator's `port`, a host's `base_port`) are claimed first, so
  // that the ports assigned afterwards can step around them and only two fixed ports can clash.
  llvm::StringMap<AddressPorts> ports;
  std::vector<PortClaim> fixedClaims;
  std::vector<int> nextHostPort;
  for (const Host &host : spec.hosts)
    nextHostPort.push_back(host.basePort);
  for (size_t t = 0; t < cluster.tasks.size(); ++t) {
    Task &task = cluster.tasks[t];
    const Host &host = spec.hosts[task.host];
    PortClaim claim;
    claim.task = t;
    if (task.role == Role::Coordinator && spec.coordinatorPort != 0) {
      task.port = spec.coordinatorPort;
      claim.loc = spec.coordinatorPortLocation;
      claim.origin = "port " + std::to_string(spec.coordinatorPort);
    } else if (host.basePort != 0) {
      task.port = nextHostPort[task.host]++;
      claim.loc = locationAt(spec.basePortLocations, task.host);
      claim.origin = "host '" + host.name + "', base_port " + std::to_string(host.basePort);
      if (task.port > kMaxPort)
        return ir::makeError(spec.source, claim.loc,
                             "the ports of host '" + host.name + "' run past 65535 (base_port " +
                                 std::to_string(host.basePort) + ", " +
                                 std::to_string(task.port - host.basePort + 1) + " tasks)");
    } else {
      continue;
    }
    AddressPorts &onAddress = ports[task.address];
    auto [it, inserted] = onAddress.fixedClaim.try_emplace(task.port, fixedClaims.size());
    if (inserted) {
      fixedClaims.push_back(std::move(claim));
      continue;
    }
    const PortClaim &first = fixedClaims[it->second];
    ir::SourceLoc where = writtenBefore(first.loc, claim.loc) ? claim.loc : first.loc;
    return ir::makeError(spec.source, where,
                         "port clash: " + cluster.tasks[first.task].name + " (" + first.origin +
                             ") and " + task.name + " (" + claim.origin + ") both use " +
                             task.endpoint());
  }

  for (Task &task : cluster.tasks) {
    if (task.port != 0)
      continue;
    AddressPorts &onAddress = ports[task.address];
    int port = onAddress.nextAssigned;
    while (port <= kMaxPort && onAddress.fixedClaim.count(port))
      ++port;
    if (port > kMaxPort)
      return ir::makeError(spec.source, locationAt(spec.hostLocations, task.host),
                           "no free port left on " + task.address + " for " + task.name +
                               " (ports are assigned from " + std::to_string(kDefaultBasePort) +
                               " up to 65535)");
    task.port = port;
    onAddress.nextAssigned = port + 1;
  }
  return cluster;
}

namespace {

std::vector<const Task *> tasksWhere(const std::vector<Task> &tasks,
                                     llvm::function_ref<bool(const Task &)> keep) {
  std::vector<const Task *> result;
  for (const Task &task : tasks)
    if (keep(task))
      result.push_back(&task);
  return result;
}

} // namespace

std::vector<const Task *> Cluster::workers() const {
  return tasksWhere(tasks, [](const Task &t) { return t.role == Role::Worker; });
}

std::vector<const Task *> Cluster::parameterServers() const {
  return tasksWhere(tasks, [](const Task &t) { return t.role == Role::ParameterServer; });
}

std::vector<const Task *> Cluster::tasksOnHost(int host) const {
  return tasksWhere(tasks, [host](const Task &t) { return t.host == host; });
}

int Cluster::numWorkers() const {
  return static_cast<int>(workers().size());
}

int Cluster::numParameterServers() const {
  return static_cast<int>(parameterServers().size());
}

const Task *Cluster::findTask(llvm::StringRef name) const {
  for (const Task &task : tasks)
    if (task.name == name)
      return &task;
  return nullptr;
}

std::string Cluster::describe() const {
  auto plural = [](size_t n, llvm::StringRef one, llvm::StringRef many) {
    return std::to_string(n) + " " + (n == 1 ? one : many).str();
  };
  std::string text = plural(hosts.size(), "host", "hosts") + ", " +
                     plural(numWorkers(), "worker", "workers") + " (" +
                     replicationName(replication).str() + "), " +
                     plural(numParameterServers(), "parameter server", "parameter servers") +
                     "; coordinator at " + coordinator().endpoint() + "\n";
  for (size_t h = 0; h < hosts.size(); ++h) {
    const Host &host = hosts[h];
    std::vector<std::string> devices;
    for (const Device &device : host.devices)
      devices.push_back(device.str());
    text += "  " + host.name + " " + host.address + " [" + llvm::join(devices, ", ") + "]";
    if (host.bandwidthBitsPerSec != 0)
      text += " " + formatBandwidth(host.bandwidthBitsPerSec);
    if (!host.machine.empty())
      text += " on machine " + host.machine;
    text += ":";
    for (const Task *task : tasksOnHost(static_cast<int>(h)))
      text += " " + task->name + "@" + std::to_string(task->port);
    text += "\n";
  }
  return text;
}

} // namespace prism::cluster
