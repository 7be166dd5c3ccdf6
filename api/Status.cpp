// Errors as values at the library's edge.
#include <cstdio>
#include <utility>

#include "api/Internal.h"
#include "ir/Diagnostic.h"

namespace prism::api {

namespace {
// The library's codes are the IR's (ir/Diagnostic.h), plus Ok: one table for both directions.
constexpr std::pair<ErrorCode, ir::ErrorCode> kCodes[] = {
    {ErrorCode::Invalid, ir::ErrorCode::Invalid},
    {ErrorCode::NotFound, ir::ErrorCode::NotFound},
    {ErrorCode::Unsupported, ir::ErrorCode::Unsupported},
    {ErrorCode::DeadlineExceeded, ir::ErrorCode::DeadlineExceeded},
    {ErrorCode::Unavailable, ir::ErrorCode::Unavailable},
    {ErrorCode::Aborted, ir::ErrorCode::Aborted},
    {ErrorCode::PermissionDenied, ir::ErrorCode::PermissionDenied},
    {ErrorCode::ResourceExhausted, ir::ErrorCode::ResourceExhausted},
    {ErrorCode::Internal, ir::ErrorCode::Internal},
};

ErrorCode fromInternal(ir::ErrorCode code) {
  for (const auto &[api, internal] : kCodes)
    if (internal == code)
      return api;
  return ErrorCode::Internal;
}
} // namespace

const char *errorCodeName(ErrorCode code) {
  if (code == ErrorCode::Ok)
    return "ok";
  for (const auto &[api, internal] : kCodes)
    if (api == code)
      return ir::errorCodeName(internal).data(); // the IR's names are literals
  return "unknown";
}

namespace detail {
void failedAccess(const Status &status) {
  std::fprintf(stderr, "prism: the value of a failed Result was read: %s\n",
               status.message().c_str());
  std::abort();
}
} // namespace detail

Status toStatus(llvm::Error err) {
  if (!err)
    return Status::success();
  ErrorCode code = fromInternal(ir::errorCode(err));
  return Status(code, llvm::toString(std::move(err)));
}

} // namespace prism::api
