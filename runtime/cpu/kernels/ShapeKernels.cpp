// CPU kernels of the shape and data-movement ops: reshape, transpose, concat, slice, pad,
// reductions (global_avg_pool among them), constant, cast, and the backward ops that undo
// broadcasting and reductions (sum_like, expand_like, slice_grad, reshape_like).
#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

#include "runtime/cpu/kernels/Broadcast.h"
#include "runtime/cpu/kernels/DTypeDispatch.h"
#include "runtime/cpu/kernels/ElementwiseMath.h"
#include "runtime/cpu/kernels/Parallel.h"
#include "runtime/cpu/kernels/RowSum.h"
#include "runtime/cpu/kernels/TargetClones.h"

namespace prism::runtime::cpu {
namespace {

int64_t normalizedAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

int64_t product(llvm::ArrayRef<int64_t> dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t(1), std::multiplies<int64_t>());
}

std::vector<int64_t> rowMajorStrides(llvm::ArrayRef<int64_t> dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;)
    strides[i - 1] = strides[i] * dims[i];
  return strides;
}

// Short runs are copied by a loop: a memcpy call costs more than a few elements.
template <typename E> void copyElements(E *__restrict to, const E *__restrict from, int64_t n) {
  if (n >= 64) {
    std::memcpy(to, from, static_cast<size_t>(n) * sizeof(E));
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    to[i] = from[i];
}

// reshape and reshape_like: the elements stay in row-major order; only the shape changes. The
// output has its own buffer (the input's may be reused once this op has read it), so it is a
// copy.
class CopyKernel final : public Kernel {
public:
  explicit CopyKernel(const KernelSpec &spec)
      : bytes_(spec.outputTypes[0].numElements() * ir::dtypeBytes(spec.outputTypes[0].dtype)),
        threads_(spec.threads) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const char *from = static_cast<const char *>(inputs[0]->dense.raw());
    char *to = static_cast<char *>(outputs[0]->dense.raw());
    if (from == to)
      return llvm::Error::success();
    parallelFor(bytes_, threads_, kCheapGrain * 4, [&](int64_t begin, int64_t end) {
      std::memcpy(to + begin, from + begin, static_cast<size_t>(end - begin));
    });
    return llvm::Error::success();
  }

private:
  int64_t bytes_;
  int threads_;
};

KernelOrError makeCopy(const KernelSpec &spec) {
  return std::unique_ptr<Kernel>(new CopyKernel(spec));
}

// ---------------------------------------------------------------------------------------------
// transpose

// A transpose with extent-1 dimensions dropped and runs of input dimensions that stay adjacent
// and in order merged: NCHW -> NHWC is [N, C, HW] with perm [0, 2, 1].
struct SimplifiedPermutation {
  std::vector<int64_t> dims; // of the input
  std::vector<int64_t> perm; // output dimension i is input dimension perm[i]
};

SimplifiedPermutation simplifyPermutation(llvm::ArrayRef<int64_t> dims,
                                          llvm::ArrayRef<int64_t> perm) {
  std::vector<int64_t> kept; // output order, input dimension numbers, extent-1 ones dropped
  for (int64_t p : perm)
    if (dims[p] != 1)
      kept.push_back(p);
  // Runs of consecutive input dimensions, in output order.
  std::vector<std::pair<int64_t, int64_t>> runs; // first, last input dimension
  for (int64_t p : kept) {
    if (!runs.empty() && runs.back().second + 1 == p) {
      runs.back().second = p;
      continue;
    }
    // Extent-1 input dimensions between two kept ones do not break a run.
    if (!runs.empty() && p > runs.back().second) {
      bool onlyOnes = true;
      for (int64_t d = runs.back().second + 1; d < p && onlyOnes; ++d)
        onlyOnes = dims[d] == 1;
      if (onlyOnes) {
        runs.back().second = p;
        continue;
      }
    }
    runs.push_back({p, p});
  }
  std::vector<size_t> byInputOrder(runs.size());
  std::iota(byInputOrder.begin(), byInputOrder.end(), 0);
  std::sort(byInputOrder.begin(), byInputOrder.end(),
            [&](size_t a, size_t b) { return runs[a].first < runs[b].first; });
  SimplifiedPermutation s;
  s.perm.resize(runs.size());
  for (size_t rank = 0; rank < byInputOrder.size(); ++rank) {
    const auto &run = runs[byInputOrder[rank]];
    s.dims.push_back(product(dims.slice(run.first, run.second - run.first + 1)));
    s.perm[byInputOrder[rank]] = static_cast<int64_t>(rank);
  }
  return s;
}

