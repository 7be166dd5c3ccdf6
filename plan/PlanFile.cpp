// Plan files: binary protobuf, atomically written, verified when written and when read.
#include "plan/PlanFile.h"

#include "plan/PlanVerifier.h"
#include "support/AtomicFile.h"
#include "llvm/Support/MemoryBuffer.h"

namespace prism::plan {

llvm::Error writePlan(const Plan &plan, llvm::StringRef path) {
  if (auto e = verifyPlan(plan))
    return e;
  std::string bytes;
  if (!plan.SerializeToString(&bytes))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot serialize the plan for " + path.str());
  return support::writeFileAtomically(path, bytes);
}

llvm::Expected<Plan> readPlan(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return llvm::createStringError(buffer.getError(), "cannot read plan %s: %s", path.str().c_str(),
                                   buffer.getError().message().c_str());
  Plan plan;
  llvm::StringRef bytes = (*buffer)->getBuffer();
  if (!plan.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "%s: not a plan (the protobuf does not parse; a plan is what "
                                   "`prism partition` writes)",
                                   path.str().c_str());
  if (auto e = verifyPlan(plan))
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s: %s", path.str().c_str(),
                                   llvm::toString(std::move(e)).c_str());
  return plan;
}

} // namespace prism::plan
