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

// gRPC's name of a status code: "DEADLINE_EXCEEDED".
inline const char *statusCodeName(grpc::StatusCode code) {
  switch (code) {
  case grpc::StatusCode::OK:
    return "OK";
  case grpc::StatusCode::CANCELLED:
    return "CANCELLED";
  case grpc::StatusCode::INVALID_ARGUMENT:
    return "INVALID_ARGUMENT";
  case grpc::StatusCode::DEADLINE_EXCEEDED:
    return "DEADLINE_EXCEEDED";
  case grpc::StatusCode::NOT_FOUND:
    return "NOT_FOUND";
  case grpc::StatusCode::ALREADY_EXISTS:
    return "ALREADY_EXISTS";
  case grpc::StatusCode::PERMISSION_DENIED:
    return "PERMISSION_DENIED";
  case grpc::StatusCode::RESOURCE_EXHAUSTED:
    return "RESOURCE_EXHAUSTED";
  case grpc::StatusCode::FAILED_PRECONDITION:
    return "FAILED_PRECONDITION";
  case grpc::StatusCode::ABORTED:
    return "ABORTED";
  case grpc::StatusCode::OUT_OF_RANGE:
    return "OUT_OF_RANGE";
  case grpc::StatusCode::UNIMPLEMENTED:
    return "UNIMPLEMENTED";
  case grpc::StatusCode::INTERNAL:
    return "INTERNAL";
  case grpc::StatusCode::UNAVAILABLE:
    return "UNAVAILABLE";
  case grpc::StatusCode::DATA_LOSS:
    return "DATA_LOSS";
  case grpc::StatusCode::UNAUTHENTICATED:
    return "UNAUTHENTICATED";
  default:
    return "UNKNOWN";
  }
}

// `what failed: DEADLINE_EXCEEDED: the status's message`, with the status's code as the
// error's code.
inline llvm::Error rpcError(const grpc::Status &status, const llvm::Twine &what) {
  return ir::makeError(errorCodeOf(status.error_code()),
                       what + " failed: " + statusCodeName(status.error_code()) + ": " +
                           status.error_message());
}

} // namespace prism::runtime::dist
