// Readers of cluster descriptions (YAML, JSON, resource_info, local:N) and their validation.
#include "cluster/ClusterParser.h"

#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

namespace prism::cluster {

namespace {

constexpr llvm::StringLiteral kShorthandSource = "<cluster>";
constexpr llvm::StringLiteral kHostKeys =
    "name, address, devices, ps, bandwidth, base_port, machine";
constexpr llvm::StringLiteral kBandwidthForms =
    "expected bits/s, or a number with a unit bit, kbit, mbit, gbit or tbit, such as 10gbit";
constexpr llvm::StringLiteral kAddressForms =
    "expected an IPv4 literal such as 10.0.0.2, or localhost";
constexpr int kMaxPort = 65535;
// Every task needs a port of its own on its address, so no count may exceed the ports there are.
constexpr int64_t kMaxCount = kMaxPort;

// An IPv4 address a task can listen on and others can reach; `localhost` becomes 127.0.0.1.
// On failure, `problem` says why, in words that follow "bad address 'X' (...)".
std::optional<std::string> normalizeAddress(llvm::StringRef text, std::string &problem) {
  if (text == "localhost")
    return std::string("127.0.0.1");
  llvm::SmallVector<llvm::StringRef, 4> parts;
  text.split(parts, '.', /*MaxSplit=*/-1, /*KeepEmpty=*/true);
  unsigned octets[4] = {0, 0, 0, 0};
  bool wellFormed = parts.size() == 4;
  for (size_t i = 0; wellFormed && i < 4; ++i) {
    llvm::StringRef part = parts[i];
    // Leading zeros are refused: some resolvers read them as octal.
    wellFormed = !part.empty() && part.size() <= 3 && llvm::all_of(part, llvm::isDigit) &&
                 !(part.size() > 1 && part.front() == '0') && !part.getAsInteger(10, octets[i]) &&
                 octets[i] <= 255;
  }
  if (!wellFormed) {
    problem = kAddressForms.str();
    return std::nullopt;
  }
  if (octets[0] == 0) {
    problem = "0.x.x.x is the unspecified network, not a host's own address";
    return std::nullopt;
  }
  if (octets[0] >= 224 && octets[0] <= 239) {
    problem = "a multicast address names no single host";
    return std::nullopt;
  }
  if (octets[0] == 255 && octets[1] == 255 && octets[2] == 255 && octets[3] == 255) {
    problem = "the broadcast address names no single host";
    return std::nullopt;
  }
  return text.str();
}

bool isGoodHostName(llvm::StringRef name) {
  return !name.empty() && llvm::all_of(name, [](char c) {
    return llvm::isAlnum(c) || c == '.' || c == '_' || c == '-';
  });
}

std::optional<int64_t> parseWholeNumber(llvm::StringRef text) {
  bool negative = text.consume_front("-");
  if (text.empty() || text.size() > 12 || !llvm::all_of(text, llvm::isDigit))
    return std::nullopt;
  int64_t value = 0;
  if (text.getAsInteger(10, value))
    return std::nullopt;
  return negative ? -value : value;
}

// Puts the ps default in place once every host is read: one PS task per host when no host says
// how many (as Parallax does), and none on the hosts that are silent when some host does say.
void applyPsDefault(std::vector<Host> &hosts, const std::vector<std::optional<int>> &psGiven) {
  bool anyGiven =
      llvm::any_of(psGiven, [](const std::optional<int> &ps) { return ps.has_value(); });
  for (size_t h = 0; h < hosts.size(); ++h)
    hosts[h].psTasks = psGiven[h] ? *psGiven[h] : (anyGiven ? 0 : 1);
}

// Puts the machine default in place once every host is read: a host that names no machine is on
// the one its address's other hosts name, if any (hosts of one address are one machine).
void applyMachineDefault(std::vector<Host> &hosts) {
  for (Host &host : hosts)
    for (const Host &other : hosts)
      if (host.machine.empty() && other.address == host.address)
        host.machine = other.machine;
}

ir::SourceLoc toLoc(const YAML::Mark &mark) {
  if (mark.is_null() || mark.line < 0 || mark.column < 0)
    return {};
  return {mark.line + 1, mark.column + 1};
}

// Validates a YAML document (or a JSON one, read as the YAML it also is) into a ClusterSpec.
class YamlClusterReader {
public:
  explicit YamlClusterReader(llvm::StringRef file) : file_(file.str()) {}

