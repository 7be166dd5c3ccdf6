// The GPU's hand-written kernels: fills, reductions, the softmax cross-entropy and its gradient,
// the bias and activation after a matrix product, gathers, convolutions and max pooling, and the
// optimizer updates (dense, or lazy on the rows a sparse gradient touches). NVRTC compiles
// this file once per architecture when a program first needs one of them (CudaOpKernels.h); the
// tests compile it for the host as well (PRISM_HOST_KERNELS) and run every kernel there, one
// thread at a time, against the CPU kernels, so the index arithmetic and the math are checked on
// machines without a GPU.
//
// Each kernel takes one argument, a struct of plain values and pointers (the same layout on host
// and device), and covers its index range with PRISM_FOR_EACH, a grid-stride loop on the GPU.
// Only what NVRTC knows without headers may appear here. Everything is f32 but the fills and
// copies.
#ifdef PRISM_HOST_KERNELS
#define PRISM_KERNEL(name, Args, a) inline void name(const Args a)
#define PRISM_FOR_EACH(i, n) for (long long i = 0; i < (n); ++i)
#else
#define PRISM_KERNEL(name, Args, a) extern "C" __global__ void name(const Args a)
#define PRISM_FOR_EACH(i, n)                                                                       \
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                   \
       i += (long long)blockDim.x * gridDim.x)
#endif

#define PRISM_MAX_RANK 8

#ifdef PRISM_HOST_KERNELS
#define PRISM_DEVICE_FUNCTION inline
inline unsigned int prism_float_bits(float v) {
  unsigned int bits;
  __builtin_memcpy(&bits, &v, sizeof bits);
  return bits;
}
inline float prism_bits_float(unsigned int bits) {
  float v;
  __builtin_memcpy(&v, &bits, sizeof v);
  return v;
}
inline void prism_atomic_add(float *p, float v) { *p += v; }
inline float prism_mul_rn(float a, float b) { return a * b; }
inline int prism_atomic_exch(int *p, int v) {
  int old = *p;
  *p = v;
  return old;
}
#else
#define PRISM_DEVICE_FUNCTION __device__ __forceinline__
__device__ __forceinline__ unsigned int prism_float_bits(float v) { return __float_as_uint(v); }
__device__ __forceinline__ float prism_bits_float(unsigned int bits) {
  return __uint_as_float(bits);
}
__device__ __forceinline__ void prism_atomic_add(float *p, float v) { atomicAdd(p, v); }
// A product rounded on its own (never fused into a following sum), as the CPU's loops round it.
__device__ __forceinline__ float prism_mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ int prism_atomic_exch(int *p, int v) { return atomicExch(p, v); }
#endif

// x / d, and x mod d into *r, for 0 <= x and 0 < d: in 32 bits where both fit, since a GPU
// divides 64-bit integers in software (index decoding is most of what the patch kernels do).
PRISM_DEVICE_FUNCTION long long prism_divmod(long long x, long long d, long long *r) {
  long long q;
  if ((((unsigned long long)x | (unsigned long long)d) >> 32) == 0)
    q = (long long)((unsigned int)x / (unsigned int)d);
  else
    q = x / d;
  *r = x - q * d;
  return q;
}

// The step's values, which the executor writes to the device before each step's kernels
// (runtime::StepValues, the same layout), so that a kernel launches the same way every step.
struct StepValues {
  long long step;
  long long exampleOffset;
  long long globalBatch;
};

// Element i of an index tensor of i32 (wide = 0) or i64 (wide = 1).
PRISM_DEVICE_FUNCTION long long prism_index(const void *indices, int wide, long long i) {
  return wide ? ((const long long *)indices)[i] : (long long)((const int *)indices)[i];
}

// `v` rounded to the nearest bf16 (precision 1) or fp16 (precision 2) value, kept as a float, as
// ir::roundToPrecision rounds it: ties to even, a NaN stays a quiet NaN, fp16 overflows to
// infinity and keeps its subnormals (a fixed step of 2^-24). Precision 0 keeps `v`.
PRISM_DEVICE_FUNCTION float prism_round_to(float v, int precision) {
  if (precision == 1) {
    unsigned int bits = prism_float_bits(v);
    if (v != v)
      bits = (bits | 0x00400000u) & 0xffff0000u;
    else
      bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
    return prism_bits_float(bits);
  }
  if (precision != 2 || v != v || v - v != 0.0f) // f32, NaN or infinity
    return v;
  float magnitude = fabsf(v);
  if (magnitude >= 65520.0f) // rounds past the largest fp16, 65504
    return prism_bits_float((prism_float_bits(v) & 0x80000000u) | 0x7f800000u);
  int exponent;
  frexpf(magnitude, &exponent); // magnitude = m 2^exponent, m in [0.5, 1)
  int step = exponent - 11 > -24 ? exponent - 11 : -24;
  float quantum = ldexpf(1.0f, step);
  return copysignf(nearbyintf(magnitude / quantum) * quantum, v);
}

// out[i] = in[i] rounded to `precision` (prism_round_to).
struct RoundArgs {
  float *out;
  const float *in;
  long long n;
  int precision;
};
PRISM_KERNEL(prism_round, RoundArgs, a) {
  PRISM_FOR_EACH(i, a.n) { a.out[i] = prism_round_to(a.in[i], a.precision); }
}

// out[i] = value, for elements of 1, 4 or 8 bytes (bool, f32/i32, f64/i64), as bit patterns.
struct FillArgs {
  void *out;
  unsigned long long bits;
  long long n;
  int bytes;
};
PRISM_KERNEL(prism_fill, FillArgs, a) {
  PRISM_FOR_EACH(i, a.n) {
    if (a.bytes == 1)
      ((unsigned char *)a.out)[i] = (unsigned char)a.bits;
    else if (a.bytes == 4)
      ((unsigned int *)a.out)[i] = (unsigned int)a.bits;
    else
      ((unsigned long long *)a.out)[i] = a.bits;
  }
}

// out[0, bytes) = in[0, bytes) (assign), by 4-byte words where both are aligned to them.
struct CopyArgs {
  void *out;
  const void *in;
  long long bytes;
};
PRISM_KERNEL(prism_copy, CopyArgs, a) {
  const bool words = a.bytes % 4 == 0 && (unsigned long long)a.out % 4 == 0 &&
                     (unsigned long long)a.in % 4 == 0;
  if (words) {
    PRISM_FOR_EACH(i, a.bytes / 4) { ((unsigned int *)a.out)[i] = ((const unsigned int *)a.in)[i]; }
  } else {
    PRISM_FOR_EACH(i, a.bytes) {
      ((unsigned char *)a.out)[i] = ((const unsigned char *)a.in)[i];
    }
  }
}

// A block of 4-byte elements moved along one axis (slice, slice_grad, concat): out viewed as
// [outer, outExtent, inner] and in as [outer, inExtent, inner]; `count` positions of the axis
// are copied from inStart on to outStart on.
struct AxisCopyArgs {
  unsigned int *out;
  const unsigned int *in;
  long long outer, inner, outExtent, inExtent, inStart, outStart, count;
};
PRISM_KERNEL(prism_axis_copy, AxisCopyArgs, a) {
  PRISM_FOR_EACH(e, a.outer * a.count * a.inner) {
    long long i = e % a.inner, rest = e / a.inner;
    long long p = rest % a.count, o = rest / a.count;
    a.out[(o * a.outExtent + a.outStart + p) * a.inner + i] =
        a.in[(o * a.inExtent + a.inStart + p) * a.inner + i];
  }
}

