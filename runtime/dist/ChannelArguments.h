// The arguments of a channel from one task of a job to another (a parameter server, a host's
// aggregator): never through an HTTP proxy the environment names, messages of any size, a
// reconnect soon after a failure, and a call that could not reach its server retried a few times
// within its deadline.
#pragma once

#include <grpcpp/support/channel_arguments.h>

#include "llvm/ADT/StringRef.h"

namespace prism::runtime::dist {

// `service`: the full name of the service whose calls are retried ("prism.ps.ParameterServer").
grpc::ChannelArguments clusterChannelArguments(llvm::StringRef service);

} // namespace prism::runtime::dist