  llvm::Expected<ClusterSpec> read(const YAML::Node &root) {
    ir::SourceLoc rootLoc = toLoc(root.Mark());
    if (!rootLoc.known())
      rootLoc = {1, 1};
    if (!root.IsDefined() || root.IsNull())
      return error(rootLoc, "no hosts: the cluster description is empty");
    if (!root.IsMap())
      return error(rootLoc, "a cluster description is a map with 'hosts' (and optionally "
                            "'network' and 'port')");

    ClusterSpec spec;
    spec.source = file_;
    std::optional<YAML::Node> hosts;
    ir::SourceLoc hostsLoc;
    uint64_t networkBandwidth = 0;
    std::set<std::string> seen;
    for (const auto &entry : root) {
      auto key = keyOf(entry.first, seen, "at the top level");
      if (!key)
        return key.takeError();
      ir::SourceLoc keyLoc = toLoc(entry.first.Mark());
      ir::SourceLoc valueLoc = valueLocation(entry.second, keyLoc);
      if (*key == "hosts") {
        hosts = entry.second;
        hostsLoc = valueLoc;
      } else if (*key == "network") {
        if (llvm::Error err = readNetwork(entry.second, valueLoc, networkBandwidth))
          return std::move(err);
      } else if (*key == "port") {
        auto port =
            wholeNumber(entry.second, valueLoc, "'port'", 1, kMaxPort, "a port number 1..65535");
        if (!port)
          return port.takeError();
        spec.coordinatorPort = *port;
        spec.coordinatorPortLocation = valueLoc;
      } else {
        return error(keyLoc,
                     "unknown key '" + *key + "' at the top level (expected hosts, network, port)");
      }
    }
    if (!hosts)
      return error(rootLoc, "no hosts: the cluster description has no 'hosts'");
    if (hosts->IsNull() || (hosts->IsSequence() && hosts->size() == 0))
      return error(hostsLoc, "no hosts: 'hosts' is empty");
    if (!hosts->IsSequence())
      return error(hostsLoc, "'hosts' must be a list of hosts");

    std::vector<std::optional<int>> psGiven;
    std::map<std::string, int> firstLineOfName;
    int position = 0;
    for (const YAML::Node &node : *hosts) {
      ++position;
      if (llvm::Error err = readHost(node, position, hostsLoc, spec, psGiven, firstLineOfName))
        return std::move(err);
    }
    applyPsDefault(spec.hosts, psGiven);
    for (Host &host : spec.hosts)
      if (host.bandwidthBitsPerSec == 0)
        host.bandwidthBitsPerSec = networkBandwidth;
    applyMachineDefault(spec.hosts);
    return spec;
  }

private:
  llvm::Error error(ir::SourceLoc loc, const llvm::Twine &message) const {
    return ir::makeError(file_, loc, message);
  }

  // A null value (`ps:` with nothing after it) has no place of its own: use its key's.
  static ir::SourceLoc valueLocation(const YAML::Node &value, ir::SourceLoc keyLoc) {
    ir::SourceLoc loc = toLoc(value.Mark());
    return value.IsNull() || !loc.known() ? keyLoc : loc;
  }

  llvm::Expected<std::string> keyOf(const YAML::Node &key, std::set<std::string> &seen,
                                    const llvm::Twine &where) const {
    if (!key.IsScalar())
      return error(toLoc(key.Mark()), "keys must be plain names " + where);
    std::string name = key.Scalar();
    if (!seen.insert(name).second)
      return error(toLoc(key.Mark()), "duplicate key '" + name + "' " + where);
    return name;
  }

  llvm::Expected<std::string> scalar(const YAML::Node &value, ir::SourceLoc loc,
                                     const llvm::Twine &field) const {
    if (value.IsNull())
      return error(loc, field + " has no value");
    if (!value.IsScalar())
      return error(loc,
                   field + " must be a single value, not a " + (value.IsMap() ? "map" : "list"));
    return value.Scalar();
  }

  llvm::Expected<int> wholeNumber(const YAML::Node &value, ir::SourceLoc loc,
                                  const llvm::Twine &field, int64_t min, int64_t max,
                                  llvm::StringRef expected) const {
    auto text = scalar(value, loc, field);
    if (!text)
      return text.takeError();
    std::optional<int64_t> number = parseWholeNumber(*text);
    if (!number || *number < min || *number > max)
      return error(loc, field + " must be " + expected + ", got '" + *text + "'");
    return static_cast<int>(*number);
  }

