// Questions about a plan's variables (see PlanVariables.h).
#include "plan/PlanVariables.h"

namespace prism::plan {

std::optional<ir::Placement> placementOf(const Variable &variable) {
  for (ir::Placement placement :
       {ir::Placement::AllReduce, ir::Placement::ParameterServer, ir::Placement::Replicated})
    if (ir::placementName(placement) == variable.placement())
      return placement;
  return std::nullopt;
}

bool onParameterServers(const Variable &variable) {
  return placementOf(variable) == ir::Placement::ParameterServer;
}

} // namespace prism::plan