// When the input's last dimension stays last, the output is rows copied whole from tabulated
// input offsets. Otherwise the input's last dimension (contiguous in the input) and the output's
// last dimension (contiguous in the output) form a 2-D transpose, done in square tiles so that
// both sides stay in cache; every other dimension is a table of (input, output) offsets.
template <typename E> class TransposeKernel final : public Kernel {
public:
  explicit TransposeKernel(const KernelSpec &spec) : threads_(spec.threads) {
    const auto &type = spec.inputTypes[0];
    total_ = type.numElements();
    auto perm = spec.attrs.getInts("perm");
    SimplifiedPermutation s = simplifyPermutation(type.dims, perm);
    size_t rank = s.dims.size();
    bool identity = true;
    for (size_t i = 0; i < rank; ++i)
      identity &= s.perm[i] == static_cast<int64_t>(i);
    if (identity || total_ == 0) {
      rowLength_ = total_;
      inputStarts_ = {0};
      return;
    }
    std::vector<int64_t> inStrides = rowMajorStrides(s.dims);
    std::vector<int64_t> outDims(rank);
    for (size_t i = 0; i < rank; ++i)
      outDims[i] = s.dims[s.perm[i]];
    std::vector<int64_t> outStrides = rowMajorStrides(outDims);
    if (s.perm.back() == static_cast<int64_t>(rank) - 1) {
      rowLength_ = s.dims.back();
      std::vector<size_t> outer(rank - 1);
      std::iota(outer.begin(), outer.end(), 0);
      tabulate(outDims, outStrides, inStrides, s.perm, outer, inputStarts_, outputStarts_);
      return;
    }
    size_t outInner = rank - 1; // output position of the input's last dimension:
    size_t inInner = std::find(s.perm.begin(), s.perm.end(), int64_t(rank) - 1) - s.perm.begin();
    columns_ = s.dims[s.perm[outInner]];
    columnStride_ = inStrides[s.perm[outInner]];
    lines_ = s.dims.back();
    lineStride_ = outStrides[inInner];
    std::vector<size_t> outer;
    for (size_t i = 0; i < rank; ++i)
      if (i != outInner && i != inInner)
        outer.push_back(i);
    tabulate(outDims, outStrides, inStrides, s.perm, outer, inputStarts_, outputStarts_);
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const E *in = inputs[0]->dense.data<E>();
    E *out = outputs[0]->dense.data<E>();
    if (columns_ == 0)
      runRows(in, out);
    else
      runTiles(in, out);
    return llvm::Error::success();
  }

private:
  static constexpr int64_t kTile = 64 / sizeof(E) >= 16 ? 64 / sizeof(E) : 16;

  // Input and output offsets of every combination of the `outer` output dimensions, in the
  // output's row-major order.
  static void tabulate(const std::vector<int64_t> &outDims, const std::vector<int64_t> &outStrides,
                       const std::vector<int64_t> &inStrides, const std::vector<int64_t> &perm,
                       const std::vector<size_t> &outer, std::vector<int64_t> &inputStarts,
                       std::vector<int64_t> &outputStarts) {
    int64_t count = 1;
    for (size_t d : outer)
      count *= outDims[d];
    inputStarts.assign(count, 0);
    outputStarts.assign(count, 0);
    std::vector<int64_t> index(outer.size(), 0);
    int64_t inAt = 0, outAt = 0;
    for (int64_t c = 0; c < count; ++c) {
      inputStarts[c] = inAt;
      outputStarts[c] = outAt;
      for (size_t k = outer.size(); k-- > 0;) {
        size_t d = outer[k];
        inAt += inStrides[perm[d]];
        outAt += outStrides[d];
        if (++index[k] < outDims[d])
          break;
        inAt -= inStrides[perm[d]] * outDims[d];
        outAt -= outStrides[d] * outDims[d];
        index[k] = 0;
      }
    }
  }

  void runRows(const E *in, E *out) const {
    int64_t rows = static_cast<int64_t>(inputStarts_.size());
    if (rows == 1) { // the identity: one parallel copy
      parallelFor(total_, threads_, kCheapGrain, [&](int64_t begin, int64_t end) {
        copyElements(out + begin, in + begin, end - begin);
      });
      return;
    }
    int64_t grain = std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(rowLength_, 1));
    parallelFor(rows, threads_, grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        copyElements(out + r * rowLength_, in + inputStarts_[r], rowLength_);
    });
  }

  void runTiles(const E *in, E *out) const {
    int64_t columnTiles = (columns_ + kTile - 1) / kTile;
    int64_t lineTiles = (lines_ + kTile - 1) / kTile;
    int64_t tilesPerCombination = columnTiles * lineTiles;
    int64_t tiles = static_cast<int64_t>(inputStarts_.size()) * tilesPerCombination;
    int64_t grain = std::max<int64_t>(1, kCheapGrain / (kTile * kTile));
    parallelFor(tiles, threads_, grain, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        int64_t combination = t / tilesPerCombination, tile = t % tilesPerCombination;
        int64_t line0 = tile / columnTiles * kTile, column0 = tile % columnTiles * kTile;
        int64_t lineEnd = std::min(lines_, line0 + kTile);
        int64_t columnEnd = std::min(columns_, column0 + kTile);
        const E *from = in + inputStarts_[combination];
        E *to = out + outputStarts_[combination];
        // Output line `line` is contiguous over columns; the input reads it with a stride.
        for (int64_t line = line0; line < lineEnd; ++line) {
          E *__restrict toLine = to + line * lineStride_;
          const E *__restrict fromLine = from + line;
          for (int64_t column = column0; column < columnEnd; ++column)
            toLine[column] = fromLine[column * columnStride_];
        }
      }
    });
  }

  int threads_;
  int64_t total_ = 0;
  // Rows: output row r is rowLength_ elements from inputStarts_[r].
  int64_t rowLength_ = 0;
  // Tiles: per combination of the other dimensions, `lines_` output lines of `columns_`.
  int64_t columns_ = 0, columnStride_ = 0, lines_ = 0, lineStride_ = 0;
  std::vector<int64_t> inputStarts_, outputStarts_;
};

