// The precision an op computes in: float32 by default; bf16 or fp16 for the ops the op table
// allows (matrix products and convolutions), whose inputs are then rounded to the low precision
// while products accumulate and results stay in float32. Written by the mixed-precision pass as
// the `compute` attribute, read by kernels and the reference interpreter.
#pragma once

#include <cstdint>
#include <optional>

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::ir {

class Op;
struct OpDef;

enum class ComputePrecision : uint8_t { F32, BF16, FP16 };

// The attribute every reduced-precision op accepts: `compute = "bf16"`.
constexpr const char *kComputeAttr = "compute";

llvm::StringRef precisionName(ComputePrecision precision); // "f32", "bf16", "fp16"
// Reads "f32", "bf16" or "fp16"; the error names the text and the choices.
llvm::Expected<ComputePrecision> parsePrecision(llvm::StringRef text);

// Whether the op table lets `def` compute in reduced precision.
bool allowsReducedPrecision(const OpDef &def);
// The op's precision (its `compute` attribute; f32 when absent).
ComputePrecision computePrecision(const Op &op);
// Sets it (f32 removes the attribute, so a float32 module prints as written).
void setComputePrecision(Op &op, ComputePrecision precision);

// Rounds a float32 to the nearest bf16 or fp16 value (ties to even), returned as a float32;
// fp16 overflows to ±infinity and underflows through its subnormals. The numerics every
// reduced-precision kernel follows.
float roundToPrecision(float value, ComputePrecision precision);

} // namespace prism::ir
