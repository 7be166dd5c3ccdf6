// `prism simulate MODEL --scale 1,2,4,...,1024`: the flags of scale mode, checked into
// plan::ScaleOptions, and the run (plan/ScaleStudy.h; docs/simulate.md, "Scale on paper").
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "plan/CostProfile.h"
#include "tools/Partition.h"

namespace prism::tools {

struct ScaleArgs {
  std::string scale; // --scale: empty when not scale mode
  int gpusPerHost = 8;
  std::string link = "10G";
  std::string strategies = "hybrid,allreduce,ps";
  int psPerHost = 1;
  int64_t batchPerWorker = 64;
  std::string plot;
  CLI::App *command = nullptr; // to tell which flags were given

  void addOptions(CLI::App &cmd);
  bool enabled() const { return !scale.empty() || given("--scale"); }
  bool given(const char *flag) const;
  // A flag of scale mode given without --scale, or one of plain mode given with it.
  llvm::Error checkMode() const;
};

// "1,2,4,...,1024": positive worker counts, increasing; "..." goes on multiplying by the ratio
// of the two counts before it up to the count after it. Errors name --scale.
llvm::Expected<std::vector<int>> parseWorkerCounts(llvm::StringRef text);

// Runs scale mode on `model`, printing the table (or JSON) and writing --plot.
int runScale(const ScaleArgs &args, const std::string &model, const CompileArgs &compile,
             const plan::CostProfile &profile, const std::string &profileSource, bool json);

} // namespace prism::tools
