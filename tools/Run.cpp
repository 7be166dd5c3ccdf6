// Run options shared by the commands that run plans.
#include "tools/Run.h"

#include <cmath>

#include "api/Internal.h"
#include "ir/Diagnostic.h"

namespace prism::tools {

void RunOptionArgs::addOptions(CLI::App &cmd, bool all) {
  if (all) {
    cmd.add_option("--data", data, kDataHelp);
    auto *epochsOption =
        cmd.add_option("--epochs", epochs, "Epochs to train (default: the plan's steps, else 1)")
            ->check(CLI::PositiveNumber);
    cmd.add_option("--steps", steps, "Steps to train")
        ->check(CLI::PositiveNumber)
        ->excludes(epochsOption);
    cmd.add_option("--threads", threads, "CPU threads per task")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    cmd.add_option("--metrics-out", metricsOut, "Write worker:0's JSON lines of metrics here");
    cmd.add_flag("--quiet,-q", quiet, "Print only errors");
    cmd.add_flag("--no-eval", noEval, "Skip test-set evaluation");
    cmd.add_option(
        "--save", save,
        "Save the whole job (worker state, every PS shard) in this directory at the end");
    cmd.add_option("--restore", restore, "Continue from a checkpoint --save wrote");
  }
  cmd.add_option("--launcher", launcher,
                 "Start each task through this command prefix ({host}, {address} replaced), "
                 "e.g. 'ssh {address}' or 'ip netns exec ns-{host}'; default: local processes");
  cmd.add_option("--heartbeat-timeout", heartbeatTimeout,
                 "Seconds without a heartbeat before a task counts as gone")
      ->check(CLI::Range(0.5, 3600.0))
      ->capture_default_str();
  cmd.add_option("--variables-out", variablesOut,
                 "Every task writes its variables to a directory here at the end");
  cmd.add_option("--trace", traceDir,
                 "Every task writes its timeline to DIR/<task>.json (`prism trace merge DIR`)");
  cmd.add_flag("--tf32", tf32,
               "GPU workers' float32 matrix products in TF32 on the tensor cores (faster, 10-bit "
               "mantissas in); an error for a CPU device");
  cmd.add_flag("--cuda-graphs", cudaGraphs,
               "GPU workers' steps as CUDA graphs: from a program's second step on, its runs of "
               "kernels recorded once and replayed (one launch each); an error for a CPU device");
  cmd.add_flag("--tls", tls,
               "TLS on every gRPC channel, with a CA and a certificate per task made for this job");
  cmd.add_option("--tls-ca", tlsCa, "TLS with this CA certificate (PEM) ...");
  cmd.add_option("--tls-cert", tlsCert,
                 "... each task's certificate, {task} standing for its name (certs/{task}.pem: "
                 "worker-0, ps-1, coordinator-0) ...");
  cmd.add_option("--tls-key", tlsKey, "... and its key (certs/{task}.key)");
}

void RunOptionArgs::addRecoveryOptions(CLI::App &cmd) {
  cmd.add_option("--checkpoint-dir", checkpointDir,
                 "Write a complete checkpoint to DIR/step-N every --checkpoint-every steps; a "
                 "run given a DIR that holds one resumes from the newest");
  cmd.add_option("--checkpoint-every", checkpointEvery, "Steps between checkpoints")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--keep-checkpoints", keepCheckpoints, "Complete checkpoints kept, the newest")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option("--max-restarts", maxRestarts,
                 "When a task is lost, restart every task from the newest checkpoint, at most "
                 "this many times")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

llvm::Expected<runtime::job::JobOptions> RunOptionArgs::toJobOptions() const {
  return api::toJobOptions(toApiOptions());
}

api::RunOptions RunOptionArgs::toApiOptions() const {
  api::RunOptions options;
  options.data = data;
  if (steps > 0)
    options.steps = steps;
  if (epochs > 0)
    options.epochs = epochs;
  options.threads = threads;
  options.metricsOut = metricsOut;
  options.quiet = quiet;
  options.evaluate = !noEval;
  options.launcher = launcher;
  options.heartbeatTimeoutMs = std::llround(heartbeatTimeout * 1000);
  options.variablesDir = variablesOut;
  options.saveDir = save;
  options.restoreDir = restore;
  options.checkpointDir = checkpointDir;
  options.checkpointEvery = checkpointEvery;
  options.keepCheckpoints = keepCheckpoints;
  options.maxRestarts = maxRestarts;
  options.tls = tls;
  options.tlsCa = tlsCa;
  options.tlsCert = tlsCert;
  options.tlsKey = tlsKey;
  options.traceDir = traceDir;
  options.tf32 = tf32;
  options.cudaGraphs = cudaGraphs;
  return options;
}

} // namespace prism::tools
