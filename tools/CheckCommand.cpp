// `prism check FILE...`: parse, verify and infer shapes; print what the model is made of.
#include <string>
#include <vector>

#include "ir/OpTable.h"
#include "ir/Printer.h"
#include "ir/VariableUsage.h"
#include "ir/Verifier.h"
#include "tools/Commands.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {
namespace {

std::string humanBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format(u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return os.str();
}

std::string withCommas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

void printSummary(const ir::Module &m, const std::string &path, bool listVariables) {
  llvm::raw_ostream &os = llvm::outs();
  int64_t params = 0, bytes = 0;
  std::vector<std::string> sparse;
  for (const auto &var : m.variables()) {
    int64_t n = var->type().numElements();
    if (var->trainable()) {
      params += n;
      bytes += n * ir::dtypeBytes(var->type().dtype);
    }
    auto usage = ir::classifyVariableUsage(m, *var);
    if (usage == ir::VariableUsage::Sparse || usage == ir::VariableUsage::Mixed)
      sparse.push_back(var->name() + (usage == ir::VariableUsage::Mixed ? " (mixed)" : ""));
  }
  size_t updates = 0;
  for (const auto &op : m.ops())
    updates += op->def().has(ir::kSideEffect);

  os << path << ": model " << m.name() << "\n";
  os << "  inputs      ";
  for (size_t i = 0; i < m.inputs().size(); ++i)
    os << (i ? ", " : "") << m.inputs()[i]->name() << " " << m.inputs()[i]->type().str();
  os << "\n  variables   " << m.variables().size() << " (" << withCommas(params)
     << " trainable parameters, " << humanBytes(static_cast<double>(bytes)) << ")\n";
  if (listVariables)
    for (const auto &var : m.variables())
      os << "    " << llvm::left_justify(var->name(), 24) << " "
         << llvm::left_justify(var->type().str(), 22) << " "
         << llvm::left_justify(ir::variableUsageName(ir::classifyVariableUsage(m, *var)), 7) << " "
         << humanBytes(
                static_cast<double>(var->type().numElements() * ir::dtypeBytes(var->type().dtype)))
         << (var->trainable() ? "" : "  (not trained)") << "\n";
  os << "  ops         " << m.ops().size();
  if (updates)
    os << " (" << updates << " variable updates)";
  os << "\n  sparse      ";
  if (sparse.empty())
    os << "none";
  for (size_t i = 0; i < sparse.size(); ++i)
    os << (i ? ", " : "") << sparse[i];
  os << "\n";
  if (m.loss) {
    os << "  loss        " << m.loss->value->ref();
    if (m.optimizer)
      os << ", minimized with " << ir::printOptimizer(*m.optimizer);
    os << "\n";
  }
  if (!m.gradients.empty())
    os << "  gradients   " << m.gradients.size() << "\n";
}

} // namespace

void registerCheckCommand(CLI::App &app) {
  auto *cmd = app.add_subcommand("check", "Parse, verify and infer shapes; print a summary");
  auto files = std::make_shared<std::vector<std::string>>();
  auto listVariables = std::make_shared<bool>(false);
  auto quiet = std::make_shared<bool>(false);
  cmd->add_option("files", *files, "Model files (.prism); '-' reads standard input")->required();
  cmd->add_flag("--variables,-v", *listVariables, "List every variable");
  cmd->add_flag("--quiet,-q", *quiet, "Print only errors");
  cmd->callback([=]() {
    int status = 0;
    for (const std::string &path : *files) {
      auto module = loadModule(path, /*inferShapes=*/true);
      if (!module) {
        status = reportError(module.takeError());
        continue;
      }
      if (auto err = ir::verify(**module)) {
        status = reportError(std::move(err));
        continue;
      }
      if (!*quiet)
        printSummary(**module, path, *listVariables);
    }
    if (status)
      throw CLI::RuntimeError(status);
  });
}

} // namespace prism::tools