KernelOrError makeTranspose(const KernelSpec &spec) {
  return withElementBits(spec, spec.outputTypes[0].dtype, [&](auto e) {
    return std::unique_ptr<Kernel>(new TransposeKernel<decltype(e)>(spec));
  });
}

// ---------------------------------------------------------------------------------------------
// concat, slice, slice_grad: each output row (the dimensions before the axis) is a fixed list of
// segments, each copied from a row of an input or filled with zeros.

struct Segment {
  int input = -1;             // -1: zeros
  int64_t length = 0;         // elements
  int64_t inputRowLength = 0; // the input's elements per row
  int64_t inputColumn = 0;    // where in the input's row the segment starts
};

template <typename E> class RowAssemblyKernel final : public Kernel {
public:
  RowAssemblyKernel(const KernelSpec &spec, std::vector<Segment> segments)
      : segments_(std::move(segments)), threads_(spec.threads) {
    total_ = spec.outputTypes[0].numElements();
    for (const Segment &s : segments_) {
      segmentStarts_.push_back(rowLength_);
      rowLength_ += s.length;
    }
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    E *out = outputs[0]->dense.data<E>();
    if (rowLength_ == 0)
      return llvm::Error::success();
    parallelFor(total_, threads_, kCheapGrain, [&](int64_t begin, int64_t end) {
      int64_t row = begin / rowLength_, column = begin % rowLength_;
      size_t s = std::upper_bound(segmentStarts_.begin(), segmentStarts_.end(), column) -
                 segmentStarts_.begin() - 1;
      while (begin < end) {
        const Segment &segment = segments_[s];
        int64_t within = column - segmentStarts_[s];
        int64_t count = std::min(segment.length - within, end - begin);
        if (segment.input < 0) {
          std::memset(out + begin, 0, static_cast<size_t>(count) * sizeof(E));
        } else {
          const E *from = inputs[segment.input]->dense.data<E>() + row * segment.inputRowLength +
                          segment.inputColumn + within;
          copyElements(out + begin, from, count);
        }
        begin += count;
        column += count;
        if (++s == segments_.size()) {
          s = 0;
          column = 0;
          ++row;
        }
      }
    });
    return llvm::Error::success();
  }

private:
  std::vector<Segment> segments_;
  std::vector<int64_t> segmentStarts_;
  int64_t rowLength_ = 0, total_ = 0;
  int threads_;
};

