// Tests of Cluster::resolve: tasks per replication, port assignment, clashes and large clusters.
#include "cluster/ClusterParser.h"

#include <set>

#include <gtest/gtest.h>

#include "llvm/ADT/StringExtras.h"

namespace prism::cluster {
namespace {

std::string inputPath(llvm::StringRef name) {
  return std::string(PRISM_SOURCE_DIR) + "/tests/cluster/Inputs/" + name.str();
}

Cluster loadOrDie(llvm::StringRef shorthandOrPath, Replication replication) {
  auto cluster = loadCluster(shorthandOrPath, replication);
  if (!cluster) {
    ADD_FAILURE() << llvm::toString(cluster.takeError());
    return Cluster{};
  }
  return std::move(*cluster);
}

std::string resolveError(llvm::StringRef yaml, Replication replication) {
  auto spec = parseClusterYaml(yaml, "c.yaml");
  if (!spec)
    return "parse error: " + llvm::toString(spec.takeError());
  auto cluster = Cluster::resolve(*spec, replication);
  if (cluster)
    return "no error";
  return llvm::toString(cluster.takeError());
}

// One line per task: "worker:2 on h1 at 127.0.0.3:7000 [cpu:0]".
std::vector<std::string> taskLines(const Cluster &cluster) {
  std::vector<std::string> lines;
  for (const Task &task : cluster.tasks) {
    std::vector<std::string> devices;
    for (const Device &device : task.devices)
      devices.push_back(device.str());
    lines.push_back(task.name + " on " + cluster.hosts[task.host].name + " at " + task.endpoint() +
                    " [" + llvm::join(devices, ",") + "]");
  }
  return lines;
}

void expectConsistent(const Cluster &cluster) {
  std::set<std::string> endpoints;
  for (const Task &task : cluster.tasks) {
    EXPECT_TRUE(endpoints.insert(task.endpoint()).second) << "port used twice: " << task.endpoint();
    EXPECT_EQ(task.address, cluster.hosts[task.host].address) << task.name;
    EXPECT_EQ(task.name, (roleName(task.role) + ":" + llvm::Twine(task.index)).str());
    EXPECT_EQ(cluster.findTask(task.name), &task);
  }
  EXPECT_EQ(cluster.coordinator().role, Role::Coordinator);
  EXPECT_EQ(cluster.coordinator().host, 0);
}

using Lines = std::vector<std::string>;

TEST(ClusterResolveTest, TwoHostsBetweenGraph) {
  Cluster cluster = loadOrDie(inputPath("two_hosts.yaml"), Replication::BetweenGraph);
  EXPECT_EQ(taskLines(cluster), (Lines{
                                    "coordinator:0 on h0 at 127.0.0.2:7000 []",
                                    "worker:0 on h0 at 127.0.0.2:7001 [cpu:0]",
                                    "worker:1 on h0 at 127.0.0.2:7002 [cpu:1]",
                                    "worker:2 on h1 at 127.0.0.3:7000 [cpu:0]",
                                    "worker:3 on h1 at 127.0.0.3:7001 [cpu:1]",
                                    "ps:0 on h0 at 127.0.0.2:7003 []",
                                }));
  expectConsistent(cluster);
  EXPECT_EQ(cluster.numWorkers(), 4);
  EXPECT_EQ(cluster.numParameterServers(), 1);
  EXPECT_EQ(cluster.workers()[2]->name, "worker:2");
  EXPECT_EQ(cluster.parameterServers()[0]->host, 0);
  EXPECT_EQ(cluster.tasksOnHost(1).size(), 2u);
  EXPECT_EQ(cluster.findTask("worker:9"), nullptr);
  EXPECT_EQ(cluster.describe(),
            "2 hosts, 4 workers (between-graph), 1 parameter server; coordinator at "
            "127.0.0.2:7000\n"
            "  h0 127.0.0.2 [cpu:0, cpu:1] 10gbit: coordinator:0@7000 worker:0@7001 "
            "worker:1@7002 ps:0@7003\n"
            "  h1 127.0.0.3 [cpu:0, cpu:1] 10gbit: worker:2@7000 worker:3@7001\n");
}

TEST(ClusterResolveTest, TwoHostsInGraph) {
  Cluster cluster = loadOrDie(inputPath("two_hosts.yaml"), Replication::InGraph);
  EXPECT_EQ(taskLines(cluster), (Lines{
                                    "coordinator:0 on h0 at 127.0.0.2:7000 []",
                                    "worker:0 on h0 at 127.0.0.2:7001 [cpu:0,cpu:1]",
                                    "worker:1 on h1 at 127.0.0.3:7000 [cpu:0,cpu:1]",
                                    "ps:0 on h0 at 127.0.0.2:7002 []",
                                }));
  expectConsistent(cluster);
  EXPECT_EQ(cluster.replication, Replication::InGraph);
}

TEST(ClusterResolveTest, JsonAndYamlResolveEqually) {
  for (Replication replication : {Replication::BetweenGraph, Replication::InGraph}) {
    Cluster yaml = loadOrDie(inputPath("two_hosts.yaml"), replication);
    Cluster json = loadOrDie(inputPath("two_hosts.json"), replication);
    EXPECT_EQ(yaml.hosts, json.hosts);
    EXPECT_EQ(yaml.tasks, json.tasks);
    EXPECT_EQ(yaml.describe(), json.describe());
  }
}

TEST(ClusterResolveTest, ResourceInfo) {
  Cluster between = loadOrDie(inputPath("resource_info"), Replication::BetweenGraph);
  EXPECT_EQ(taskLines(between), (Lines{
                                    "coordinator:0 on 127.0.0.2 at 127.0.0.2:7000 []",
                                    "worker:0 on 127.0.0.2 at 127.0.0.2:7001 [gpu:0]",
                                    "worker:1 on 127.0.0.2 at 127.0.0.2:7002 [gpu:1]",
                                    "worker:2 on 127.0.0.3 at 127.0.0.3:7000 [cpu:0]",
                                    "worker:3 on localhost at 127.0.0.1:7000 [gpu:3]",
                                    "ps:0 on 127.0.0.2 at 127.0.0.2:7003 []",
                                    "ps:1 on 127.0.0.3 at 127.0.0.3:7001 []",
                                    "ps:2 on localhost at 127.0.0.1:7001 []",
                                }));
  expectConsistent(between);

  Cluster inGraph = loadOrDie(inputPath("resource_info"), Replication::InGraph);
  EXPECT_EQ(taskLines(inGraph), (Lines{
                                    "coordinator:0 on 127.0.0.2 at 127.0.0.2:7000 []",
                                    "worker:0 on 127.0.0.2 at 127.0.0.2:7001 [gpu:0,gpu:1]",
                                    "worker:1 on 127.0.0.3 at 127.0.0.3:7000 [cpu:0]",
                                    "worker:2 on localhost at 127.0.0.1:7000 [gpu:3]",
                                    "ps:0 on 127.0.0.2 at 127.0.0.2:7002 []",
                                    "ps:1 on 127.0.0.3 at 127.0.0.3:7001 []",
                                    "ps:2 on localhost at 127.0.0.1:7001 []",
                                }));
  expectConsistent(inGraph);
}

TEST(ClusterResolveTest, PortsStayUniqueOnASharedAddress) {
  // The coordinator's `port` and host c's `base_port` are fixed; the rest step around them.
  Cluster between = loadOrDie(inputPath("shared_address.yaml"), Replication::BetweenGraph);
  EXPECT_EQ(taskLines(between), (Lines{
                                    "coordinator:0 on a at 127.0.0.1:9000 []",
                                    "worker:0 on a at 127.0.0.1:7000 [gpu:0]",
                                    "worker:1 on a at 127.0.0.1:7002 [gpu:1]",
                                    "worker:2 on b at 127.0.0.1:7003 [cpu:0]",
                                    "worker:3 on c at 127.0.0.1:7001 [cpu:0]",
                                    "ps:0 on b at 127.0.0.1:7004 []",
                                    "ps:1 on b at 127.0.0.1:7005 []",
                                }));
  expectConsistent(between);

  Cluster inGraph = loadOrDie(inputPath("shared_address.yaml"), Replication::InGraph);
  EXPECT_EQ(taskLines(inGraph), (Lines{
                                    "coordinator:0 on a at 127.0.0.1:9000 []",
                                    "worker:0 on a at 127.0.0.1:7000 [gpu:0,gpu:1]",
                                    "worker:1 on b at 127.0.0.1:7002 [cpu:0]",
                                    "worker:2 on c at 127.0.0.1:7001 [cpu:0]",
                                    "ps:0 on b at 127.0.0.1:7003 []",
                                    "ps:1 on b at 127.0.0.1:7004 []",
                                }));
  expectConsistent(inGraph);
}

TEST(ClusterResolveTest, BasePortOfTheFirstHostIncludesTheCoordinator) {
  auto spec = parseClusterYaml("hosts:\n"
                               "  - {name: a, address: 10.0.0.1, base_port: 8000, ps: 1}\n"
                               "  - {name: b, address: 10.0.0.2, devices: [gpu:0]}\n",
                               "c.yaml");
  ASSERT_TRUE(bool(spec)) << llvm::toString(spec.takeError());
  auto cluster = Cluster::resolve(*spec, Replication::BetweenGraph);
  ASSERT_TRUE(bool(cluster)) << llvm::toString(cluster.takeError());
  EXPECT_EQ(taskLines(*cluster), (Lines{
                                     "coordinator:0 on a at 10.0.0.1:8000 []",
                                     "worker:0 on a at 10.0.0.1:8001 [cpu:0]",
                                     "worker:1 on b at 10.0.0.2:7000 [gpu:0]",
                                     "ps:0 on a at 10.0.0.1:8002 []",
                                 }));
}

TEST(ClusterResolveTest, LocalShorthands) {
  for (Replication replication : {Replication::BetweenGraph, Replication::InGraph}) {
    Cluster cluster = loadOrDie("local:4", replication);
    EXPECT_EQ(taskLines(cluster), (Lines{
                                      "coordinator:0 on local0 at 127.0.0.1:7000 []",
                                      "worker:0 on local0 at 127.0.0.1:7001 [cpu:0]",
                                      "worker:1 on local1 at 127.0.0.1:7002 [cpu:0]",
                                      "worker:2 on local2 at 127.0.0.1:7003 [cpu:0]",
                                      "worker:3 on local3 at 127.0.0.1:7004 [cpu:0]",
                                  }));
    expectConsistent(cluster);
  }

  Cluster withPs = loadOrDie("local:2,ps=3", Replication::InGraph);
  EXPECT_EQ(taskLines(withPs), (Lines{
                                   "coordinator:0 on local0 at 127.0.0.1:7000 []",
                                   "worker:0 on local0 at 127.0.0.1:7001 [cpu:0]",
                                   "worker:1 on local1 at 127.0.0.1:7002 [cpu:0]",
                                   "ps:0 on local0 at 127.0.0.1:7003 []",
                                   "ps:1 on local0 at 127.0.0.1:7004 []",
                                   "ps:2 on local1 at 127.0.0.1:7005 []",
                               }));

  Cluster towers = loadOrDie("local:2,devices=3", Replication::InGraph);
  ASSERT_EQ(towers.numWorkers(), 2);
  EXPECT_EQ(towers.workers()[1]->devices.size(), 3u);
  Cluster perDevice = loadOrDie("local:2,devices=3", Replication::BetweenGraph);
  EXPECT_EQ(perDevice.numWorkers(), 6);
  expectConsistent(perDevice);
}

TEST(ClusterResolveTest, PortClashes) {
  // a's tasks take 8000..8002 (coordinator, worker, ps); b starts inside that range.
  EXPECT_EQ(resolveError("hosts:\n"
                         "  - {name: a, address: 127.0.0.2, base_port: 8000, ps: 1}\n"
                         "  - {name: b, address: 127.0.0.2, base_port: 8002}\n",
                         Replication::BetweenGraph),
            "c.yaml:3:46: error: port clash: worker:1 (host 'b', base_port 8002) and ps:0 (host "
            "'a', base_port 8000) both use 127.0.0.2:8002");
  EXPECT_EQ(resolveError("port: 8001\n"
                         "hosts:\n"
                         "  - name: a\n"
                         "    address: 127.0.0.2\n"
                         "    base_port: 8000\n",
                         Replication::InGraph),
            "c.yaml:5:16: error: port clash: coordinator:0 (port 8001) and ps:0 (host 'a', "
            "base_port 8000) both use 127.0.0.2:8001");
  // On different addresses the same ports are fine.
  EXPECT_EQ(resolveError("hosts:\n"
                         "  - {name: a, address: 127.0.0.2, base_port: 8000}\n"
                         "  - {name: b, address: 127.0.0.3, base_port: 8000}\n",
                         Replication::BetweenGraph),
            "no error");
}

TEST(ClusterResolveTest, PortsRunningOut) {
  EXPECT_EQ(resolveError("hosts:\n"
                         "  - name: a\n"
                         "    address: 127.0.0.2\n"
                         "    base_port: 65535\n",
                         Replication::InGraph),
            "c.yaml:4:16: error: the ports of host 'a' run past 65535 (base_port 65535, 2 tasks)");
  // 7000..65535 leaves room for 58536 tasks on one address: the coordinator, a worker and
  // 58534 parameter servers.
  ClusterSpec crowded;
  crowded.source = "built";
  crowded.hosts.push_back(Host{"h0", "127.0.0.1", {Device{}}, 58535, 0, 0, ""});
  auto cluster = Cluster::resolve(crowded, Replication::InGraph);
  ASSERT_FALSE(bool(cluster));
  EXPECT_EQ(llvm::toString(cluster.takeError()),
            "built: error: no free port left on 127.0.0.1 for ps:58534 (ports are assigned from "
            "7000 up to 65535)");
}

TEST(ClusterResolveTest, RefusesSpecsBuiltWithoutHostsOrDevices) {
  ClusterSpec empty;
  empty.source = "built";
  auto none = Cluster::resolve(empty, Replication::InGraph);
  ASSERT_FALSE(bool(none));
  EXPECT_EQ(llvm::toString(none.takeError()), "built: error: the cluster has no hosts");

  ClusterSpec deviceless;
  deviceless.source = "built";
  deviceless.hosts.push_back(Host{"h0", "127.0.0.1", {}, 0, 0, 0, ""});
  auto noDevice = Cluster::resolve(deviceless, Replication::InGraph);
  ASSERT_FALSE(bool(noDevice));
  EXPECT_EQ(llvm::toString(noDevice.takeError()), "built: error: host 'h0' has no worker device");
}

TEST(ClusterResolveTest, SixtyFourWorkers) {
  Cluster local = loadOrDie("local:64,ps=4", Replication::BetweenGraph);
  EXPECT_EQ(local.numWorkers(), 64);
  EXPECT_EQ(local.numParameterServers(), 4);
  EXPECT_EQ(local.workers().back()->port, 7064);
  EXPECT_EQ(local.parameterServers().back()->port, 7068);
  expectConsistent(local);

  Cluster towers = loadOrDie("local:16,devices=4", Replication::BetweenGraph);
  EXPECT_EQ(towers.numWorkers(), 64);
  expectConsistent(towers);

  // Eight hosts with eight GPUs each, written in YAML and in JSON.
  std::string yaml = "network: {bandwidth: 100gbit}\nhosts:\n";
  std::string json = "{\"network\": {\"bandwidth\": \"100gbit\"}, \"hosts\": [";
  for (int h = 0; h < 8; ++h) {
    std::string address = "10.0.1." + std::to_string(h + 1);
    yaml += "  - name: node" + std::to_string(h) + "\n    address: " + address +
            "\n    devices: [gpu:0, gpu:1, gpu:2, gpu:3, gpu:4, gpu:5, gpu:6, gpu:7]\n";
    json += std::string(h ? ", " : "") + "{\"name\": \"node" + std::to_string(h) +
            "\", \"address\": \"" + address +
            "\", \"devices\": [\"gpu:0\", \"gpu:1\", \"gpu:2\", \"gpu:3\", \"gpu:4\", "
            "\"gpu:5\", \"gpu:6\", \"gpu:7\"]}";
  }
  json += "]}";
  auto yamlSpec = parseClusterText(yaml, "big");
  auto jsonSpec = parseClusterText(json, "big");
  ASSERT_TRUE(bool(yamlSpec)) << llvm::toString(yamlSpec.takeError());
  ASSERT_TRUE(bool(jsonSpec)) << llvm::toString(jsonSpec.takeError());
  for (Replication replication : {Replication::BetweenGraph, Replication::InGraph}) {
    auto fromYaml = Cluster::resolve(*yamlSpec, replication);
    auto fromJson = Cluster::resolve(*jsonSpec, replication);
    ASSERT_TRUE(bool(fromYaml)) << llvm::toString(fromYaml.takeError());
    ASSERT_TRUE(bool(fromJson)) << llvm::toString(fromJson.takeError());
    EXPECT_EQ(fromYaml->numWorkers(), replication == Replication::BetweenGraph ? 64 : 8);
    EXPECT_EQ(fromYaml->numParameterServers(), 8);
    EXPECT_EQ(fromYaml->tasks, fromJson->tasks);
    expectConsistent(*fromYaml);
  }
  auto cluster = Cluster::resolve(*yamlSpec, Replication::BetweenGraph);
  ASSERT_TRUE(bool(cluster));
  const Task &last = *cluster->workers().back();
  EXPECT_EQ(last.name, "worker:63");
  EXPECT_EQ(last.endpoint(), "10.0.1.8:7007");
  EXPECT_EQ(last.devices, (std::vector<Device>{Device{DeviceKind::Gpu, 7}}));
  EXPECT_EQ(cluster->hosts[7].bandwidthBitsPerSec, 100'000'000'000u);
}

} // namespace
} // namespace prism::cluster
