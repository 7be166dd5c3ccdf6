// Gloo's rendezvous store over the coordinator's key-value calls, so that Gloo contexts meet
// across hosts without a shared file system.
#pragma once

#include <chrono>

#include <gloo/rendezvous/store.h>

#include "runtime/dist/CoordinatorClient.h"

namespace prism::runtime::dist {

// Gloo expects a store to throw: failures (a timeout, an aborted job) are thrown as
// gloo::IoException carrying the coordinator client's message. Callers outside Gloo should use
// the CoordinatorClient directly.
class CoordinatorStore : public gloo::rendezvous::Store {
public:
  // `getTimeout` bounds get(), which Gloo calls without one.
  explicit CoordinatorStore(CoordinatorClient &client,
                            std::chrono::milliseconds getTimeout = kDefaultTimeout)
      : client_(client), getTimeout_(getTimeout) {}

  void set(const std::string &key, const std::vector<char> &data) override;
  std::vector<char> get(const std::string &key) override;
  void wait(const std::vector<std::string> &keys) override { wait(keys, kDefaultTimeout); }
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &timeout) override;

private:
  CoordinatorClient &client_;
  std::chrono::milliseconds getTimeout_;
};

} // namespace prism::runtime::dist