KernelOrError makeRowAssembly(const KernelSpec &spec, std::vector<Segment> segments) {
  // Empty segments would never advance a row.
  segments.erase(std::remove_if(segments.begin(), segments.end(),
                                [](const Segment &s) { return s.length == 0; }),
                 segments.end());
  return withElementBits(spec, spec.outputTypes[0].dtype, [&](auto e) {
    return std::unique_ptr<Kernel>(new RowAssemblyKernel<decltype(e)>(spec, segments));
  });
}

// Elements of one index along `axis` and everything after it.
int64_t innerElements(llvm::ArrayRef<int64_t> dims, int64_t axis) {
  return product(dims.drop_front(axis + 1));
}

KernelOrError makeConcat(const KernelSpec &spec) {
  const auto &out = spec.outputTypes[0];
  int64_t axis = normalizedAxis(spec.attrs.getInt("axis"), out.rank());
  int64_t inner = innerElements(out.dims, axis);
  std::vector<Segment> segments;
  for (size_t i = 0; i < spec.inputTypes.size(); ++i) {
    int64_t length = spec.inputTypes[i].dims[axis] * inner;
    segments.push_back({static_cast<int>(i), length, length, 0});
  }
  return makeRowAssembly(spec, std::move(segments));
}

KernelOrError makeSlice(const KernelSpec &spec) {
  const auto &in = spec.inputTypes[0], &out = spec.outputTypes[0];
  int64_t axis = normalizedAxis(spec.attrs.getInt("axis"), in.rank());
  int64_t inner = innerElements(in.dims, axis);
  int64_t begin = spec.attrs.getInt("begin");
  return makeRowAssembly(spec, {{0, out.dims[axis] * inner, in.dims[axis] * inner, begin * inner}});
}

KernelOrError makeSliceGrad(const KernelSpec &spec) {
  const auto &g = spec.inputTypes[0], &out = spec.outputTypes[0];
  int64_t axis = normalizedAxis(spec.attrs.getInt("axis"), out.rank());
  int64_t inner = innerElements(out.dims, axis);
  int64_t begin = spec.attrs.getInt("begin");
  int64_t extent = g.dims[axis];
  return makeRowAssembly(spec, {{-1, begin * inner, 0, 0},
                                {0, extent * inner, extent * inner, 0},
                                {-1, (out.dims[axis] - begin - extent) * inner, 0, 0}});
}

// ---------------------------------------------------------------------------------------------
// pad: each output row (every dimension but the last) is the padding value, or an input row
// with the last dimension's padding on either side.

template <typename T> class PadKernel final : public Kernel {
public:
  PadKernel(const KernelSpec &spec, T value) : value_(value), threads_(spec.threads) {
    const auto &in = spec.inputTypes[0], &out = spec.outputTypes[0];
    auto pads = spec.attrs.getInts("pads");
    int64_t rank = in.rank();
    if (rank == 0) { // nothing to pad: one row of one element
      rowStarts_ = {0};
      inner_ = outLength_ = 1;
      return;
    }
    inner_ = in.dims[rank - 1];
    before_ = pads[rank - 1];
    outLength_ = out.dims[rank - 1];
    // Input row starts in the output's row order (an odometer over the outer dimensions).
    std::vector<int64_t> inStrides = rowMajorStrides(in.dims);
    int64_t rows = product(llvm::ArrayRef<int64_t>(out.dims).drop_back());
    rowStarts_.assign(rows, -1);
    std::vector<int64_t> index(rank - 1, 0);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t at = 0;
      bool inside = true;
      for (int64_t d = 0; d + 1 < rank && inside; ++d) {
        int64_t i = index[d] - pads[d];
        inside = i >= 0 && i < in.dims[d];
        at += i * inStrides[d];
      }
      if (inside)
        rowStarts_[r] = at;
      for (int64_t d = rank - 1; d-- > 0;) {
        if (++index[d] < out.dims[d])
          break;
        index[d] = 0;
      }
    }
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const T *x = inputs[0]->dense.data<T>();
    T *out = outputs[0]->dense.data<T>();
    const T value = value_;
    int64_t rows = static_cast<int64_t>(rowStarts_.size());
    int64_t grain = std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(outLength_, 1));
    parallelFor(rows, threads_, grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        T *row = out + r * outLength_;
        if (rowStarts_[r] < 0) {
          std::fill(row, row + outLength_, value);
          continue;
        }
        std::fill(row, row + before_, value);
        copyElements(row + before_, x + rowStarts_[r], inner_);
        std::fill(row + before_ + inner_, row + outLength_, value);
      }
    });
    return llvm::Error::success();
  }

