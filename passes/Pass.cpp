// Pass options read from the command line, and the statistics a pass counts.
#include "passes/Pass.h"

#include "ir/Diagnostic.h"

namespace prism::passes {

std::string PassOptions::get(llvm::StringRef key, llvm::StringRef dflt) const {
  auto it = values_.find(key);
  return it == values_.end() ? dflt.str() : it->second;
}

llvm::Expected<int64_t> PassOptions::getInt(llvm::StringRef key, int64_t dflt) const {
  auto it = values_.find(key);
  if (it == values_.end())
    return dflt;
  int64_t value;
  // getAsInteger returns true on failure, including trailing garbage and overflow.
  if (llvm::StringRef(it->second).trim().getAsInteger(10, value))
    return ir::makeError("option --" + key + ": expected an integer, got '" + it->second + "'");
  return value;
}

llvm::Expected<double> PassOptions::getFloat(llvm::StringRef key, double dflt) const {
  auto it = values_.find(key);
  if (it == values_.end())
    return dflt;
  double value;
  if (llvm::StringRef(it->second).trim().getAsDouble(value))
    return ir::makeError("option --" + key + ": expected a number, got '" + it->second + "'");
  return value;
}

void Pass::count(llvm::StringRef statistic, int64_t by) {
  for (Statistic &s : stats_)
    if (s.first == statistic) {
      s.second += by;
      return;
    }
  stats_.emplace_back(statistic.str(), by);
}

} // namespace prism::passes
