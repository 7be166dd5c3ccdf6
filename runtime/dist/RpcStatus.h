// gRPC statuses as Prism errors: the status code becomes the error's code (so callers decide on
// codes, not on message text), and the message names the call and the peer.
#pragma once

#include <grpcpp/support/status.h>

#include "ir/Diagnostic.h"

namespace prism::runtime::dist {

inline ir::ErrorCode errorCodeOf(grpc::StatusCode code) {
  switch (code) {
  case grpc::StatusCode::DEADLINE_EXCEEDED:
    return ir::ErrorCode::DeadlineExceeded;
  case grpc::StatusCode::UNAVAILABLE:
  case grpc::StatusCode::CANCELLED:
    return ir::ErrorCode::Unavailable;
  case grpc::StatusCode::ABORTED:
    return ir::ErrorCode::Aborted;
  case grpc::StatusCode::NOT_FOUND:
    return ir::ErrorCode::NotFound;
  case grpc::StatusCode::PERMISSION_DENIED:
  case grpc::StatusCode::UNAUTHENTICATED:
    return ir::ErrorCode::PermissionDenied;
  case grpc::StatusCode::RESOURCE_EXHAUSTED:
    return ir::ErrorCode::ResourceExhausted;
  case grpc::StatusCode::UNIMPLEMENTED:
    return ir::ErrorCode::Unsupported;
  case grpc::StatusCode::INTERNAL:
  case grpc::StatusCode::DATA_LOSS:
  case grpc::StatusCode::UNKNOWN:
    return ir::ErrorCode::Internal;
  default:
    return ir::ErrorCode::Invalid;
  }
}

// `what failed (deadline exceeded): the status's message`, with the status's code.
inline llvm::Error rpcError(const grpc::Status &status, const llvm::Twine &what) {
  ir::ErrorCode code = errorCodeOf(status.error_code());
  return ir::makeError(code, what + " failed (" + ir::errorCodeName(code) +
                                 "): " + status.error_message());
}

} // namespace prism::runtime::dist