// out = scale * in summed over the dimensions marked in `reduced` (bit d for dimension d of
// in's `rank` dimensions); out holds the kept dimensions in order. Summed in double, in index
// order: by one thread per output element, or, when `parts` > 1 (few outputs, long sums), in two
// launches: prism_reduce_parts sums each of `parts` consecutive ranges of an output's reduced
// indices into partial[p * outCount + o], then prism_reduce adds an output's parts in order.
// `inner` > 0 where the reduced dimensions are one block (dimensions of size 1 aside): in is then
// [outCount / inner, reducedCount, inner] and an element's offset takes no division (a bias's
// gradient, a row's sum); 0 takes the general indexing.
struct ReduceArgs {
  float *out;
  const float *in;
  long long dims[PRISM_MAX_RANK];
  int rank;
  unsigned reduced;
  long long outCount;
  long long reducedCount;
  float scale;
  long long parts;
  double *partial;
  long long inner;
};
// Σ in over the reduced indices [begin, end) of kept index o, in double.
PRISM_DEVICE_FUNCTION double prism_reduce_range(const ReduceArgs &a, long long o, long long begin,
                                                long long end) {
  if (a.inner > 0) {
    const float *p = a.in + (o / a.inner) * a.reducedCount * a.inner + o % a.inner;
    double sum = 0;
    for (long long r = begin; r < end; ++r)
      sum += (double)p[r * a.inner];
    return sum;
  }
  // The input offset of the kept index o, with every reduced index 0.
  long long strides[PRISM_MAX_RANK];
  long long stride = 1;
  for (int d = a.rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= a.dims[d];
  }
  long long base = 0, rest = o;
  for (int d = a.rank - 1; d >= 0; --d)
    if (!(a.reduced >> d & 1u)) {
      base += (rest % a.dims[d]) * strides[d];
      rest /= a.dims[d];
    }
  double sum = 0;
  for (long long r = begin; r < end; ++r) {
    long long offset = base, left = r;
    for (int d = a.rank - 1; d >= 0; --d)
      if (a.reduced >> d & 1u) {
        offset += (left % a.dims[d]) * strides[d];
        left /= a.dims[d];
      }
    sum += (double)a.in[offset];
  }
  return sum;
}
// The reduced indices of part p of `parts` over `count` of them: [begin, end).
PRISM_DEVICE_FUNCTION void prism_part_range(long long count, long long parts, long long p,
                                            long long *begin, long long *end) {
  long long chunk = (count + parts - 1) / parts;
  *begin = p * chunk < count ? p * chunk : count;
  *end = *begin + chunk < count ? *begin + chunk : count;
}
PRISM_KERNEL(prism_reduce_parts, ReduceArgs, a) {
  PRISM_FOR_EACH(t, a.outCount * a.parts) {
    long long begin, end;
    prism_part_range(a.reducedCount, a.parts, t / a.outCount, &begin, &end);
    a.partial[t] = prism_reduce_range(a, t % a.outCount, begin, end);
  }
}
PRISM_KERNEL(prism_reduce, ReduceArgs, a) {
  PRISM_FOR_EACH(o, a.outCount) {
    double sum = 0;
    if (a.parts > 1) {
      for (long long p = 0; p < a.parts; ++p)
        sum += a.partial[p * a.outCount + o];
    } else {
      sum = prism_reduce_range(a, o, 0, a.reducedCount);
    }
    a.out[o] = (float)(sum * (double)a.scale);
  }
}

// out = scale * g broadcast back over the dimensions marked in `reduced` (of out's `rank`
// dimensions `dims`); g holds the kept dimensions in order (expand_like).
struct ExpandArgs {
  float *out;
  const float *g;
  long long dims[PRISM_MAX_RANK];
  int rank;
  unsigned reduced;
  long long count;
  float scale;
};
PRISM_KERNEL(prism_expand, ExpandArgs, a) {
  PRISM_FOR_EACH(o, a.count) {
    long long from = 0, stride = 1, rest = o;
    for (int d = a.rank - 1; d >= 0; --d) {
      long long index = rest % a.dims[d];
      rest /= a.dims[d];
      if (!(a.reduced >> d & 1u)) {
        from += index * stride;
        stride *= a.dims[d];
      }
    }
    a.out[o] = a.scale * a.g[from];
  }
}

// gather: out[j, k] = table[indices[j], k] over `count` indices of rows of `rowSize`; an index
// outside [0, tableRows) sets *bad to its position + 1 (the caller reports it) and gives 0s.
// With `flatIndices`, the indices are also written out as i64 (gather_grad's sparse value).
struct GatherArgs {
  float *out;
  const float *table;
  const void *indices;
  int wide;
  long long count;
  long long rowSize;
  long long tableRows;
  long long *bad;
  long long *flatIndices;
};
PRISM_KERNEL(prism_gather, GatherArgs, a) {
  PRISM_FOR_EACH(e, a.count * a.rowSize) {
    long long j = e / a.rowSize, k = e % a.rowSize;
    long long index = prism_index(a.indices, a.wide, j);
    bool inside = index >= 0 && index < a.tableRows;
    if (!inside)
      *a.bad = j + 1;
    if (a.out)
      a.out[e] = inside ? a.table[index * a.rowSize + k] : 0.0f;
    if (a.flatIndices && k == 0)
      a.flatIndices[j] = index;
  }
}

// The sparse gradient of an update, coalesced: rows of one index add up into `sum` (a scratch of
// the table's shape), and each distinct index is claimed by one of its positions, which
// `order[j]` names (the index, or -1 for positions that repeat an earlier claim).
// First every touched row of `sum` and its claim are cleared, then the rows added, then claimed.
struct SparseRowsArgs {
  float *sum;
  int *claimed;
  long long *order;
  const long long *indices;
  const float *rows;
  long long count;
  long long rowSize;
  int stage; // 0: clear, 1: add, 2: claim
};
PRISM_KERNEL(prism_sparse_rows, SparseRowsArgs, a) {
  if (a.stage == 2) {
    PRISM_FOR_EACH(j, a.count) {
      long long index = a.indices[j];
      a.order[j] = prism_atomic_exch(a.claimed + index, 1) == 0 ? index : -1;
    }
    return;
  }
  PRISM_FOR_EACH(e, a.count * a.rowSize) {
    long long j = e / a.rowSize, k = e % a.rowSize;
    long long at = a.indices[j] * a.rowSize + k;
    if (a.stage == 0) {
      a.sum[at] = 0.0f;
      if (k == 0)
        a.claimed[a.indices[j]] = 0;
    } else {
      prism_atomic_add(a.sum + at, a.rows[e]);
    }
  }
}

// The labels of softmax_cross_entropy: i32 or i64, one per row; `ignore` is the ignored label
// when `ignoring`. A label outside [0, classes) sets *bad to its row + 1 (the caller reports it).
struct LabelsView {
  const void *labels;
  int wide; // i64 labels
  int ignoring;
  long long ignore;
};
PRISM_DEVICE_FUNCTION long long prism_label(const LabelsView &l, long long row) {
  return prism_index(l.labels, l.wide, row);
}

// The largest element of a row of logits, and Σ exp(x - most) over the row in double.
PRISM_DEVICE_FUNCTION double prism_exp_sum(const float *row, long long classes, float *most) {
  float m = row[0];
  for (long long c = 1; c < classes; ++c)
    m = row[c] > m ? row[c] : m;
  double sum = 0;
  for (long long c = 0; c < classes; ++c)
    sum += exp((double)(row[c] - m));
  *most = m;
  return sum;
}

// The same two statistics of every row of a wide [rows, classes] (many classes, few rows) in
// four launches of rows * parts or rows threads: prism_row_max_parts takes the largest element of
// each of `parts` consecutive ranges of a row into partMost[p * rows + r], prism_row_max the
// largest of those into most[r]; prism_row_exp_parts sums exp(x - most[r]) over each range in
// double into partSum[p * rows + r], prism_row_exp_sum adds those in order into sum[r].
struct RowStatsArgs {
  const float *x;
  long long rows, classes, parts;
  float *partMost;
  double *partSum;
  float *most;
  double *sum;
};
PRISM_KERNEL(prism_row_max_parts, RowStatsArgs, a) {
  PRISM_FOR_EACH(t, a.rows * a.parts) {
    long long r = t % a.rows, begin, end;
    prism_part_range(a.classes, a.parts, t / a.rows, &begin, &end);
    const float *row = a.x + r * a.classes;
    float m = begin < end ? row[begin] : row[0];
    for (long long c = begin + 1; c < end; ++c)
      m = row[c] > m ? row[c] : m;
    a.partMost[t] = m;
  }
}
PRISM_KERNEL(prism_row_max, RowStatsArgs, a) {
  PRISM_FOR_EACH(r, a.rows) {
    float m = a.partMost[r];
    for (long long p = 1; p < a.parts; ++p)
      m = a.partMost[p * a.rows + r] > m ? a.partMost[p * a.rows + r] : m;
    a.most[r] = m;
  }
}
PRISM_KERNEL(prism_row_exp_parts, RowStatsArgs, a) {
  PRISM_FOR_EACH(t, a.rows * a.parts) {
    long long r = t % a.rows, begin, end;
    prism_part_range(a.classes, a.parts, t / a.rows, &begin, &end);
    const float *row = a.x + r * a.classes;
    double sum = 0;
    for (long long c = begin; c < end; ++c)
      sum += exp((double)(row[c] - a.most[r]));
    a.partSum[t] = sum;
  }
}
PRISM_KERNEL(prism_row_exp_sum, RowStatsArgs, a) {
  PRISM_FOR_EACH(r, a.rows) {
    double sum = 0;
    for (long long p = 0; p < a.parts; ++p)
      sum += a.partSum[p * a.rows + r];
    a.sum[r] = sum;
  }
}

