// How a plan is run: what `prism run` and `prism task` take besides the plan.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "runtime/dist/Tls.h"
#include "runtime/train/CheckpointDir.h"

namespace prism::runtime::job {

struct JobOptions {
  std::string data;             // a data spec (docs/data.md)
  std::optional<int64_t> steps; // default: the plan's steps, else one epoch
  std::optional<int64_t> epochs;
  int threads = 1;         // per task
  bool tf32 = false;       // GPU workers' float32 matrix products in TF32
  bool cudaGraphs = false; // GPU workers' steps as CUDA graphs
  std::string metricsOut;  // JSON lines from worker:0; empty: none
  bool quiet = false;
  bool evaluate = true; // test-set evaluation on worker:0 at epoch ends
  // A command prefix each task's command line is appended to, with {host} and {address}
  // replaced (`ip netns exec prism-{host}`, `ssh {address}`); empty: local processes.
  std::string launcher;
  // The program each task runs as `PROGRAM task ...`; empty: $PRISM_TASK_PROGRAM when set, else
  // this program (the `prism` command). A program that embeds the library names the installed
  // `prism` here.
  std::string taskProgram;
  std::chrono::milliseconds heartbeatTimeout{5000};
  std::chrono::milliseconds rpcTimeout{60000};
  // When set, every task writes its variables there at the end (`prism verify` reads them).
  std::string variablesDir;
  // A checkpoint of the whole job (worker state and every PS shard) written at the end, and
  // one to start from.
  std::string saveDir;
  std::string restoreDir;
  // The job's secret; empty: PRISM_JOB_TOKEN from the environment, else the plan's.
  std::string jobToken;
  // Periodic checkpoints of the whole job (runtime/train/CheckpointDir.h).
  train::PeriodicCheckpoints checkpoints;
  // When a task is lost, the launcher stops the others and starts every task again from the
  // newest complete checkpoint (or the start), at most this many times.
  int maxRestarts = 0;
  // A fault this task injects into itself (InjectedFault.h); empty: none.
  std::string injectFault;
  // TLS on every gRPC channel (runtime/dist/Tls.h). A task's own files; for the launcher, paths
  // in which {task} stands for each task's file name (worker-0, ps-1, coordinator).
  dist::TlsFiles tls;
  // The launcher makes a CA and a certificate per task for this job (removed when it ends).
  bool generateTls = false;
  // Whose certificate the coordinator presents: empty, the plan's coordinator task's (the
  // launcher's); "worker:0" when that process serves the coordinator (under mpirun or srun).
  std::string coordinatorTask;
  // Elastic membership: join a running elastic job as a new worker (`prism task PLAN --join
  // --coordinator HOST:PORT`); the task name and the job's flags come from the coordinator.
  bool join = false;
  // Every task records its timeline (runtime/exec/Trace.h) and writes it to
  // DIR/<task file name>.json when it ends; empty: no trace.
  std::string traceDir;
};

} // namespace prism::runtime::job
