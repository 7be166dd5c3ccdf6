// Errors as values: every error Prism makes is one `ir::LocatedError` with a code, a place in a
// source file (when it has one), a message and notes. It prints once, as
// `file:line:column: error: message` followed by `  note: ...` lines; wrapping an error adds
// context or a note to it, never a second `error:`.
#pragma once

#include <string>
#include <vector>

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

namespace prism::ir {

// 1-based line and column; line 0 means "no location" (made by a pass, not parsed).
struct SourceLoc {
  int line = 0;
  int column = 0;
  bool known() const { return line > 0; }
};

// What kind of failure an error is: callers decide on the code, never on the message text.
// RPC failures keep the meaning of their status code.
enum class ErrorCode : uint8_t {
  Invalid,          // bad input: a model, a plan, a flag, a data file (the default)
  NotFound,         // a named thing (file, value, task, key) does not exist
  Unsupported,      // valid, but this build or machine cannot do it (a device, a kernel)
  DeadlineExceeded, // a bounded wait ran out
  Unavailable,      // a peer could not be reached, or went away
  Aborted,          // the job was stopped (by the coordinator or a failed peer)
  PermissionDenied, // a wrong or missing job token
  ResourceExhausted,
  Internal, // a broken invariant: a bug in Prism
};
llvm::StringRef errorCodeName(ErrorCode code);

class LocatedError : public llvm::ErrorInfo<LocatedError> {
public:
  static char ID;
  LocatedError(ErrorCode code, std::string file, SourceLoc loc, std::string message)
      : code_(code), file_(std::move(file)), loc_(loc), message_(std::move(message)) {}
  LocatedError(std::string file, SourceLoc loc, std::string message)
      : LocatedError(ErrorCode::Invalid, std::move(file), loc, std::move(message)) {}

  ErrorCode code() const { return code_; }
  const std::string &file() const { return file_; }
  SourceLoc loc() const { return loc_; }
  bool located() const { return !file_.empty() || loc_.known(); }
  // The message alone: no place, no `error:`, no notes.
  const std::string &text() const { return message_; }
  const std::vector<std::string> &notes() const { return notes_; }

  void setLocation(std::string file, SourceLoc loc) {
    file_ = std::move(file);
    loc_ = loc;
  }
  void setText(std::string text) { message_ = std::move(text); }
  void addNote(std::string note) { notes_.push_back(std::move(note)); }

  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override { return llvm::inconvertibleErrorCode(); }

private:
  ErrorCode code_;
  std::string file_;
  SourceLoc loc_;
  std::string message_;
  std::vector<std::string> notes_;
};

// `file:line:column: error: message` (file and location omitted when unknown).
llvm::Error makeError(llvm::StringRef file, SourceLoc loc, const llvm::Twine &message);
// A plain error with no location.
llvm::Error makeError(const llvm::Twine &message);
// An error of a given code.
llvm::Error makeError(ErrorCode code, const llvm::Twine &message);

// Wrapping, each keeping the code, the place and the notes of `err` (an error of another kind
// is first made a LocatedError with its message):
// `context: message`, e.g. withContext(err, "variable 'w'") -> `error: variable 'w': ...`.
llvm::Error withContext(llvm::Error err, const llvm::Twine &context);
// Gives `err` a place when it has none; when it has one, the new place becomes a note.
llvm::Error withLocation(llvm::Error err, llvm::StringRef file, SourceLoc loc);
// Adds `note: text` below the message.
llvm::Error withNote(llvm::Error err, const llvm::Twine &note);

// The code of an error (Invalid for errors of other kinds); `err` is left as it was.
ErrorCode errorCode(const llvm::Error &err);
// The message alone (see LocatedError::text), consuming the error; for messages that travel
// as text (an RPC status, an exception of a library), where the receiver makes its own error.
std::string messageOf(llvm::Error err);

} // namespace prism::ir