private:
  T value_;
  int threads_;
  int64_t inner_ = 0, before_ = 0, outLength_ = 0;
  std::vector<int64_t> rowStarts_; // -1: a row of padding
};

KernelOrError makePad(const KernelSpec &spec) {
  double value = spec.attrs.getFloat("value");
  return withNumericType(spec, spec.outputTypes[0].dtype, [&](auto t) {
    using T = decltype(t);
    return std::unique_ptr<Kernel>(new PadKernel<T>(spec, static_cast<T>(value)));
  });
}

// ---------------------------------------------------------------------------------------------
// reduce_sum, reduce_mean, sum_like: sums over some dimensions, accumulated in double.

// The input with extent-1 dimensions dropped and neighbouring dimensions that are both reduced
// or both kept merged. If the last one is reduced, every output element sums contiguous
// segments of `inner` elements; if it is kept, every output row of `inner` elements sums
// contiguous input rows. outputStarts holds where each output element's (or row's) first
// segment begins; reducedStarts the offsets of its segments from there.
struct ReductionPlan {
  bool innerReduced = true;
  int64_t inner = 1;
  std::vector<int64_t> outputStarts, reducedStarts;

  ReductionPlan(llvm::ArrayRef<int64_t> dims, const std::vector<bool> &reduced) {
    std::vector<int64_t> mergedDims;
    std::vector<bool> mergedReduced;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] == 1)
        continue;
      if (!mergedDims.empty() && mergedReduced.back() == reduced[d]) {
        mergedDims.back() *= dims[d];
        continue;
      }
      mergedDims.push_back(dims[d]);
      mergedReduced.push_back(reduced[d]);
    }
    if (mergedDims.empty()) { // a single element
      mergedDims.push_back(1);
      mergedReduced.push_back(true);
    }
    std::vector<int64_t> strides = rowMajorStrides(mergedDims);
    innerReduced = mergedReduced.back();
    inner = mergedDims.back();
    std::vector<size_t> kept, folded;
    for (size_t d = 0; d + 1 < mergedDims.size(); ++d)
      (mergedReduced[d] ? folded : kept).push_back(d);
    outputStarts = offsets(mergedDims, strides, kept);
    reducedStarts = offsets(mergedDims, strides, folded);
  }

  // Offsets of every combination of the dimensions `which`, row-major.
  static std::vector<int64_t> offsets(const std::vector<int64_t> &dims,
                                      const std::vector<int64_t> &strides,
                                      const std::vector<size_t> &which) {
    int64_t count = 1;
    for (size_t d : which)
      count *= dims[d];
    std::vector<int64_t> result(count);
    std::vector<int64_t> index(which.size(), 0);
    int64_t at = 0;
    for (int64_t c = 0; c < count; ++c) {
      result[c] = at;
      for (size_t k = which.size(); k-- > 0;) {
        at += strides[which[k]];
        if (++index[k] < dims[which[k]])
          break;
        at -= strides[which[k]] * dims[which[k]];
        index[k] = 0;
      }
    }
    return result;
  }
};

// Σ of the elements [begin, end) of one output's reduced range, in which segment t holds the
// elements [t * inner, (t + 1) * inner) and starts at x + starts[t].
template <typename T>
PRISM_TARGET_CLONES double sumReduced(const T *x, const int64_t *starts, int64_t inner,
                                      int64_t begin, int64_t end) {
  double sum = 0;
  for (int64_t at = begin; at < end;) {
    int64_t t = at / inner, within = at % inner;
    int64_t count = std::min(inner - within, end - at);
    sum += sumAsDouble(x + starts[t] + within, count);
    at += count;
  }
  return sum;
}

// Restrict parameters: GCC vectorizes this loop without a run-time overlap check (restrict
// pointers declared inside a loop do not give it that).
template <typename T>
PRISM_ALWAYS_INLINE void accumulateRow(double *__restrict acc, const T *__restrict x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    acc[i] += static_cast<double>(x[i]);
}

