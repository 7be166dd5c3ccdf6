// Compute precision: names, the `compute` attribute and the rounding that defines it.
#include "ir/Precision.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ir/Diagnostic.h"
#include "ir/Module.h"
#include "ir/OpTable.h"

namespace prism::ir {

llvm::StringRef precisionName(ComputePrecision precision) {
  switch (precision) {
  case ComputePrecision::F32:
    return "f32";
  case ComputePrecision::BF16:
    return "bf16";
  case ComputePrecision::FP16:
    return "fp16";
  }
  return "f32";
}

llvm::Expected<ComputePrecision> parsePrecision(llvm::StringRef text) {
  for (ComputePrecision p : {ComputePrecision::F32, ComputePrecision::BF16, ComputePrecision::FP16})
    if (text == precisionName(p))
      return p;
  return makeError("unknown precision '" + text + "': expected f32, bf16 or fp16");
}

bool allowsReducedPrecision(const OpDef &def) {
  return def.reducedPrecisionOperands != 0;
}

ComputePrecision computePrecision(const Op &op) {
  const Attr *attr = op.attrs.find(kComputeAttr);
  if (!attr || attr->kind() != AttrKind::String)
    return ComputePrecision::F32;
  auto parsed = parsePrecision(attr->getString());
  if (!parsed) {
    llvm::consumeError(parsed.takeError()); // the verifier reports it
    return ComputePrecision::F32;
  }
  return *parsed;
}

void setComputePrecision(Op &op, ComputePrecision precision) {
  if (precision == ComputePrecision::F32)
    op.attrs.erase(kComputeAttr);
  else
    op.attrs.set(kComputeAttr, Attr::string(precisionName(precision).str()));
}

namespace {

float roundToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if (std::isnan(value))
    bits = (bits | 0x00400000u) & 0xffff0000u; // stays a quiet NaN
  else
    bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u; // to nearest, ties to even
  float rounded;
  std::memcpy(&rounded, &bits, sizeof rounded);
  return rounded;
}

float roundToFp16(float value) {
  if (std::isnan(value) || std::isinf(value))
    return value;
  float magnitude = std::fabs(value);
  if (magnitude >= 65520.0f) // rounds past the largest fp16, 65504
    return std::copysign(INFINITY, value);
  int exponent;
  std::frexp(magnitude, &exponent); // magnitude = m · 2^exponent, m in [0.5, 1)
  // 11 significant bits for normal numbers (exponent >= -13); subnormals have a fixed step of
  // 2^-24.
  int step = std::max(exponent - 11, -24);
  float quantum = std::ldexp(1.0f, step);
  float rounded = std::nearbyint(magnitude / quantum) * quantum; // ties to even
  return std::copysign(rounded, value);
}

} // namespace

float roundToPrecision(float value, ComputePrecision precision) {
  switch (precision) {
  case ComputePrecision::F32:
    return value;
  case ComputePrecision::BF16:
    return roundToBf16(value);
  case ComputePrecision::FP16:
    return roundToFp16(value);
  }
  return value;
}

} // namespace prism::ir
