// The rule that draws dropout masks, shared by the reference and every device's kernels: each
// element's draw is a hash of (seed, the op's stream key, step, global example index, element
// index within the example), counter-based, so masks are the same however workers, towers and
// micro-batches split a batch, and a gradient op recomputes its forward's mask exactly.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ir/Type.h"
#include "runtime/SeedRule.h"
#include "llvm/ADT/StringRef.h"

namespace prism::runtime {

// The draws of one op in one step: splitmix64 chained over the seed, the key's FNV-1a hash and
// the step.
inline uint64_t dropoutStepStream(uint64_t seed, llvm::StringRef key, int64_t step) {
  return splitmix64(streamSeed(seed, key) ^ static_cast<uint64_t>(step));
}

// The draws of one example (its index in the global batch) within the step's stream.
inline uint64_t dropoutExampleStream(uint64_t stepStream, int64_t example) {
  return splitmix64(stepStream ^ static_cast<uint64_t>(example));
}

// Whether element `element` of an example survives: its uniform draw u in [0, 1) (53 bits) is
// at least `rate`.
inline bool dropoutKeeps(uint64_t exampleStream, int64_t element, double rate) {
  uint64_t draw = splitmix64(exampleStream ^ static_cast<uint64_t>(element));
  return static_cast<double>(draw >> 11) * 0x1.0p-53 >= rate;
}

// What a kept element is multiplied by (inverted dropout): the expected value is unchanged.
inline double dropoutScale(double rate) {
  return 1.0 / (1.0 - rate);
}

// How a kernel walks a dropout op's value: per example when the declared type's first dimension
// is B (each example its own stream, by its index in the global batch), else as one example;
// `exampleSize` elements an example, of the `bound` type's.
struct DropoutLayout {
  bool perExample = false;
  int64_t exampleSize = 1;
};
inline DropoutLayout dropoutLayout(const ir::TensorType &declared, const ir::TensorType &bound) {
  DropoutLayout layout;
  layout.perExample = declared.rank() > 0 && declared.dims[0] == ir::kBatchDim;
  const int64_t elements = bound.numElements();
  const int64_t examples = layout.perExample ? bound.dims[0] : 1;
  layout.exampleSize = examples == 0 ? 1 : std::max<int64_t>(elements / examples, 1);
  return layout;
}

} // namespace prism::runtime