// acc[i] += Σ over t in [begin, end) of x[starts[t] + i], for i < n.
template <typename T>
PRISM_TARGET_CLONES void accumulateRows(double *acc, const T *x, const int64_t *starts,
                                        int64_t begin, int64_t end, int64_t n) {
  for (int64_t t = begin; t < end; ++t)
    accumulateRow(acc, x + starts[t], n);
}

template <typename T> class ReductionKernel final : public Kernel {
public:
  ReductionKernel(const KernelSpec &spec, const std::vector<bool> &reduced, bool mean)
      : plan_(spec.inputTypes[0].dims, reduced), threads_(spec.threads) {
    const auto &in = spec.inputTypes[0];
    int64_t count = 1;
    for (size_t d = 0; d < in.dims.size(); ++d)
      if (reduced[d])
        count *= in.dims[d];
    divisor_ = mean ? static_cast<double>(count) : 1.0;
    outputs_ = spec.outputTypes[0].numElements();
    // Per-block partial sums when there are too few outputs to give every thread some.
    partials_.resize(static_cast<size_t>(std::max(threads_, 1)) *
                     static_cast<size_t>(outputs_ < kColumnChunk * threads_ ? outputs_ : 0));
  }

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const T *x = inputs[0]->dense.data<T>();
    T *out = outputs[0]->dense.data<T>();
    if (plan_.innerReduced)
      runSegments(x, out);
    else
      runRows(x, out);
    return llvm::Error::success();
  }

private:
  // Columns of an output row summed together: their accumulators stay in L1.
  static constexpr int64_t kColumnChunk = 1024;

  T finish(double sum) const { return static_cast<T>(sum / divisor_); }

  // The last dimension is reduced: out[j] = sum over t of segment (outputStarts[j] +
  // reducedStarts[t]).
  void runSegments(const T *x, T *out) {
    int64_t outputs = static_cast<int64_t>(plan_.outputStarts.size());
    int64_t segments = static_cast<int64_t>(plan_.reducedStarts.size());
    int64_t inner = plan_.inner;
    int64_t perOutput = segments * inner;
    if (outputs >= threads_ || perOutput * outputs < kCheapGrain * 2) {
      int64_t grain = std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(perOutput, 1));
      parallelFor(outputs, threads_, grain, [&](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j)
          out[j] = finish(sumReduced(x + plan_.outputStarts[j], plan_.reducedStarts.data(), inner,
                                     0, perOutput));
      });
      return;
    }
    // Few outputs, each a long sum: the blocks split every output's (segment, element) range.
    int blocks = parallelBlocks(perOutput, threads_, kCheapGrain / outputs + 1);
    forEachBlock(perOutput, blocks, [&](int block, int64_t begin, int64_t end) {
      for (int64_t j = 0; j < outputs; ++j)
        partials_[block * outputs + j] =
            sumReduced(x + plan_.outputStarts[j], plan_.reducedStarts.data(), inner, begin, end);
    });
    for (int64_t j = 0; j < outputs; ++j) {
      double sum = 0;
      for (int block = 0; block < blocks; ++block)
        sum += partials_[block * outputs + j];
      out[j] = finish(sum);
    }
  }

  // The last dimension is kept: out row j (inner elements) = sum over t of the input row at
  // outputStarts[j] + reducedStarts[t].
  void runRows(const T *x, T *out) {
    int64_t rows = static_cast<int64_t>(plan_.outputStarts.size());
    int64_t folded = static_cast<int64_t>(plan_.reducedStarts.size());
    int64_t inner = plan_.inner;
    int64_t chunks = (inner + kColumnChunk - 1) / kColumnChunk;
    int64_t units = rows * chunks;
    if (units >= threads_ || units * folded * std::min(inner, kColumnChunk) < kCheapGrain * 2) {
      int64_t perUnit = std::max<int64_t>(1, folded * std::min(inner, kColumnChunk));
      int64_t grain = std::max<int64_t>(1, kCheapGrain / perUnit);
      parallelFor(units, threads_, grain, [&](int64_t begin, int64_t end) {
        double acc[kColumnChunk];
        for (int64_t u = begin; u < end; ++u) {
          int64_t j = u / chunks, column = u % chunks * kColumnChunk;
          int64_t count = std::min(kColumnChunk, inner - column);
          std::fill(acc, acc + count, 0.0);
          accumulateRows(acc, x + plan_.outputStarts[j] + column, plan_.reducedStarts.data(), 0,
                         folded, count);
          T *to = out + j * inner + column;
          for (int64_t i = 0; i < count; ++i)
            to[i] = finish(acc[i]);
        }
      });
      return;
    }
    // Few, short output rows summed over many input rows ([N, C] -> [C]): the blocks split the
    // input rows, each summing into its own partial output.
    int64_t outputs = rows * inner;
    int blocks = parallelBlocks(folded, threads_, kCheapGrain / outputs + 1);
    forEachBlock(folded, blocks, [&](int block, int64_t begin, int64_t end) {
      double *acc = partials_.data() + block * outputs;
      std::fill(acc, acc + outputs, 0.0);
      for (int64_t j = 0; j < rows; ++j)
        accumulateRows(acc + j * inner, x + plan_.outputStarts[j], plan_.reducedStarts.data(),
                       begin, end, inner);
    });
    for (int64_t i = 0; i < outputs; ++i) {
      double sum = 0;
      for (int block = 0; block < blocks; ++block)
        sum += partials_[block * outputs + i];
      out[i] = finish(sum);
    }
  }

  ReductionPlan plan_;
  int threads_;
  double divisor_ = 1;
  int64_t outputs_ = 0;
  std::vector<double> partials_;
};

