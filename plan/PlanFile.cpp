// Plan files: binary protobuf, atomically written, verified when written and when read.
#include "plan/PlanFile.h"

#include "ir/Diagnostic.h"
#include "plan/PlanVerifier.h"
#include "support/AtomicFile.h"
#include "llvm/Support/MemoryBuffer.h"

namespace prism::plan {

llvm::Error writePlan(const Plan &plan, llvm::StringRef path, PlanCheck check) {
  if (check == PlanCheck::Verify)
    if (auto e = verifyPlan(plan))
      return e;
  std::string bytes;
  if (!plan.SerializeToString(&bytes))
    return ir::makeError(ir::ErrorCode::Internal, "cannot serialize the plan for " + path);
  // A plan holds the job token: its owner alone may read it.
  return support::writeFileAtomically(path, bytes, support::FileAccess::OwnerOnly);
}

llvm::Expected<Plan> readPlan(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return ir::makeError(buffer.getError() == std::errc::no_such_file_or_directory
                             ? ir::ErrorCode::NotFound
                             : ir::ErrorCode::Invalid,
                         "cannot read plan " + path + ": " + buffer.getError().message());
  Plan plan;
  llvm::StringRef bytes = (*buffer)->getBuffer();
  if (!plan.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return ir::makeError(path + ": not a plan (the protobuf does not parse; a plan is what "
                                "`prism partition` writes)");
  if (auto e = verifyPlan(plan))
    return ir::withContext(std::move(e), path);
  return plan;
}

} // namespace prism::plan
