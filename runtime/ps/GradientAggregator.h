// Combining what a step's contributors pushed into one gradient per shard: the batch-weighted
// mean Σ w_i g_i / Σ w_i, computed in contributor order so that the result, bit for bit, never
// depends on the order in which pushes arrived.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/Tensor.h"
#include "runtime/ps/PsShard.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::ps {

// A gradient for one shard: dense, of the shard's shape; or sparse, rows with local row numbers
// (global row − rowBegin) that may repeat and add up.
struct ShardGradient {
  Tensor dense;   // empty when sparse
  Tensor indices; // i64 [n]
  Tensor rows;    // [n, row shape...]
  bool isSparse() const { return dense.empty(); }
};

// Gradients by variable name.
using GradientSet = std::map<std::string, ShardGradient>;

// One contributor's push for one step, checked against the shards it names.
struct Contribution {
  double weight = 0; // its local batch size, > 0
  GradientSet gradients;
};

// The batch-weighted mean of `contributions` (in contributor-index order) for each shard that
// some contribution has a gradient for; a contributor without one counts as a zero gradient.
// A shard's result is dense when any contribution was dense, else the concatenation of every
// contribution's rows scaled by w_i / Σw. Sums are taken in float64, in contributor order.
llvm::Expected<GradientSet> aggregateGradients(llvm::ArrayRef<PsShard> shards,
                                               llvm::ArrayRef<Contribution> contributions);

// Sparse rows with each index once: `indices` (i64, n) and `rows` ([n, row shape...], f32 or
// f64) with the rows of a repeated index summed (in float64, in the given order), the indices in
// the order they first appear. Repeated rows add up, so the sum a server takes is the same.
ShardGradient coalesceRows(const Tensor &indices, const Tensor &rows);

} // namespace prism::runtime::ps
