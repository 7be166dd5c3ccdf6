// The placement dump: a plan as text for a person, as JSON for programs (a documented, stable
// interface: docs/plan-dump.md), and as Graphviz DOT for a picture. No format shows the job token.
#pragma once

#include "support/Memory.h"
#include <string>

#include "plan/plan.pb.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::plan {

enum class DumpFormat { Text, Json, Dot };

// "text", "json", "dot"; an error names the value and the choices.
llvm::Expected<DumpFormat> parseDumpFormat(llvm::StringRef name);

// The plan in `format`; with `task` ("worker:1", "ps:0") only what concerns that task: its own
// section, the variables its program declares or its shards hold, its host's link (an error
// naming the task and listing the plan's tasks when there is no such task). A program that does
// not parse is an error.
llvm::Expected<std::string> dumpPlan(const Plan &plan, DumpFormat format,
                                     llvm::StringRef task = "");

// Bytes in decimal units, as every plan output prints them: "360 B", "1.2 kB", "25.6 MB".
using support::formatBytes;

} // namespace prism::plan