  llvm::Expected<uint64_t> bandwidth(const YAML::Node &value, ir::SourceLoc loc,
                                     const llvm::Twine &owner) const {
    auto text = scalar(value, loc, "'bandwidth' of " + owner);
    if (!text)
      return text.takeError();
    std::optional<uint64_t> bits = parseBandwidth(*text);
    if (!bits)
      return error(loc, "bad bandwidth '" + *text + "' in 'bandwidth' of " + owner + " (" +
                            kBandwidthForms + ")");
    return *bits;
  }

  llvm::Error readNetwork(const YAML::Node &network, ir::SourceLoc loc, uint64_t &bandwidthBits) {
    if (!network.IsMap())
      return error(loc, "'network' must be a map such as {bandwidth: 10gbit}");
    std::set<std::string> seen;
    for (const auto &entry : network) {
      auto key = keyOf(entry.first, seen, "in network");
      if (!key)
        return key.takeError();
      ir::SourceLoc keyLoc = toLoc(entry.first.Mark());
      if (*key != "bandwidth")
        return error(keyLoc, "unknown key '" + *key + "' in network (expected bandwidth)");
      auto bits = bandwidth(entry.second, valueLocation(entry.second, keyLoc), "network");
      if (!bits)
        return bits.takeError();
      bandwidthBits = *bits;
    }
    return llvm::Error::success();
  }

  llvm::Error readDevices(const YAML::Node &list, ir::SourceLoc loc, const std::string &label,
                          Host &host) {
    if (!list.IsNull() && !list.IsSequence())
      return error(loc, "'devices' of " + label + " must be a list such as [cpu:0, gpu:1]");
    if (list.IsNull() || list.size() == 0)
      return error(loc, label + " has no worker device: 'devices' is empty (give at least one, "
                                "such as [cpu:0])");
    for (const YAML::Node &item : list) {
      ir::SourceLoc itemLoc = valueLocation(item, loc);
      auto text = scalar(item, itemLoc, "a device in 'devices' of " + label);
      if (!text)
        return text.takeError();
      std::optional<Device> device = parseDevice(*text);
      if (!device)
        return error(itemLoc, "bad device '" + *text + "' in 'devices' of " + label +
                                  " (expected cpu:N or gpu:N)");
      if (llvm::is_contained(host.devices, *device))
        return error(itemLoc, "duplicate device '" + *text + "' in 'devices' of " + label);
      host.devices.push_back(*device);
    }
    return llvm::Error::success();
  }

  llvm::Expected<std::string> machineName(const YAML::Node &value, ir::SourceLoc loc,
                                          const std::string &label) const {
    auto machine = scalar(value, loc, "'machine' of " + label);
    if (machine && !isGoodHostName(*machine))
      return error(loc, "bad machine name '" + *machine + "' in " + label +
                            " (use letters, digits, '.', '_' and '-')");
    return machine;
  }

  // Hosts of one address are one machine: where `host` and one read before it both name it,
  // the names agree.
  llvm::Error sameMachineAtOneAddress(const std::vector<Host> &before, const Host &host,
                                      const std::string &label, ir::SourceLoc machineLoc) const {
    for (const Host &other : before)
      if (other.address == host.address && !other.machine.empty() && !host.machine.empty() &&
          other.machine != host.machine)
        return error(machineLoc, "machine '" + host.machine + "' of " + label +
                                     " differs from machine '" + other.machine + "' of host '" +
                                     other.name + "' at the same address " + host.address);
    return llvm::Error::success();
  }