// Which dimensions the `axes` attribute reduces ([] means all).
std::vector<bool> reducedDimensions(const ir::AttrMap &attrs, int64_t rank) {
  auto axes = attrs.getInts("axes");
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes)
    reduced[normalizedAxis(a, rank)] = true;
  return reduced;
}

template <bool Mean> KernelOrError makeReduce(const KernelSpec &spec) {
  std::vector<bool> reduced = reducedDimensions(spec.attrs, spec.inputTypes[0].rank());
  return withNumericType(spec, spec.outputTypes[0].dtype, [&](auto t) {
    return std::unique_ptr<Kernel>(new ReductionKernel<decltype(t)>(spec, reduced, Mean));
  });
}

// global_avg_pool(x[N, H, W, C]) -> [N, C]: reduce_mean over H and W.
KernelOrError makeGlobalAvgPool(const KernelSpec &spec) {
  std::vector<bool> reduced = {false, true, true, false};
  return withFloatType(spec, spec.outputTypes[0].dtype, [&](auto t) {
    return std::unique_ptr<Kernel>(new ReductionKernel<decltype(t)>(spec, reduced, true));
  });
}

// sum_like(g, ref): g summed over the dimensions along which ref (aligned at the last
// dimension) was broadcast.
KernelOrError makeSumLike(const KernelSpec &spec) {
  const auto &g = spec.inputTypes[0], &ref = spec.inputTypes[1];
  std::vector<bool> reduced(g.dims.size(), true);
  size_t lead = g.dims.size() - ref.dims.size();
  for (size_t i = 0; i < ref.dims.size(); ++i)
    reduced[lead + i] = ref.dims[i] == 1 && g.dims[lead + i] != 1;
  return withFloatType(spec, spec.outputTypes[0].dtype, [&](auto t) {
    return std::unique_ptr<Kernel>(new ReductionKernel<decltype(t)>(spec, reduced, false));
  });
}

// ---------------------------------------------------------------------------------------------
// expand_like(g, ref): g (ref reduced over axes) broadcast back to ref's shape, divided by the
// number of reduced elements for a mean.

template <typename T> class ExpandKernel final : public Kernel {
public:
  ExpandKernel(const KernelSpec &spec, BroadcastPlan<1> plan, T scale)
      : plan_(std::move(plan)), scale_(scale), threads_(spec.threads) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const T *g = inputs[0]->dense.data<T>();
    T *out = outputs[0]->dense.data<T>();
    bool step = plan_.innerStep(0) != 0;
    const T scale = scale_;
    parallelFor(plan_.total(), threads_, kCheapGrain, [&](int64_t begin, int64_t end) {
      plan_.forRange(begin, end,
                     [&](int64_t at, const std::array<int64_t, 1> &from, int64_t count) {
                       elementwise::binaryLoop<elementwise::Mul>(out + at, g + from[0], step,
                                                                 &scale, false, count);
                     });
    });
    return llvm::Error::success();
  }

