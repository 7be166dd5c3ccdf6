// mixed-precision: the ops the op table lets compute in reduced precision (matrix products and
// convolutions, forward and backward) compute in bf16 or fp16: their inputs are rounded to it,
// products accumulate in float32 and results stay float32. Variables, optimizer state,
// gradients' reductions and every other op keep float32, so the variables are the float32
// master weights. fp16's small range needs loss scaling, which lower-optimizer adds (the
// training pipelines ask it to when the precision is fp16).
#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "ir/Precision.h"
#include "passes/Pass.h"

namespace prism::passes {
namespace {

class MixedPrecision : public Pass {
public:
  llvm::StringRef name() const override { return "mixed-precision"; }
  llvm::StringRef summary() const override {
    return "matrix products and convolutions compute in bf16 or fp16 (--precision), the rest in "
           "f32";
  }
  std::vector<std::string> optionKeys() const override { return {"precision"}; }

  llvm::Expected<bool> run(ir::Module &module, const PassOptions &options) override {
    count("ops in reduced precision", 0);
    auto precision = ir::parsePrecision(options.get("precision", "bf16"));
    if (!precision)
      return ir::withContext(precision.takeError(), "option --precision");
    bool changed = false;
    for (const auto &op : module.ops()) {
      if (!ir::allowsReducedPrecision(op->def()) || ir::computePrecision(*op) == *precision)
        continue;
      ir::setComputePrecision(*op, *precision);
      changed = true;
      if (*precision != ir::ComputePrecision::F32)
        count("ops in reduced precision");
    }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createMixedPrecisionPass() {
  return std::make_unique<MixedPrecision>();
}

} // namespace prism::passes