  llvm::Error readHost(const YAML::Node &node, int position, ir::SourceLoc hostsLoc,
                       ClusterSpec &spec, std::vector<std::optional<int>> &psGiven,
                       std::map<std::string, int> &firstLineOfName) {
    ir::SourceLoc hostLoc = valueLocation(node, hostsLoc);
    std::string label = "host #" + std::to_string(position);
    if (!node.IsMap())
      return error(hostLoc, label + " must be a map with keys " + kHostKeys);
    // Name the host in messages by its name when it has a usable one, whatever the key order.
    for (const auto &entry : node)
      if (entry.first.IsScalar() && entry.first.Scalar() == "name" && entry.second.IsScalar() &&
          isGoodHostName(entry.second.Scalar()))
        label = "host '" + entry.second.Scalar() + "'";

    Host host;
    std::optional<int> ps;
    ir::SourceLoc basePortLoc, machineLoc;
    bool hasName = false, hasAddress = false, hasDevices = false;
    std::set<std::string> seen;
    for (const auto &entry : node) {
      auto key = keyOf(entry.first, seen, "in " + label);
      if (!key)
        return key.takeError();
      ir::SourceLoc keyLoc = toLoc(entry.first.Mark());
      const YAML::Node &value = entry.second;
      ir::SourceLoc loc = valueLocation(value, keyLoc);
      if (*key == "name") {
        auto name = scalar(value, loc, "'name' of " + label);
        if (!name)
          return name.takeError();
        if (!isGoodHostName(*name))
          return error(loc,
                       "bad host name '" + *name + "' (use letters, digits, '.', '_' and '-')");
        auto [it, inserted] = firstLineOfName.try_emplace(*name, loc.line);
        if (!inserted)
          return error(loc, "duplicate host name '" + *name + "' (first at line " +
                                std::to_string(it->second) + ")");
        host.name = *name;
        hasName = true;
      } else if (*key == "address") {
        auto address = scalar(value, loc, "'address' of " + label);
        if (!address)
          return address.takeError();
        std::string problem;
        std::optional<std::string> normalized = normalizeAddress(*address, problem);
        if (!normalized)
          return error(loc, "bad address '" + *address + "' in " + label + " (" + problem + ")");
        host.address = *normalized;
        hasAddress = true;
      } else if (*key == "devices") {
        if (llvm::Error err = readDevices(value, loc, label, host))
          return err;
        hasDevices = true;
      } else if (*key == "ps") {
        auto count =
            wholeNumber(value, loc, "'ps' of " + label, 0, kMaxCount, "a whole number >= 0");
        if (!count)
          return count.takeError();
        ps = *count;
      } else if (*key == "bandwidth") {
        auto bits = bandwidth(value, loc, label);
        if (!bits)
          return bits.takeError();
        host.bandwidthBitsPerSec = *bits;
      } else if (*key == "base_port") {
        auto port = wholeNumber(value, loc, "'base_port' of " + label, 1, kMaxPort,
                                "a port number 1..65535");
        if (!port)
          return port.takeError();
        host.basePort = *port;
        basePortLoc = loc;
      } else if (*key == "machine") {
        auto machine = machineName(value, loc, label);
        if (!machine)
          return machine.takeError();
        host.machine = *machine;
        machineLoc = loc;
      } else {
        return error(keyLoc,
                     "unknown key '" + *key + "' in " + label + " (expected " + kHostKeys + ")");
      }
    }
    if (!hasName)
      return error(hostLoc, label + " has no 'name'");
    if (!hasAddress)
      return error(hostLoc, label + " has no 'address'");
    if (!hasDevices)
      host.devices.push_back(Device{DeviceKind::Cpu, 0});
    if (llvm::Error err = sameMachineAtOneAddress(spec.hosts, host, label, machineLoc))
      return err;
    spec.hosts.push_back(std::move(host));
    spec.hostLocations.push_back(hostLoc);
    spec.basePortLocations.push_back(basePortLoc);
    psGiven.push_back(ps);
    return llvm::Error::success();
  }

