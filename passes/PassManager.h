// The pass manager: runs a pipeline of passes over a module, verifying after each one, dumping
// the IR where asked and collecting every pass's statistics.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/Module.h"
#include "passes/Pass.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::passes {

struct PassManagerOptions {
  // Run ir::verify after every pass; a broken module is blamed on the pass that broke it.
  bool verifyEach = true;
  // Dump the module after the named pass, or after every pass with "all"; empty: no dumps.
  std::string dumpAfter;
  // Where dumps go, as `NN-passname.prism` (NN: the pass's 1-based position in the pipeline).
  std::string dumpDir;
};

class PassManager {
public:
  explicit PassManager(PassManagerOptions options = {}) : options_(std::move(options)) {}

  // A pass manager for a comma-separated pipeline (`infer-shapes,autodiff,lower-optimizer`).
  // An unknown name is an error that lists the known passes; an empty pipeline runs nothing.
  static llvm::Expected<PassManager> fromPipeline(llvm::StringRef pipeline,
                                                  PassManagerOptions options = {});

  void addPass(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }
  llvm::ArrayRef<std::unique_ptr<Pass>> passes() const { return passes_; }
  // `infer-shapes,dce`: the pipeline as written in `--passes=`.
  std::string pipelineString() const;

  // Runs every pass in order; returns whether any of them changed the module. Options that no
  // pass in the pipeline reads are rejected before anything runs.
  llvm::Expected<bool> run(ir::Module &module, const PassOptions &options);

  // The files the dumps of the last run wrote, in order.
  const std::vector<std::string> &dumpedFiles() const { return dumpedFiles_; }

  // One row per statistic of every pass that ran: pass, statistic, count; aligned columns.
  void printStatistics(llvm::raw_ostream &os) const;

private:
  llvm::Error checkOptions(const PassOptions &options) const;
  llvm::Error dump(const ir::Module &module, size_t position, const Pass &pass);

  PassManagerOptions options_;
  std::vector<std::unique_ptr<Pass>> passes_;
  std::vector<std::string> dumpedFiles_;
};

} // namespace prism::passes