// Per row r of logits [rows, classes]: loss[r] = logsumexp(row) - row[label] (0 when ignored),
// counted[r] = 1 when the row counts. The caller sums them in row order. The row's largest
// element and Σ exp(x - largest) come from `most` and `sum` where given (prism_row_max and
// prism_row_exp_sum), else from the row itself.
struct CrossEntropyRowsArgs {
  double *loss;
  double *counted;
  const float *logits;
  LabelsView labels;
  long long rows;
  long long classes;
  long long *bad;
  const float *most;
  const double *sum;
};
PRISM_KERNEL(prism_cross_entropy_rows, CrossEntropyRowsArgs, a) {
  PRISM_FOR_EACH(r, a.rows) {
    long long label = prism_label(a.labels, r);
    a.loss[r] = 0;
    a.counted[r] = 0;
    if (a.labels.ignoring && label == a.labels.ignore)
      continue;
    if (label < 0 || label >= a.classes) {
      *a.bad = r + 1;
      continue;
    }
    const float *row = a.logits + r * a.classes;
    float most;
    double sum;
    if (a.most) {
      most = a.most[r];
      sum = a.sum[r];
    } else {
      sum = prism_exp_sum(row, a.classes, &most);
    }
    a.loss[r] = (double)(most - row[label]) + log(sum);
    a.counted[r] = 1;
  }
}

// When given, *countedTotal = Σ counted[r] (each row counting 1 where `counted` is null) and
// out = Σ loss[r] / Σ counted[r] (0 when nothing counts), the same sums in the same order every
// run: with parts > 1, prism_mean_of_rows_parts first sums `parts` consecutive ranges of the
// rows into partial[2p] (loss) and partial[2p + 1] (counted), and prism_mean_of_rows adds the
// parts in order on one thread; with one part that thread sums the rows.
struct MeanOfRowsArgs {
  float *out;
  double *countedTotal;
  const double *loss;
  const double *counted;
  long long rows;
  long long parts;
  double *partial;
};
PRISM_DEVICE_FUNCTION void prism_rows_sum(const MeanOfRowsArgs &a, long long begin, long long end,
                                          double *total, double *counted) {
  double t = 0, c = 0;
  for (long long r = begin; r < end; ++r) {
    t += a.loss[r];
    c += a.counted ? a.counted[r] : 1.0;
  }
  *total = t;
  *counted = c;
}
PRISM_KERNEL(prism_mean_of_rows_parts, MeanOfRowsArgs, a) {
  PRISM_FOR_EACH(p, a.parts) {
    long long begin, end;
    prism_part_range(a.rows, a.parts, p, &begin, &end);
    prism_rows_sum(a, begin, end, &a.partial[2 * p], &a.partial[2 * p + 1]);
  }
}
PRISM_KERNEL(prism_mean_of_rows, MeanOfRowsArgs, a) {
  PRISM_FOR_EACH(i, 1) {
    double total = 0, counted = 0;
    if (a.parts > 1) {
      for (long long p = 0; p < a.parts; ++p) {
        total += a.partial[2 * p];
        counted += a.partial[2 * p + 1];
      }
    } else {
      prism_rows_sum(a, 0, a.rows, &total, &counted);
    }
    if (a.countedTotal)
      *a.countedTotal = counted;
    if (a.out)
      a.out[0] = (float)(counted > 0 ? total / counted : 0.0);
  }
}

// dx[r, c] = dloss * (softmax(row)[c] - (c == label)) / counted, 0 on rows that do not count
// (ignored, or with a bad label, which prism_cross_entropy_rows reported).
struct CrossEntropyGradArgs {
  float *dx;
  const float *dloss;
  const float *logits;
  LabelsView labels;
  const double *countedTotal;
  long long rows;
  long long classes;
  const float *most; // where given, each row's statistics (prism_row_max, prism_row_exp_sum)
  const double *sum;
};
PRISM_KERNEL(prism_cross_entropy_grad, CrossEntropyGradArgs, a) {
  PRISM_FOR_EACH(r, a.rows) {
    const double total = *a.countedTotal;
    float *dx = a.dx + r * a.classes;
    long long label = prism_label(a.labels, r);
    bool ignored = a.labels.ignoring && label == a.labels.ignore;
    if (ignored || label < 0 || label >= a.classes || total == 0) {
      for (long long c = 0; c < a.classes; ++c)
        dx[c] = 0;
      continue;
    }
    const float *row = a.logits + r * a.classes;
    float most;
    double sum = prism_exp_sum(row, a.classes, &most);
    double perRow = (double)a.dloss[0] / total;
    for (long long c = 0; c < a.classes; ++c)
      dx[c] = (float)(perRow * exp((double)(row[c] - most)) / sum);
    dx[label] -= (float)perRow;
  }
}
// The same gradient a thread per element, from the rows' statistics in `most` and `sum`.
PRISM_KERNEL(prism_cross_entropy_grad_elements, CrossEntropyGradArgs, a) {
  PRISM_FOR_EACH(e, a.rows * a.classes) {
    const double total = *a.countedTotal;
    long long r = e / a.classes, c = e % a.classes;
    long long label = prism_label(a.labels, r);
    bool ignored = a.labels.ignoring && label == a.labels.ignore;
    if (ignored || label < 0 || label >= a.classes || total == 0) {
      a.dx[e] = 0;
      continue;
    }
    double perRow = (double)a.dloss[0] / total;
    float v = (float)(perRow * exp((double)(a.logits[e] - a.most[r])) / a.sum[r]);
    a.dx[e] = c == label ? v - (float)perRow : v;
  }
}

// y[r, c] = activation(y[r, c] + bias[c]) over y [rows, columns]; activation 1 is relu.
struct BiasActivationArgs {
  float *y;
  const float *bias;
  long long rows;
  long long columns;
  int relu;
};
PRISM_KERNEL(prism_bias_activation, BiasActivationArgs, a) {
  PRISM_FOR_EACH(i, a.rows * a.columns) {
    float v = a.y[i] + a.bias[i % a.columns];
    a.y[i] = a.relu ? (v > 0.0f ? v : 0.0f) : v;
  }
}

// The scalars of an update, read on the device: the schedule's factor (null: 1) and the loss
// scaling's finite flag (null: finite; 0 skips the update).
struct UpdateScalars {
  const float *lrFactor;
  const float *finite;
  float lr;
  // A sparse gradient: element i of the update is element i % rowSize of row order[i / rowSize]
  // (skipped when -1), and the gradient is read at the same offset of the coalesced sum. Null for
  // a dense update, where element i is offset i.
  const long long *order;
  long long rowSize;
};
PRISM_DEVICE_FUNCTION bool prism_skips(const UpdateScalars &s) {
  return s.finite && s.finite[0] == 0.0f;
}
// The offset element i of an update works on, or -1 to skip it.
PRISM_DEVICE_FUNCTION long long prism_offset(const UpdateScalars &s, long long i) {
  if (!s.order)
    return i;
  long long row = s.order[i / s.rowSize];
  return row < 0 ? -1 : row * s.rowSize + i % s.rowSize;
}

PRISM_DEVICE_FUNCTION float prism_rate(const UpdateScalars &s) {
  return (float)((double)s.lr * (s.lrFactor ? (double)s.lrFactor[0] : 1.0));
}

// w -= lr * g.
struct SgdArgs {
  float *w;
  const float *g;
  long long n;
  UpdateScalars s;
};
PRISM_KERNEL(prism_apply_sgd, SgdArgs, a) {
  if (prism_skips(a.s))
    return;
  const float lr = prism_rate(a.s);
  PRISM_FOR_EACH(e, a.n) {
    long long i = prism_offset(a.s, e);
    if (i >= 0)
      a.w[i] -= lr * a.g[i];
  }
}