  std::string file_;
};

llvm::Expected<YAML::Node> loadYaml(llvm::StringRef text, llvm::StringRef fileName,
                                    llvm::StringRef language) {
  try {
    return YAML::Load(text.str());
  } catch (const YAML::Exception &e) {
    return ir::makeError(fileName, toLoc(e.mark), language + " syntax error: " + e.msg);
  }
}

llvm::Expected<ClusterSpec> readYamlDocument(llvm::StringRef text, llvm::StringRef fileName,
                                             llvm::StringRef language) {
  auto root = loadYaml(text, fileName, language);
  if (!root)
    return root.takeError();
  try {
    return YamlClusterReader(fileName).read(*root);
  } catch (const YAML::Exception &e) {
    return ir::makeError(fileName, toLoc(e.mark), "cannot read the cluster: " + e.msg);
  }
}

// nlohmann reports the 1-based index of the last byte it read; the error is at that byte.
ir::SourceLoc locationOfByte(llvm::StringRef text, size_t byte) {
  size_t offset = std::min(byte == 0 ? 0 : byte - 1, text.size());
  llvm::StringRef before = text.take_front(offset);
  int line = 1 + static_cast<int>(before.count('\n'));
  size_t lineStart = before.rfind('\n');
  size_t column = lineStart == llvm::StringRef::npos ? offset + 1 : offset - lineStart;
  return {line, static_cast<int>(column)};
}

// "[json.exception.parse_error.101] parse error at line 3, column 7: syntax error while parsing
// object separator - unexpected '}'" -> "syntax error while parsing object separator - ...":
// the place is reported by our own file:line:column.
std::string jsonErrorText(llvm::StringRef what) {
  size_t colon = what.find(": ");
  return colon == llvm::StringRef::npos ? what.str() : what.drop_front(colon + 2).str();
}

// `hosts:` or `network: {...}`: a name of letters, digits and '_' starting with a letter, then ':'
// and a space or the end of the line. Resource_info lines (`10.0.0.1`, `host:0,1`) never are.
bool isYamlKeyLine(llvm::StringRef line) {
  if (line.startswith("---") || line.startswith("-") || line.startswith("\"") ||
      line.startswith("'"))
    return true;
  llvm::StringRef key = line.take_while([](char c) { return llvm::isAlnum(c) || c == '_'; });
  if (key.empty() || !llvm::isAlpha(key.front()))
    return false;
  llvm::StringRef rest = line.drop_front(key.size());
  return rest == ":" || rest.startswith(": ") || rest.startswith(":\t");
}

// `gpu` (nothing shared) or `gpu:K` (every group on GPU K); false for anything else.
bool parseSharedGpu(llvm::StringRef value, std::optional<int64_t> &shared) {
  llvm::StringRef index = value.drop_front(3);
  if (index.empty())
    return true;
  shared = index.consume_front(":") ? parseWholeNumber(index) : std::nullopt;
  return shared && *shared >= 0 && *shared <= kMaxCount;
}

} // namespace

ClusterFormat detectClusterFormat(llvm::StringRef fileName, llvm::StringRef text) {
  std::string extension = llvm::sys::path::extension(fileName).lower();
  if (extension == ".json")
    return ClusterFormat::Json;
  if (extension == ".yaml" || extension == ".yml")
    return ClusterFormat::Yaml;
  if (text.ltrim().startswith("{"))
    return ClusterFormat::Json;
  llvm::SmallVector<llvm::StringRef, 16> lines;
  text.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    line = line.split('#').first.trim();
    if (!line.empty())
      return isYamlKeyLine(line) ? ClusterFormat::Yaml : ClusterFormat::ResourceInfo;
  }
  return ClusterFormat::ResourceInfo;
}

llvm::Expected<ClusterSpec> parseClusterYaml(llvm::StringRef text, llvm::StringRef fileName) {
  return readYamlDocument(text, fileName, "YAML");
}

llvm::Expected<ClusterSpec> parseClusterJson(llvm::StringRef text, llvm::StringRef fileName) {
  // nlohmann judges the syntax (YAML would accept more than JSON does); the checked text is then
  // read as YAML, of which JSON is a subset, because only yaml-cpp tells where each value is.
  try {
    nlohmann::json document = nlohmann::json::parse(text.begin(), text.end());
    (void)document;
  } catch (const nlohmann::json::parse_error &e) {
    return ir::makeError(fileName, locationOfByte(text, e.byte), "JSON " + jsonErrorText(e.what()));
  } catch (const nlohmann::json::exception &e) {
    return ir::makeError(fileName, {}, "JSON error: " + jsonErrorText(e.what()));
  }
  return readYamlDocument(text, fileName, "JSON");
}

