// `prism trace merge DIR [-o FILE]`: the timelines a job's tasks wrote with `--trace DIR`, one
// file that chrome://tracing and Perfetto open (docs/distributed.md, "Traces"); `prism trace
// compare MEASURED PREDICTED`: a measured step against `prism simulate --trace-out`'s, span by
// span (docs/simulate.md).
#include <string>
#include <vector>

#include "ir/Diagnostic.h"
#include "runtime/exec/Trace.h"
#include "tools/Commands.h"
#include "tools/OutputFile.h"
#include "tools/TraceCompare.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

namespace prism::tools {
namespace {

struct TraceMergeArgs {
  std::string dir;
  std::string output = "-";
};

// The task traces in `dir`: its *.json files but a merged one (this command's own output).
llvm::Expected<std::vector<std::string>> traceFiles(const std::string &dir, llvm::StringRef skip) {
  if (!llvm::sys::fs::is_directory(dir))
    return ir::makeError(dir + ": not a directory (give the DIR of `--trace DIR`)");
  std::vector<std::string> files;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
    llvm::StringRef path = it->path();
    bool isOutput = false; // the same file as -o, however it is spelled
    if (!skip.empty() && llvm::sys::fs::equivalent(path, skip, isOutput))
      isOutput = false;
    if (path.endswith(".json") && !isOutput)
      files.push_back(path.str());
  }
  if (ec)
    return ir::makeError(dir + ": " + ec.message());
  if (files.empty())
    return ir::makeError(dir + ": no task traces (*.json) in it");
  return files;
}

int runMerge(const TraceMergeArgs &args) {
  auto files = traceFiles(args.dir, args.output == "-" ? "" : args.output);
  if (!files)
    return reportError(files.takeError());
  auto merged = runtime::mergeTraceFiles(*files);
  if (!merged)
    return reportError(merged.takeError());
  if (auto err = writeOutput(args.output, *merged))
    return reportError(std::move(err));
  return 0;
}

struct TraceCompareArgs {
  std::string measured, predicted;
  int skip = 5;
  size_t top = 20;
  bool json = false;
};

// A file's text, or a `--trace DIR`'s task traces merged.
llvm::Expected<std::string> traceText(const std::string &path) {
  if (llvm::sys::fs::is_directory(path)) {
    auto files = traceFiles(path, "");
    if (!files)
      return files.takeError();
    return runtime::mergeTraceFiles(*files);
  }
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return ir::makeError(path + ": " + buffer.getError().message());
  return (*buffer)->getBuffer().str();
}

int runCompare(const TraceCompareArgs &args) {
  if (args.skip < 0)
    return reportError(
        ir::makeError("option --skip: expected 0 or more steps, got " + std::to_string(args.skip)));
  auto measured = traceText(args.measured);
  if (!measured)
    return reportError(measured.takeError());
  auto predicted = traceText(args.predicted);
  if (!predicted)
    return reportError(predicted.takeError());
  auto comparison = compareTraces(*measured, args.measured, *predicted, args.predicted, args.skip);
  if (!comparison)
    return reportError(comparison.takeError());
  llvm::outs() << (args.json ? comparisonToJson(*comparison)
                             : formatComparison(*comparison, args.top));
  return 0;
}

} // namespace

void registerTraceCommand(CLI::App &app) {
  auto *cmd = app.add_subcommand("trace", "Work with the timelines of `--trace DIR`");
  cmd->require_subcommand(1);
  auto *merge = cmd->add_subcommand(
      "merge", "Join the tasks' timelines into one trace (chrome://tracing, Perfetto)");
  auto args = std::make_shared<TraceMergeArgs>();
  merge->add_option("dir", args->dir, "The directory `--trace DIR` wrote")->required();
  merge->add_option("-o,--output", args->output, "Where to write the trace ('-': stdout)");
  merge->callback([args]() {
    if (int status = runMerge(*args))
      throw CLI::RuntimeError(status);
  });
  auto *compare = cmd->add_subcommand(
      "compare", "A measured step against a predicted one (prism simulate --trace-out), span by "
                 "span, the largest differences first");
  auto compareArgs = std::make_shared<TraceCompareArgs>();
  compare
      ->add_option("measured", compareArgs->measured,
                   "A run's trace: `prism trace merge`'s file, or the DIR of `--trace DIR`")
      ->required();
  compare->add_option("predicted", compareArgs->predicted, "`prism simulate --trace-out`'s file")
      ->required();
  compare->add_option("--skip", compareArgs->skip, "Measured steps left out at the start")
      ->capture_default_str();
  compare->add_option("--top", compareArgs->top, "Spans shown besides the steps (0: all)")
      ->capture_default_str();
  compare->add_flag("--json", compareArgs->json, "Print every span as JSON");
  compare->callback([compareArgs]() {
    if (int status = runCompare(*compareArgs))
      throw CLI::RuntimeError(status);
  });
}

} // namespace prism::tools
