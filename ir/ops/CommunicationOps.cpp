// Communication: the ops the parallelizing passes insert to move values between towers, worker
// tasks and parameter-server tasks. A task's program is ordinary IR with these ops in it; the
// distributed runtime gives them kernels (docs/parallelization.md has their semantics).
#include "ir/ops/OpHelpers.h"

namespace prism::ir::ops {
namespace {

// Every operand must be floating point; the results have the operands' types.
ShapeResult allReduceShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  Types out;
  for (const TensorType &t : in) {
    if (auto e = expectDense(t, "all_reduce operand"))
      return std::move(e);
    if (auto e = expectFloat(t, "all_reduce operand"))
      return std::move(e);
    out.push_back(t);
  }
  if (attrs.getString("group").empty())
    return shapeError("group must not be empty");
  return out;
}

// Only the bytes that travel count: one copy of every operand.
OpCost transferCost(llvm::ArrayRef<TensorType> in, llvm::ArrayRef<TensorType> out, const AttrMap &,
                    int64_t batch) {
  OpCost c;
  for (const TensorType &t : out)
    c.bytes += bytesOf(t, batch);
  if (out.empty())
    for (const TensorType &t : in.drop_front())
      c.bytes += bytesOf(t, batch);
  return c;
}

ShapeResult pullShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectDense(in[0], "variable"))
    return std::move(e);
  return Types{in[0]};
}

ShapeResult pullRowsShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  return getOp("gather").shape(in, attrs);
}

ShapeResult pushShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (in[1].sparse)
    return shapeError("ps_push takes a dense gradient, got " + in[1].str() +
                      " (sparse gradients go through ps_push_rows)");
  if (auto e = expectSameType(in[0], in[1], "variable and gradient"))
    return std::move(e);
  return Types{};
}

ShapeResult pushRowsShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (!in[1].sparse)
    return shapeError("ps_push_rows takes a sparse gradient, got " + in[1].str());
  if (in[1].dense() != in[0])
    return shapeError("gradient " + in[1].str() + " does not match variable " + in[0].str());
  return Types{};
}

ShapeResult gradientShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectFloat(in[0], "variable"))
    return std::move(e);
  return Types{in[0].dense()};
}

ShapeResult gradientRowsShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectFloat(in[0], "variable"))
    return std::move(e);
  if (in[0].rank() < 1)
    return shapeError("a sparse gradient needs a table, got " + in[0].str());
  return Types{TensorType(in[0].dtype, in[0].dims, /*sparse=*/true)};
}

ShapeResult combineTowersShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  for (const TensorType &t : in.drop_front())
    if (auto e = expectSameType(in[0], t, "tower values"))
      return std::move(e);
  if (auto e = expectFloat(in[0], "tower value"))
    return std::move(e);
  return Types{in[0]};
}

ShapeResult towerSliceShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  const TensorType &x = in[0];
  if (x.rank() < 1 || x.dims[0] != kBatchDim)
    return shapeError("the sliced value must have the batch dimension B first, got " + x.str());
  int64_t tower = attrs.getInt("tower"), towers = attrs.getInt("towers");
  if (towers < 1 || tower < 0 || tower >= towers)
    return shapeError("tower " + std::to_string(tower) + " is not one of " +
                      std::to_string(towers) + " towers");
  return Types{x};
}

} // namespace

void registerCommunicationOps(std::vector<OpDef> &t) {
  OpDef allReduce = makeOp(
      "all_reduce",
      "the batch-weighted mean Σ bᵢ gᵢ / Σ bᵢ of each operand over the group's tasks; operands "
      "sharing a bucket travel as one message",
      {"g"}, allReduceShape, nullptr,
      {attr("group", AttrKind::String, "the tasks that take part (a group of the plan)"),
       attr("bucket", AttrKind::Int, "the fusion bucket: its operands are reduced together")},
      kCommunication);
  allReduce.variadic = true;
  allReduce.resultPerOperand = true;
  allReduce.cost = transferCost;
  t.push_back(allReduce);

  OpDef pull = makeOp("ps_pull", "the value of a PS-held variable at step start", {"var"},
                      pullShape, nullptr, {}, kCommunication);
  pull.cost = transferCost;
  t.push_back(pull);
  OpDef pullRows = makeOp("ps_pull_rows",
                          "gather(var, indices) answered by the PS shards that own the rows: only "
                          "the rows read travel",
                          {"var", "indices"}, pullRowsShape, nullptr, {}, kCommunication);
  pullRows.cost = transferCost;
  t.push_back(pullRows);
  OpDef push = makeOp("ps_push", "sends a dense gradient to the PS shards of var at step end",
                      {"var", "g"}, pushShape, nullptr, {}, kCommunication | kSideEffect);
  push.numResults = 0;
  push.cost = transferCost;
  t.push_back(push);
  OpDef pushRows = makeOp("ps_push_rows",
                          "sends a sparse gradient to the PS shards of var, each its rows, at "
                          "step end",
                          {"var", "g"}, pushRowsShape, nullptr, {}, kCommunication | kSideEffect);
  pushRows.numResults = 0;
  pushRows.cost = transferCost;
  t.push_back(pushRows);
  t.push_back(makeOp("ps_gradient",
                     "on a PS task: the batch-weighted mean of the dense gradients pushed for "
                     "this shard of var this step",
                     {"var"}, gradientShape, nullptr, {}, kCommunication | kOnParameterServer));
  t.push_back(makeOp("ps_gradient_rows",
                     "on a PS task: the pushed sparse gradients of this shard of var, each "
                     "scaled by its batch weight, rows numbered within the shard",
                     {"var"}, gradientRowsShape, nullptr, {}, kCommunication | kOnParameterServer));

  OpDef combine = makeOp("combine_towers",
                         "inside a task: the batch-weighted mean of the towers' values (sparse "
                         "values: their rows, each scaled by its tower's weight)",
                         {"g"}, combineTowersShape, nullptr, {}, kCommunication);
  combine.variadic = true;
  t.push_back(combine);
  t.push_back(makeOp("tower_slice",
                     "the rows of the batch that tower `tower` of `towers` computes (the "
                     "contiguous split of docs/data.md)",
                     {"x"}, towerSliceShape, nullptr,
                     {attr("tower", AttrKind::Int, "this tower"),
                      attr("towers", AttrKind::Int, "the number of towers")},
                     kCommunication));
}

} // namespace prism::ir::ops
