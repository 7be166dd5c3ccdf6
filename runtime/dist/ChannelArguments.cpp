#include "runtime/dist/ChannelArguments.h"

#include <grpc/grpc.h>

#include <string>

namespace prism::runtime::dist {

grpc::ChannelArguments clusterChannelArguments(llvm::StringRef service) {
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
  arguments.SetMaxReceiveMessageSize(-1); // whole shards travel in one message
  // gRPC's default reconnect backoff starts at 1 s: a retry would find the channel still failing.
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  arguments.SetInt(GRPC_ARG_ENABLE_RETRIES, 1);
  // UNAVAILABLE: the connection failed or broke before an answer. Retrying cannot apply a push
  // twice: a server refuses a second push of one step from one worker.
  arguments.SetServiceConfigJSON(R"({"methodConfig": [{"name": [{"service": ")" + service.str() +
                                 R"("}], "retryPolicy": {"maxAttempts": 4,
      "initialBackoff": "0.2s", "maxBackoff": "1s", "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]}}]})");
  return arguments;
}

} // namespace prism::runtime::dist
