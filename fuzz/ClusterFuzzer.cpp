// libFuzzer target: cluster descriptions (YAML, JSON, Parallax's resource_info, and the
// `local:N,ps=M,devices=D` shorthand), parsed and resolved into tasks and ports with both
// replications. Any bytes give a cluster or an error, never a crash or a sanitizer report.
#include <cstddef>
#include <cstdint>

#include "cluster/Cluster.h"
#include "cluster/ClusterParser.h"

namespace {

void resolve(llvm::Expected<prism::cluster::ClusterSpec> spec) {
  if (!spec) {
    llvm::consumeError(spec.takeError());
    return;
  }
  for (auto replication :
       {prism::cluster::Replication::BetweenGraph, prism::cluster::Replication::InGraph}) {
    auto cluster = prism::cluster::Cluster::resolve(*spec, replication);
    if (!cluster)
      llvm::consumeError(cluster.takeError());
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  resolve(prism::cluster::parseClusterText(text, "fuzz.yaml"));
  if (prism::cluster::isLocalShorthand(text))
    resolve(prism::cluster::parseLocalShorthand(text));
  return 0;
}
