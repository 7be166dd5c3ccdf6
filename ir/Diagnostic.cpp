// Located errors.
#include "ir/Diagnostic.h"

#include "llvm/Support/raw_ostream.h"

namespace prism::ir {

char LocatedError::ID = 0;

void LocatedError::log(llvm::raw_ostream &os) const {
  if (!file_.empty())
    os << file_ << ":";
  if (loc_.known())
    os << loc_.line << ":" << loc_.column << ":";
  if (!file_.empty() || loc_.known())
    os << " ";
  os << "error: " << message_;
}

llvm::Error makeError(llvm::StringRef file, SourceLoc loc, const llvm::Twine &message) {
  return llvm::make_error<LocatedError>(file.str(), loc, message.str());
}

llvm::Error makeError(const llvm::Twine &message) {
  return llvm::make_error<LocatedError>("", SourceLoc{}, message.str());
}

} // namespace prism::ir
