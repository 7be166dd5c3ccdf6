// Gloo's rendezvous store over the coordinator's key-value calls.
#include "runtime/dist/CoordinatorStore.h"

#include <gloo/common/error.h>

#include "ir/Diagnostic.h"

namespace prism::runtime::dist {
namespace {

[[noreturn]] void throwForGloo(llvm::Error error) {
  // Whoever catches it makes an llvm::Error of its own.
  throw gloo::IoException(ir::messageOf(std::move(error)));
}

} // namespace

void CoordinatorStore::set(const std::string &key, const std::vector<char> &data) {
  if (llvm::Error error = client_.set(key, llvm::StringRef(data.data(), data.size())))
    throwForGloo(std::move(error));
}

std::vector<char> CoordinatorStore::get(const std::string &key) {
  llvm::Expected<std::string> value = client_.get(key, getTimeout_);
  if (!value)
    throwForGloo(value.takeError());
  return std::vector<char>(value->begin(), value->end());
}

void CoordinatorStore::wait(const std::vector<std::string> &keys,
                            const std::chrono::milliseconds &timeout) {
  if (llvm::Error error = client_.wait(keys, timeout))
    throwForGloo(std::move(error));
}

} // namespace prism::runtime::dist
