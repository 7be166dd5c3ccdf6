// The deterministic batch-weighted mean of a step's gradients.
#include "runtime/ps/GradientAggregator.h"

#include <algorithm>

#include "ir/Diagnostic.h"

namespace prism::runtime::ps {
namespace {

template <typename T>
ShardGradient combineDense(const PsShard &shard, llvm::ArrayRef<const ShardGradient *> parts,
                           llvm::ArrayRef<double> scales) {
  Tensor result(shard.dtype, shard.shape());
  std::vector<double> sum(static_cast<size_t>(result.numElements()), 0.0);
  int64_t rowElements = shard.rowElements();
  for (size_t i = 0; i < parts.size(); ++i) {
    const ShardGradient &g = *parts[i];
    if (!g.isSparse()) {
      const T *values = g.dense.data<T>();
      for (size_t j = 0; j < sum.size(); ++j)
        sum[j] += scales[i] * static_cast<double>(values[j]);
      continue;
    }
    const int64_t *indices = g.indices.data<int64_t>();
    const T *rows = g.rows.data<T>();
    for (int64_t r = 0; r < g.indices.numElements(); ++r)
      for (int64_t k = 0; k < rowElements; ++k)
        sum[indices[r] * rowElements + k] +=
            scales[i] * static_cast<double>(rows[r * rowElements + k]);
  }
  T *out = result.data<T>();
  for (size_t j = 0; j < sum.size(); ++j)
    out[j] = static_cast<T>(sum[j]);
  return {result, Tensor(), Tensor()};
}

template <typename T>
ShardGradient concatenateSparse(const PsShard &shard, llvm::ArrayRef<const ShardGradient *> parts,
                                llvm::ArrayRef<double> scales) {
  int64_t total = 0;
  for (const ShardGradient *g : parts)
    total += g->indices.numElements();
  std::vector<int64_t> rowsShape = shard.rowShape();
  rowsShape.insert(rowsShape.begin(), total);
  ShardGradient result{Tensor(), Tensor(ir::DType::I64, {total}), Tensor(shard.dtype, rowsShape)};
  int64_t *indices = result.indices.data<int64_t>();
  T *rows = result.rows.data<T>();
  int64_t rowElements = shard.rowElements();
  for (size_t i = 0; i < parts.size(); ++i) {
    const ShardGradient &g = *parts[i];
    int64_t n = g.indices.numElements();
    std::copy_n(g.indices.data<int64_t>(), n, indices);
    const T *source = g.rows.data<T>();
    for (int64_t j = 0; j < n * rowElements; ++j)
      rows[j] = static_cast<T>(scales[i] * static_cast<double>(source[j]));
    indices += n;
    rows += n * rowElements;
  }
  return result;
}

// Rows into their slots: `out` row slots[i] is the float64 sum of the rows i that name it, in
// the order given, rounded once. A row's elements add independently of each other, so the loop
// over them vectorizes without changing any sum.
template <typename T>
void sumRows(const int64_t *slots, int64_t n, const T *rows, int64_t rowElements, T *out,
             int64_t unique) {
  std::vector<double> sum(static_cast<size_t>(unique * rowElements), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    double *__restrict to = sum.data() + slots[i] * rowElements;
    const T *__restrict from = rows + i * rowElements;
    for (int64_t k = 0; k < rowElements; ++k)
      to[k] += static_cast<double>(from[k]);
  }
  for (size_t j = 0; j < sum.size(); ++j)
    out[j] = static_cast<T>(sum[j]);
}

// Each id's slot in the order the ids first appear, by open addressing over a power-of-two
// table at most half full (a step's few thousand ids: no node to allocate per id, as a
// std::unordered_map would). Returns the distinct ids; `slots` gets each position's slot.
std::vector<int64_t> slotsOfIds(const int64_t *ids, int64_t n, std::vector<int64_t> &slots) {
  size_t capacity = 16;
  int shift = 60; // 64 - log2(capacity)
  for (; capacity < 2 * static_cast<size_t>(n); capacity *= 2)
    --shift;
  std::vector<int64_t> keys(capacity), slotAt(capacity, -1);
  std::vector<int64_t> order;
  slots.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids[i];
    // Fibonacci hashing: the product's high bits, so that ids a stride apart spread out.
    size_t at = static_cast<size_t>((static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ull) >> shift);
    while (slotAt[at] >= 0 && keys[at] != id)
      at = (at + 1) & (capacity - 1);
    if (slotAt[at] < 0) {
      keys[at] = id;
      slotAt[at] = static_cast<int64_t>(order.size());
      order.push_back(id);
    }
    slots[static_cast<size_t>(i)] = slotAt[at];
  }
  return order;
}

} // namespace

ShardGradient coalesceRows(const Tensor &indices, const Tensor &rows) {
  const int64_t n = indices.numElements();
  const int64_t rowElements = n ? rows.numElements() / n : 0;
  std::vector<int64_t> slots;
  const std::vector<int64_t> order = slotsOfIds(indices.data<int64_t>(), n, slots);
  const auto unique = static_cast<int64_t>(order.size());
  std::vector<int64_t> rowShape = rows.shape();
  if (rowShape.empty())
    rowShape.push_back(unique);
  rowShape[0] = unique;
  ShardGradient result{Tensor(), Tensor(ir::DType::I64, {unique}), Tensor(rows.dtype(), rowShape)};
  std::copy(order.begin(), order.end(), result.indices.data<int64_t>());
  if (rows.dtype() == ir::DType::F64)
    sumRows(slots.data(), n, rows.data<double>(), rowElements, result.rows.data<double>(), unique);
  else
    sumRows(slots.data(), n, rows.data<float>(), rowElements, result.rows.data<float>(), unique);
  return result;
}

llvm::Expected<GradientSet> aggregateGradients(llvm::ArrayRef<PsShard> shards,
                                               llvm::ArrayRef<Contribution> contributions) {
  double totalWeight = 0;
  for (const Contribution &c : contributions)
    totalWeight += c.weight;
  if (!(totalWeight > 0))
    return ir::makeError("the contributions' total weight is not positive");

  GradientSet result;
  for (const PsShard &shard : shards) {
    std::vector<const ShardGradient *> parts;
    std::vector<double> scales;
    bool anyDense = false;
    for (const Contribution &c : contributions) {
      auto it = c.gradients.find(shard.name);
      if (it == c.gradients.end())
        continue;
      parts.push_back(&it->second);
      scales.push_back(c.weight / totalWeight);
      anyDense |= !it->second.isSparse();
    }
    if (parts.empty())
      continue;
    bool isF32 = shard.dtype == ir::DType::F32;
    if (!isF32 && shard.dtype != ir::DType::F64)
      return ir::makeError("variable " + shard.name + " is " + ir::dtypeName(shard.dtype) +
                           ", gradients need f32 or f64");
    if (anyDense)
      result[shard.name] = isF32 ? combineDense<float>(shard, parts, scales)
                                 : combineDense<double>(shard, parts, scales);
    else
      result[shard.name] = isF32 ? concatenateSparse<float>(shard, parts, scales)
                                 : concatenateSparse<double>(shard, parts, scales);
  }
  return result;
}

} // namespace prism::runtime::ps
