// Readers of cluster descriptions: YAML and JSON files, Parallax's resource_info files and the
// `local:N` shorthand. Each returns a ClusterSpec with defaults applied, or a located error.
#pragma once

#include "cluster/Cluster.h"

namespace prism::cluster {

enum class ClusterFormat { Yaml, Json, ResourceInfo };

// JSON for `*.json` or text whose first non-space character is `{`; YAML for `*.yaml`/`*.yml`
// or text whose first line that is not blank or a comment is `---` or has a `key:`; otherwise
// Parallax's resource_info (whose lines are `host` or `host:0,1`).
ClusterFormat detectClusterFormat(llvm::StringRef fileName, llvm::StringRef text);

llvm::Expected<ClusterSpec> parseClusterYaml(llvm::StringRef text, llvm::StringRef fileName);
llvm::Expected<ClusterSpec> parseClusterJson(llvm::StringRef text, llvm::StringRef fileName);
llvm::Expected<ClusterSpec> parseResourceInfo(llvm::StringRef text, llvm::StringRef fileName);
// Any of the three, by detectClusterFormat().
llvm::Expected<ClusterSpec> parseClusterText(llvm::StringRef text, llvm::StringRef fileName);
llvm::Expected<ClusterSpec> readClusterFile(llvm::StringRef path);

// `local:N[,ps=M][,devices=D]`: N hosts named local0..local<N-1>, all on 127.0.0.1, each with D
// cpu devices (default 1), and M parameter-server tasks (default 0) spread over them.
bool isLocalShorthand(llvm::StringRef spec);
llvm::Expected<ClusterSpec> parseLocalShorthand(llvm::StringRef spec);

// What a `--cluster` option names: a shorthand, or a file in any of the formats.
llvm::Expected<ClusterSpec> readClusterSpec(llvm::StringRef shorthandOrPath);
llvm::Expected<Cluster> loadCluster(llvm::StringRef shorthandOrPath, Replication replication);

} // namespace prism::cluster
