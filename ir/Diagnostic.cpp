// Errors as values: making, wrapping and printing them.
#include "ir/Diagnostic.h"

#include "llvm/Support/raw_ostream.h"

namespace prism::ir {

char LocatedError::ID = 0;

llvm::StringRef errorCodeName(ErrorCode code) {
  switch (code) {
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
  return "invalid";
}

void LocatedError::log(llvm::raw_ostream &os) const {
  if (!file_.empty())
    os << file_ << ":";
  if (loc_.known())
    os << loc_.line << ":" << loc_.column << ":";
  if (located())
    os << " ";
  os << "error: " << message_;
  for (const std::string &note : notes_)
    os << "\n  note: " << note;
}

llvm::Error makeError(llvm::StringRef file, SourceLoc loc, const llvm::Twine &message) {
  return llvm::make_error<LocatedError>(file.str(), loc, message.str());
}

llvm::Error makeError(const llvm::Twine &message) {
  return llvm::make_error<LocatedError>("", SourceLoc{}, message.str());
}

llvm::Error makeError(ErrorCode code, const llvm::Twine &message) {
  return llvm::make_error<LocatedError>(code, "", SourceLoc{}, message.str());
}

namespace {

// Applies `edit` to the LocatedError in `err` (making one of any other error).
template <typename Edit> llvm::Error editError(llvm::Error err, Edit edit) {
  if (!err)
    return err;
  return llvm::handleErrors(
      std::move(err),
      [&](std::unique_ptr<LocatedError> e) -> llvm::Error {
        edit(*e);
        return llvm::Error(std::move(e));
      },
      [&](const llvm::ErrorInfoBase &other) -> llvm::Error {
        auto e = std::make_unique<LocatedError>("", SourceLoc{}, other.message());
        edit(*e);
        return llvm::Error(std::move(e));
      });
}

std::string placeText(llvm::StringRef file, SourceLoc loc) {
  std::string text = file.str();
  if (loc.known())
    text += (text.empty() ? "" : ":") + std::to_string(loc.line) + ":" + std::to_string(loc.column);
  return text;
}

} // namespace

llvm::Error withContext(llvm::Error err, const llvm::Twine &context) {
  std::string prefix = context.str() + ": ";
  return editError(std::move(err), [&](LocatedError &e) {
    if (!llvm::StringRef(e.text()).startswith(prefix))
      e.setText(prefix + e.text());
  });
}

llvm::Error withLocation(llvm::Error err, llvm::StringRef file, SourceLoc loc) {
  return editError(std::move(err), [&](LocatedError &e) {
    if (!e.located())
      e.setLocation(file.str(), loc);
    else if (!file.empty() || loc.known())
      e.addNote("from " + placeText(file, loc));
  });
}

llvm::Error withNote(llvm::Error err, const llvm::Twine &note) {
  return editError(std::move(err), [&](LocatedError &e) { e.addNote(note.str()); });
}

ErrorCode errorCode(const llvm::Error &err) {
  // llvm::Error offers no const inspection; its payload is an ErrorInfoBase we can test.
  const llvm::ErrorInfoBase *payload = nullptr;
  llvm::Error &mutableErr = const_cast<llvm::Error &>(err);
  mutableErr = llvm::handleErrors(std::move(mutableErr),
                                  [&](std::unique_ptr<llvm::ErrorInfoBase> e) -> llvm::Error {
                                    payload = e.get();
                                    return llvm::Error(std::move(e));
                                  });
  if (payload && payload->isA<LocatedError>())
    return static_cast<const LocatedError *>(payload)->code();
  return ErrorCode::Invalid;
}

std::string messageOf(llvm::Error err) {
  std::string text;
  llvm::handleAllErrors(
      std::move(err), [&](const LocatedError &e) { text = e.text(); },
      [&](const llvm::ErrorInfoBase &e) { text = e.message(); });
  return text;
}

} // namespace prism::ir
