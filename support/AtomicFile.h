// Writing a file all or nothing: the contents go to a temporary file beside it, which is then
// renamed over the final name, so a crash or a full disk never leaves a half-written or emptied
// file where a good one stood.
#pragma once

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::support {

// Who may read the file: everyone (0644 under the umask), or its owner alone (0600: plans, which
// hold the job's token, and checkpoints).
enum class FileAccess { Everyone, OwnerOnly };

llvm::Error writeFileAtomically(llvm::StringRef path, llvm::StringRef contents,
                                FileAccess access = FileAccess::Everyone);
// The same with the contents written by `write` to the temporary file's stream, piece by piece
// (a checkpoint's tensors go out without being copied into one buffer first).
llvm::Error writeFileAtomically(llvm::StringRef path,
                                llvm::function_ref<void(llvm::raw_ostream &)> write,
                                FileAccess access = FileAccess::Everyone);

} // namespace prism::support