llvm::Expected<ClusterSpec> parseResourceInfo(llvm::StringRef text, llvm::StringRef fileName) {
  ClusterSpec spec;
  spec.source = fileName.str();
  std::map<std::string, int> firstLineOfHost;
  llvm::SmallVector<llvm::StringRef, 16> lines;
  text.split(lines, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    int lineNumber = static_cast<int>(i) + 1;
    llvm::StringRef line = lines[i];
    auto columnOf = [&](llvm::StringRef piece) {
      return ir::SourceLoc{lineNumber, static_cast<int>(piece.data() - line.data()) + 1};
    };
    llvm::StringRef content = line.split('#').first.rtrim(" \t\r");
    if (content.trim().empty())
      continue;
    auto [hostPart, gpuPart] = content.split(':');
    bool hasGpuList = content.contains(':');
    llvm::StringRef hostText = hostPart.trim();
    if (hostText.empty())
      return ir::makeError(fileName, columnOf(content.ltrim()), "missing host before ':'");
    ir::SourceLoc hostLoc = columnOf(hostText);
    std::string problem;
    std::optional<std::string> address = normalizeAddress(hostText, problem);
    if (!address)
      return ir::makeError(fileName, hostLoc,
                           "bad address '" + hostText + "' for a host (" + problem + ")");
    auto [it, inserted] = firstLineOfHost.try_emplace(hostText.str(), lineNumber);
    if (!inserted)
      return ir::makeError(fileName, hostLoc,
                           "duplicate host '" + hostText + "' (first at line " +
                               std::to_string(it->second) + ")");

    Host host;
    host.name = hostText.str();
    host.address = *address;
    host.psTasks = 1;
    if (!hasGpuList) {
      host.devices.push_back(Device{DeviceKind::Cpu, 0});
    } else if (gpuPart.trim().empty()) {
      return ir::makeError(fileName, columnOf(gpuPart),
                           "host '" + hostText +
                               "' has no worker device: no GPU ids after ':' (write '" + hostText +
                               "' for a CPU host, or '" + hostText + ":0,1')");
    } else {
      llvm::SmallVector<llvm::StringRef, 8> ids;
      gpuPart.split(ids, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/true);
      for (llvm::StringRef id : ids) {
        llvm::StringRef idText = id.trim();
        ir::SourceLoc idLoc = columnOf(idText.empty() ? id : idText);
        std::optional<Device> device = parseDevice(("gpu:" + idText).str());
        if (!device)
          return ir::makeError(fileName, idLoc,
                               "bad GPU id '" + idText + "' for host '" + hostText +
                                   "' (expected a number such as 0)");
        if (llvm::is_contained(host.devices, *device))
          return ir::makeError(fileName, idLoc,
                               "duplicate GPU id '" + idText + "' for host '" + hostText + "'");
        host.devices.push_back(*device);
      }
    }
    spec.hosts.push_back(std::move(host));
    spec.hostLocations.push_back(hostLoc);
  }
  if (spec.hosts.empty())
    return ir::makeError(fileName, ir::SourceLoc{1, 1},
                         "no hosts: the resource_info file lists none");
  return spec;
}

llvm::Expected<ClusterSpec> parseClusterText(llvm::StringRef text, llvm::StringRef fileName) {
  switch (detectClusterFormat(fileName, text)) {
  case ClusterFormat::Yaml:
    return parseClusterYaml(text, fileName);
  case ClusterFormat::Json:
    return parseClusterJson(text, fileName);
  case ClusterFormat::ResourceInfo:
    return parseResourceInfo(text, fileName);
  }
  llvm_unreachable("unknown cluster format");
}

llvm::Expected<ClusterSpec> readClusterFile(llvm::StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return ir::makeError(path, {}, "cannot read the cluster file: " + buffer.getError().message());
  return parseClusterText((*buffer)->getBuffer(), path);
}

bool isLocalShorthand(llvm::StringRef spec) {
  return spec.startswith("local:");
}

namespace {

// `workers` groups on 127.0.0.1, each with `devices` devices: cpu:0 .., or its GPU (gpu:h, or
// `sharedGpu`) listed that many times (towers sharing it); `psTasks` parameter servers spread
// evenly, the first hosts taking one more when they don't divide.
ClusterSpec localGroups(int64_t workers, int64_t devices, bool gpus,
                        std::optional<int64_t> sharedGpu, int64_t psTasks) {
  ClusterSpec cluster;
  cluster.source = kShorthandSource.str();
  for (int64_t h = 0; h < workers; ++h) {
    Host host;
    host.name = "local" + std::to_string(h);
    host.address = "127.0.0.1";
    for (int64_t d = 0; d < devices; ++d)
      host.devices.push_back(
          gpus ? Device{DeviceKind::Gpu, static_cast<int>(sharedGpu ? *sharedGpu : h)}
               : Device{DeviceKind::Cpu, static_cast<int>(d)});
    host.psTasks = static_cast<int>(psTasks / workers + (h < psTasks % workers ? 1 : 0));
    cluster.hosts.push_back(std::move(host));
  }
  return cluster;
}

} // namespace

