// Where the plan places a variable, typed with the names the IR's placement attribute uses
// (ir/VariablePlacement.h), so the plan and the IR spell a placement one way.
#pragma once

#include <optional>

#include "ir/VariablePlacement.h"
#include "plan/plan.pb.h"

namespace prism::plan {

// The variable's placement; none for a text that names no placement.
std::optional<ir::Placement> placementOf(const Variable &variable);
// Held in row shards by parameter-server tasks.
bool onParameterServers(const Variable &variable);

} // namespace prism::plan
