// The pass interface: a named IR-to-IR transformation that reports whether it changed the
// module and counts what it did (printed by `--stats`).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/Module.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

namespace prism::passes {

// Options given to passes on the command line (`--workers=4`, `--partitions=2`): a pass reads
// the ones it knows; the pass manager rejects options that no pass in the pipeline reads.
class PassOptions {
public:
  void set(llvm::StringRef key, llvm::StringRef value) { values_[key] = value.str(); }
  bool has(llvm::StringRef key) const { return values_.count(key) != 0; }
  std::string get(llvm::StringRef key, llvm::StringRef dflt = "") const;
  // The option as an integer (or `dflt` when absent); an error names the option and the text.
  llvm::Expected<int64_t> getInt(llvm::StringRef key, int64_t dflt) const;
  llvm::Expected<double> getFloat(llvm::StringRef key, double dflt) const;
  const llvm::StringMap<std::string> &values() const { return values_; }

private:
  llvm::StringMap<std::string> values_;
};

class Pass {
public:
  virtual ~Pass() = default;
  // kebab-case, as written in `--passes=`.
  virtual llvm::StringRef name() const = 0;
  // One line, for `prism opt --list-passes`.
  virtual llvm::StringRef summary() const = 0;
  // Option keys this pass reads (for `--help` and for rejecting unknown options).
  virtual std::vector<std::string> optionKeys() const { return {}; }
  // Transforms the module; returns whether it changed.
  virtual llvm::Expected<bool> run(ir::Module &module, const PassOptions &options) = 0;

  using Statistic = std::pair<std::string, int64_t>;
  const std::vector<Statistic> &statistics() const { return stats_; }

protected:
  void count(llvm::StringRef statistic, int64_t by = 1);

private:
  std::vector<Statistic> stats_;
};

} // namespace prism::passes
