// bench/ir_scale: how long each pass of the training and data-parallel pipelines takes on ladder
// models (bench/ir_scale/LadderModel.h) of growing size, so a pass that is not linear in the
// graph shows. Usage: prism_bench_ir_scale [OPS...] [--repeats N]; prints a markdown table of
// the median over N runs (default: 10000 and 100000 ops, 3 runs).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/ir_scale/LadderModel.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"
#include "llvm/ADT/StringRef.h"

using namespace prism;

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// One run on one size: the time of each step, in table order, and the op counts.
struct Run {
  std::vector<double> ms;
  size_t builtOps = 0, trainingOps = 0, parallelOps = 0;
};

std::vector<std::string> passNames() {
  std::vector<std::string> names;
  for (const char *pipeline : {bench::kLadderTrainingPipeline, bench::kLadderParallelPipeline}) {
    llvm::SmallVector<llvm::StringRef, 8> parts;
    llvm::StringRef(pipeline).split(parts, ',');
    for (llvm::StringRef name : parts)
      names.push_back(name.str());
  }
  return names;
}

llvm::Expected<Run> runOnce(int64_t ops) {
  Run run;
  auto start = Clock::now();
  auto module = bench::buildLadderModel(bench::ladderLayersFor(ops));
  if (!module)
    return module.takeError();
  run.ms.push_back(msSince(start));
  run.builtOps = (*module)->ops().size();
  passes::PassOptions options;
  options.set("workers", "4");
  // Each pass alone, unverified: the verifier is timed once, at the end.
  passes::PassManagerOptions unverified;
  unverified.verifyEach = false;
  for (const std::string &name : passNames()) {
    auto manager = passes::PassManager::fromPipeline(name, unverified);
    if (!manager)
      return manager.takeError();
    passes::PassOptions read;
    for (const std::string &key : manager->passes().front()->optionKeys())
      if (options.has(key))
        read.set(key, options.get(key));
    start = Clock::now();
    if (auto changed = manager->run(**module, read); !changed)
      return changed.takeError();
    run.ms.push_back(msSince(start));
    if (name == "fuse-elementwise")
      run.trainingOps = (*module)->ops().size();
  }
  run.parallelOps = (*module)->ops().size();
  start = Clock::now();
  if (auto err = ir::verify(**module))
    return std::move(err);
  run.ms.push_back(msSince(start));
  return run;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  std::vector<int64_t> sizes;
  int repeats = 3;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    if (arg == "--repeats" && i + 1 < argc)
      repeats = std::max(1, std::atoi(argv[++i]));
    else
      sizes.push_back(std::atoll(argv[i]));
  }
  if (sizes.empty())
    sizes = {10000, 100000};

  std::vector<std::string> rows = {"build (C++ builder)"};
  for (const std::string &name : passNames())
    rows.push_back(name);
  rows.push_back("verify (once, at the end)");
  std::vector<Run> medians;
  for (int64_t ops : sizes) {
    std::vector<Run> runs;
    for (int r = 0; r < repeats; ++r) {
      auto run = runOnce(ops);
      if (!run) {
        std::fprintf(stderr, "%s\n", llvm::toString(run.takeError()).c_str());
        return 1;
      }
      runs.push_back(std::move(*run));
    }
    Run result = runs.front();
    for (size_t step = 0; step < rows.size(); ++step) {
      std::vector<double> times;
      for (const Run &run : runs)
        times.push_back(run.ms[step]);
      result.ms[step] = median(times);
    }
    medians.push_back(result);
  }

  std::printf("| step |");
  for (const Run &run : medians)
    std::printf(" %zu ops |", run.builtOps);
  std::printf("\n| --- |");
  for (size_t i = 0; i < medians.size(); ++i)
    std::printf(" --- |");
  std::printf("\n");
  for (size_t step = 0; step < rows.size(); ++step) {
    std::printf("| %s |", rows[step].c_str());
    for (const Run &run : medians)
      std::printf(" %.1f ms |", run.ms[step]);
    std::printf("\n");
  }
  std::printf("| total |");
  for (const Run &run : medians) {
    double total = 0;
    for (double ms : run.ms)
      total += ms;
    std::printf(" %.1f ms |", total);
  }
  std::printf("\n| ops after the training passes |");
  for (const Run &run : medians)
    std::printf(" %zu |", run.trainingOps);
  std::printf("\n| ops after the data-parallel passes |");
  for (const Run &run : medians)
    std::printf(" %zu |", run.parallelOps);
  std::printf("\n");
  return 0;
}