llvm::Expected<ClusterSpec> parseLocalShorthand(llvm::StringRef spec) {
  auto error = [&](llvm::StringRef at, const llvm::Twine &message) {
    ir::SourceLoc loc{1, static_cast<int>(at.data() - spec.data()) + 1};
    return ir::makeError(kShorthandSource, loc, message);
  };
  llvm::StringRef rest = spec;
  if (!rest.consume_front("local:"))
    return error(spec, "'" + spec + "' is not a local:N shorthand");
  llvm::SmallVector<llvm::StringRef, 4> parts;
  rest.split(parts, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/true);

  std::optional<int64_t> workers = parseWholeNumber(parts[0]);
  if (!workers || *workers < 0)
    return error(parts[0], "bad worker count '" + parts[0] + "' in '" + spec +
                               "' (expected local:N with N >= 1)");
  if (*workers > kMaxCount)
    return error(parts[0], "too many workers: " + parts[0] + " in '" + spec + "' (at most " +
                               llvm::Twine(kMaxCount) + ": each task takes a port)");
  if (*workers == 0)
    return error(parts[0], "no hosts: '" + spec + "' asks for no workers (local:N needs N >= 1)");
  int64_t psTasks = 0, devicesPerWorker = 1, towers = 0;
  // devices=gpu: group h has gpu:h; devices=gpu:K: every group shares gpu:K; towers=T: its
  // worker runs T in-graph towers on that GPU (the GPU listed T times).
  bool gpus = false;
  std::optional<int64_t> sharedGpu;
  std::set<std::string> seen;
  for (llvm::StringRef option : llvm::makeArrayRef(parts).drop_front()) {
    auto [name, value] = option.split('=');
    if ((name != "ps" && name != "devices" && name != "towers") || !option.contains('='))
      return error(option, "unknown option '" + option + "' in '" + spec +
                               "' (expected ps=M, devices=D, devices=gpu, devices=gpu:K or "
                               "towers=T)");
    if (!seen.insert(name.str()).second)
      return error(option, "duplicate option '" + name + "' in '" + spec + "'");
    if (name == "devices" && value.startswith("gpu")) {
      gpus = true;
      if (!parseSharedGpu(value, sharedGpu))
        return error(value,
                     "'devices' in '" + spec + "': expected gpu or gpu:K, got '" + value + "'");
      continue;
    }
    std::optional<int64_t> number = parseWholeNumber(value);
    int64_t least = name == "ps" ? 0 : 1;
    if (!number || *number < least || *number > kMaxCount)
      return error(value, "'" + name + "' in '" + spec + "' must be a whole number >= " +
                              llvm::Twine(least) + ", got '" + value + "'");
    (name == "ps" ? psTasks : name == "towers" ? towers : devicesPerWorker) = *number;
  }
  if (towers > 0 && !gpus) {
    llvm::StringRef at = spec.substr(spec.find("towers="));
    return error(at, "'towers' in '" + spec +
                         "' is for GPU workers (devices=gpu or devices=gpu:K); on CPUs, "
                         "devices=D gives each worker D towers");
  }
  if (towers > 0)
    devicesPerWorker = towers;
  if (*workers * devicesPerWorker > kMaxCount)
    return error(parts[0], "'" + spec + "' asks for " + llvm::Twine(*workers * devicesPerWorker) +
                               " worker devices, more than there are ports on 127.0.0.1");

  return localGroups(*workers, devicesPerWorker, gpus, sharedGpu, psTasks);
}

llvm::Expected<ClusterSpec> readClusterSpec(llvm::StringRef shorthandOrPath) {
  if (isLocalShorthand(shorthandOrPath))
    return parseLocalShorthand(shorthandOrPath);
  return readClusterFile(shorthandOrPath);
}

llvm::Expected<Cluster> loadCluster(llvm::StringRef shorthandOrPath, Replication replication) {
  auto spec = readClusterSpec(shorthandOrPath);
  if (!spec)
    return spec.takeError();
  return Cluster::resolve(*spec, replication);
}

} // namespace prism::cluster
