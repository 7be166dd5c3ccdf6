// Source locations and located errors: every parse or verify error names file:line:column.
#pragma once

#include <string>

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::ir {

// 1-based line and column; line 0 means "no location" (made by a pass, not parsed).
struct SourceLoc {
  int line = 0;
  int column = 0;
  bool known() const { return line > 0; }
};

// An error with a place in a source file. Its message is the whole diagnostic line
// `file:line:column: error: what`, so callers print `toString(err)` as is.
class LocatedError : public llvm::ErrorInfo<LocatedError> {
public:
  static char ID;
  LocatedError(std::string file, SourceLoc loc, std::string message)
      : file_(std::move(file)), loc_(loc), message_(std::move(message)) {}

  const std::string &file() const { return file_; }
  SourceLoc loc() const { return loc_; }
  const std::string &text() const { return message_; }

  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override { return llvm::inconvertibleErrorCode(); }

private:
  std::string file_;
  SourceLoc loc_;
  std::string message_;
};

// `file:line:column: error: message` (file and location omitted when unknown).
llvm::Error makeError(llvm::StringRef file, SourceLoc loc, const llvm::Twine &message);
// A plain error with no location.
llvm::Error makeError(const llvm::Twine &message);

} // namespace prism::ir
