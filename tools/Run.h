// The options of running a plan, shared by `prism run`, `prism train --cluster` and `prism
// verify` (`prism task` reads runtime::job::TaskCommand).
#pragma once

#include <chrono>
#include <string>

#include "CLI/CLI.hpp"
#include "api/Internal.h"
#include "prism/Prism.h"
#include "runtime/job/JobOptions.h"
#include "llvm/Support/Error.h"

namespace prism::tools {

using api::kDefaultData;

// What --data takes, for the commands' help.
inline const std::string kDataHelp =
    "fashion-mnist[:DIR], zipf:VOCAB[,tokens=T,classes=C], text:FILE, npy:DIR (default: the one "
    "the model names, else " +
    std::string(kDefaultData) + ")";

struct RunOptionArgs {
  std::string data; // `prism run`: empty is the data the plan's model names, else kDefaultData
  int64_t steps = 0;
  int64_t epochs = 0;
  int threads = runtime::job::JobOptions().threads;
  std::string metricsOut;
  std::string launcher;
  double heartbeatTimeout = // seconds
      std::chrono::duration<double>(runtime::job::JobOptions().heartbeatTimeout).count();
  std::string variablesOut;
  std::string save;
  std::string restore;
  bool quiet = false;
  bool noEval = false;
  std::string checkpointDir;
  int64_t checkpointEvery = 0;
  int64_t keepCheckpoints = runtime::train::PeriodicCheckpoints().keep;
  int maxRestarts = 0;
  bool tls = false;
  std::string tlsCa, tlsCert, tlsKey;
  std::string traceDir;    // --trace
  bool tf32 = false;       // --tf32
  bool cudaGraphs = false; // --cuda-graphs

  // With `all` false, only what `train` and `verify` lack of their own (they have --data,
  // --steps, --epochs, --threads, --metrics-out, --quiet, --no-eval).
  void addOptions(CLI::App &cmd, bool all = true);
  // --checkpoint-dir, --checkpoint-every, --keep-checkpoints and (for jobs) --max-restarts.
  void addRecoveryOptions(CLI::App &cmd);
  llvm::Expected<runtime::job::JobOptions> toJobOptions() const;
  // The same as the library's run options.
  api::RunOptions toApiOptions() const;
};

} // namespace prism::tools
