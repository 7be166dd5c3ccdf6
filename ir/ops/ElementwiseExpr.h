// The expression language of fused_elementwise: prefix calls of elementwise ops over operand
// references, e.g. `mul(sigmoid($0), tanh($1))`. Shared by the op's shape rule, the pass that
// builds such expressions, and the kernels that evaluate them.
#pragma once

#include <string>
#include <vector>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::ir {

// The ops an expression may call: the unary and binary float elementwise ops whose meaning
// does not depend on broadcasting or attributes.
bool isFusableElementwiseOp(llvm::StringRef name);
// All of them (tests run each through fused_elementwise).
llvm::ArrayRef<llvm::StringRef> fusableElementwiseOps();

struct ExprNode {
  int operand = -1;               // >= 0: a reference to operand `operand`
  std::string op;                 // otherwise: the op applied to `args`
  llvm::SmallVector<int, 2> args; // indices of earlier nodes
  bool isOperand() const { return operand >= 0; }
};

// Nodes in evaluation order: every node's arguments come before it; the last node is the root.
struct ElementwiseExpr {
  std::vector<ExprNode> nodes;
  const ExprNode &root() const { return nodes.back(); }
};

// Parses and checks an expression: each called op must be in the op table with the
// kElementwise trait, take 1 or 2 operands, be fusable, and get that many arguments.
llvm::Expected<ElementwiseExpr> parseElementwiseExpr(llvm::StringRef text);

} // namespace prism::ir
