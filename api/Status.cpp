// Errors as values at the library's edge.
#include <cstdio>

#include "api/Internal.h"
#include "ir/Diagnostic.h"

namespace prism::api {

const char *errorCodeName(ErrorCode code) {
  switch (code) {
  case ErrorCode::Ok:
    return "ok";
  case ErrorCode::Invalid:
    return "invalid";
  case ErrorCode::NotFound:
    return "not found";
  case ErrorCode::Unsupported:
    return "unsupported";
  case ErrorCode::DeadlineExceeded:
    return "deadline exceeded";
  case ErrorCode::Unavailable:
    return "unavailable";
  case ErrorCode::Aborted:
    return "aborted";
  case ErrorCode::PermissionDenied:
    return "permission denied";
  case ErrorCode::ResourceExhausted:
    return "resource exhausted";
  case ErrorCode::Internal:
    return "internal";
  }
  return "unknown";
}

namespace detail {
void failedAccess(const Status &status) {
  std::fprintf(stderr, "prism: the value of a failed Result was read: %s\n",
               status.message().c_str());
  std::abort();
}
} // namespace detail

namespace {
ErrorCode fromInternal(ir::ErrorCode code) {
  switch (code) {
  case ir::ErrorCode::Invalid:
    return ErrorCode::Invalid;
  case ir::ErrorCode::NotFound:
    return ErrorCode::NotFound;
  case ir::ErrorCode::Unsupported:
    return ErrorCode::Unsupported;
  case ir::ErrorCode::DeadlineExceeded:
    return ErrorCode::DeadlineExceeded;
  case ir::ErrorCode::Unavailable:
    return ErrorCode::Unavailable;
  case ir::ErrorCode::Aborted:
    return ErrorCode::Aborted;
  case ir::ErrorCode::PermissionDenied:
    return ErrorCode::PermissionDenied;
  case ir::ErrorCode::ResourceExhausted:
    return ErrorCode::ResourceExhausted;
  case ir::ErrorCode::Internal:
    return ErrorCode::Internal;
  }
  return ErrorCode::Internal;
}
} // namespace

Status toStatus(llvm::Error err) {
  if (!err)
    return Status::success();
  ErrorCode code = fromInternal(ir::errorCode(err));
  return Status(code, llvm::toString(std::move(err)));
}

} // namespace prism::api
