// Tests of the cluster readers: each format, the shorthand, and every error with its location.
#include "cluster/ClusterParser.h"

#include <gtest/gtest.h>

namespace prism::cluster {
namespace {

std::string inputPath(llvm::StringRef name) {
  return std::string(PRISM_SOURCE_DIR) + "/tests/cluster/Inputs/" + name.str();
}

template <typename T> std::string errorOf(llvm::Expected<T> result) {
  if (result)
    return "no error";
  return llvm::toString(result.takeError());
}

std::string yamlError(llvm::StringRef text) {
  return errorOf(parseClusterYaml(text, "bad.yaml"));
}

Device cpu(int index) {
  return Device{DeviceKind::Cpu, index};
}
Device gpu(int index) {
  return Device{DeviceKind::Gpu, index};
}

ClusterSpec parseOrDie(llvm::Expected<ClusterSpec> spec) {
  if (!spec) {
    ADD_FAILURE() << llvm::toString(spec.takeError());
    return ClusterSpec{};
  }
  return std::move(*spec);
}

// The host part every test that writes one host by hand shares.
constexpr const char *kHostsHeader = "hosts:\n"
                                     "  - name: h0\n"
                                     "    address: 127.0.0.2\n";

TEST(ClusterParserTest, ReadsYamlHostsWithDefaults) {
  ClusterSpec spec = parseOrDie(readClusterFile(inputPath("two_hosts.yaml")));
  ASSERT_EQ(spec.hosts.size(), 2u);
  EXPECT_EQ(spec.source, inputPath("two_hosts.yaml"));
  EXPECT_EQ(spec.hosts[0].name, "h0");
  EXPECT_EQ(spec.hosts[0].address, "127.0.0.2");
  EXPECT_EQ(spec.hosts[0].devices, (std::vector<Device>{cpu(0), cpu(1)}));
  EXPECT_EQ(spec.hosts[0].psTasks, 1);
  // h0 sets ps, so a host that is silent about it runs none.
  EXPECT_EQ(spec.hosts[1].psTasks, 0);
  EXPECT_EQ(spec.hosts[1].bandwidthBitsPerSec, 10'000'000'000u);
  EXPECT_EQ(spec.hostLocations[1].line, 7);
  EXPECT_EQ(spec.coordinatorPort, 0);
}

TEST(ClusterParserTest, EveryHostRunsOnePsWhenNoHostSaysHowMany) {
  ClusterSpec spec = parseOrDie(parseClusterYaml("hosts:\n"
                                                 "  - {name: a, address: 10.0.0.1}\n"
                                                 "  - {name: b, address: 10.0.0.2}\n",
                                                 "c.yaml"));
  ASSERT_EQ(spec.hosts.size(), 2u);
  EXPECT_EQ(spec.hosts[0].psTasks, 1);
  EXPECT_EQ(spec.hosts[1].psTasks, 1);
  EXPECT_EQ(spec.hosts[0].devices, std::vector<Device>{cpu(0)});
  EXPECT_EQ(spec.hosts[0].bandwidthBitsPerSec, 0u);
}

TEST(ClusterParserTest, ReadsPortsBandwidthsAndLocalhost) {
  ClusterSpec spec = parseOrDie(readClusterFile(inputPath("shared_address.yaml")));
  ASSERT_EQ(spec.hosts.size(), 3u);
  EXPECT_EQ(spec.coordinatorPort, 9000);
  EXPECT_EQ(spec.hosts[0].address, "127.0.0.1");
  EXPECT_EQ(spec.hosts[0].devices, (std::vector<Device>{gpu(0), gpu(1)}));
  EXPECT_EQ(spec.hosts[0].bandwidthBitsPerSec, 25'000'000'000u);
  EXPECT_EQ(spec.hosts[1].bandwidthBitsPerSec, 1'000'000'000u);
  EXPECT_EQ(spec.hosts[1].psTasks, 2);
  EXPECT_EQ(spec.hosts[0].psTasks, 0);
  EXPECT_EQ(spec.hosts[2].basePort, 7001);
}

TEST(ClusterParserTest, HostsOfOneAddressShareTheMachineOneOfThemNames) {
  ClusterSpec spec = parseOrDie(parseClusterYaml("hosts:\n"
                                                 "  - {name: a, address: 10.0.0.1, machine: box}\n"
                                                 "  - {name: b, address: 10.0.0.2, machine: box}\n"
                                                 "  - {name: c, address: 10.0.0.1}\n"
                                                 "  - {name: d, address: 10.0.0.3}\n",
                                                 "c.yaml"));
  ASSERT_EQ(spec.hosts.size(), 4u);
  EXPECT_EQ(spec.hosts[0].machineName(), "box");
  EXPECT_EQ(spec.hosts[1].machineName(), "box");
  EXPECT_EQ(spec.hosts[2].machine, "box"); // a's address
  EXPECT_EQ(spec.hosts[3].machine, "");
  EXPECT_EQ(spec.hosts[3].machineName(), "10.0.0.3");
}

TEST(ClusterParserTest, JsonAndYamlDescribeTheSameHosts) {
  ClusterSpec yaml = parseOrDie(readClusterFile(inputPath("two_hosts.yaml")));
  ClusterSpec json = parseOrDie(readClusterFile(inputPath("two_hosts.json")));
  EXPECT_EQ(yaml.hosts, json.hosts);
}

TEST(ClusterParserTest, ReadsResourceInfo) {
  ClusterSpec spec = parseOrDie(readClusterFile(inputPath("resource_info")));
  ASSERT_EQ(spec.hosts.size(), 3u);
  EXPECT_EQ(spec.hosts[0].name, "127.0.0.2");
  EXPECT_EQ(spec.hosts[0].devices, (std::vector<Device>{gpu(0), gpu(1)}));
  EXPECT_EQ(spec.hosts[1].devices, std::vector<Device>{cpu(0)});
  EXPECT_EQ(spec.hosts[2].name, "localhost");
  EXPECT_EQ(spec.hosts[2].address, "127.0.0.1");
  EXPECT_EQ(spec.hosts[2].devices, std::vector<Device>{gpu(3)});
  for (const Host &host : spec.hosts)
    EXPECT_EQ(host.psTasks, 1) << host.name;
  EXPECT_EQ(spec.hostLocations[2].line, 5);
}

TEST(ClusterParserTest, ReadsResourceInfoWithSpacesAndComments) {
  ClusterSpec spec = parseOrDie(parseClusterText("  10.0.0.1:2 , 0 # two GPUs\n\r\n", "hosts"));
  ASSERT_EQ(spec.hosts.size(), 1u);
  EXPECT_EQ(spec.hosts[0].devices, (std::vector<Device>{gpu(2), gpu(0)}));
}

TEST(ClusterParserTest, JsonNumbersMayBeStrings) {
  ClusterSpec spec = parseOrDie(parseClusterJson(
      R"({"port": "9000", "hosts": [{"name": "a", "address": "10.0.0.1", "ps": "2",
          "bandwidth": 1000000, "base_port": 8000}]})",
      "c.json"));
  ASSERT_EQ(spec.hosts.size(), 1u);
  EXPECT_EQ(spec.coordinatorPort, 9000);
  EXPECT_EQ(spec.hosts[0].psTasks, 2);
  EXPECT_EQ(spec.hosts[0].bandwidthBitsPerSec, 1'000'000u);
  EXPECT_EQ(spec.hosts[0].basePort, 8000);
}

TEST(ClusterParserTest, DetectsTheFormat) {
  EXPECT_EQ(detectClusterFormat("c.json", "hosts: []"), ClusterFormat::Json);
  EXPECT_EQ(detectClusterFormat("c", "  \n {\"hosts\": []}"), ClusterFormat::Json);
  EXPECT_EQ(detectClusterFormat("c.yml", "10.0.0.1"), ClusterFormat::Yaml);
  EXPECT_EQ(detectClusterFormat("c", "# hosts\n\nhosts:\n  - name: a\n"), ClusterFormat::Yaml);
  EXPECT_EQ(detectClusterFormat("c", "network: {bandwidth: 1gbit}\n"), ClusterFormat::Yaml);
  EXPECT_EQ(detectClusterFormat("c", "---\nhosts: []\n"), ClusterFormat::Yaml);
  EXPECT_EQ(detectClusterFormat("resource_info", "# a: b\n10.0.0.1:0,1\n"),
            ClusterFormat::ResourceInfo);
  EXPECT_EQ(detectClusterFormat("hosts.txt", "localhost\n"), ClusterFormat::ResourceInfo);
}

TEST(ClusterParserTest, ReadsLocalShorthands) {
  ClusterSpec four = parseOrDie(parseLocalShorthand("local:4"));
  ASSERT_EQ(four.hosts.size(), 4u);
  for (const Host &host : four.hosts) {
    EXPECT_EQ(host.address, "127.0.0.1");
    EXPECT_EQ(host.devices, std::vector<Device>{cpu(0)});
    EXPECT_EQ(host.psTasks, 0);
  }
  EXPECT_EQ(four.hosts[3].name, "local3");

  ClusterSpec withPs = parseOrDie(parseLocalShorthand("local:3,ps=5,devices=2"));
  ASSERT_EQ(withPs.hosts.size(), 3u);
  EXPECT_EQ(withPs.hosts[0].psTasks, 2);
  EXPECT_EQ(withPs.hosts[1].psTasks, 2);
  EXPECT_EQ(withPs.hosts[2].psTasks, 1);
  EXPECT_EQ(withPs.hosts[2].devices, (std::vector<Device>{cpu(0), cpu(1)}));

  EXPECT_TRUE(isLocalShorthand("local:2"));
  EXPECT_FALSE(isLocalShorthand("cluster.yaml"));
  ClusterSpec viaSpec = parseOrDie(readClusterSpec("local:2,devices=3"));
  EXPECT_EQ(viaSpec.hosts[1].devices.size(), 3u);

  // A GPU per group, or one GPU every group shares.
  ClusterSpec gpus = parseOrDie(parseLocalShorthand("local:3,devices=gpu,ps=1"));
  ASSERT_EQ(gpus.hosts.size(), 3u);
  for (size_t h = 0; h < 3; ++h)
    EXPECT_EQ(gpus.hosts[h].devices, std::vector<Device>{gpu(static_cast<int>(h))});
  ClusterSpec shared = parseOrDie(parseLocalShorthand("local:2,devices=gpu:1"));
  for (const Host &host : shared.hosts)
    EXPECT_EQ(host.devices, std::vector<Device>{gpu(1)});
  // towers=T: the group's GPU listed T times, its worker's in-graph towers sharing it.
  ClusterSpec towers = parseOrDie(parseLocalShorthand("local:2,towers=3,devices=gpu"));
  EXPECT_EQ(towers.hosts[0].devices, (std::vector<Device>{gpu(0), gpu(0), gpu(0)}));
  EXPECT_EQ(towers.hosts[1].devices, (std::vector<Device>{gpu(1), gpu(1), gpu(1)}));
  ClusterSpec oneGpu = parseOrDie(parseLocalShorthand("local:1,devices=gpu:0,towers=2"));
  EXPECT_EQ(oneGpu.hosts[0].devices, (std::vector<Device>{gpu(0), gpu(0)}));
}

TEST(ClusterParserTest, ParsesDevicesAndBandwidths) {
  EXPECT_EQ(parseDevice("gpu:12"), gpu(12));
  EXPECT_EQ(parseDevice("cpu:0"), cpu(0));
  for (const char *bad : {"cpu", "cpu:", "cpu:-1", "CPU:0", "tpu:0", "gpu:1x", "gpu: 1"})
    EXPECT_FALSE(parseDevice(bad)) << bad;
  EXPECT_EQ(gpu(3).str(), "gpu:3");

  EXPECT_EQ(parseBandwidth("10gbit"), 10'000'000'000u);
  EXPECT_EQ(parseBandwidth("100mbit"), 100'000'000u);
  EXPECT_EQ(parseBandwidth("25Gbit"), 25'000'000'000u);
  EXPECT_EQ(parseBandwidth("1.5gbit"), 1'500'000'000u);
  EXPECT_EQ(parseBandwidth("10 kbit"), 10'000u);
  EXPECT_EQ(parseBandwidth("2500000000"), 2'500'000'000u);
  EXPECT_EQ(parseBandwidth("1tbit"), 1'000'000'000'000u);
  for (const char *bad : {"", "gbit", "0", "0gbit", "10gbits", "10gbps", "-1gbit", "1.5bit",
                          "1.gbit", ".5gbit", "1e9", "99999999999999999999tbit"})
    EXPECT_FALSE(parseBandwidth(bad)) << bad;
  EXPECT_EQ(formatBandwidth(10'000'000'000u), "10gbit");
  EXPECT_EQ(formatBandwidth(1'500'000'000u), "1500mbit");
  EXPECT_EQ(formatBandwidth(1234), "1234bit");
}

// Errors, each with the place the mistake is written and the field and value it concerns.

TEST(ClusterParserErrorTest, UnknownKeys) {
  EXPECT_EQ(yamlError(std::string(kHostsHeader) + "    devics: [cpu:0]\n"),
            "bad.yaml:4:5: error: unknown key 'devics' in host 'h0' (expected name, address, "
            "devices, ps, bandwidth, base_port, machine)");
  EXPECT_EQ(yamlError(std::string(kHostsHeader) + "hots: 1\n"),
            "bad.yaml:4:1: error: unknown key 'hots' at the top level (expected hosts, network, "
            "port)");
  EXPECT_EQ(yamlError(std::string(kHostsHeader) + "network: {bandwidth: 1gbit, delay: 5ms}\n"),
            "bad.yaml:4:29: error: unknown key 'delay' in network (expected bandwidth)");
  EXPECT_EQ(yamlError(std::string(kHostsHeader) + "    ps: 1\n    ps: 2\n"),
            "bad.yaml:5:5: error: duplicate key 'ps' in host 'h0'");
}

TEST(ClusterParserErrorTest, HostNames) {
  EXPECT_EQ(yamlError("hosts:\n"
                      "  - {name: h0, address: 127.0.0.2}\n"
                      "  - {name: h0, address: 127.0.0.3}\n"),
            "bad.yaml:3:12: error: duplicate host name 'h0' (first at line 2)");
  EXPECT_EQ(yamlError("hosts:\n  - address: 127.0.0.2\n"),
            "bad.yaml:2:5: error: host #1 has no 'name'");
  EXPECT_EQ(yamlError("hosts:\n  - name: h0\n"), "bad.yaml:2:5: error: host 'h0' has no 'address'");
  EXPECT_EQ(yamlError("hosts:\n  - name: h 0\n    address: 127.0.0.2\n"),
            "bad.yaml:2:11: error: bad host name 'h 0' (use letters, digits, '.', '_' and '-')");
  EXPECT_EQ(yamlError("hosts:\n  - name:\n    address: 127.0.0.2\n"),
            "bad.yaml:2:5: error: 'name' of host #1 has no value");
  EXPECT_EQ(yamlError("hosts:\n  - name: [a]\n    address: 127.0.0.2\n"),
            "bad.yaml:2:11: error: 'name' of host #1 must be a single value, not a list");
  EXPECT_EQ(yamlError("hosts:\n  - h0\n"),
            "bad.yaml:2:5: error: host #1 must be a map with keys name, address, devices, ps, "
            "bandwidth, base_port, machine");
}

TEST(ClusterParserErrorTest, Machines) {
  EXPECT_EQ(yamlError("hosts:\n  - {name: h0, address: 127.0.0.2, machine: a b}\n"),
            "bad.yaml:2:45: error: bad machine name 'a b' in host 'h0' (use letters, digits, '.', "
            "'_' and '-')");
  EXPECT_EQ(yamlError("hosts:\n"
                      "  - {name: h0, address: 10.0.0.1, machine: m1}\n"
                      "  - {name: h1, address: 10.0.0.1, machine: m2}\n"),
            "bad.yaml:3:44: error: machine 'm2' of host 'h1' differs from machine 'm1' of host "
            "'h0' at the same address 10.0.0.1");
}

TEST(ClusterParserErrorTest, Devices) {
  EXPECT_EQ(yamlError(std::string(kHostsHeader) + "    devices: []\n"),
            "bad.yaml:4:14: error: host 'h0' has no worker device: 'devices' is empty (give at "
            "least one, such as [cpu:0])");
  EXPECT_EQ(yamlError(std::string(kHostsHeader) + "    devices:\n"),
            "bad.yaml:4:5: error: host 'h0' has no worker device: 'devices' is empty (give at "
            "least one, such as [cpu:0])");
  EXPECT_EQ(yamlError(std::string(kHostsHeader) + "    devices: [cpu:0, tpu:1]\n"),
            "bad.yaml:4:22: error: bad device 'tpu:1' in 'devices' of host 'h0' (expected cpu:N "
            "or gpu:N)");
  EXPECT_EQ(yamlError(std::string(kHostsHeader) + "    devices:\n      - gpu:0\n      - gpu:0\n"),
            "bad.yaml:6:9: error: duplicate device 'gpu:0' in 'devices' of host 'h0'");
  EXPECT_EQ(yamlError(std::string(kHostsHeader) + "    devices: cpu:0\n"),
            "bad.yaml:4:14: error: 'devices' of host 'h0' must be a list such as [cpu:0, gpu:1]");
}

TEST(ClusterParserErrorTest, Addresses) {
  auto addressError = [](llvm::StringRef address) {
    return yamlError(("hosts:\n  - name: h0\n    address: " + address + "\n").str());
  };
  const std::string where = "bad.yaml:3:14: error: ";
  EXPECT_EQ(addressError("10.0.0"), where + "bad address '10.0.0' in host 'h0' (expected an IPv4 "
                                            "literal such as 10.0.0.2, or localhost)");
  EXPECT_EQ(addressError("node1"), where + "bad address 'node1' in host 'h0' (expected an IPv4 "
                                           "literal such as 10.0.0.2, or localhost)");
  EXPECT_EQ(addressError("10.0.0.256"), where + "bad address '10.0.0.256' in host 'h0' (expected "
                                                "an IPv4 literal such as 10.0.0.2, or localhost)");
  EXPECT_EQ(addressError("10.0.0.01"), where + "bad address '10.0.0.01' in host 'h0' (expected "
                                               "an IPv4 literal such as 10.0.0.2, or localhost)");
  EXPECT_EQ(addressError("0.0.0.0"), where + "bad address '0.0.0.0' in host 'h0' (0.x.x.x is the "
                                             "unspecified network, not a host's own address)");
  EXPECT_EQ(addressError("255.255.255.255"),
            where + "bad address '255.255.255.255' in host 'h0' (the broadcast address names no "
                    "single host)");
  EXPECT_EQ(addressError("224.0.0.1"), where + "bad address '224.0.0.1' in host 'h0' (a multicast "
                                               "address names no single host)");
}

TEST(ClusterParserErrorTest, NumbersAndBandwidths) {
  EXPECT_EQ(yamlError(std::string(kHostsHeader) + "    ps: -1\n"),
            "bad.yaml:4:9: error: 'ps' of host 'h0' must be a whole number >= 0, got '-1'");
  EXPECT_EQ(yamlError(std::string(kHostsHeader) + "    ps: two\n"),
            "bad.yaml:4:9: error: 'ps' of host 'h0' must be a whole number >= 0, got 'two'");
  EXPECT_EQ(yamlError(std::string(kHostsHeader) + "    base_port: 70000\n"),
            "bad.yaml:4:16: error: 'base_port' of host 'h0' must be a port number 1..65535, got "
            "'70000'");
  EXPECT_EQ(yamlError(std::string(kHostsHeader) + "port: 0\n"),
            "bad.yaml:4:7: error: 'port' must be a port number 1..65535, got '0'");
  EXPECT_EQ(yamlError(std::string(kHostsHeader) + "    bandwidth: 10gigs\n"),
            "bad.yaml:4:16: error: bad bandwidth '10gigs' in 'bandwidth' of host 'h0' (expected "
            "bits/s, or a number with a unit bit, kbit, mbit, gbit or tbit, such as 10gbit)");
  EXPECT_EQ(yamlError(std::string(kHostsHeader) + "network:\n  bandwidth: fast\n"),
            "bad.yaml:5:14: error: bad bandwidth 'fast' in 'bandwidth' of network (expected "
            "bits/s, or a number with a unit bit, kbit, mbit, gbit or tbit, such as 10gbit)");
  EXPECT_EQ(yamlError(std::string(kHostsHeader) + "network: 10gbit\n"),
            "bad.yaml:4:10: error: 'network' must be a map such as {bandwidth: 10gbit}");
}

TEST(ClusterParserErrorTest, EmptyClusters) {
  EXPECT_EQ(yamlError("hosts: []\n"), "bad.yaml:1:8: error: no hosts: 'hosts' is empty");
  EXPECT_EQ(yamlError("# nothing yet\nhosts:\n"),
            "bad.yaml:2:1: error: no hosts: 'hosts' is empty");
  EXPECT_EQ(yamlError("network: {bandwidth: 1gbit}\n"),
            "bad.yaml:1:1: error: no hosts: the cluster description has no 'hosts'");
  EXPECT_EQ(yamlError(""), "bad.yaml:1:1: error: no hosts: the cluster description is empty");
  EXPECT_EQ(yamlError("hosts: {name: h0}\n"),
            "bad.yaml:1:8: error: 'hosts' must be a list of hosts");
  EXPECT_EQ(yamlError("- 1\n"), "bad.yaml:1:1: error: a cluster description is a map with 'hosts' "
                                "(and optionally 'network' and 'port')");
  EXPECT_EQ(errorOf(parseResourceInfo("# no hosts\n\n", "resource_info")),
            "resource_info:1:1: error: no hosts: the resource_info file lists none");
}

TEST(ClusterParserErrorTest, SyntaxErrors) {
  EXPECT_EQ(yamlError("hosts:\n  - name: h0\n    devices: [cpu:0\n"),
            "bad.yaml:4:1: error: YAML syntax error: end of sequence flow not found");
  // nlohmann stops at the last byte of the token it did not expect: the closing quote of "h0".
  EXPECT_EQ(
      errorOf(parseClusterJson("{\n  \"hosts\": [\n    {\"name\" \"h0\"}\n  ]\n}\n", "bad.json")),
      "bad.json:3:16: error: JSON syntax error while parsing object separator - unexpected "
      "string literal; expected ':'");
  EXPECT_EQ(errorOf(parseClusterJson("{\"hosts\": [", "bad.json")),
            "bad.json:1:12: error: JSON syntax error while parsing value - unexpected end of "
            "input; expected '[', '{', or a literal");
}

TEST(ClusterParserErrorTest, JsonMistakesAreLocatedLikeYamlOnes) {
  EXPECT_EQ(
      errorOf(parseClusterJson("{\"hosts\": [\n"
                               "  {\"name\": \"h0\", \"address\": \"127.0.0.2\", \"ps\": -2}\n"
                               "]}\n",
                               "c.json")),
      "c.json:2:48: error: 'ps' of host 'h0' must be a whole number >= 0, got '-2'");
  EXPECT_EQ(errorOf(parseClusterJson("{\"hosts\":[{\"name\":\"h0\",\"adress\":\"127.0.0.2\"}]}",
                                     "c.json")),
            "c.json:1:24: error: unknown key 'adress' in host 'h0' (expected name, address, "
            "devices, ps, bandwidth, base_port, machine)");
}

TEST(ClusterParserErrorTest, ResourceInfo) {
  auto riError = [](llvm::StringRef text) { return errorOf(parseResourceInfo(text, "ri")); };
  EXPECT_EQ(riError("127.0.0.2\nnode7:0\n"),
            "ri:2:1: error: bad address 'node7' for a host (expected an IPv4 literal such as "
            "10.0.0.2, or localhost)");
  EXPECT_EQ(riError("127.0.0.2:0, x\n"),
            "ri:1:14: error: bad GPU id 'x' for host '127.0.0.2' (expected a number such as 0)");
  EXPECT_EQ(riError("127.0.0.2:0,,1\n"),
            "ri:1:13: error: bad GPU id '' for host '127.0.0.2' (expected a number such as 0)");
  EXPECT_EQ(riError("127.0.0.2:1,1\n"),
            "ri:1:13: error: duplicate GPU id '1' for host '127.0.0.2'");
  EXPECT_EQ(riError("# hosts\n  127.0.0.2\n127.0.0.2:0\n"),
            "ri:3:1: error: duplicate host '127.0.0.2' (first at line 2)");
  EXPECT_EQ(riError("127.0.0.2:\n"),
            "ri:1:11: error: host '127.0.0.2' has no worker device: no GPU ids after ':' (write "
            "'127.0.0.2' for a CPU host, or '127.0.0.2:0,1')");
  EXPECT_EQ(riError(":0\n"), "ri:1:1: error: missing host before ':'");
}

TEST(ClusterParserErrorTest, Shorthands) {
  EXPECT_EQ(errorOf(parseLocalShorthand("local:0")),
            "<cluster>:1:7: error: no hosts: 'local:0' asks for no workers (local:N needs N >= 1)");
  EXPECT_EQ(errorOf(parseLocalShorthand("local:four")),
            "<cluster>:1:7: error: bad worker count 'four' in 'local:four' (expected local:N with "
            "N >= 1)");
  EXPECT_EQ(errorOf(parseLocalShorthand("local:4,ps=-1")),
            "<cluster>:1:12: error: 'ps' in 'local:4,ps=-1' must be a whole number >= 0, got '-1'");
  EXPECT_EQ(errorOf(parseLocalShorthand("local:4,devices=0")),
            "<cluster>:1:17: error: 'devices' in 'local:4,devices=0' must be a whole number >= 1, "
            "got '0'");
  EXPECT_EQ(errorOf(parseLocalShorthand("local:4,gpus=2")),
            "<cluster>:1:9: error: unknown option 'gpus=2' in 'local:4,gpus=2' (expected ps=M, "
            "devices=D, devices=gpu, devices=gpu:K or towers=T)");
  EXPECT_EQ(errorOf(parseLocalShorthand("local:1,towers=2")),
            "<cluster>:1:9: error: 'towers' in 'local:1,towers=2' is for GPU workers "
            "(devices=gpu or devices=gpu:K); on CPUs, devices=D gives each worker D towers");
  EXPECT_EQ(errorOf(parseLocalShorthand("local:2,devices=gpu,towers=0")),
            "<cluster>:1:28: error: 'towers' in 'local:2,devices=gpu,towers=0' must be a whole "
            "number >= 1, got '0'");
  EXPECT_EQ(errorOf(parseLocalShorthand("local:1000,devices=gpu,towers=1000")),
            "<cluster>:1:7: error: 'local:1000,devices=gpu,towers=1000' asks for 1000000 worker "
            "devices, more than there are ports on 127.0.0.1");
  for (const char *bad : {"gpux", "gpu:", "gpu:x", "gpu:-1"})
    EXPECT_EQ(errorOf(parseLocalShorthand(std::string("local:2,devices=") + bad)),
              std::string("<cluster>:1:17: error: 'devices' in 'local:2,devices=") + bad +
                  "': expected gpu or gpu:K, got '" + bad + "'");
  EXPECT_EQ(errorOf(parseLocalShorthand("local:4,ps=1,ps=2")),
            "<cluster>:1:14: error: duplicate option 'ps' in 'local:4,ps=1,ps=2'");
  EXPECT_EQ(errorOf(parseLocalShorthand("local:1000,devices=1000")),
            "<cluster>:1:7: error: 'local:1000,devices=1000' asks for 1000000 worker devices, "
            "more than there are ports on 127.0.0.1");
}

TEST(ClusterParserErrorTest, MissingFile) {
  std::string message = errorOf(readClusterSpec("/nonexistent/cluster.yaml"));
  EXPECT_EQ(message.rfind("/nonexistent/cluster.yaml: error: cannot read the cluster file: ", 0),
            0u)
      << message;
}

} // namespace
} // namespace prism::cluster
