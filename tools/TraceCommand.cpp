// `prism trace merge DIR [-o FILE]`: the timelines a job's tasks wrote with `--trace DIR`, one
// file that chrome://tracing and Perfetto open (docs/distributed.md, "Traces").
#include <string>
#include <vector>

#include "ir/Diagnostic.h"
#include "runtime/exec/Trace.h"
#include "tools/Commands.h"
#include "tools/OutputFile.h"
#include "llvm/Support/FileSystem.h"
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
}

} // namespace prism::tools