private:
  BroadcastPlan<1> plan_;
  T scale_;
  int threads_;
};

KernelOrError makeExpandLike(const KernelSpec &spec) {
  const auto &out = spec.outputTypes[0];
  std::vector<bool> reduced = reducedDimensions(spec.attrs, out.rank());
  // g's strides over the output's dimensions: row-major over the kept ones, 0 on reduced ones.
  std::vector<int64_t> strides(out.dims.size(), 0);
  int64_t stride = 1, count = 1;
  for (size_t d = out.dims.size(); d-- > 0;) {
    if (reduced[d]) {
      count *= out.dims[d];
      continue;
    }
    strides[d] = stride;
    stride *= out.dims[d];
  }
  double divisor = spec.attrs.getBool("mean") ? static_cast<double>(count) : 1.0;
  BroadcastPlan<1> plan(out.dims, {strides});
  return withFloatType(spec, out.dtype, [&](auto t) {
    using T = decltype(t);
    return std::unique_ptr<Kernel>(new ExpandKernel<T>(spec, plan, static_cast<T>(1.0 / divisor)));
  });
}

// ---------------------------------------------------------------------------------------------
// constant and cast

// The output is filled on every run: the buffer is shared with other values.
template <typename E> class FillKernel final : public Kernel {
public:
  FillKernel(const KernelSpec &spec, E value)
      : value_(value), elements_(spec.outputTypes[0].numElements()), threads_(spec.threads) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *>,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    E *out = outputs[0]->dense.data<E>();
    const E value = value_;
    parallelFor(elements_, threads_, kCheapGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        out[i] = value;
    });
    return llvm::Error::success();
  }

private:
  E value_;
  int64_t elements_;
  int threads_;
};

KernelOrError makeConstant(const KernelSpec &spec) {
  double value = spec.attrs.getFloat("value");
  // Converted as the reference does: integers truncate toward zero, bool is value != 0.
  return withElementType(spec, spec.outputTypes[0].dtype, [&](auto t) {
    using T = decltype(t);
    return std::unique_ptr<Kernel>(new FillKernel<T>(spec, static_cast<T>(value)));
  });
}

// static_cast has the reference's rounding: float to integer truncates toward zero, anything
// to bool is value != 0, bool reads as 0 or 1.
template <typename From, typename To> class CastKernel final : public Kernel {
public:
  explicit CastKernel(const KernelSpec &spec)
      : elements_(spec.outputTypes[0].numElements()), threads_(spec.threads) {}

  llvm::Error run(llvm::ArrayRef<const RuntimeValue *> inputs,
                  llvm::ArrayRef<RuntimeValue *> outputs) override {
    const From *in = inputs[0]->dense.data<From>();
    To *out = outputs[0]->dense.data<To>();
    parallelFor(elements_, threads_, kCheapGrain, [&](int64_t begin, int64_t end) {
      const From *__restrict from = in;
      To *__restrict to = out;
      for (int64_t i = begin; i < end; ++i)
        to[i] = static_cast<To>(from[i]);
    });
    return llvm::Error::success();
  }

private:
  int64_t elements_;
  int threads_;
};

KernelOrError makeCast(const KernelSpec &spec) {
  ir::DType from = spec.inputTypes[0].dtype, to = spec.outputTypes[0].dtype;
  if (from == to)
    return makeCopy(spec);
  return withElementType(spec, from, [&](auto f) {
    return withElementType(spec, to, [&](auto t) {
      return std::unique_ptr<Kernel>(new CastKernel<decltype(f), decltype(t)>(spec));
    });
  });
}

} // namespace

void registerShapeKernels(KernelRegistry &registry) {
  registry.add("reshape", makeCopy);
  registry.add("reshape_like", makeCopy);
  registry.add("transpose", makeTranspose);
  registry.add("concat", makeConcat);
  registry.add("slice", makeSlice);
  registry.add("slice_grad", makeSliceGrad);
  registry.add("pad", makePad);
  registry.add("reduce_sum", makeReduce<false>);
  registry.add("reduce_mean", makeReduce<true>);
  registry.add("sum_like", makeSumLike);
  registry.add("expand_like", makeExpandLike);
  registry.add("global_avg_pool", makeGlobalAvgPool);
  registry.add("constant", makeConstant);
  registry.add("cast", makeCast);
}

} // namespace prism::runtime::cpu
