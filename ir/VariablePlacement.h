// The typed contract for where a variable lives, shared by the passes that decide it
// (classify-variables, place-variables), the plan that records it and the runtime that obeys
// it. The facts are stored as variable attributes (so a program prints and parses with them),
// and these accessors are the only code that reads or writes those attributes:
//   kind       = "dense" | "sparse" | "mixed" | "unused"   (classify-variables)
//   placement  = "allreduce" | "ps" | "replicated"          (place-variables)
//   shards     = [ps task of each shard]                    (placement = "ps")
//   rows       = [0, end of shard 0, end of shard 1, ...]   (placement = "ps": boundaries)
//   table_shape, held_rows = [begin, end, begin, end, ...]  (a PS task's share of a table)
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/Module.h"
#include "ir/VariableUsage.h"
#include "llvm/Support/Error.h"

namespace prism::ir {

// The kind classify-variables gave a trainable variable, or none.
std::optional<VariableUsage> variableKind(const Variable &variable);
void setVariableKind(Variable &variable, VariableUsage kind);

enum class Placement : uint8_t { AllReduce, ParameterServer, Replicated };
llvm::StringRef placementName(Placement placement); // "allreduce", "ps", "replicated"

struct RowRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const RowRange &o) const { return begin == o.begin && end == o.end; }
};

// One contiguous range of a table's rows and the PS task (index among the PS tasks) holding it.
struct PsShard {
  int64_t task = 0;
  RowRange rows;
};

struct VariablePlacement {
  Placement where = Placement::Replicated;
  // ParameterServer: the shards in row order, covering [0, rows) without gaps.
  std::vector<PsShard> shards;

  // The ranges PS task `task` holds, in row order.
  std::vector<RowRange> rangesOn(int64_t task) const;
  bool operator==(const VariablePlacement &o) const;
  bool operator!=(const VariablePlacement &o) const { return !(*this == o); }
};

// The placement place-variables gave a variable, or none.
std::optional<VariablePlacement> placementOf(const Variable &variable);
void setPlacement(Variable &variable, const VariablePlacement &placement);
void clearPlacement(Variable &variable);
// placementOf(v) is ParameterServer.
bool onParameterServers(const Variable &variable);

// A PS task's share of a table: the whole table's shape (initial values depend on it) and the
// row ranges the task holds; the variable's own type has the held rows only.
struct HeldRows {
  Dims tableShape;
  std::vector<RowRange> ranges;
  int64_t count() const;
};
std::optional<HeldRows> heldRowsOf(const Variable &variable);
void setHeldRows(Variable &variable, const HeldRows &held);

// Checks the attributes above on one variable (the verifier calls it): each has the form its
// reader expects, so the accessors can trust them.
llvm::Error checkPlacementAttrs(const Variable &variable);

} // namespace prism::ir
