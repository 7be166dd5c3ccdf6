// Injected faults: their text form and their signals.
#include "runtime/job/InjectedFault.h"

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "ir/Diagnostic.h"

namespace prism::runtime::job {
namespace {

constexpr const char *kVariable = "PRISM_INJECT_FAULTS";

struct KindName {
  InjectedFault::Kind kind;
  const char *name;
};
constexpr KindName kKinds[] = {{InjectedFault::Kind::Kill, "kill"},
                               {InjectedFault::Kind::Stop, "stop"},
                               {InjectedFault::Kind::KillCheckpoint, "kill-in-checkpoint"},
                               {InjectedFault::Kind::Slow, "slow"}};

} // namespace

std::string InjectedFault::str(bool withTask) const {
  std::string text = withTask ? task + ":" : "";
  for (const KindName &k : kKinds)
    if (k.kind == kind)
      text += k.name;
  return text + "@" + std::to_string(step);
}

void InjectedFault::fire() const {
  if (kind == Kind::Slow) {
    std::this_thread::sleep_for(std::chrono::milliseconds(step));
    return;
  }
  raise(kind == Kind::Stop ? SIGSTOP : SIGKILL);
}

llvm::Expected<InjectedFault> parseInjectedFault(llvm::StringRef spec) {
  auto [kindText, stepText] = spec.split('@');
  InjectedFault fault;
  bool known = false;
  for (const KindName &k : kKinds)
    if (kindText == k.name) {
      fault.kind = k.kind;
      known = true;
    }
  if (!known || stepText.getAsInteger(10, fault.step) || fault.step < 1)
    return ir::makeError("injected fault '" + spec +
                         "': expected KIND@STEP, KIND one of kill, stop, kill-in-checkpoint and "
                         "STEP a step number from 1, or slow@MS (a worker sleeps MS milliseconds "
                         "before each step)");
  return fault;
}

llvm::Expected<std::vector<InjectedFault>> parseInjectedFaults(llvm::StringRef spec) {
  std::vector<InjectedFault> faults;
  llvm::SmallVector<llvm::StringRef, 4> items;
  spec.split(items, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef item : items) {
    // The task name has a colon of its own: "ps:0:kill@37".
    size_t colon = item.rfind(':');
    if (colon == llvm::StringRef::npos)
      return ir::makeError(std::string(kVariable) + ": '" + item + "': expected TASK:KIND@STEP");
    auto fault = parseInjectedFault(item.substr(colon + 1));
    if (!fault)
      return ir::withContext(fault.takeError(), kVariable);
    fault->task = item.substr(0, colon).str();
    faults.push_back(std::move(*fault));
  }
  return faults;
}

llvm::Expected<std::vector<InjectedFault>> injectedFaultsFromEnvironment() {
  const char *value = std::getenv(kVariable);
  if (!value || !*value)
    return std::vector<InjectedFault>{};
  return parseInjectedFaults(value);
}

} // namespace prism::runtime::job
