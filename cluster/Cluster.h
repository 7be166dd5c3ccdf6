// The resolved model of a cluster: its hosts, and the tasks (coordinator, workers, parameter
// servers) that run on them with their addresses, ports and devices.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/Diagnostic.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::cluster {

enum class DeviceKind { Cpu, Gpu };

struct Device {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;

  // "cpu:0", "gpu:3": the spelling cluster files use.
  std::string str() const;
  friend bool operator==(const Device &a, const Device &b) {
    return a.kind == b.kind && a.index == b.index;
  }
  friend bool operator!=(const Device &a, const Device &b) { return !(a == b); }
};

// "cpu:N" or "gpu:N" with N a decimal number; nothing else.
std::optional<Device> parseDevice(llvm::StringRef text);

// "10gbit", "100mbit", "1.5gbit", "2500000000" (bits/s); units bit, kbit, mbit, gbit, tbit are
// powers of 1000 as in `tc`, case-insensitive. Returns nullopt for anything else or for zero.
std::optional<uint64_t> parseBandwidth(llvm::StringRef text);
// The inverse, choosing the largest unit that divides evenly: 10000000000 -> "10gbit".
std::string formatBandwidth(uint64_t bitsPerSec);

struct Host {
  std::string name;
  std::string address; // an IPv4 literal; `localhost` is stored as 127.0.0.1
  std::vector<Device> devices;
  int psTasks = 0;
  uint64_t bandwidthBitsPerSec = 0; // 0 = unknown
  int basePort = 0;                 // first port of this host's tasks; 0 = assigned per address
  // The machine the host runs on, when hosts of different addresses share one (network
  // namespaces, containers): they share its cores. Empty: its address names it.
  std::string machine;

  // The machine's name: `machine`, else the address (hosts of one address are one machine).
  const std::string &machineName() const { return machine.empty() ? address : machine; }

  friend bool operator==(const Host &a, const Host &b) {
    return a.name == b.name && a.address == b.address && a.devices == b.devices &&
           a.psTasks == b.psTasks && a.bandwidthBitsPerSec == b.bandwidthBitsPerSec &&
           a.basePort == b.basePort && a.machine == b.machine;
  }
};

enum class Role { Worker, ParameterServer, Coordinator };
// "worker", "ps", "coordinator": the prefix of task names.
llvm::StringRef roleName(Role role);

struct Task {
  std::string name; // "worker:0", "ps:1", "coordinator:0"
  Role role = Role::Worker;
  int index = 0; // within its role
  int host = 0;  // index into Cluster::hosts
  std::string address;
  int port = 0;
  std::vector<Device> devices; // a worker's devices; empty for the coordinator and PS tasks

  std::string endpoint() const { return address + ":" + std::to_string(port); }
  friend bool operator==(const Task &a, const Task &b) {
    return a.name == b.name && a.role == b.role && a.index == b.index && a.host == b.host &&
           a.address == b.address && a.port == b.port && a.devices == b.devices;
  }
};

// How workers map onto devices.
enum class Replication {
  BetweenGraph, // one worker task per device, each running its own copy of the program
  InGraph,      // one worker task per host, owning all its devices (towers inside one process)
};
llvm::StringRef replicationName(Replication replication); // "between-graph", "in-graph"

constexpr int kDefaultBasePort = 7000;

// A parsed cluster description, before tasks and ports are assigned. Defaults (devices, ps,
// bandwidth) are already applied. The locations let resolve() point port clashes at the file.
struct ClusterSpec {
  std::string source; // the file name, or "<cluster>" for a shorthand
  std::vector<Host> hosts;
  int coordinatorPort = 0;                      // 0 = assigned like any other task
  std::vector<ir::SourceLoc> hostLocations;     // parallel to hosts; may be empty
  std::vector<ir::SourceLoc> basePortLocations; // parallel to hosts; may be empty
  ir::SourceLoc coordinatorPortLocation;
};

struct Cluster {
  std::vector<Host> hosts;
  // The coordinator first, then the workers, then the parameter servers; within a role, host by
  // host in file order. Ports were assigned in this order.
  std::vector<Task> tasks;
  Replication replication = Replication::BetweenGraph;

  // Makes the tasks of `spec` and assigns their ports (docs/cluster.md gives the rules). Fails
  // when two tasks would share an address:port or ports run past 65535.
  static llvm::Expected<Cluster> resolve(const ClusterSpec &spec, Replication replication);

  const Task &coordinator() const { return tasks.front(); }
  std::vector<const Task *> workers() const;
  std::vector<const Task *> parameterServers() const;
  std::vector<const Task *> tasksOnHost(int host) const;
  int numWorkers() const;
  int numParameterServers() const;
  // By name ("worker:3"); null when there is none.
  const Task *findTask(llvm::StringRef name) const;
  // A few lines: counts, then each host with its tasks and ports.
  std::string describe() const;
};

} // namespace prism::cluster
