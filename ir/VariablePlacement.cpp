// Reading and writing the placement attributes of variables (the one place that knows them).
#include "ir/VariablePlacement.h"

#include "ir/Diagnostic.h"

namespace prism::ir {
namespace {

constexpr const char *kKind = "kind";
constexpr const char *kPlacement = "placement";
constexpr const char *kShards = "shards";
constexpr const char *kRows = "rows";
constexpr const char *kTableShape = "table_shape";
constexpr const char *kHeldRows = "held_rows";

constexpr VariableUsage kUsages[] = {VariableUsage::Unused, VariableUsage::Dense,
                                     VariableUsage::Sparse, VariableUsage::Mixed};
constexpr Placement kPlacements[] = {Placement::AllReduce, Placement::ParameterServer,
                                     Placement::Replicated};

std::optional<VariableUsage> parseKind(llvm::StringRef text) {
  for (VariableUsage usage : kUsages)
    if (variableUsageName(usage) == text)
      return usage;
  return std::nullopt;
}

std::optional<Placement> parsePlacement(llvm::StringRef text) {
  for (Placement placement : kPlacements)
    if (placementName(placement) == text)
      return placement;
  return std::nullopt;
}

const Attr *attrOf(const Variable &variable, const char *name, AttrKind kind) {
  const Attr *attr = variable.attrs.find(name);
  return attr && attr->kind() == kind ? attr : nullptr;
}

} // namespace

std::optional<VariableUsage> variableKind(const Variable &variable) {
  const Attr *kind = attrOf(variable, kKind, AttrKind::String);
  return kind ? parseKind(kind->getString()) : std::nullopt;
}

void setVariableKind(Variable &variable, VariableUsage kind) {
  variable.attrs.set(kKind, Attr::string(variableUsageName(kind).str()));
}

llvm::StringRef placementName(Placement placement) {
  switch (placement) {
  case Placement::AllReduce:
    return "allreduce";
  case Placement::ParameterServer:
    return "ps";
  case Placement::Replicated:
    return "replicated";
  }
  return "replicated";
}

std::vector<RowRange> VariablePlacement::rangesOn(int64_t task) const {
  std::vector<RowRange> ranges;
  for (const PsShard &shard : shards)
    if (shard.task == task)
      ranges.push_back(shard.rows);
  return ranges;
}

bool VariablePlacement::operator==(const VariablePlacement &o) const {
  if (where != o.where || shards.size() != o.shards.size())
    return false;
  for (size_t i = 0; i < shards.size(); ++i)
    if (shards[i].task != o.shards[i].task || !(shards[i].rows == o.shards[i].rows))
      return false;
  return true;
}

std::optional<VariablePlacement> placementOf(const Variable &variable) {
  const Attr *where = attrOf(variable, kPlacement, AttrKind::String);
  if (!where)
    return std::nullopt;
  std::optional<Placement> placement = parsePlacement(where->getString());
  if (!placement)
    return std::nullopt;
  VariablePlacement result;
  result.where = *placement;
  const Attr *shards = attrOf(variable, kShards, AttrKind::Ints);
  const Attr *rows = attrOf(variable, kRows, AttrKind::Ints);
  if (shards && rows && rows->getInts().size() == shards->getInts().size() + 1)
    for (size_t i = 0; i < shards->getInts().size(); ++i)
      result.shards.push_back({shards->getInts()[i], {rows->getInts()[i], rows->getInts()[i + 1]}});
  return result;
}

void setPlacement(Variable &variable, const VariablePlacement &placement) {
  clearPlacement(variable);
  variable.attrs.set(kPlacement, Attr::string(placementName(placement.where).str()));
  if (placement.shards.empty())
    return;
  llvm::SmallVector<int64_t, 4> tasks, boundaries{placement.shards.front().rows.begin};
  for (const PsShard &shard : placement.shards) {
    tasks.push_back(shard.task);
    boundaries.push_back(shard.rows.end);
  }
  variable.attrs.set(kShards, Attr::ints(tasks));
  variable.attrs.set(kRows, Attr::ints(boundaries));
}

void clearPlacement(Variable &variable) {
  for (const char *key : {kPlacement, kShards, kRows})
    variable.attrs.erase(key);
}

bool onParameterServers(const Variable &variable) {
  auto placement = placementOf(variable);
  return placement && placement->where == Placement::ParameterServer;
}

int64_t HeldRows::count() const {
  int64_t total = 0;
  for (const RowRange &range : ranges)
    total += range.size();
  return total;
}

std::optional<HeldRows> heldRowsOf(const Variable &variable) {
  const Attr *shape = attrOf(variable, kTableShape, AttrKind::Ints);
  const Attr *held = attrOf(variable, kHeldRows, AttrKind::Ints);
  if (!shape || !held || held->getInts().size() % 2 != 0)
    return std::nullopt;
  HeldRows result;
  result.tableShape.assign(shape->getInts().begin(), shape->getInts().end());
  for (size_t i = 0; i + 1 < held->getInts().size(); i += 2)
    result.ranges.push_back({held->getInts()[i], held->getInts()[i + 1]});
  return result;
}

void setHeldRows(Variable &variable, const HeldRows &held) {
  llvm::SmallVector<int64_t, 4> pairs;
  for (const RowRange &range : held.ranges) {
    pairs.push_back(range.begin);
    pairs.push_back(range.end);
  }
  variable.attrs.set(kTableShape, Attr::ints(held.tableShape));
  variable.attrs.set(kHeldRows, Attr::ints(pairs));
}

llvm::Error checkPlacementAttrs(const Variable &variable) {
  auto bad = [&](const char *attr, const llvm::Twine &expected) {
    return makeError("variable '" + variable.name() + "': attribute '" + attr + "' " + expected);
  };
  if (const Attr *kind = variable.attrs.find(kKind))
    if (kind->kind() != AttrKind::String || !parseKind(kind->getString()))
      return bad(kKind,
                 "must be \"dense\", \"sparse\", \"mixed\" or \"unused\", got " + kind->str());
  const Attr *where = variable.attrs.find(kPlacement);
  if (where && (where->kind() != AttrKind::String || !parsePlacement(where->getString())))
    return bad(kPlacement, "must be \"allreduce\", \"ps\" or \"replicated\", got " + where->str());
  const Attr *shards = variable.attrs.find(kShards);
  const Attr *rows = variable.attrs.find(kRows);
  if (shards || rows) {
    if (!shards || !rows || shards->kind() != AttrKind::Ints || rows->kind() != AttrKind::Ints)
      return bad(shards ? kRows : kShards, "must come with the other, both lists of integers");
    if (rows->getInts().size() != shards->getInts().size() + 1)
      return bad(kRows, "must list one boundary more than 'shards' has tasks");
    for (int64_t task : shards->getInts())
      if (task < 0)
        return bad(kShards, "must list PS task indices (0 or more), got " + shards->str());
    for (size_t i = 1; i < rows->getInts().size(); ++i)
      if (rows->getInts()[i] < rows->getInts()[i - 1])
        return bad(kRows, "must not decrease, got " + rows->str());
  }
  const Attr *shape = variable.attrs.find(kTableShape);
  const Attr *held = variable.attrs.find(kHeldRows);
  if (shape || held) {
    if (!shape || !held || shape->kind() != AttrKind::Ints || held->kind() != AttrKind::Ints)
      return bad(shape ? kHeldRows : kTableShape, "must come with the other, both integer lists");
    if (held->getInts().size() % 2 != 0)
      return bad(kHeldRows, "must list [begin, end) pairs, got " + held->str());
    for (size_t i = 0; i + 1 < held->getInts().size(); i += 2)
      if (held->getInts()[i] > held->getInts()[i + 1] || held->getInts()[i] < 0)
        return bad(kHeldRows, "has an empty or negative range in " + held->str());
  }
  return llvm::Error::success();
}

} // namespace prism::ir