// acc = momentum * acc + g; w -= lr * (nesterov ? g + momentum * acc : acc).
struct MomentumArgs {
  float *w;
  float *acc;
  const float *g;
  long long n;
  UpdateScalars s;
  float momentum;
  int nesterov;
};
PRISM_KERNEL(prism_apply_momentum, MomentumArgs, a) {
  if (prism_skips(a.s))
    return;
  const float lr = prism_rate(a.s);
  PRISM_FOR_EACH(e, a.n) {
    long long i = prism_offset(a.s, e);
    if (i < 0)
      continue;
    a.acc[i] = a.momentum * a.acc[i] + a.g[i];
    a.w[i] -= lr * (a.nesterov ? a.g[i] + a.momentum * a.acc[i] : a.acc[i]);
  }
}

// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + epsilon), with t read on the device and
// the bias corrections folded in double, as the CPU does.
struct AdamArgs {
  float *w;
  float *m;
  float *v;
  const float *g;
  const float *t;
  long long n;
  UpdateScalars s;
  double beta1;
  double beta2;
  double epsilon;
};
PRISM_KERNEL(prism_apply_adam, AdamArgs, a) {
  if (prism_skips(a.s))
    return;
  const double t = (double)a.t[0];
  const double c1 = 1 - pow(a.beta1, t), c2 = 1 - pow(a.beta2, t);
  const float beta1 = (float)a.beta1, beta2 = (float)a.beta2;
  const float oneMinusBeta1 = (float)(1 - a.beta1), oneMinusBeta2 = (float)(1 - a.beta2);
  const float stepSize = (float)((double)a.s.lr * (a.s.lrFactor ? (double)a.s.lrFactor[0] : 1.0) /
                                 c1);
  const float invSqrtC2 = (float)(1 / sqrt(c2));
  const float epsilon = (float)a.epsilon;
  PRISM_FOR_EACH(e, a.n) {
    long long i = prism_offset(a.s, e);
    if (i < 0)
      continue;
    a.m[i] = beta1 * a.m[i] + oneMinusBeta1 * a.g[i];
    a.v[i] = beta2 * a.v[i] + oneMinusBeta2 * a.g[i] * a.g[i];
    a.w[i] -= stepSize * a.m[i] / (sqrt(a.v[i]) * invSqrtC2 + epsilon);
  }
}

// Convolution and pooling over NHWC tensors, filters [KH, KW, C, O], with TensorFlow's `same`
// padding (pad_before = pad_total / 2) or `valid`: window o of a spatial axis covers input
// positions [o * stride - pad, o * stride - pad + window). A convolution is a matrix product
// over the patch matrix of its input (CudaOpKernels.cpp): prism_im2col writes it, prism_col2im
// sums a patch matrix's gradient back onto the input; the pools are direct loops.
struct Conv2dArgs {
  float *y;          // pools: y [N, OH, OW, C]; their gradients: dx [N, H, W, C]
  const float *x;    // x [N, H, W, C]
  const float *dy;   // the pools' gradients: dy [N, OH, OW, C]
  long long n, h, w_, c, kh, kw, o, oh, ow, sh, sw, padH, padW;
};

// visit(ih, iw, kh, kw) for every cell of window (oh, ow) that lies inside the input.
template <typename Visit>
PRISM_DEVICE_FUNCTION void prism_window_cells_of(const Conv2dArgs &a, long long oh, long long ow,
                                                 Visit visit) {
  for (long long kh = 0; kh < a.kh; ++kh) {
    long long ih = oh * a.sh - a.padH + kh;
    if (ih < 0 || ih >= a.h)
      continue;
    for (long long kw = 0; kw < a.kw; ++kw) {
      long long iw = ow * a.sw - a.padW + kw;
      if (iw >= 0 && iw < a.w_)
        visit(ih, iw, kh, kw);
    }
  }
}

// visit(oh, ow, kh, kw) for every output window that holds input cell (ih, iw), as its cell
// (kh, kw).
template <typename Visit>
PRISM_DEVICE_FUNCTION void prism_windows_holding(const Conv2dArgs &a, long long ih, long long iw,
                                                 Visit visit) {
  for (long long kh = 0; kh < a.kh; ++kh) {
    long long th = ih + a.padH - kh, oh = th, left = 0; // th = oh * sh
    if (th < 0)
      continue;
    if (a.sh != 1)
      oh = prism_divmod(th, a.sh, &left);
    if (left != 0 || oh >= a.oh)
      continue;
    for (long long kw = 0; kw < a.kw; ++kw) {
      long long tw = iw + a.padW - kw, ow = tw;
      if (tw < 0)
        continue;
      if (a.sw != 1)
        ow = prism_divmod(tw, a.sw, &left);
      if (left == 0 && ow < a.ow)
        visit(oh, ow, kh, kw);
    }
  }
}

// The patch matrix of examples [first, first + count): row (n - first, oh, ow), column
// (kh, kw, c) holds x[n, oh * sh - padH + kh, ow * sw - padW + kw, c], 0 outside the input. Its
// product with the filter viewed as [KH * KW * C, O] is the convolution's y [count * OH * OW, O].
// A thread takes prism_patch_width(C) neighbouring channels (of a row and a cell (kh, kw) for
// prism_im2col, of an input position for prism_col2im), so that it decodes its indices once
// for them.
struct PatchArgs {
  Conv2dArgs g;   // the geometry (g.x: x for prism_im2col, g.y: dx for prism_col2im)
  float *patches; // prism_im2col: written; prism_col2im: the gradient of the patch matrix
  long long first, count;
};
PRISM_DEVICE_FUNCTION long long prism_patch_width(long long c) { return c % 4 == 0 ? 4 : 1; }
PRISM_KERNEL(prism_im2col, PatchArgs, a) {
  const Conv2dArgs &g = a.g;
  const long long width = prism_patch_width(g.c), groups = g.c / width;
  const long long cells = g.kh * g.kw * groups; // the threads of a patch row
  PRISM_FOR_EACH(t, a.count * g.oh * g.ow * cells) {
    long long cell, cg, kw, ow, oh;
    const long long row = prism_divmod(t, cells, &cell);
    const long long kh = prism_divmod(prism_divmod(cell, groups, &cg), g.kw, &kw);
    const long long n = a.first + prism_divmod(prism_divmod(row, g.ow, &ow), g.oh, &oh);
    const long long ih = oh * g.sh - g.padH + kh, iw = ow * g.sw - g.padW + kw;
    float *out = a.patches + t * width; // row * columns + ((kh * KW + kw) * C + cg * width)
    if (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w_) {
      const float *in = g.x + ((n * g.h + ih) * g.w_ + iw) * g.c + cg * width;
      for (long long j = 0; j < width; ++j)
        out[j] = in[j];
    } else {
      for (long long j = 0; j < width; ++j)
        out[j] = 0.0f;
    }
  }
}
// dx[n, ih, iw, c] for the examples [first, first + count): the sum of the patch matrix's
// gradient over the cells (row, column) that copied x[n, ih, iw, c] (a gather, in double).
PRISM_KERNEL(prism_col2im, PatchArgs, a) {
  const Conv2dArgs &g = a.g;
  const long long columns = g.kh * g.kw * g.c;
  const long long width = prism_patch_width(g.c), groups = g.c / width;
  PRISM_FOR_EACH(t, a.count * g.h * g.w_ * groups) {
    long long cg, iw, ih;
    const long long position = prism_divmod(t, groups, &cg);
    const long long m = prism_divmod(prism_divmod(position, g.w_, &iw), g.h, &ih);
    double sum[4] = {0, 0, 0, 0};
    prism_windows_holding(g, ih, iw, [&](long long oh, long long ow, long long kh, long long kw) {
      const float *cell = a.patches + ((m * g.oh + oh) * g.ow + ow) * columns +
                          (kh * g.kw + kw) * g.c + cg * width;
      for (long long j = 0; j < width; ++j)
        sum[j] += (double)cell[j];
    });
    float *out = g.y + a.first * g.h * g.w_ * g.c + t * width;
    for (long long j = 0; j < width; ++j)
      out[j] = (float)sum[j];
  }
}

// The flat input offset of the first maximum of window (n, oh, ow, c) (row-major over the
// window; ties keep the first), or -1 when no cell of it lies inside the input. `a.o` is C.
PRISM_DEVICE_FUNCTION long long prism_window_argmax(const Conv2dArgs &a, long long n,
                                                    long long oh, long long ow, long long c) {
  long long best = -1;
  prism_window_cells_of(a, oh, ow, [&](long long ih, long long iw, long long, long long) {
    long long at = ((n * a.h + ih) * a.w_ + iw) * a.c + c;
    if (best < 0 || a.x[at] > a.x[best])
      best = at;
  });
  return best;
}

