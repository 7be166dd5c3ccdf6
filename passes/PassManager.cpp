// The pass manager: pipeline parsing, option checks, verify-each, dumps and statistics.
#include "passes/PassManager.h"

#include <algorithm>

#include "ir/Diagnostic.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Passes.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"

namespace prism::passes {
namespace {

std::string knownPassNames() {
  std::string names;
  for (const PassInfo &info : allPasses())
    names += (names.empty() ? "" : ", ") + info.name;
  return names;
}

// Every value has a type: then the module must stay fully typed after each pass.
bool fullyTyped(const ir::Module &module) {
  for (const auto &op : module.ops())
    for (unsigned i = 0; i < op->numResults(); ++i)
      if (!op->result(i)->hasType())
        return false;
  return true;
}

// Puts the pass name in front of an error's message, keeping its file:line:column first so
// that editors still find the place.
llvm::Error blamePass(llvm::StringRef passName, llvm::Error err) {
  auto prefixed = [&](llvm::StringRef text) {
    std::string prefix = (passName + ": ").str();
    return text.startswith(prefix) ? text.str() : prefix + text.str();
  };
  return llvm::handleErrors(
      std::move(err),
      [&](const ir::LocatedError &e) -> llvm::Error {
        return ir::makeError(e.file(), e.loc(), prefixed(e.text()));
      },
      [&](const llvm::ErrorInfoBase &e) -> llvm::Error {
        return ir::makeError(prefixed(e.message()));
      });
}

} // namespace

llvm::Expected<PassManager> PassManager::fromPipeline(llvm::StringRef pipeline,
                                                      PassManagerOptions options) {
  PassManager manager(std::move(options));
  if (pipeline.trim().empty())
    return std::move(manager);
  llvm::SmallVector<llvm::StringRef, 8> names;
  pipeline.split(names, ',');
  for (llvm::StringRef raw : names) {
    llvm::StringRef name = raw.trim();
    if (name.empty())
      return ir::makeError("empty pass name in pipeline '" + pipeline + "'");
    std::unique_ptr<Pass> pass = createPass(name);
    if (!pass)
      return ir::makeError("unknown pass '" + name + "' (known passes: " + knownPassNames() + ")");
    manager.addPass(std::move(pass));
  }
  return std::move(manager);
}

std::string PassManager::pipelineString() const {
  std::string text;
  for (const auto &pass : passes_)
    text += (text.empty() ? "" : ",") + pass->name().str();
  return text;
}

llvm::Error PassManager::checkOptions(const PassOptions &options) const {
  llvm::StringSet<> read;
  for (const auto &pass : passes_)
    for (const std::string &key : pass->optionKeys())
      read.insert(key);
  // Sorted, so the error names the same option whatever the map's order.
  std::vector<std::string> unread;
  for (const auto &entry : options.values())
    if (!read.count(entry.getKey()))
      unread.push_back(entry.getKey().str());
  std::sort(unread.begin(), unread.end());
  if (!unread.empty())
    return ir::makeError("option --" + unread.front() +
                         " is not read by any pass in the pipeline '" + pipelineString() + "'");
  if (!options_.dumpAfter.empty()) {
    if (options_.dumpDir.empty())
      return ir::makeError("--dump-after needs a --dump-dir to write to");
    bool named = options_.dumpAfter == "all";
    for (const auto &pass : passes_)
      named |= pass->name() == options_.dumpAfter;
    if (!named)
      return ir::makeError("--dump-after=" + options_.dumpAfter +
                           " names no pass in the pipeline '" + pipelineString() +
                           "' (use a pass name or 'all')");
  }
  return llvm::Error::success();
}

llvm::Error PassManager::dump(const ir::Module &module, size_t position, const Pass &pass) {
  if (options_.dumpAfter != "all" && options_.dumpAfter != pass.name())
    return llvm::Error::success();
  if (std::error_code ec = llvm::sys::fs::create_directories(options_.dumpDir))
    return ir::makeError("cannot create dump directory '" + options_.dumpDir +
                         "': " + ec.message());
  std::string fileName;
  llvm::raw_string_ostream(fileName)
      << llvm::format("%02u", static_cast<unsigned>(position)) << "-" << pass.name() << ".prism";
  llvm::SmallString<128> path(options_.dumpDir);
  llvm::sys::path::append(path, fileName);
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return ir::makeError("cannot write dump '" + path + "': " + ec.message());
  ir::printModule(module, out);
  out.close();
  if (out.has_error())
    return ir::makeError("cannot write dump '" + path + "': " + out.error().message());
  dumpedFiles_.push_back(path.str().str());
  return llvm::Error::success();
}

llvm::Expected<bool> PassManager::run(ir::Module &module, const PassOptions &options) {
  dumpedFiles_.clear();
  if (auto err = checkOptions(options))
    return std::move(err);
  bool changed = false;
  for (size_t i = 0; i < passes_.size(); ++i) {
    Pass &pass = *passes_[i];
    bool typedBefore = options_.verifyEach && fullyTyped(module);
    llvm::Expected<bool> passChanged = pass.run(module, options);
    if (!passChanged)
      return blamePass(pass.name(), passChanged.takeError());
    changed |= *passChanged;
    if (options_.verifyEach) {
      ir::VerifyOptions verifyOptions;
      // A pass may leave an untyped module untyped, but must not lose types.
      verifyOptions.requireTypes = typedBefore;
      if (auto err = ir::verify(module, verifyOptions))
        return blamePass(
            pass.name(), llvm::handleErrors(std::move(err), [](const ir::LocatedError &e) {
              return ir::makeError(e.file(), e.loc(),
                                   "the module is invalid after this pass: " + e.text());
            }));
    }
    if (auto err = dump(module, i + 1, pass))
      return std::move(err);
  }
  return changed;
}

void PassManager::printStatistics(llvm::raw_ostream &os) const {
  struct Row {
    std::string pass, statistic, count;
  };
  std::vector<Row> rows = {{"pass", "statistic", "count"}};
  for (const auto &pass : passes_)
    for (const Pass::Statistic &s : pass->statistics())
      rows.push_back({pass->name().str(), s.first, std::to_string(s.second)});
  size_t passWidth = 0, statWidth = 0, countWidth = 0;
  for (const Row &r : rows) {
    passWidth = std::max(passWidth, r.pass.size());
    statWidth = std::max(statWidth, r.statistic.size());
    countWidth = std::max(countWidth, r.count.size());
  }
  for (const Row &r : rows)
    os << llvm::left_justify(r.pass, passWidth) << "  "
       << llvm::left_justify(r.statistic, statWidth) << "  "
       << llvm::right_justify(r.count, countWidth) << "\n";
}

} // namespace prism::passes
