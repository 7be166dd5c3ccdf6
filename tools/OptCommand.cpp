// `prism opt FILE --passes=a,b,...`: run passes and print the module (canonical form when no
// passes are given).
#include <string>
#include <vector>

#include "ir/Printer.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"
#include "tools/Commands.h"
#include "tools/OutputFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {
namespace {

struct OptArgs {
  std::string file;
  std::string pipeline;
  std::string output = "-";
  std::string dumpAfter;
  std::string dumpDir = "prism-dumps";
  bool stats = false;
  bool noVerifyEach = false;
  bool listPasses = false;
};

// `--key=value` and `--key value` left over after the known flags become pass options.
llvm::Expected<passes::PassOptions> passOptionsFrom(const std::vector<std::string> &extras) {
  passes::PassOptions options;
  for (size_t i = 0; i < extras.size(); ++i) {
    llvm::StringRef arg = extras[i];
    if (!arg.consume_front("--"))
      return ir::makeError("unexpected argument '" + extras[i] + "'");
    auto [key, value] = arg.split('=');
    if (!arg.contains('=')) {
      if (i + 1 >= extras.size())
        return ir::makeError("option --" + key + " needs a value");
      value = extras[++i];
    }
    options.set(key, value);
  }
  return options;
}

int runOpt(const OptArgs &args, const std::vector<std::string> &extras) {
  if (args.listPasses) {
    for (const passes::PassInfo &info : passes::allPasses()) {
      auto pass = info.create();
      llvm::outs() << llvm::left_justify(pass->name(), 26) << " " << pass->summary() << "\n";
    }
    return 0;
  }
  if (args.file.empty())
    return reportError(ir::makeError("prism opt: a model file is required"));
  auto options = passOptionsFrom(extras);
  if (!options)
    return reportError(options.takeError());
  passes::PassManagerOptions pmOptions;
  pmOptions.verifyEach = !args.noVerifyEach;
  pmOptions.dumpAfter = args.dumpAfter;
  pmOptions.dumpDir = args.dumpDir;
  auto pm = passes::PassManager::fromPipeline(args.pipeline, pmOptions);
  if (!pm)
    return reportError(pm.takeError());
  auto module = loadModule(args.file, /*inferShapes=*/false);
  if (!module)
    return reportError(module.takeError());
  auto changed = pm->run(**module, *options);
  if (args.stats)
    pm->printStatistics(llvm::errs());
  if (!changed)
    return reportError(changed.takeError());
  if (auto err = writeOutput(args.output, ir::printModule(**module)))
    return reportError(std::move(err));
  return 0;
}

} // namespace

void registerOptCommand(CLI::App &app) {
  auto args = std::make_shared<OptArgs>();
  auto *cmd = app.add_subcommand(
      "opt", "Run passes over a model and print it; other --KEY=VALUE options go to the passes");
  cmd->add_option("file", args->file, "Model file (.prism); '-' reads standard input");
  cmd->add_option("--passes", args->pipeline,
                  "Comma-separated pipeline, e.g. infer-shapes,autodiff");
  cmd->add_option("-o,--output", args->output, "Where to write the module ('-': stdout)");
  cmd->add_option("--dump-after", args->dumpAfter, "Dump the module after this pass, or 'all'");
  cmd->add_option("--dump-dir", args->dumpDir, "Directory for dumps (NN-pass.prism)");
  cmd->add_flag("--stats", args->stats, "Print each pass's statistics on stderr");
  cmd->add_flag("--no-verify-each", args->noVerifyEach, "Skip the verifier between passes");
  cmd->add_flag("--list-passes", args->listPasses, "List the passes and exit");
  cmd->allow_extras();
  cmd->callback([args, cmd]() {
    int status = runOpt(*args, cmd->remaining());
    if (status)
      throw CLI::RuntimeError(status);
  });
}

} // namespace prism::tools
