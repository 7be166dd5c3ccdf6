// The call of a function defined in the module (`%h, %c = @lstm_cell(%x, %h0, %c0, w, b)`):
// a placeholder the inline pass replaces with the function's body before shapes are inferred.
#include "ir/ops/OpHelpers.h"

namespace prism::ir::ops {
namespace {

// A call's types are its body's for these operands, known once the inline pass expands it.
ShapeResult callShape(llvm::ArrayRef<TensorType>, const AttrMap &attrs) {
  return shapeError("a call of @" + attrs.getString("callee") +
                    " has no types until the inline pass expands it (`prism opt "
                    "--passes=inline`; training pipelines run it first)");
}

} // namespace

void registerCallOps(std::vector<OpDef> &t) {
  OpDef call =
      makeOp("call",
             "the results of the function `callee` for these arguments; written "
             "`@callee(args...)` and expanded by the inline pass",
             {"args"}, callShape, nullptr,
             {attr("callee", AttrKind::String, "the function's name, without `@`")}, kCall);
  call.variadic = true;
  t.push_back(call);
}

} // namespace prism::ir::ops