// max_pool2d: y [N, OH, OW, C] the first maximum of each window (0 for a window outside).
PRISM_KERNEL(prism_max_pool2d, Conv2dArgs, a) {
  PRISM_FOR_EACH(e, a.n * a.oh * a.ow * a.c) {
    long long c = e % a.c, rest = e / a.c;
    long long ow = rest % a.ow, oh = (rest / a.ow) % a.oh, n = rest / (a.ow * a.oh);
    long long best = prism_window_argmax(a, n, oh, ow, c);
    a.y[e] = best < 0 ? 0.0f : a.x[best];
  }
}

// max_pool2d_grad: dx [N, H, W, C], each cell the sum of dy over the windows whose first
// maximum it is.
PRISM_KERNEL(prism_max_pool2d_grad, Conv2dArgs, a) {
  PRISM_FOR_EACH(e, a.n * a.h * a.w_ * a.c) {
    long long c = e % a.c, rest = e / a.c;
    long long iw = rest % a.w_, ih = (rest / a.w_) % a.h, n = rest / (a.w_ * a.h);
    double sum = 0;
    prism_windows_holding(a, ih, iw, [&](long long oh, long long ow, long long, long long) {
      if (prism_window_argmax(a, n, oh, ow, c) == e)
        sum += (double)a.dy[((n * a.oh + oh) * a.ow + ow) * a.c + c];
    });
    a.y[e] = (float)sum;
  }
}

