// bench/compile: how long `prism partition` takes for each model and 1…64 workers (the
// partitioner alone: passes, per-task programs, estimate and verification; the model already
// parsed). Prints a markdown table; BENCHMARKS.md keeps it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cluster/ClusterParser.h"
#include "frontends/text/Parser.h"
#include "plan/Partitioner.h"
#include "plan/PlanVerifier.h"

using namespace prism;

int main(int argc, char **argv) {
  std::string root = argc > 1 ? argv[1] : ".";
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 7;
  const char *models[] = {"mlp", "cnn", "embedding_classifier", "lstm_lm", "resnet"};
  const int workerCounts[] = {1, 2, 4, 8, 16, 32, 64};
  std::printf(
      "| model | ops (training step) | strategy | 1 | 2 | 4 | 8 | 16 | 32 | 64 workers |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const char *name : models) {
    auto model = frontends::parseModuleFile(root + "/models/" + name + ".prism");
    if (!model) {
      std::fprintf(stderr, "%s\n", llvm::toString(model.takeError()).c_str());
      return 1;
    }
    for (passes::Strategy strategy :
         {passes::Strategy::Hybrid, passes::Strategy::ParameterServer}) {
      std::string row;
      size_t ops = 0;
      for (int workers : workerCounts) {
        std::string spec =
            "local:" + std::to_string(workers) + ",ps=" + std::to_string(std::max(1, workers / 4));
        auto cluster = cluster::loadCluster(spec, cluster::Replication::BetweenGraph);
        if (!cluster) {
          std::fprintf(stderr, "%s\n", llvm::toString(cluster.takeError()).c_str());
          return 1;
        }
        plan::PartitionOptions options;
        options.placement.strategy = strategy;
        options.globalBatch = 1024;
        std::vector<double> times;
        for (int r = 0; r < repeats; ++r) {
          auto start = std::chrono::steady_clock::now();
          auto result = plan::partition(**model, *cluster, options);
          double ms =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                  .count();
          if (!result) {
            std::fprintf(stderr, "%s on %s: %s\n", name, spec.c_str(),
                         llvm::toString(result.takeError()).c_str());
            return 1;
          }
          if (ops == 0) {
            auto worker = plan::parseProgram(*plan::findProgram(result->plan, "worker:0"));
            ops = worker ? (*worker)->ops().size() : 0;
            if (!worker)
              llvm::consumeError(worker.takeError());
          }
          times.push_back(ms);
        }
        std::sort(times.begin(), times.end());
        char cell[32];
        std::snprintf(cell, sizeof cell, " %.1f ms |", times[times.size() / 2]);
        row += cell;
      }
      std::printf("| %s | %zu | %s |%s\n", name, ops, passes::strategyName(strategy).str().c_str(),
                  row.c_str());
    }
  }
  return 0;
}
