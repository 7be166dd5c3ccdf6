// The options of running a plan, shared by `prism run`, `prism task`, `prism train --cluster`
// and `prism verify`.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "runtime/job/JobOptions.h"
#include "llvm/Support/Error.h"

namespace prism::tools {

struct RunOptionArgs {
  std::string data = "fashion-mnist";
  int64_t steps = 0;
  int64_t epochs = 0;
  int threads = 1;
  std::string metricsOut;
  std::string launcher;
  double heartbeatTimeout = 5;
  std::string variablesOut;
  std::string save;
  std::string restore;
  bool quiet = false;
  bool noEval = false;

  // With `all` false, only what `train` and `verify` lack of their own (they have --data,
  // --steps, --epochs, --threads, --metrics-out, --quiet, --no-eval).
  void addOptions(CLI::App &cmd, bool all = true);
  llvm::Expected<runtime::job::JobOptions> toJobOptions() const;
};

} // namespace prism::tools
