// The module verifier: SSA (every value defined once, before use), op signatures, types and
// shapes, the loss, gradients and variable writes. Errors name the op and its location.
#pragma once

#include "ir/Module.h"
#include "llvm/Support/Error.h"

namespace prism::ir {

struct VerifyOptions {
  // Require every value to have a type (after infer-shapes); otherwise untyped values pass.
  bool requireTypes = true;
};

llvm::Error verify(const Module &module, VerifyOptions options = {});

// The optimizer's loss-scaling parameters (docs/ir.md), when given: `loss_scale` a positive
// number, `loss_scale_interval` an integer of at least 1. The error has no location: the verifier
// and lower-optimizer add the optimizer's.
llvm::Error checkLossScaleParameters(const AttrMap &params);

} // namespace prism::ir
