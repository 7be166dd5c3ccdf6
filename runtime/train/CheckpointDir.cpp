// Periodic checkpoints: the step directories of a checkpoint directory.
#include "runtime/train/CheckpointDir.h"

#include <algorithm>
#include <vector>

#include "ir/Diagnostic.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::runtime::train {
namespace {

constexpr llvm::StringLiteral kPrefix = "step-";
constexpr llvm::StringLiteral kPartial = ".partial";

// The entries of `dir` named step-N (complete: no suffix) or step-N.partial, with their steps.
std::vector<CompleteCheckpoint> stepEntries(llvm::StringRef dir, bool partial,
                                            std::error_code &ec) {
  std::vector<CompleteCheckpoint> entries;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (!name.consume_front(kPrefix) || name.consume_back(kPartial) != partial)
      continue;
    int64_t step = 0;
    if (name.getAsInteger(10, step) || step < 0)
      continue;
    entries.push_back({step, it->path()});
  }
  if (ec == std::errc::no_such_file_or_directory)
    ec.clear();
  return entries;
}

} // namespace

llvm::Error checkPeriodicCheckpoints(const PeriodicCheckpoints &checkpoints) {
  if (checkpoints.dir.empty())
    return checkpoints.every > 0
               ? ir::makeError("--checkpoint-every " + std::to_string(checkpoints.every) +
                               " needs --checkpoint-dir: where the checkpoints go")
               : llvm::Error::success();
  if (checkpoints.every == 0)
    return ir::makeError("--checkpoint-dir " + checkpoints.dir +
                         " needs --checkpoint-every N: the steps between checkpoints");
  if (checkpoints.every < 1)
    return ir::makeError("--checkpoint-every " + std::to_string(checkpoints.every) +
                         ": expected a number of steps, at least 1");
  if (checkpoints.keep < 1)
    return ir::makeError("--keep-checkpoints " + std::to_string(checkpoints.keep) +
                         ": expected a number of checkpoints, at least 1");
  return llvm::Error::success();
}

std::string checkpointStepDir(llvm::StringRef dir, int64_t step) {
  llvm::SmallString<256> path(dir);
  std::string name;
  llvm::raw_string_ostream(name) << kPrefix << llvm::format("%08lld", static_cast<long long>(step));
  llvm::sys::path::append(path, name);
  return std::string(path);
}

std::string partialCheckpointDir(llvm::StringRef dir, int64_t step) {
  return checkpointStepDir(dir, step) + kPartial.str();
}

llvm::Expected<std::optional<CompleteCheckpoint>> latestCheckpoint(llvm::StringRef dir) {
  std::error_code ec;
  std::vector<CompleteCheckpoint> complete = stepEntries(dir, /*partial=*/false, ec);
  if (ec)
    return ir::makeError("cannot list the checkpoints in " + dir + ": " + ec.message());
  std::optional<CompleteCheckpoint> latest;
  for (CompleteCheckpoint &c : complete)
    if (!latest || c.step > latest->step)
      latest = std::move(c);
  return latest;
}

llvm::Error completeCheckpoint(llvm::StringRef dir, int64_t step, int64_t keep) {
  std::string partial = partialCheckpointDir(dir, step), final = checkpointStepDir(dir, step);
  // A checkpoint of this step from an earlier attempt of the job is the same state.
  if (llvm::sys::fs::exists(final))
    llvm::sys::fs::remove_directories(final);
  if (auto ec = llvm::sys::fs::rename(partial, final))
    return ir::makeError("cannot move the checkpoint of step " + std::to_string(step) + " into " +
                         final + ": " + ec.message());
  std::error_code ec;
  std::vector<CompleteCheckpoint> complete = stepEntries(dir, /*partial=*/false, ec);
  std::sort(complete.begin(), complete.end(),
            [](const auto &a, const auto &b) { return a.step > b.step; });
  for (size_t i = static_cast<size_t>(keep); i < complete.size(); ++i)
    llvm::sys::fs::remove_directories(complete[i].path);
  for (const CompleteCheckpoint &p : stepEntries(dir, /*partial=*/true, ec))
    if (p.step < step)
      llvm::sys::fs::remove_directories(p.path);
  return llvm::Error::success();
}

void removePartialCheckpoints(llvm::StringRef dir) {
  std::error_code ec;
  for (const CompleteCheckpoint &p : stepEntries(dir, /*partial=*/true, ec))
    llvm::sys::fs::remove_directories(p.path);
}

} // namespace prism::runtime::train
