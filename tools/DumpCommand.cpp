// `prism dump PLAN [--format text|json|dot] [--task T]`: a plan file as a person, a program or
// Graphviz reads it (docs/plan-dump.md).
#include <string>

#include "plan/PlanDump.h"
#include "plan/PlanFile.h"
#include "tools/Commands.h"
#include "tools/OutputFile.h"

namespace prism::tools {
namespace {

struct DumpArgs {
  std::string plan;
  std::string format = "text";
  std::string task;
  std::string output = "-";
};

int runDump(const DumpArgs &args) {
  auto format = plan::parseDumpFormat(args.format);
  if (!format)
    return reportError(format.takeError());
  auto plan = plan::readPlan(args.plan);
  if (!plan)
    return reportError(plan.takeError());
  auto text = plan::dumpPlan(*plan, *format, args.task);
  if (!text)
    return reportError(text.takeError());
  if (auto err = writeOutput(args.output, *text))
    return reportError(std::move(err));
  return 0;
}

} // namespace

void registerDumpCommand(CLI::App &app) {
  auto *cmd = app.add_subcommand("dump", "Print a plan: placement, communication and estimate");
  auto args = std::make_shared<DumpArgs>();
  cmd->add_option("plan", args->plan, "Plan file (from `prism partition`)")->required();
  cmd->add_option("--format", args->format, "text (for a person), json (docs/plan-dump.md), dot");
  cmd->add_option("--task", args->task, "Only what concerns this task, e.g. worker:0 or ps:1");
  cmd->add_option("-o,--output", args->output, "Where to write the dump ('-': stdout)");
  cmd->callback([args]() {
    if (int status = runDump(*args))
      throw CLI::RuntimeError(status);
  });
}

} // namespace prism::tools
