// Errors of the Prism library, as values: a Status (ok, or a code and the message the `prism`
// command would print) and Result<T> (a value, or the Status saying why there is none). No
// exception crosses the library's interface.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace prism::api {

// What kind of failure a Status is; decide on the code, never on the message text.
enum class ErrorCode {
  Ok,
  Invalid,          // bad input: a model, a plan, an option, a tensor, a data file
  NotFound,         // a named thing (file, input, variable, task) does not exist
  Unsupported,      // valid, but this build or machine cannot do it (a device, a kernel)
  DeadlineExceeded, // a bounded wait ran out
  Unavailable,      // a peer could not be reached, or went away
  Aborted,          // the job was stopped (by the coordinator or a failed peer)
  PermissionDenied, // a wrong or missing job token
  ResourceExhausted,
  Internal, // a broken invariant: a bug in Prism
};

// "ok", "invalid", "not found", ...
const char *errorCodeName(ErrorCode code);

class Status {
public:
  // Success.
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status success() { return Status(); }

  bool ok() const { return code_ == ErrorCode::Ok; }
  ErrorCode code() const { return code_; }
  // The whole error as `prism` prints it: `model.prism:6:3: error: ...` and its notes.
  const std::string &message() const { return message_; }

private:
  ErrorCode code_ = ErrorCode::Ok;
  std::string message_;
};

namespace detail {
// Reading the value of a failed Result is a bug in the caller: prints the status and aborts.
[[noreturn]] void failedAccess(const Status &status);
} // namespace detail

// A value of type T, or the Status of why there is none.
template <typename T> class Result {
public:
  Result(T value) : value_(std::move(value)) {}
  // `status` must be an error.
  Result(Status status) : status_(std::move(status)) {
    if (status_.ok())
      status_ = Status(ErrorCode::Internal, "error: a Result was made from a successful Status");
  }

  bool ok() const { return value_.has_value(); }
  const Status &status() const { return status_; }

  T &value() & {
    check();
    return *value_;
  }
  const T &value() const & {
    check();
    return *value_;
  }
  T &&value() && {
    check();
    return std::move(*value_);
  }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T &&operator*() && { return std::move(*this).value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }

private:
  void check() const {
    if (!value_)
      detail::failedAccess(status_);
  }

  std::optional<T> value_;
  Status status_;
};

} // namespace prism::api