// dropout and dropout_grad in training (runtime/DropoutMask.h, draw for draw): element i of
// example e survives when splitmix64(splitmix64(stepStream ^ (first + e)) ^ (i % size)), as a
// 53-bit fraction, is at least rate; survivors are scaled.
struct DropoutArgs {
  float *out;
  const float *in;
  long long n;
  long long exampleSize;
  const StepValues *step;
  long long towerOffset;   // the tower's first example within the task's
  unsigned long long seed; // the op's stream of the run (streamSeed of the seed and its key)
  int perExample;          // draws keyed on each example's global index, else all on index 0
  double rate;
  float scale;
};
PRISM_DEVICE_FUNCTION unsigned long long prism_splitmix64(unsigned long long x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
PRISM_KERNEL(prism_dropout, DropoutArgs, a) {
  const unsigned long long stepStream =
      prism_splitmix64(a.seed ^ (unsigned long long)a.step->step);
  const long long firstExample = a.perExample ? a.step->exampleOffset + a.towerOffset : 0;
  PRISM_FOR_EACH(i, a.n) {
    unsigned long long example =
        prism_splitmix64(stepStream ^ (unsigned long long)(firstExample + i / a.exampleSize));
    unsigned long long draw =
        prism_splitmix64(example ^ (unsigned long long)(i % a.exampleSize));
    bool keep = (double)(draw >> 11) * (1.0 / 9007199254740992.0) >= a.rate;
    a.out[i] = keep ? a.in[i] * a.scale : 0.0f;
  }
}

// batch_share: the task's rows over the step's global batch (its own batch where unset).
struct BatchShareArgs {
  float *out;
  const StepValues *step;
  long long rows;
  long long batch;
};
PRISM_KERNEL(prism_batch_share, BatchShareArgs, a) {
  PRISM_FOR_EACH(i, 1) {
    long long global = a.step->globalBatch > 0 ? a.step->globalBatch : a.batch;
    a.out[i] = (float)((double)a.rows / (double)global);
  }
}

// transpose of 4-byte elements: out.dims[d] = in.dims[perm[d]]; `inStrides` are in's strides
// taken in out's order (inStrides[d] = stride of in's dimension perm[d]).
struct TransposeArgs {
  unsigned int *out;
  const unsigned int *in;
  long long outDims[PRISM_MAX_RANK];
  long long inStrides[PRISM_MAX_RANK];
  int rank;
  long long n;
};
PRISM_KERNEL(prism_transpose, TransposeArgs, a) {
  PRISM_FOR_EACH(o, a.n) {
    long long rest = o, from = 0;
    for (int d = a.rank - 1; d >= 0; --d) {
      from += (rest % a.outDims[d]) * a.inStrides[d];
      rest /= a.outDims[d];
    }
    a.out[o] = a.in[from];
  }
}

// Row-wise ops over the last dimension (`width` elements per row), a thread per row, sums in
// double: softmax (y = softmax(x)); softmax_grad (dx = y * (dy - sum(dy * y))); layer_norm
// (y = gamma * xhat + beta); layer_norm_grad (dx = (g - mean(g) - xhat * mean(g * xhat)) / sd,
// g = dy * gamma).
struct RowsArgs {
  float *out;
  const float *x;     // softmax, layer_norm, layer_norm_grad: x; softmax_grad: y
  const float *dy;    // the gradients' dy
  const float *gamma; // layer_norm and its gradient
  const float *beta;  // layer_norm
  long long rows;
  long long width;
  double epsilon;
  int op; // 0 softmax, 1 softmax_grad, 2 layer_norm, 3 layer_norm_grad, 4 log_softmax,
          // 5 log_softmax_grad
};
PRISM_KERNEL(prism_rows, RowsArgs, a) {
  PRISM_FOR_EACH(r, a.rows) {
    const float *x = a.x + r * a.width;
    float *out = a.out + r * a.width;
    if (a.op == 0) {
      float most;
      double sum = prism_exp_sum(x, a.width, &most);
      for (long long c = 0; c < a.width; ++c)
        out[c] = (float)(exp((double)(x[c] - most)) / sum);
      continue;
    }
    if (a.op == 4) { // log_softmax: (x - most) - log(sum)
      float most;
      double logSum = log(prism_exp_sum(x, a.width, &most));
      for (long long c = 0; c < a.width; ++c)
        out[c] = (float)((double)(x[c] - most) - logSum);
      continue;
    }
    const float *dy = a.dy + r * a.width;
    if (a.op == 5) { // log_softmax_grad, x being y = log_softmax: dy - exp(y) * sum(dy)
      double sum = 0;
      for (long long c = 0; c < a.width; ++c)
        sum += (double)dy[c];
      for (long long c = 0; c < a.width; ++c)
        out[c] = (float)((double)dy[c] - exp((double)x[c]) * (double)(float)sum);
      continue;
    }
    if (a.op == 1) {
      double dot = 0;
      for (long long c = 0; c < a.width; ++c)
        dot += (double)dy[c] * (double)x[c];
      for (long long c = 0; c < a.width; ++c)
        out[c] = (float)((double)x[c] * ((double)dy[c] - dot));
      continue;
    }
    double mean = 0, var = 0;
    for (long long c = 0; c < a.width; ++c)
      mean += (double)x[c];
    mean /= (double)a.width;
    for (long long c = 0; c < a.width; ++c)
      var += ((double)x[c] - mean) * ((double)x[c] - mean);
    var /= (double)a.width;
    const double inv = 1.0 / sqrt(var + a.epsilon);
    if (a.op == 2) {
      for (long long c = 0; c < a.width; ++c)
        out[c] = (float)((double)a.gamma[c] * ((double)x[c] - mean) * inv + (double)a.beta[c]);
      continue;
    }
    double meanG = 0, meanGX = 0;
    for (long long c = 0; c < a.width; ++c) {
      double g = (double)dy[c] * (double)a.gamma[c], xhat = ((double)x[c] - mean) * inv;
      meanG += g;
      meanGX += g * xhat;
    }
    meanG /= (double)a.width;
    meanGX /= (double)a.width;
    for (long long c = 0; c < a.width; ++c) {
      double g = (double)dy[c] * (double)a.gamma[c], xhat = ((double)x[c] - mean) * inv;
      out[c] = (float)((g - meanG - xhat * meanGX) * inv);
    }
  }
}

// layer_norm_gamma_grad: dgamma[c] = sum over rows of dy * xhat, a thread per column.
PRISM_KERNEL(prism_layer_norm_gamma_grad, RowsArgs, a) {
  PRISM_FOR_EACH(c, a.width) {
    double sum = 0;
    for (long long r = 0; r < a.rows; ++r) {
      const float *x = a.x + r * a.width;
      double mean = 0, var = 0;
      for (long long k = 0; k < a.width; ++k)
        mean += (double)x[k];
      mean /= (double)a.width;
      for (long long k = 0; k < a.width; ++k)
        var += ((double)x[k] - mean) * ((double)x[k] - mean);
      var /= (double)a.width;
      sum += (double)a.dy[r * a.width + c] * ((double)x[c] - mean) / sqrt(var + a.epsilon);
    }
    a.out[c] = (float)sum;
  }
}

// Batch normalization over x [rows, channels] (every dimension but the last is a sample), with
// its statistics from moments ([mean, mean of squares] per channel, f64) in training or from the
// running averages in evaluation; sums in double, as the CPU's.
struct BatchNormArgs {
  float *out;            // y, dx, or a per-channel result
  double *dmoments;      // batch_norm_apply_moments_grad's result, or moments' [2, C]
  const float *x;
  const float *dy;
  const float *scale;
  const float *bias;
  const float *runningMean;
  const float *runningVar;
  float *updateMean;     // batch_norm_update: the running averages, written in place
  float *updateVar;
  const double *moments; // [2, C]
  double *mean;          // scratch [C]: the statistics normalized with
  double *inv;           // scratch [C]: 1 / sqrt(var + epsilon)
  double *coefB;         // scratch [C]: batch_norm_grad's b and d (dx = a dy + b x + d)
  double *coefD;
  int fromX;             // the plain batch_norm ops: training statistics from x itself
  long long rows;
  long long channels;
  double epsilon;
  double momentum;
  // batch_norm_update: the values per channel of the step's global batch, its examples (read
  // from `step`) times `perExample`
  const StepValues *step;
  double perExample;
  int training;
  int op;
};

// mean and inv per channel: from moments in training (the variance mean(x * x) - mean^2, at
// least 0), from the running averages in evaluation.
PRISM_KERNEL(prism_bn_stats, BatchNormArgs, a) {
  PRISM_FOR_EACH(c, a.channels) {
    double mean, var;
    if (a.training && a.fromX) { // two passes over the rows, as the CPU
      double sum = 0, squares = 0;
      for (long long r = 0; r < a.rows; ++r)
        sum += (double)a.x[r * a.channels + c];
      mean = sum / (double)a.rows;
      for (long long r = 0; r < a.rows; ++r) {
        double d = (double)a.x[r * a.channels + c] - mean;
        squares += d * d;
      }
      var = squares / (double)a.rows;
    } else if (a.training) {
      mean = a.moments[c];
      var = a.moments[a.channels + c] - mean * mean;
      var = var > 0 ? var : 0;
    } else {
      mean = (double)a.runningMean[c];
      var = (double)a.runningVar[c];
    }
    a.mean[c] = mean;
    a.inv[c] = 1.0 / sqrt(var + a.epsilon);
  }
}

// Per element: op 0 batch_norm_apply (y = scale * (x - mean) * inv + bias), op 1
// batch_norm_apply_grad (dx = dy * scale * inv), op 2 batch_norm_moments_grad (dx =
// (dmoments[0] + 2 x dmoments[1]) / rows, dmoments in `moments`), op 3 batch_norm_grad in
// training (dx = a dy + b x + d, a = scale * inv, b and d from prism_bn_channels' op 4).
PRISM_KERNEL(prism_bn_elements, BatchNormArgs, a) {
  PRISM_FOR_EACH(e, a.rows * a.channels) {
    long long c = e % a.channels;
    if (a.op == 0) {
      double scale = (double)a.scale[c] * a.inv[c];
      a.out[e] = (float)((double)a.x[e] * scale + ((double)a.bias[c] - a.mean[c] * scale));
    } else if (a.op == 1) {
      a.out[e] = (float)((double)a.dy[e] * ((double)a.scale[c] * a.inv[c]));
    } else if (a.op == 3) { // batch_norm_grad in training
      a.out[e] = (float)((double)a.scale[c] * a.inv[c] * (double)a.dy[e] +
                         a.coefB[c] * (double)a.x[e] + a.coefD[c]);
    } else {
      double rows = (double)a.rows;
      a.out[e] = (float)(a.moments[c] / rows + 2 * a.moments[a.channels + c] / rows * (double)a.x[e]);
    }
  }
}

// Per channel, a thread each, rows in order: op 0 batch_norm_moments (dmoments = [mean, mean of
// squares] of x), op 1 batch_norm_apply_scale_grad (out = sum(dy * (x - mean)) * inv), op 2
// batch_norm_apply_moments_grad (dmoments from s = sum(dy), t = sum(dy * (x - mean)); zero in
// evaluation), op 3 batch_norm_update (running averages, training only), op 4 batch_norm_grad's
// coefficients b = -scale inv^2 mean(dy xhat) and d = -scale inv mean(dy) - b mean.
PRISM_KERNEL(prism_bn_channels, BatchNormArgs, a) {
  PRISM_FOR_EACH(c, a.channels) {
    const long long C = a.channels;
    if (a.op == 3) {
      if (!a.training)
        continue;
      double m = a.moments[c], biased = a.moments[C + c] - m * m;
      double count = (double)a.step->globalBatch * a.perExample;
      a.updateMean[c] = (float)((1 - a.momentum) * (double)a.updateMean[c] + a.momentum * m);
      a.updateVar[c] = (float)((1 - a.momentum) * (double)a.updateVar[c] +
                               a.momentum * biased * count / (count - 1));
      continue;
    }
    if (a.op == 2 && !a.training) {
      a.dmoments[c] = 0;
      a.dmoments[C + c] = 0;
      continue;
    }
    double s = 0, t = 0;
    for (long long r = 0; r < a.rows; ++r) {
      double x = (double)a.x[r * C + c];
      if (a.op == 0) {
        s += x;
        t += x * x;
      } else {
        double g = (double)a.dy[r * C + c];
        s += g;
        t += g * (x - a.mean[c]);
      }
    }
    if (a.op == 0) {
      a.dmoments[c] = s / (double)a.rows;
      a.dmoments[C + c] = t / (double)a.rows;
    } else if (a.op == 4) {
      double scale = (double)a.scale[c] * a.inv[c], rows = (double)a.rows;
      double meanDy = s / rows, meanDyXhat = t * a.inv[c] / rows;
      a.coefB[c] = -scale * a.inv[c] * meanDyXhat;
      a.coefD[c] = -scale * meanDy - a.coefB[c] * a.mean[c];
    } else if (a.op == 1) {
      a.out[c] = (float)(t * a.inv[c]);
    } else {
      double inv = a.inv[c], inv3 = inv * inv * inv, scale = (double)a.scale[c];
      a.dmoments[c] = scale * (-inv * s + a.mean[c] * inv3 * t);
      a.dmoments[C + c] = -0.5 * scale * inv3 * t;
    }
  }
}

// pad of 4-byte elements: out [dims] from in, `before[d]` cells of `value` ahead of dimension d.
struct PadArgs {
  unsigned int *out;
  const unsigned int *in;
  long long outDims[PRISM_MAX_RANK];
  long long inDims[PRISM_MAX_RANK];
  long long before[PRISM_MAX_RANK];
  int rank;
  long long n;
  unsigned int value;
};
PRISM_KERNEL(prism_pad, PadArgs, a) {
  PRISM_FOR_EACH(o, a.n) {
    long long rest = o, from = 0, stride = 1;
    bool inside = true;
    for (int d = a.rank - 1; d >= 0; --d) {
      long long i = rest % a.outDims[d] - a.before[d];
      rest /= a.outDims[d];
      inside = inside && i >= 0 && i < a.inDims[d];
      from += i * stride;
      stride *= a.inDims[d];
    }
    a.out[o] = inside ? a.in[from] : a.value;
  }
}

// cast: each element converted as C++'s static_cast does (float to integer truncates toward zero,
// anything to bool is != 0). Type codes: 0 f32, 1 f64, 2 i32, 3 i64, 4 bool.
struct CastArgs {
  void *out;
  const void *in;
  long long n;
  int from;
  int to;
};
PRISM_DEVICE_FUNCTION double prism_read(const void *p, int type, long long i) {
  switch (type) {
  case 0:
    return (double)((const float *)p)[i];
  case 1:
    return ((const double *)p)[i];
  case 2:
    return (double)((const int *)p)[i];
  case 3:
    return (double)((const long long *)p)[i];
  default:
    return (double)((const unsigned char *)p)[i];
  }
}
PRISM_KERNEL(prism_cast, CastArgs, a) {
  PRISM_FOR_EACH(i, a.n) {
    if (a.from == 3 && a.to == 3) {
      ((long long *)a.out)[i] = ((const long long *)a.in)[i];
      continue;
    }
    if (a.from == 3 && a.to == 2) { // i64 to i32 without a trip through double
      ((int *)a.out)[i] = (int)((const long long *)a.in)[i];
      continue;
    }
    double v = prism_read(a.in, a.from, i);
    switch (a.to) {
    case 0:
      ((float *)a.out)[i] = a.from == 1 ? (float)((const double *)a.in)[i] : (float)v;
      break;
    case 1:
      ((double *)a.out)[i] = v;
      break;
    case 2:
      ((int *)a.out)[i] = (int)v;
      break;
    case 3:
      ((long long *)a.out)[i] = (long long)v;
      break;
    default:
      ((unsigned char *)a.out)[i] = v != 0 ? 1 : 0;
    }
  }
}

// The three-operand selects over f32 values (operands of the result's shape, or scalars: a
// stride of 0): op 0 where(cond, a, b) (cond of type code condType, non-zero is true), op 1
// maximum_grad(dy, a, b) (dy where a >= b), op 2 minimum_grad (dy where a <= b).
struct SelectArgs {
  float *out;
  const void *p0;
  const float *p1;
  const float *p2;
  long long s0, s1, s2; // 1, or 0 for a scalar
  long long n;
  int condType;
  int op;
};
PRISM_KERNEL(prism_select, SelectArgs, a) {
  PRISM_FOR_EACH(i, a.n) {
    float x = a.p1[i * a.s1], y = a.p2[i * a.s2];
    if (a.op == 0) {
      a.out[i] = prism_read(a.p0, a.condType, i * a.s0) != 0 ? x : y;
    } else {
      float dy = ((const float *)a.p0)[i * a.s0];
      bool takes = a.op == 1 ? x >= y : x <= y;
      a.out[i] = takes ? dy : 0.0f;
    }
  }
}

// The squared sum (op 0) or the finiteness (op 1) of f32 values in `chunks` equal parts, a thread
// per part, each part's result in partial[k] (in double); then prism_norm_finish adds the parts
// of every operand in order.
struct NormArgs {
  double *partial;
  const float *in;
  long long n;
  long long chunks;
  int op;
};
PRISM_KERNEL(prism_norm_parts, NormArgs, a) {
  PRISM_FOR_EACH(k, a.chunks) {
    long long size = (a.n + a.chunks - 1) / a.chunks;
    long long begin = k * size, end = begin + size < a.n ? begin + size : a.n;
    double acc = 0;
    for (long long i = begin; i < end; ++i) {
      double v = (double)a.in[i];
      if (a.op == 0)
        acc += v * v;
      else if (!(v - v == 0)) // inf and NaN
        acc = 1;
    }
    a.partial[k] = acc;
  }
}

// out = sqrt(sum of partial) (op 0: global_norm), 1 when no part found a non-finite value else
// 0 (op 1: all_finite), or clip_scale of the norm in `norm` (op 2: min(1, clip / norm), 1 for
// a norm of 0). One thread.
struct NormFinishArgs {
  float *out;
  const double *partial;
  const float *norm;
  long long parts;
  double clip;
  int op;
};
PRISM_KERNEL(prism_norm_finish, NormFinishArgs, a) {
  PRISM_FOR_EACH(i, 1) {
    if (a.op == 2) {
      double norm = (double)a.norm[0];
      double factor = norm == 0 ? 1.0 : a.clip / norm;
      a.out[0] = (float)(factor < 1.0 ? factor : 1.0);
      continue;
    }
    double sum = 0;
    for (long long k = 0; k < a.parts; ++k)
      sum += a.partial[k];
    a.out[0] = a.op == 0 ? (float)sqrt(sum) : (sum == 0 ? 1.0f : 0.0f);
  }
}

// scale: out = x * s[0] over n elements.
struct ScaleArgs {
  float *out;
  const float *x;
  const float *s;
  long long n;
};
PRISM_KERNEL(prism_scale, ScaleArgs, a) {
  PRISM_FOR_EACH(i, a.n) { a.out[i] = a.x[i] * a.s[0]; }
}

// combine_towers: out = weight * in (the first tower's, or a sparse value's rows) or
// out += weight * in (each further tower's), over n elements: the towers' batch-weighted mean
// summed in tower order, each product rounded before the sum, as on the CPU.
struct WeightedAddArgs {
  float *out;
  const float *in;
  long long n;
  float weight;
  int accumulate;
};
PRISM_KERNEL(prism_weighted_add, WeightedAddArgs, a) {
  PRISM_FOR_EACH(i, a.n) {
    float term = prism_mul_rn(a.weight, a.in[i]);
    a.out[i] = a.accumulate ? a.out[i] + term : term;
  }
}

// avg_pool2d: y the mean of the window's cells inside the input (padding not counted; 0 for a
// window outside). avg_pool2d_grad: dx each cell's share of the windows holding it.
PRISM_DEVICE_FUNCTION long long prism_window_cells(const Conv2dArgs &a, long long oh,
                                                   long long ow) {
  long long count = 0;
  prism_window_cells_of(a, oh, ow, [&](long long, long long, long long, long long) { ++count; });
  return count;
}
PRISM_KERNEL(prism_avg_pool2d, Conv2dArgs, a) {
  PRISM_FOR_EACH(e, a.n * a.oh * a.ow * a.c) {
    long long c = e % a.c, rest = e / a.c;
    long long ow = rest % a.ow, oh = (rest / a.ow) % a.oh, n = rest / (a.ow * a.oh);
    double sum = 0;
    prism_window_cells_of(a, oh, ow, [&](long long ih, long long iw, long long, long long) {
      sum += (double)a.x[((n * a.h + ih) * a.w_ + iw) * a.c + c];
    });
    long long count = prism_window_cells(a, oh, ow);
    a.y[e] = count > 0 ? (float)(sum / (double)count) : 0.0f;
  }
}
PRISM_KERNEL(prism_avg_pool2d_grad, Conv2dArgs, a) {
  PRISM_FOR_EACH(e, a.n * a.h * a.w_ * a.c) {
    long long c = e % a.c, rest = e / a.c;
    long long iw = rest % a.w_, ih = (rest / a.w_) % a.h, n = rest / (a.w_ * a.h);
    double sum = 0;
    prism_windows_holding(a, ih, iw, [&](long long oh, long long ow, long long, long long) {
      sum += (double)a.dy[((n * a.oh + oh) * a.ow + ow) * a.c + c] /
             (double)prism_window_cells(a, oh, ow);
    });
    a.y[e] = (float)sum;
  }
}

// lr_schedule: the factor at the step count in step[0] (runtime's LearningRateSchedule::factor:
// a linear warmup, then decay 0 constant, 1 step, 2 exponential, 3 cosine). A count that is not a
// whole number >= 0 sets *bad (the caller reports it).
struct LrScheduleArgs {
  float *out;
  const float *step;
  long long *bad;
  long long warmupSteps;
  double warmupStart;
  int decay;
  long long every;
  double gamma;
  long long total;
  double finalFactor;
};
PRISM_KERNEL(prism_lr_schedule, LrScheduleArgs, a) {
  PRISM_FOR_EACH(i, 1) {
    double counter = (double)a.step[0];
    if (!(counter >= 0) || counter != floor(counter) || counter > 9.0e15) {
      *a.bad = 1;
      a.out[0] = 1.0f;
      continue;
    }
    long long step = (long long)counter;
    double factor = 1;
    if (step < a.warmupSteps) {
      factor = a.warmupStart + (1 - a.warmupStart) * (double)step / (double)a.warmupSteps;
    } else {
      long long s = step - a.warmupSteps;
      if (a.decay == 1)
        factor = pow(a.gamma, (double)(s / a.every));
      else if (a.decay == 2)
        factor = pow(a.gamma, (double)s);
      else if (a.decay == 3) {
        double progress = (double)(s < a.total ? s : a.total) / (double)a.total;
        factor = a.finalFactor + (1 - a.finalFactor) * (1 + cos(3.14159265358979323846 * progress)) / 2;
      }
    }
    a.out[0] = (float)factor;
  }
}

// sigmoid_cross_entropy: op 0 each element's term max(x, 0) - x z + log(1 + e^-|x|) into
// `terms` (double; their mean is prism_mean_of_rows's), op 1 the gradient
// dx = dloss (sigmoid(x) - z) / n.
struct SigmoidCrossEntropyArgs {
  float *out;
  double *terms;
  const float *x;
  const float *z;
  const float *dloss;
  long long n;
  int op;
};
PRISM_KERNEL(prism_sigmoid_cross_entropy, SigmoidCrossEntropyArgs, a) {
  PRISM_FOR_EACH(i, a.n) {
    double x = (double)a.x[i], z = (double)a.z[i];
    if (a.op == 0) {
      a.terms[i] = (x > 0 ? x : 0) - x * z + log1p(exp(-(x < 0 ? -x : x)));
    } else {
      double sigmoid = x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
      a.out[i] = (float)((double)a.dloss[0] * (sigmoid - z) / (double)a.n);
    }
  }
}

// The sparse-value ops over f32 rows of `rowSize` elements: op 0 sparse_to_dense's scatter
// (dense[indices[j]] += rows[j], atomically), op 1 touched_rows (dense[indices[j]] = 1), both
// flagging an index outside [0, tableRows) in *bad; op 2 sparse_from_dense's positions
// (position[i] = the masked rows before i, *total = all of them; the three kernels below), op 3
// its copy of each masked row i of `rows` (the dense g) to outRows[position[i]], with
// outIndices[position[i]] = i.
struct SparseArgs {
  float *dense;
  const long long *indices;
  const float *rows;
  const float *mask;
  long long *position;
  long long *total;
  long long *outIndices;
  float *outRows;
  long long *bad;
  long long count;
  long long rowSize;
  long long tableRows;
  int op;
  long long parts;       // op 2: the rows in this many consecutive ranges
  long long *partCounts; // and their masked rows (then the masked rows before each)
};
// op 2 in three launches: prism_mask_counts counts each range's masked rows, prism_mask_offsets
// (one thread) turns the counts into the masked rows before each range and sets *total, and
// prism_mask_positions numbers each range's rows from there.
PRISM_KERNEL(prism_mask_counts, SparseArgs, a) {
  PRISM_FOR_EACH(p, a.parts) {
    long long begin, end, count = 0;
    prism_part_range(a.tableRows, a.parts, p, &begin, &end);
    for (long long i = begin; i < end; ++i)
      count += a.mask[i] != 0.0f;
    a.partCounts[p] = count;
  }
}
PRISM_KERNEL(prism_mask_offsets, SparseArgs, a) {
  PRISM_FOR_EACH(t, 1) {
    long long at = 0;
    for (long long p = 0; p < a.parts; ++p) {
      long long count = a.partCounts[p];
      a.partCounts[p] = at;
      at += count;
    }
    *a.total = at;
  }
}
PRISM_KERNEL(prism_mask_positions, SparseArgs, a) {
  PRISM_FOR_EACH(p, a.parts) {
    long long begin, end, at = a.partCounts[p];
    prism_part_range(a.tableRows, a.parts, p, &begin, &end);
    for (long long i = begin; i < end; ++i) {
      a.position[i] = at;
      at += a.mask[i] != 0.0f;
    }
  }
}
PRISM_KERNEL(prism_sparse, SparseArgs, a) {
  if (a.op == 3) {
    PRISM_FOR_EACH(e, a.tableRows * a.rowSize) {
      long long i = e / a.rowSize, k = e % a.rowSize;
      if (a.mask[i] == 0.0f)
        continue;
      a.outRows[a.position[i] * a.rowSize + k] = a.rows[e];
      if (k == 0)
        a.outIndices[a.position[i]] = i;
    }
    return;
  }
  PRISM_FOR_EACH(e, a.count * (a.op == 0 ? a.rowSize : 1)) {
    long long j = a.op == 0 ? e / a.rowSize : e;
    long long index = a.indices[j];
    if (index < 0 || index >= a.tableRows) {
      *a.bad = j + 1;
      continue;
    }
    if (a.op == 0)
      prism_atomic_add(a.dense + index * a.rowSize + e % a.rowSize, a.rows[e]);
    else
      a.dense[index] = 1.0f;
  }
}

// update_loss_scale: one thread; scale, good and skipped are scalar variables written in place.
struct LossScaleArgs {
  float *scale;
  float *good;
  float *skipped;
  const float *finite;
  double interval;
  double growth;
  double backoff;
};
PRISM_KERNEL(prism_update_loss_scale, LossScaleArgs, a) {
  PRISM_FOR_EACH(i, 1) {
    double s = (double)a.scale[0], g = (double)a.good[0];
    if (a.finite[0] != 0.0f) {
      g += 1;
      if (g >= a.interval) {
        s *= a.growth;
        g = 0;
      }
    } else {
      s *= a.backoff;
      g = 0;
      a.skipped[0] = (float)((double)a.skipped[0] + 1);
    }
    a.scale[0] = (float)s;
    a.good[0] = (float)g;
  }
}

// X(kernel, Args) for every kernel above: the host tests' table of them.
#define PRISM_DEVICE_KERNELS(X)                                                                    \
  X(prism_fill, FillArgs)                                                                          \
  X(prism_copy, CopyArgs)                                                                          \
  X(prism_axis_copy, AxisCopyArgs)                                                                 \
  X(prism_reduce_parts, ReduceArgs)                                                                \
  X(prism_reduce, ReduceArgs)                                                                      \
  X(prism_expand, ExpandArgs)                                                                      \
  X(prism_gather, GatherArgs)                                                                      \
  X(prism_sparse_rows, SparseRowsArgs)                                                             \
  X(prism_row_max_parts, RowStatsArgs)                                                             \
  X(prism_row_max, RowStatsArgs)                                                                   \
  X(prism_row_exp_parts, RowStatsArgs)                                                             \
  X(prism_row_exp_sum, RowStatsArgs)                                                               \
  X(prism_cross_entropy_rows, CrossEntropyRowsArgs)                                                \
  X(prism_mean_of_rows_parts, MeanOfRowsArgs)                                                      \
  X(prism_mean_of_rows, MeanOfRowsArgs)                                                            \
  X(prism_cross_entropy_grad, CrossEntropyGradArgs)                                                \
  X(prism_cross_entropy_grad_elements, CrossEntropyGradArgs)                                       \
  X(prism_bias_activation, BiasActivationArgs)                                                     \
  X(prism_dropout, DropoutArgs)                                                                    \
  X(prism_batch_share, BatchShareArgs)                                                             \
  X(prism_transpose, TransposeArgs)                                                                \
  X(prism_rows, RowsArgs)                                                                          \
  X(prism_layer_norm_gamma_grad, RowsArgs)                                                         \
  X(prism_bn_stats, BatchNormArgs)                                                                 \
  X(prism_bn_elements, BatchNormArgs)                                                              \
  X(prism_bn_channels, BatchNormArgs)                                                              \
  X(prism_pad, PadArgs)                                                                            \
  X(prism_cast, CastArgs)                                                                          \
  X(prism_sparse, SparseArgs)                                                                      \
  X(prism_round, RoundArgs)                                                                        \
  X(prism_mask_counts, SparseArgs)                                                                 \
  X(prism_mask_offsets, SparseArgs)                                                                \
  X(prism_mask_positions, SparseArgs)                                                              \
  X(prism_update_loss_scale, LossScaleArgs)                                                        \
  X(prism_lr_schedule, LrScheduleArgs)                                                             \
  X(prism_sigmoid_cross_entropy, SigmoidCrossEntropyArgs)                                          \
  X(prism_select, SelectArgs)                                                                      \
  X(prism_norm_parts, NormArgs)                                                                    \
  X(prism_norm_finish, NormFinishArgs)                                                             \
  X(prism_scale, ScaleArgs)                                                                        \
  X(prism_weighted_add, WeightedAddArgs)                                                           \
  X(prism_avg_pool2d, Conv2dArgs)                                                                  \
  X(prism_avg_pool2d_grad, Conv2dArgs)                                                             \
  X(prism_im2col, PatchArgs)                                                                       \
  X(prism_col2im, PatchArgs)                                                                       \
  X(prism_max_pool2d, Conv2dArgs)                                                                  \
  X(prism_max_pool2d_grad, Conv2dArgs)                                                             \
  X(prism_apply_sgd, SgdArgs)                                                                      \
  X(prism_apply_momentum, MomentumArgs)                                                            \
  X(prism_apply_adam, AdamArgs)
