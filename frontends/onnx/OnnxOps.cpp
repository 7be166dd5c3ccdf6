// The ONNX op mappings: one table entry per ONNX op type, each a function that reads the node
// through OnnxGraph and emits Prism ops (or folds the node when its inputs are known at import).
#include <algorithm>
#include <limits>
#include <numeric>

#include "frontends/onnx/OnnxGraph.h"
#include "ir/Builder.h"
#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "ir/Type.h"

namespace prism::frontends::onnx {
namespace {

struct OnnxOp;
using Mapping = llvm::Error (*)(OnnxGraph &, const OnnxOp &);

// `prismOp` is the Prism op a mapping emits, for mappings that several ONNX ops share.
struct OnnxOp {
  const char *onnxType;
  Mapping map;
  const char *prismOp = nullptr;
};

int64_t normalizeAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

// `axes` normalized against `rank` (a negative axis counts from the end); an error for an axis
// outside the rank or given twice.
llvm::Expected<std::vector<int64_t>> checkedAxes(OnnxGraph &g, std::vector<int64_t> axes,
                                                 size_t rank, llvm::StringRef what) {
  std::vector<bool> seen(rank, false);
  for (int64_t &axis : axes) {
    const int64_t given = axis;
    axis = normalizeAxis(axis, rank);
    if (axis < 0 || axis >= static_cast<int64_t>(rank))
      return g.fail(what + " " + llvm::Twine(given) + " is outside rank " + llvm::Twine(rank));
    if (seen[axis])
      return g.fail(what + " " + llvm::Twine(given) + " is given twice");
    seen[axis] = true;
  }
  return axes;
}

ir::AttrMap one(const char *name, ir::Attr value) {
  return ir::attrs({{name, std::move(value)}});
}

// Emits `op` over input 0 and defines output 0 as its result.
llvm::Expected<ir::Value *> emitOutput(OnnxGraph &g, llvm::StringRef op,
                                       llvm::ArrayRef<ir::Value *> operands, ir::AttrMap attrs,
                                       Layout layout = Layout::Onnx, DimGroups groups = {}) {
  auto y = g.emit(op, operands, std::move(attrs), g.output(0));
  if (y)
    g.defineOutput(0, *y, layout, std::move(groups));
  return y;
}

// Emits `op` over input 0 as it is held and defines output 0 held the same way (ops that keep
// every dimension: elementwise ones).
llvm::Error emitKeepingForm(OnnxGraph &g, llvm::StringRef op, ir::AttrMap attrs = {}) {
  auto x = g.heldInput(0);
  if (!x)
    return x.takeError();
  auto y = emitOutput(g, op, {*x}, std::move(attrs), g.layoutOf(0), g.groupsOf(0));
  return y ? llvm::Error::success() : y.takeError();
}

llvm::Error done(llvm::Expected<ir::Value *> v) {
  return v ? llvm::Error::success() : v.takeError();
}

// ---- elementwise ----

llvm::Error unary(OnnxGraph &g, const OnnxOp &op) {
  return emitKeepingForm(g, op.prismOp);
}

// One element of integer arithmetic on shapes, where either operand may be a multiple of B:
// k·B ± m·B, k·B · m, k·B / m and k·B / m·B stay exact; anything else is not folded.
llvm::Expected<int64_t> foldInts(OnnxGraph &g, llvm::StringRef kind, int64_t x, int64_t y) {
  const bool bx = isBatchMultiple(x), by = isBatchMultiple(y);
  const int64_t a = batchFactor(x), b = batchFactor(y);
  auto notFolded = [&] {
    return g.fail("arithmetic on the batch size (" + dimText(x) + " " + kind + " " + dimText(y) +
                      ") is not folded at import: only multiples B*k of the batch size are",
                  ir::ErrorCode::Unsupported);
  };
  if (kind == "div" && b == 0)
    return g.fail("division by zero in a constant");
  // A hostile file's constants must not overflow: that is an error, not undefined behaviour.
  auto arithmetic = [&](llvm::StringRef op) -> llvm::Expected<int64_t> {
    int64_t r = 0;
    bool overflow = op == "add"   ? __builtin_add_overflow(a, b, &r)
                    : op == "sub" ? __builtin_sub_overflow(a, b, &r)
                    : op == "mul" ? __builtin_mul_overflow(a, b, &r)
                    : op == "div" ? (a == std::numeric_limits<int64_t>::min() && b == -1)
                                  : false;
    if (overflow)
      return g.fail("integer overflow in " + dimText(x) + " " + op + " " + dimText(y));
    return op == "div"       ? a / b
           : op == "maximum" ? std::max(a, b)
           : op == "minimum" ? std::min(a, b)
                             : r;
  };
  if (!bx && !by)
    return arithmetic(kind);
  const bool sum = (kind == "add" || kind == "sub") && bx && by;
  const bool product = kind == "mul" && bx != by;
  const bool quotient = kind == "div" && bx && b != -1 && a % b == 0;
  if (!sum && !product && !quotient)
    return notFolded();
  auto factor = arithmetic(kind);
  if (!factor)
    return factor.takeError();
  if (quotient && by) // k·B / m·B
    return *factor;
  if (*factor <= 0 || *factor >= kMaxBatchFactor)
    return notFolded();
  return batchMultiple(*factor);
}

// Integer arithmetic on shapes known at import (scalars broadcast).
llvm::Error foldBinary(OnnxGraph &g, const OnnxOp &op, const ConstTensor &a, const ConstTensor &b) {
  if (!a.integer || !b.integer)
    return g.fail("float arithmetic on constants is not folded at import",
                  ir::ErrorCode::Unsupported);
  const size_t n = std::max(a.ints.size(), b.ints.size());
  if ((a.ints.size() != n && a.ints.size() != 1) || (b.ints.size() != n && b.ints.size() != 1))
    return g.fail("cannot broadcast " + dimsText(a.dims) + " with " + dimsText(b.dims));
  ConstTensor out;
  out.integer = true;
  out.dims = a.ints.size() == n ? a.dims : b.dims;
  for (size_t k = 0; k < n; ++k) {
    auto folded = foldInts(g, op.prismOp, a.ints[a.ints.size() == 1 ? 0 : k],
                           b.ints[b.ints.size() == 1 ? 0 : k]);
    if (!folded)
      return folded.takeError();
    out.ints.push_back(*folded);
  }
  g.defineConstant(g.output(0).str(), std::move(out));
  return llvm::Error::success();
}

// The operands of a broadcasting op when one of them holds a multiple of B as several Prism
// dimensions: every operand is brought to the result's groups, an operand of extent 1 on a
// grouped axis reshaped to as many 1s (numpy's alignment at the last axis holds for the Prism
// dimensions then). Another extent on a grouped axis is an error.
llvm::Expected<std::vector<ir::Value *>> groupedOperands(OnnxGraph &g, unsigned count,
                                                         DimGroups &result) {
  std::vector<std::vector<int64_t>> dims(count);
  size_t rank = 0;
  for (unsigned i = 0; i < count; ++i) {
    auto d = g.dimsOf(i);
    if (!d)
      return d.takeError();
    dims[i] = *d;
    rank = std::max(rank, d->size());
  }
  result = DimGroups::ones(rank);
  for (unsigned i = 0; i < count; ++i) {
    const DimGroups groups = g.groupsOf(i);
    for (size_t k = 0; k < dims[i].size(); ++k) {
      int64_t &size = result.sizes[rank - dims[i].size() + k];
      if (groups.sizes[k] == 1)
        continue;
      if (size != 1 && size != groups.sizes[k])
        return g.fail("operands hold a dimension that is a multiple of the batch size in " +
                          llvm::Twine("different ways"),
                      ir::ErrorCode::Unsupported);
      size = groups.sizes[k];
    }
  }
  std::vector<ir::Value *> operands;
  for (unsigned i = 0; i < count; ++i) {
    auto x = g.groupedInput(i);
    if (!x)
      return x.takeError();
    auto held = g.prismDimsOf(i);
    if (!held)
      return held.takeError();
    const DimGroups groups = g.groupsOf(i);
    std::vector<int64_t> target;
    for (size_t k = 0; k < dims[i].size(); ++k) {
      const int64_t size = result.sizes[rank - dims[i].size() + k];
      std::vector<int64_t> own = groups.prismDims(*held, k);
      if (groups.sizes[k] != size && dims[i][k] != 1)
        return g.fail("cannot broadcast " + dimsText(dims[i]) + " against a dimension that is " +
                          "a multiple of the batch size",
                      ir::ErrorCode::Unsupported);
      if (groups.sizes[k] != size)
        own.assign(size, 1);
      target.insert(target.end(), own.begin(), own.end());
    }
    ir::Value *operand = *x;
    if (target != *held) {
      auto reshaped = g.emit("reshape", {operand}, one("shape", ir::Attr::ints(target)));
      if (!reshaped)
        return reshaped.takeError();
      operand = *reshaped;
    }
    operands.push_back(operand);
  }
  return operands;
}

bool anyGrouped(OnnxGraph &g, unsigned count) {
  for (unsigned i = 0; i < count; ++i)
    if (!g.groupsOf(i).trivial())
      return true;
  return false;
}

llvm::Error binary(OnnxGraph &g, const OnnxOp &op) {
  const ConstTensor *a = g.constantInput(0), *b = g.constantInput(1);
  if (a && b)
    return foldBinary(g, op, *a, *b);
  if (anyGrouped(g, 2)) {
    DimGroups groups;
    auto operands = groupedOperands(g, 2, groups);
    if (!operands)
      return operands.takeError();
    return done(emitOutput(g, op.prismOp, *operands, {}, Layout::Onnx, std::move(groups)));
  }
  // NHWC when every computed operand is NHWC and every constant is one value (which broadcasts
  // in any layout); else the ONNX layout.
  bool nhwc = true;
  for (unsigned i = 0; i < 2; ++i) {
    const ConstTensor *c = g.constantInput(i);
    nhwc &= c ? c->numElements() == 1 : g.layoutOf(i) == Layout::Nhwc;
  }
  const Layout layout = nhwc ? Layout::Nhwc : Layout::Onnx;
  auto x = g.tensorInput(0, layout);
  if (!x)
    return x.takeError();
  auto y = g.tensorInput(1, layout);
  if (!y)
    return y.takeError();
  return done(emitOutput(g, op.prismOp, {*x, *y}, {}, layout));
}

// ---- matrix products ----

// Gemm: A's rows may be a multiple of B held as several Prism dimensions ([T*B, E] in
// attention), a batch_matmul sharing B over them; the contraction may not.
llvm::Error gemm(OnnxGraph &g, const OnnxOp &) {
  const ::onnx::NodeProto &n = g.node();
  const float alpha = floatAttr(n, "alpha", 1.0f), beta = floatAttr(n, "beta", 1.0f);
  const bool transA = intAttr(n, "transA", 0) != 0;
  const DimGroups groups = g.groupsOf(0);
  if (groups.sizes.size() != 2)
    return g.fail("operand A must have rank 2");
  if (auto contracted = g.prismAxis(0, transA ? 0 : 1, "the contraction"); !contracted)
    return contracted.takeError();
  if (transA)
    if (auto rows = g.prismAxis(0, 1, "a transposed operand A"); !rows)
      return rows.takeError();
  auto a = g.groupedInput(0);
  if (!a)
    return a.takeError();
  auto b = g.tensorInput(1);
  if (!b)
    return b.takeError();
  const bool hasBias = !g.input(2).empty();
  const bool last = alpha == 1.0f && !hasBias;
  auto y = g.emit(groups.trivial() ? "matmul" : "batch_matmul", {*a, *b},
                  ir::attrs({{"transpose_a", ir::Attr::boolean(transA)},
                             {"transpose_b", ir::Attr::boolean(intAttr(n, "transB", 0) != 0)}}),
                  last ? g.output(0) : "");
  if (!y)
    return y.takeError();
  const DimGroups outGroups{{groups.sizes[0], 1}};
  auto scaled = [&](ir::Value *v, float s, bool named) -> llvm::Expected<ir::Value *> {
    if (s == 1.0f)
      return v;
    auto factor = g.emit("constant", {}, one("value", ir::Attr::real(s)));
    if (!factor)
      return factor.takeError();
    return g.emit("mul", {v, *factor}, {}, named ? g.output(0) : "");
  };
  auto product = scaled(*y, alpha, !hasBias);
  if (!product)
    return product.takeError();
  if (!hasBias) {
    g.defineOutput(0, *product, Layout::Onnx, outGroups);
    return llvm::Error::success();
  }
  auto c = g.tensorInput(2);
  if (!c)
    return c.takeError();
  auto bias = scaled(*c, beta, false);
  if (!bias)
    return bias.takeError();
  return done(emitOutput(g, "add", {*product, *bias}, {}, Layout::Onnx, outGroups));
}

// Rank 2 is matmul; higher ranks batch_matmul over the leading dimensions (equal, or one
// operand of rank 2 shared by every batch entry, as attention's projections are). Leading
// dimensions that are multiples of B (attention's [B*heads, T, D]) are batch dimensions of
// Prism's product, as are a's rows when b has rank 2; the contraction and b's columns are not.
llvm::Error matmulOp(OnnxGraph &g, const OnnxOp &) {
  std::vector<int64_t> dims[2];
  DimGroups groups[2];
  for (unsigned i = 0; i < 2; ++i) {
    auto d = g.dimsOf(i);
    if (!d)
      return d.takeError();
    if (d->size() < 2)
      return g.fail("operand " + llvm::Twine(i) + " has rank " + llvm::Twine(d->size()) +
                        "; Prism's products take rank 2 or more",
                    ir::ErrorCode::Unsupported);
    dims[i] = *d;
    groups[i] = g.groupsOf(i);
  }
  const size_t ra = dims[0].size(), rb = dims[1].size();
  for (auto [i, axis] : {std::pair<unsigned, int64_t>{0, -1}, {1, -2}, {1, -1}})
    if (auto a = g.prismAxis(i, axis, i == 0 || axis == -2 ? "the contraction" : "a product"); !a)
      return a.takeError();
  // a's rows are one more batch dimension only when b is shared by all of them.
  if (rb != 2)
    if (auto rows = g.prismAxis(0, -2, "a product with a batched right operand"); !rows)
      return rows.takeError();
  if (ra > 2 && rb > 2 &&
      !llvm::ArrayRef(groups[0].sizes)
           .drop_back(2)
           .equals(llvm::ArrayRef(groups[1].sizes).drop_back(2)))
    return g.fail("the batch dimensions " + dimsText(dims[0]) + " and " + dimsText(dims[1]) +
                      " hold multiples of the batch size differently",
                  ir::ErrorCode::Unsupported);
  auto a = g.groupedInput(0);
  if (!a)
    return a.takeError();
  auto b = g.groupedInput(1);
  if (!b)
    return b.takeError();
  // The result's dimensions: the batch ones of the operand that has them, a's rows, b's columns.
  DimGroups out;
  const DimGroups &batched = ra >= rb ? groups[0] : groups[1];
  out.sizes.assign(batched.sizes.begin(), batched.sizes.end() - 2);
  out.sizes.push_back(groups[0].sizes[ra - 2]);
  out.sizes.push_back(1);
  const bool plain = (*a)->type().rank() == 2 && (*b)->type().rank() == 2;
  return done(emitOutput(g, plain ? "matmul" : "batch_matmul", {*a, *b}, {}, Layout::Onnx, out));
}

// ---- convolution and pooling (NHWC) ----

struct Window {
  std::vector<int64_t> kernel, strides;
  std::string padding;       // same | valid (after `pads`, when there are any)
  std::vector<int64_t> pads; // ONNX's [top, left, bottom, right] when neither fits: a pad op first
};

// The Prism padding (TensorFlow's same, or valid) that equals ONNX's pads for this input, or an
// error. `ceilMode` (pools) is accepted where it changes nothing.
llvm::Expected<Window> windowOf(OnnxGraph &g, llvm::ArrayRef<int64_t> inputDims,
                                std::vector<int64_t> kernel, bool ceilMode) {
  const ::onnx::NodeProto &n = g.node();
  Window w;
  w.kernel = std::move(kernel);
  if (w.kernel.size() != 2 || inputDims.size() != 4)
    return g.fail("only 2-D windows over 4-D NCHW inputs are supported",
                  ir::ErrorCode::Unsupported);
  w.strides = intsAttr(n, "strides", {1, 1});
  for (int64_t d : intsAttr(n, "dilations", {1, 1}))
    if (d != 1)
      return g.fail("dilations other than 1 are not supported", ir::ErrorCode::Unsupported);
  std::vector<int64_t> pads = intsAttr(n, "pads", {0, 0, 0, 0});
  const std::string autoPad = stringAttr(n, "auto_pad", "NOTSET");
  if (pads.size() != 4 || w.strides.size() != 2)
    return g.fail("expected 4 pads and 2 strides");
  // Bounds far above any real window keep the arithmetic below exact for hostile files.
  constexpr int64_t kLargest = int64_t{1} << 24;
  for (int k = 0; k < 2; ++k)
    if (w.kernel[k] < 1 || w.kernel[k] > kLargest || w.strides[k] < 1 || w.strides[k] > kLargest ||
        inputDims[2 + k] > kLargest)
      return g.fail("kernel " + dimsText(w.kernel) + ", strides " + dimsText(w.strides) +
                    " and input " + dimsText(inputDims) + " must be positive and below 2^24");
  for (int64_t p : pads)
    if (p < 0 || p > kLargest)
      return g.fail("pads " + dimsText(pads) + " must be non-negative and below 2^24");
  std::vector<int64_t> same(4, 0);
  bool valid = true, isSame = true;
  for (int k = 0; k < 2; ++k) {
    const int64_t in = inputDims[2 + k], kernelSize = w.kernel[k], s = w.strides[k];
    if (in < 0)
      return g.fail("the spatial dimensions must be static");
    const int64_t out = (in + s - 1) / s;
    const int64_t total = std::max<int64_t>((out - 1) * s + kernelSize - in, 0);
    same[k] = total / 2;
    same[k + 2] = total - total / 2;
    valid &= pads[k] == 0 && pads[k + 2] == 0;
    isSame &= pads[k] == same[k] && pads[k + 2] == same[k + 2];
    if (ceilMode && (in + pads[k] + pads[k + 2] - kernelSize) % s != 0)
      return g.fail("ceil_mode = 1 changes the output size here; Prism's windows round down",
                    ir::ErrorCode::Unsupported);
  }
  if (autoPad == "VALID" || (autoPad == "NOTSET" && valid))
    w.padding = "valid";
  else if (autoPad == "SAME_UPPER" || (autoPad == "NOTSET" && isSame))
    w.padding = "same";
  else if (autoPad == "NOTSET") {
    w.padding = "valid";
    w.pads = pads;
  } else
    return g.fail("auto_pad " + autoPad + " is not supported", ir::ErrorCode::Unsupported);
  return w;
}

// x (NHWC) padded by the window's explicit pads with `value`, or x itself when it has none.
llvm::Expected<ir::Value *> padWindow(OnnxGraph &g, ir::Value *x, const Window &w, double value) {
  if (w.pads.empty())
    return x;
  const std::vector<int64_t> &p = w.pads;
  return g.emit("pad", {x},
                ir::attrs({{"pads", ir::Attr::ints({0, p[0], p[1], 0, 0, p[2], p[3], 0})},
                           {"value", ir::Attr::real(value)}}));
}

llvm::Error conv(OnnxGraph &g, const OnnxOp &) {
  const ::onnx::NodeProto &n = g.node();
  if (intAttr(n, "group", 1) != 1)
    return g.fail("group = " + llvm::Twine(intAttr(n, "group", 1)) +
                      " is not supported; Prism's conv2d has group = 1",
                  ir::ErrorCode::Unsupported);
  auto xDims = g.dimsOf(0);
  if (!xDims)
    return xDims.takeError();
  auto wDims = g.dimsOf(1);
  if (!wDims)
    return wDims.takeError();
  if (wDims->size() != 4)
    return g.fail("only 2-D convolutions are supported", ir::ErrorCode::Unsupported);
  auto window = windowOf(g, *xDims, {(*wDims)[2], (*wDims)[3]}, false);
  if (!window)
    return window.takeError();
  auto input = g.tensorInput(0, Layout::Nhwc);
  if (!input)
    return input.takeError();
  auto x = padWindow(g, *input, *window, 0.0);
  if (!x)
    return x.takeError();
  // ONNX's filter [O, C, KH, KW] becomes Prism's [KH, KW, C, O] in the values file.
  auto filter = g.variableInput(1, {2, 3, 1, 0});
  if (!filter)
    return filter.takeError();
  const bool hasBias = !g.input(2).empty();
  ir::AttrMap attrs = ir::attrs({{"stride", ir::Attr::ints(window->strides)},
                                 {"padding", ir::Attr::string(window->padding)}});
  auto y = g.emit("conv2d", {*x, *filter}, std::move(attrs), hasBias ? "" : g.output(0));
  if (!y)
    return y.takeError();
  if (!hasBias) {
    g.defineOutput(0, *y, Layout::Nhwc);
    return llvm::Error::success();
  }
  auto bias = g.tensorInput(2);
  if (!bias)
    return bias.takeError();
  return done(emitOutput(g, "bias_add", {*y, *bias}, {}, Layout::Nhwc));
}

llvm::Error pool(OnnxGraph &g, const OnnxOp &op) {
  const ::onnx::NodeProto &n = g.node();
  if (g.outputRead(1))
    return g.fail("the Indices output is not supported", ir::ErrorCode::Unsupported);
  auto xDims = g.dimsOf(0);
  if (!xDims)
    return xDims.takeError();
  auto window = windowOf(g, *xDims, intsAttr(n, "kernel_shape"), intAttr(n, "ceil_mode", 0) != 0);
  if (!window)
    return window.takeError();
  // Explicit pads count in an average only with count_include_pad (Prism's avg_pool2d leaves
  // 'same' padding out of the mean); a maximum never picks -inf.
  const bool average = llvm::StringRef(op.prismOp) == "avg_pool2d";
  const bool includePad = intAttr(n, "count_include_pad", 0) != 0;
  if (average && includePad && window->padding == "same")
    return g.fail("count_include_pad = 1 with padding is not supported; Prism's avg_pool2d " +
                      llvm::Twine("leaves padding out of the mean"),
                  ir::ErrorCode::Unsupported);
  if (average && !includePad && !window->pads.empty())
    return g.fail("pads " + dimsText(window->pads) +
                      " are neither 'same' nor 'valid' and count_include_pad = 0: Prism's " +
                      "avg_pool2d cannot leave such padding out of the mean",
                  ir::ErrorCode::Unsupported);
  auto input = g.tensorInput(0, Layout::Nhwc);
  if (!input)
    return input.takeError();
  auto x = padWindow(g, *input, *window, average ? 0.0 : -std::numeric_limits<double>::infinity());
  if (!x)
    return x.takeError();
  return done(emitOutput(g, op.prismOp, {*x},
                         ir::attrs({{"window", ir::Attr::ints(window->kernel)},
                                    {"stride", ir::Attr::ints(window->strides)},
                                    {"padding", ir::Attr::string(window->padding)}}),
                         Layout::Nhwc));
}

llvm::Error globalAveragePool(OnnxGraph &g, const OnnxOp &) {
  auto dims = g.dimsOf(0);
  if (!dims)
    return dims.takeError();
  if (dims->size() != 4)
    return g.fail("only 4-D NCHW inputs are supported", ir::ErrorCode::Unsupported);
  auto x = g.tensorInput(0, Layout::Nhwc);
  if (!x)
    return x.takeError();
  return done(emitOutput(
      g, "reduce_mean", {*x},
      ir::attrs({{"axes", ir::Attr::ints({1, 2})}, {"keepdims", ir::Attr::boolean(true)}}),
      Layout::Nhwc));
}

// ---- shapes ----

// ONNX's reshape target (0 copies the input's dimension, -1 is inferred) resolved against the
// input's dimensions, keeping the batch size: as B or as a multiple of it (B*k).
llvm::Expected<std::vector<int64_t>> resolveShape(OnnxGraph &g, llvm::ArrayRef<int64_t> in,
                                                  std::vector<int64_t> out, bool allowZero) {
  int inferred = -1;
  for (size_t k = 0; k < out.size(); ++k) {
    if (out[k] == 0 && !allowZero) {
      if (k >= in.size())
        return g.fail("shape " + dimsText(out) + " copies a dimension the input lacks");
      out[k] = in[k];
    } else if (out[k] == -1) {
      if (inferred >= 0)
        return g.fail("shape " + dimsText(out) + " has two -1");
      inferred = static_cast<int>(k);
    } else if (out[k] < 0 && !isBatchMultiple(out[k])) {
      return g.fail("shape " + dimsText(out) + " has a negative dimension");
    }
  }
  // How many dimensions hold B, and the product of the static extents and B's factors.
  // (0 for a product past 2^63: no real shape has one.)
  auto split = [](llvm::ArrayRef<int64_t> dims, int skip) {
    std::pair<int, int64_t> batchAndStatic{0, 1};
    for (size_t k = 0; k < dims.size(); ++k) {
      if (static_cast<int>(k) == skip)
        continue;
      batchAndStatic.first += isBatchMultiple(dims[k]);
      if (__builtin_mul_overflow(batchAndStatic.second, batchFactor(dims[k]),
                                 &batchAndStatic.second))
        batchAndStatic.second = 0;
    }
    return batchAndStatic;
  };
  auto [inBatch, inStatic] = split(in, -1);
  auto [outBatch, outStatic] = split(out, inferred);
  if (inStatic == 0 || outStatic == 0)
    return g.fail("shape " + dimsText(out) + " or " + dimsText(in) + " is empty or too large");
  auto cannot = [&] {
    return g.fail("cannot reshape " + dimsText(in) + " to " + dimsText(out) +
                      " with a batch dimension B (export with dynamic_axes on the batch, and " +
                      "keep the batch as one dimension or a multiple of it)",
                  ir::ErrorCode::Unsupported);
  };
  const bool divides = outStatic != 0 && inStatic % outStatic == 0;
  if (inferred >= 0) {
    if (inBatch == outBatch && divides)
      out[inferred] = inStatic / outStatic;
    else if (inBatch == 1 && outBatch == 0 && divides)
      out[inferred] = batchMultiple(inStatic / outStatic);
    else
      return cannot();
  } else if (inBatch != outBatch || inStatic != outStatic) {
    return cannot();
  }
  return out;
}

// The Prism shape of a reshape to the ONNX dimensions `out` of a value held as `held`: static
// dimensions are one Prism dimension each; a multiple of the batch, B*k, is held as [x, B, y]
// (1s left out, x·y = k) so that B stays between the same elements as in the input (the same
// number of elements before it, and after it), and so keeps meaning the examples of the batch.
std::pair<std::vector<int64_t>, DimGroups> prismShapeOf(llvm::ArrayRef<int64_t> held,
                                                        llvm::ArrayRef<int64_t> out) {
  std::pair<std::vector<int64_t>, DimGroups> shape;
  auto batchAt = [](llvm::ArrayRef<int64_t> dims) {
    return std::find_if(dims.begin(), dims.end(), isBatchMultiple) - dims.begin();
  };
  auto product = [](llvm::ArrayRef<int64_t> dims) {
    return std::accumulate(dims.begin(), dims.end(), int64_t(1), std::multiplies<int64_t>());
  };
  const size_t inB = batchAt(held), outB = batchAt(out);
  int64_t before = 1, after = 1;
  if (inB < held.size() && outB < out.size()) {
    before = product(held.take_front(inB));
    after = product(held.drop_front(inB + 1));
    const int64_t outBefore = product(out.take_front(outB));
    const int64_t outAfter = product(out.drop_front(outB + 1));
    if (before % outBefore == 0 && after % outAfter == 0) {
      before /= outBefore;
      after /= outAfter;
    } else {
      // A reshape that moves B among the elements mixes examples; it still means the same
      // bytes in any grouping, the plainest is [B, k].
      before = 1;
      after = batchFactor(out[outB]);
    }
  }
  for (size_t k = 0; k < out.size(); ++k) {
    if (k != outB) {
      shape.first.push_back(out[k]);
      shape.second.sizes.push_back(1);
      continue;
    }
    const size_t first = shape.first.size();
    if (before != 1)
      shape.first.push_back(before);
    shape.first.push_back(ir::kBatchDim);
    if (after != 1)
      shape.first.push_back(after);
    shape.second.sizes.push_back(static_cast<int64_t>(shape.first.size() - first));
  }
  return shape;
}

llvm::Error reshapeInput(OnnxGraph &g, std::vector<int64_t> target, bool allowZero) {
  auto in = g.dimsOf(0);
  if (!in)
    return in.takeError();
  auto shape = resolveShape(g, *in, std::move(target), allowZero);
  if (!shape)
    return shape.takeError();
  if (const ConstTensor *c = g.constantInput(0)) {
    ConstTensor reshaped = *c;
    reshaped.dims = *shape;
    g.defineConstant(g.output(0).str(), std::move(reshaped));
    return llvm::Error::success();
  }
  auto held = g.prismDimsOf(0);
  if (!held)
    return held.takeError();
  auto [prismShape, groups] = prismShapeOf(*held, *shape);
  auto x = g.groupedInput(0);
  if (!x)
    return x.takeError();
  // [T*B, E] back to [T, B, E] is the same Prism value.
  if (prismShape == *held) {
    g.defineOutput(0, *x, Layout::Onnx, std::move(groups));
    return llvm::Error::success();
  }
  return done(emitOutput(g, "reshape", {*x}, one("shape", ir::Attr::ints(prismShape)), Layout::Onnx,
                         std::move(groups)));
}

llvm::Error reshape(OnnxGraph &g, const OnnxOp &) {
  auto target = g.intsInput(1, "the shape (input 1)");
  if (!target)
    return target.takeError();
  return reshapeInput(g, *target, intAttr(g.node(), "allowzero", 0) != 0);
}

llvm::Error flatten(OnnxGraph &g, const OnnxOp &) {
  auto in = g.dimsOf(0);
  if (!in)
    return in.takeError();
  const int64_t axis = normalizeAxis(intAttr(g.node(), "axis", 1), in->size());
  if (axis < 0 || axis > static_cast<int64_t>(in->size()))
    return g.fail("axis " + llvm::Twine(axis) + " is outside the input's rank");
  // The leading part's product (B or a multiple of it when it holds B); the rest is inferred.
  std::vector<int64_t> target = {1, -1};
  for (int64_t k = 0; k < axis; ++k) {
    auto product = foldInts(g, "mul", target[0], (*in)[k]);
    if (!product)
      return product.takeError();
    target[0] = *product;
  }
  return reshapeInput(g, target, false);
}

llvm::Error unsqueezeOrSqueeze(OnnxGraph &g, const OnnxOp &op) {
  const bool squeeze = llvm::StringRef(op.onnxType) == "Squeeze";
  auto in = g.dimsOf(0);
  if (!in)
    return in.takeError();
  std::vector<int64_t> axes;
  if (!g.input(1).empty()) {
    auto given = g.intsInput(1, "the axes (input 1)");
    if (!given)
      return given.takeError();
    axes = *given;
  }
  const size_t rank = squeeze ? in->size() : in->size() + axes.size();
  auto checked = checkedAxes(g, std::move(axes), rank, "axis");
  if (!checked)
    return checked.takeError();
  axes = std::move(*checked);
  std::vector<int64_t> out;
  if (squeeze) {
    for (size_t k = 0; k < in->size(); ++k) {
      const bool listed = llvm::is_contained(axes, static_cast<int64_t>(k));
      if ((listed || axes.empty()) && (*in)[k] == 1)
        continue;
      if (listed)
        return g.fail("cannot squeeze dimension " + llvm::Twine(k) + " of " + dimsText(*in));
      out.push_back((*in)[k]);
    }
  } else {
    size_t next = 0;
    for (size_t k = 0; k < rank; ++k)
      out.push_back(llvm::is_contained(axes, static_cast<int64_t>(k)) ? 1 : (*in)[next++]);
  }
  return reshapeInput(g, out, true);
}

llvm::Error transpose(OnnxGraph &g, const OnnxOp &) {
  auto in = g.dimsOf(0);
  if (!in)
    return in.takeError();
  std::vector<int64_t> perm(in->size());
  std::iota(perm.rbegin(), perm.rend(), 0);
  perm = intsAttr(g.node(), "perm", perm);
  // NCHW -> NHWC of a value held as NHWC is that value.
  if (g.layoutOf(0) == Layout::Nhwc && perm == std::vector<int64_t>{0, 2, 3, 1}) {
    const ImportedValue *v = g.find(g.input(0));
    g.define(g.output(0).str(), v->value, Layout::Onnx);
    return llvm::Error::success();
  }
  if (perm.size() != in->size())
    return g.fail("perm " + dimsText(perm) + " does not match the rank of " + dimsText(*in));
  auto checked = checkedAxes(g, std::move(perm), in->size(), "perm entry");
  if (!checked)
    return checked.takeError();
  perm = std::move(*checked);
  // A dimension held as several Prism dimensions moves as a block.
  auto [prismPerm, groups] = g.groupsOf(0).permute(perm);
  auto x = g.groupedInput(0);
  if (!x)
    return x.takeError();
  return done(emitOutput(g, "transpose", {*x}, one("perm", ir::Attr::ints(prismPerm)), Layout::Onnx,
                         std::move(groups)));
}

llvm::Error concat(OnnxGraph &g, const OnnxOp &) {
  const int count = g.node().input_size();
  bool constants = true, nhwc = true;
  for (int i = 0; i < count; ++i) {
    const ConstTensor *c = g.constantInput(i);
    constants &= c && c->integer && c->dims.size() == 1;
    nhwc &= !c && g.layoutOf(i) == Layout::Nhwc;
  }
  if (constants) {
    ConstTensor out;
    out.integer = true;
    for (int i = 0; i < count; ++i)
      out.ints.insert(out.ints.end(), g.constantInput(i)->ints.begin(),
                      g.constantInput(i)->ints.end());
    out.dims = {static_cast<int64_t>(out.ints.size())};
    g.defineConstant(g.output(0).str(), std::move(out));
    return llvm::Error::success();
  }
  auto dims = g.dimsOf(0);
  if (!dims)
    return dims.takeError();
  auto checked = checkedAxes(g, {intAttr(g.node(), "axis", 0)}, dims->size(), "axis");
  if (!checked)
    return checked.takeError();
  const int64_t axis = checked->front();
  if (nhwc) {
    std::vector<ir::Value *> operands;
    for (int i = 0; i < count; ++i) {
      auto x = g.tensorInput(i, Layout::Nhwc);
      if (!x)
        return x.takeError();
      operands.push_back(*x);
    }
    return done(emitOutput(g, "concat", operands,
                           one("axis", ir::Attr::integer(std::vector<int64_t>{0, 3, 1, 2}[axis])),
                           Layout::Nhwc));
  }
  // Operands holding multiples of B must hold them alike, and not on the concatenated axis.
  const DimGroups groups = g.groupsOf(0);
  std::vector<ir::Value *> operands;
  for (int i = 0; i < count; ++i) {
    if (g.groupsOf(i).sizes != groups.sizes)
      return g.fail("operands hold a dimension that is a multiple of the batch size in different "
                    "ways",
                    ir::ErrorCode::Unsupported);
    auto x = g.groupedInput(i);
    if (!x)
      return x.takeError();
    operands.push_back(*x);
  }
  auto prismAxis = g.prismAxis(0, axis, "a concatenation");
  if (!prismAxis)
    return prismAxis.takeError();
  return done(emitOutput(g, "concat", operands, one("axis", ir::Attr::integer(*prismAxis)),
                         Layout::Onnx, groups));
}

llvm::Error slice(OnnxGraph &g, const OnnxOp &) {
  auto dims = g.dimsOf(0);
  if (!dims)
    return dims.takeError();
  auto starts = g.intsInput(1, "starts (input 1)");
  if (!starts)
    return starts.takeError();
  auto ends = g.intsInput(2, "ends (input 2)");
  if (!ends)
    return ends.takeError();
  std::vector<int64_t> axes(starts->size());
  std::iota(axes.begin(), axes.end(), 0);
  if (!g.input(3).empty()) {
    auto given = g.intsInput(3, "axes (input 3)");
    if (!given)
      return given.takeError();
    axes = *given;
  }
  if (!g.input(4).empty()) {
    auto steps = g.intsInput(4, "steps (input 4)");
    if (!steps)
      return steps.takeError();
    for (int64_t s : *steps)
      if (s != 1)
        return g.fail("steps other than 1 are not supported", ir::ErrorCode::Unsupported);
  }
  if (axes.size() != starts->size() || ends->size() != starts->size())
    return g.fail("starts, ends and axes differ in length");
  const ConstTensor *folded = g.constantInput(0);
  ConstTensor constant = folded ? *folded : ConstTensor{};
  if (folded && (!folded->integer || folded->dims.size() != 1))
    return g.fail("slices of constants are folded only for integer vectors",
                  ir::ErrorCode::Unsupported);
  ir::Value *x = nullptr;
  if (!folded) {
    auto value = g.groupedInput(0);
    if (!value)
      return value.takeError();
    x = *value;
  }
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t axis = normalizeAxis(axes[k], dims->size());
    if (axis < 0 || axis >= static_cast<int64_t>(dims->size()))
      return g.fail("axis " + llvm::Twine(axes[k]) + " is outside the input's rank");
    const int64_t dim = (*dims)[axis];
    const bool whole = (*starts)[k] == 0 && (*ends)[k] >= std::numeric_limits<int32_t>::max();
    if (isBatchMultiple(dim)) {
      if (whole)
        continue;
      return g.fail("cannot slice the dimension " + dimText(dim) + " (the batch size)",
                    ir::ErrorCode::Unsupported);
    }
    auto clampIndex = [dim](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + dim : i, 0, dim); };
    const int64_t begin = clampIndex((*starts)[k]), end = std::max(begin, clampIndex((*ends)[k]));
    if (folded) {
      constant.ints =
          std::vector<int64_t>(constant.ints.begin() + begin, constant.ints.begin() + end);
      constant.dims = {end - begin};
      continue;
    }
    if (begin == 0 && end == dim)
      continue;
    auto prismAxis = g.prismAxis(0, axis, "a slice");
    if (!prismAxis)
      return prismAxis.takeError();
    auto y = g.emit("slice", {x},
                    ir::attrs({{"axis", ir::Attr::integer(*prismAxis)},
                               {"begin", ir::Attr::integer(begin)},
                               {"end", ir::Attr::integer(end)}}),
                    k + 1 == axes.size() ? g.output(0) : "");
    if (!y)
      return y.takeError();
    x = *y;
  }
  if (folded)
    g.defineConstant(g.output(0).str(), std::move(constant));
  else
    g.defineOutput(0, x, Layout::Onnx, g.groupsOf(0));
  return llvm::Error::success();
}

llvm::Error gather(OnnxGraph &g, const OnnxOp &) {
  if (intAttr(g.node(), "axis", 0) != 0)
    return g.fail("only axis = 0 is supported", ir::ErrorCode::Unsupported);
  const ConstTensor *data = g.constantInput(0);
  if (data && data->integer) {
    auto indices = g.intsInput(1, "the indices into an integer constant (input 1)");
    if (!indices)
      return indices.takeError();
    if (data->dims.size() != 1)
      return g.fail("gathers from constants are folded only for integer vectors",
                    ir::ErrorCode::Unsupported);
    ConstTensor out;
    out.integer = true;
    out.dims = g.constantInput(1)->dims;
    for (int64_t i : *indices) {
      const int64_t at = i < 0 ? i + data->numElements() : i;
      if (at < 0 || at >= data->numElements())
        return g.fail("index " + llvm::Twine(i) + " is outside " + dimsText(data->dims));
      out.ints.push_back(data->ints[at]);
    }
    g.defineConstant(g.output(0).str(), std::move(out));
    return llvm::Error::success();
  }
  // An embedding: a table (a float initializer) and computed integer indices.
  auto table = g.variableInput(0);
  if (!table)
    return table.takeError();
  auto indices = g.groupedInput(1);
  if (!indices)
    return indices.takeError();
  DimGroups groups = g.groupsOf(1);
  groups.sizes.push_back(1); // the table's row
  return done(emitOutput(g, "gather", {*table, *indices}, {}, Layout::Onnx, std::move(groups)));
}

// An op over the last axis (Prism's softmax and layer_norm): an error for another axis, or
// for a last axis that is a multiple of B held as several Prism dimensions.
llvm::Error checkLastAxis(OnnxGraph &g, const llvm::Twine &what) {
  auto dims = g.dimsOf(0);
  if (!dims)
    return dims.takeError();
  if (normalizeAxis(intAttr(g.node(), "axis", -1), dims->size()) !=
      static_cast<int64_t>(dims->size()) - 1)
    return g.fail("only the last axis is supported", ir::ErrorCode::Unsupported);
  auto axis = g.prismAxis(0, -1, what);
  return axis ? llvm::Error::success() : axis.takeError();
}

llvm::Error softmax(OnnxGraph &g, const OnnxOp &op) {
  if (auto e = checkLastAxis(g, "a softmax"))
    return e;
  auto x = g.groupedInput(0);
  if (!x)
    return x.takeError();
  return done(emitOutput(g, op.prismOp, {*x}, {}, Layout::Onnx, g.groupsOf(0)));
}

llvm::Error shape(OnnxGraph &g, const OnnxOp &) {
  auto dims = g.dimsOf(0);
  if (!dims)
    return dims.takeError();
  const int64_t rank = static_cast<int64_t>(dims->size());
  const int64_t start =
      std::clamp<int64_t>(normalizeAxis(intAttr(g.node(), "start", 0), rank), 0, rank);
  const int64_t end =
      std::clamp<int64_t>(normalizeAxis(intAttr(g.node(), "end", rank), rank), start, rank);
  ConstTensor out;
  out.integer = true;
  out.ints.assign(dims->begin() + start, dims->begin() + end);
  out.dims = {end - start};
  g.defineConstant(g.output(0).str(), std::move(out));
  return llvm::Error::success();
}

llvm::Error constant(OnnxGraph &g, const OnnxOp &) {
  const ::onnx::NodeProto &n = g.node();
  ConstTensor c;
  if (const ::onnx::AttributeProto *t = findAttr(n, "value")) {
    auto read = readTensor(t->t());
    if (!read)
      return g.fail(ir::messageOf(read.takeError()));
    c = std::move(*read);
  } else if (const ::onnx::AttributeProto *f = findAttr(n, "value_float")) {
    c.floats = {f->f()};
  } else if (const ::onnx::AttributeProto *fs = findAttr(n, "value_floats")) {
    c.floats.assign(fs->floats().begin(), fs->floats().end());
    c.dims = {static_cast<int64_t>(c.floats.size())};
  } else if (const ::onnx::AttributeProto *i = findAttr(n, "value_int")) {
    c.integer = true;
    c.ints = {i->i()};
  } else if (const ::onnx::AttributeProto *is = findAttr(n, "value_ints")) {
    c.integer = true;
    c.ints.assign(is->ints().begin(), is->ints().end());
    c.dims = {static_cast<int64_t>(c.ints.size())};
  } else {
    return g.fail("only value, value_float(s) and value_int(s) are supported",
                  ir::ErrorCode::Unsupported);
  }
  g.defineConstant(g.output(0).str(), std::move(c));
  return llvm::Error::success();
}

llvm::Error identity(OnnxGraph &g, const OnnxOp &) {
  if (!g.find(g.input(0)))
    return g.fail("input '" + g.input(0) + "' is not defined before the node");
  g.alias(g.output(0).str(), g.input(0).str());
  return llvm::Error::success();
}

llvm::Error cast(OnnxGraph &g, const OnnxOp &) {
  using T = ::onnx::TensorProto;
  const int64_t to = intAttr(g.node(), "to", T::FLOAT);
  const char *dtype = to == T::FLOAT    ? "f32"
                      : to == T::DOUBLE ? "f64"
                      : to == T::INT32  ? "i32"
                      : to == T::INT64  ? "i64"
                      : to == T::BOOL   ? "bool"
                                        : nullptr;
  if (!dtype)
    return g.fail("cast to element type " + llvm::Twine(to) + " is not supported",
                  ir::ErrorCode::Unsupported);
  if (const ConstTensor *c = g.constantInput(0)) {
    ConstTensor out = *c;
    const bool integer = llvm::StringRef(dtype) != "f32" && llvm::StringRef(dtype) != "f64";
    if (integer && !c->integer)
      for (float f : c->floats)
        out.ints.push_back(static_cast<int64_t>(f));
    if (!integer && c->integer)
      for (int64_t i : c->ints) {
        if (isBatchMultiple(i))
          return g.fail("the batch size (" + dimText(i) + ") is not known at import",
                        ir::ErrorCode::Unsupported);
        out.floats.push_back(static_cast<float>(i));
      }
    out.integer = integer;
    g.defineConstant(g.output(0).str(), std::move(out));
    return llvm::Error::success();
  }
  return emitKeepingForm(g, "cast", one("dtype", ir::Attr::string(dtype)));
}

// Dropout in training mode (`training_mode` true, as a training export writes it) is Prism's
// dropout, whose masks come from Prism's own generator (docs/ir.md); otherwise the identity.
llvm::Error dropout(OnnxGraph &g, const OnnxOp &op) {
  if (g.outputRead(1))
    return g.fail("the mask output is not supported", ir::ErrorCode::Unsupported);
  float ratio = floatAttr(g.node(), "ratio", 0.5f);
  if (!g.input(1).empty()) {
    const ConstTensor *r = g.constantInput(1);
    if (!r || r->integer || r->floats.size() != 1)
      return g.fail("the ratio (input 1) must be one float known at import",
                    ir::ErrorCode::Unsupported);
    ratio = r->floats[0];
  }
  bool training = false;
  if (!g.input(2).empty()) {
    const ConstTensor *t = g.constantInput(2);
    if (!t || t->numElements() != 1)
      return g.fail("training_mode (input 2) must be known at import", ir::ErrorCode::Unsupported);
    training = t->integer ? t->ints[0] != 0 : t->floats[0] != 0;
  }
  if (!training || ratio == 0)
    return identity(g, op);
  return emitKeepingForm(g, "dropout", one("rate", ir::Attr::real(ratio)));
}

// LayerNormalization (opset 17) over the last axis.
llvm::Error layerNormalization(OnnxGraph &g, const OnnxOp &) {
  if (auto e = checkLastAxis(g, "a layer normalization"))
    return e;
  auto dims = g.dimsOf(0);
  if (!dims)
    return dims.takeError();
  if (g.outputRead(1) || g.outputRead(2))
    return g.fail("the Mean and InvStdDev outputs are not supported", ir::ErrorCode::Unsupported);
  auto x = g.groupedInput(0);
  if (!x)
    return x.takeError();
  auto scale = g.tensorInput(1);
  if (!scale)
    return scale.takeError();
  ir::Value *bias = nullptr;
  if (!g.input(2).empty()) {
    auto b = g.tensorInput(2);
    if (!b)
      return b.takeError();
    bias = *b;
  } else {
    auto zeros = g.emit(
        "constant", {},
        ir::attrs({{"value", ir::Attr::real(0)}, {"shape", ir::Attr::ints({dims->back()})}}));
    if (!zeros)
      return zeros.takeError();
    bias = *zeros;
  }
  return done(emitOutput(g, "layer_norm", {*x, *scale, bias},
                         one("epsilon", ir::Attr::real(floatAttr(g.node(), "epsilon", 1e-5f))),
                         Layout::Onnx, g.groupsOf(0)));
}

// ReduceMean and ReduceSum with their axes as an attribute (opsets 13 to 17 for ReduceMean).
llvm::Error reduce(OnnxGraph &g, const OnnxOp &op) {
  auto dims = g.dimsOf(0);
  if (!dims)
    return dims.takeError();
  std::vector<int64_t> axes = intsAttr(g.node(), "axes");
  if (!g.input(1).empty()) {
    auto given = g.intsInput(1, "the axes (input 1)");
    if (!given)
      return given.takeError();
    axes = *given;
  }
  // Empty axes reduce everything, or (noop_with_empty_axes = 1) nothing.
  if (axes.empty() && intAttr(g.node(), "noop_with_empty_axes", 0) != 0)
    return identity(g, op);
  if (axes.empty())
    for (size_t k = 0; k < dims->size(); ++k)
      axes.push_back(static_cast<int64_t>(k));
  auto checked = checkedAxes(g, std::move(axes), dims->size(), "axis");
  if (!checked)
    return checked.takeError();
  axes = std::move(*checked);
  // Reducing an ONNX axis reduces all of its Prism dimensions; kept, each becomes 1.
  const bool keepdims = intAttr(g.node(), "keepdims", 1) != 0;
  const DimGroups groups = g.groupsOf(0);
  std::vector<int64_t> prismAxes;
  DimGroups outGroups;
  for (size_t k = 0; k < dims->size(); ++k) {
    const bool reduced = llvm::is_contained(axes, static_cast<int64_t>(k));
    if (reduced)
      for (int64_t a : groups.prismAxes(k))
        prismAxes.push_back(a);
    if (!reduced || keepdims)
      outGroups.sizes.push_back(groups.sizes[k]);
  }
  auto x = g.groupedInput(0);
  if (!x)
    return x.takeError();
  return done(emitOutput(
      g, op.prismOp, {*x},
      ir::attrs({{"axes", ir::Attr::ints(prismAxes)}, {"keepdims", ir::Attr::boolean(keepdims)}}),
      Layout::Onnx, std::move(outGroups)));
}

// Pow by a constant exponent: 2 (a variance's square) and 0.5 (its root).
llvm::Error pow(OnnxGraph &g, const OnnxOp &op) {
  const ConstTensor *e = g.constantInput(1);
  if (!e)
    return g.fail("only an exponent known at import is supported", ir::ErrorCode::Unsupported);
  if (e->numElements() != 1)
    return g.fail("an exponent of " + llvm::Twine(e->numElements()) +
                      " elements is not supported: only one, known at import (2, 0.5 or 1)",
                  ir::ErrorCode::Unsupported);
  const double exponent = e->integer ? static_cast<double>(e->ints[0]) : e->floats[0];
  if (exponent == 2) {
    auto x = g.heldInput(0);
    if (!x)
      return x.takeError();
    return done(emitOutput(g, "mul", {*x, *x}, {}, g.layoutOf(0), g.groupsOf(0)));
  }
  if (exponent == 0.5)
    return emitKeepingForm(g, "sqrt");
  if (exponent == 1)
    return identity(g, op);
  return g.fail("exponent " + ir::formatDouble(exponent) + " is not supported (2, 0.5 and 1 are)",
                ir::ErrorCode::Unsupported);
}

llvm::Error where(OnnxGraph &g, const OnnxOp &) {
  if (anyGrouped(g, 3)) {
    DimGroups groups;
    auto operands = groupedOperands(g, 3, groups);
    if (!operands)
      return operands.takeError();
    return done(emitOutput(g, "where", *operands, {}, Layout::Onnx, std::move(groups)));
  }
  ir::Value *operands[3];
  for (unsigned i = 0; i < 3; ++i) {
    auto v = g.tensorInput(i);
    if (!v)
      return v.takeError();
    operands[i] = *v;
  }
  return done(emitOutput(g, "where", operands, {}));
}

// Max and Min: of one operand the identity, of two a broadcasting op, of more a chain of them
// in the ONNX layout.
llvm::Error extremum(OnnxGraph &g, const OnnxOp &op) {
  const unsigned count = static_cast<unsigned>(g.node().input_size());
  if (count == 1)
    return identity(g, op);
  if (count == 2)
    return binary(g, op);
  auto result = g.tensorInput(0);
  for (unsigned i = 1; result && i < count; ++i) {
    auto next = g.tensorInput(i);
    if (!next)
      return next.takeError();
    result = i + 1 < count ? g.emit(op.prismOp, {*result, *next})
                           : emitOutput(g, op.prismOp, {*result, *next}, {});
  }
  return done(std::move(result));
}

// Pad in constant mode: zero pads are the identity; others Prism's pad, in the layout the input
// is held in.
llvm::Error pad(OnnxGraph &g, const OnnxOp &op) {
  if (stringAttr(g.node(), "mode", "constant") != "constant")
    return g.fail("only mode 'constant' is supported", ir::ErrorCode::Unsupported);
  auto pads = g.intsInput(1, "the pads (input 1)");
  if (!pads)
    return pads.takeError();
  if (llvm::all_of(*pads, [](int64_t p) { return p == 0; }))
    return identity(g, op);
  double value = 0;
  if (!g.input(2).empty()) {
    const ConstTensor *v = g.constantInput(2);
    if (!v || v->numElements() != 1)
      return g.fail("the pad value (input 2) must be one number known at import",
                    ir::ErrorCode::Unsupported);
    value = v->integer ? static_cast<double>(v->ints[0]) : v->floats[0];
  }
  Layout layout = g.layoutOf(0);
  std::vector<int64_t> p = *pads;
  if (layout == Layout::Nhwc && p.size() == 8) // ONNX's N, C, H, W as N, H, W, C
    p = {p[0], p[2], p[3], p[1], p[4], p[6], p[7], p[5]};
  else
    layout = Layout::Onnx;
  auto x = g.tensorInput(0, layout);
  if (!x)
    return x.takeError();
  return done(emitOutput(g, "pad", {*x},
                         ir::attrs({{"pads", ir::Attr::ints(p)}, {"value", ir::Attr::real(value)}}),
                         layout));
}

// BatchNormalization in training (opset 13: more than one output; later: training_mode = 1) is
// Prism's batch_norm over the channels (NHWC for images): batch statistics in training steps,
// the running averages (untrained variables it updates) in evaluation. ONNX's momentum weighs
// the old average: PyTorch's 0.1 is ONNX's 0.9.
llvm::Error batchNormalization(OnnxGraph &g, const OnnxOp &) {
  const ::onnx::NodeProto &n = g.node();
  const bool training =
      findAttr(n, "training_mode") ? intAttr(n, "training_mode", 0) != 0 : n.output_size() > 1;
  if (!training)
    return g.fail("BatchNormalization in inference mode (the running averages in training "
                  "too) is not supported: export with training=torch.onnx.TrainingMode.TRAINING",
                  ir::ErrorCode::Unsupported);
  for (int i = 1; i < n.output_size(); ++i)
    if (g.outputRead(static_cast<unsigned>(i)))
      return g.fail("only the output Y is supported (the running averages are Prism's "
                    "variables, updated each step)",
                    ir::ErrorCode::Unsupported);
  auto dims = g.dimsOf(0);
  if (!dims)
    return dims.takeError();
  if (dims->size() != 4 && dims->size() != 2)
    return g.fail("only [N, C] and [N, C, H, W] inputs are supported", ir::ErrorCode::Unsupported);
  const Layout layout = dims->size() == 4 ? Layout::Nhwc : Layout::Onnx;
  auto x = g.tensorInput(0, layout);
  if (!x)
    return x.takeError();
  ir::Value *operands[5] = {*x};
  for (unsigned i = 1; i < 5; ++i) {
    auto v = i < 3 ? g.tensorInput(i) : g.variableInput(i);
    if (!v)
      return v.takeError();
    if (i >= 3) // the running averages
      (*v)->variable()->attrs.set("trainable", ir::Attr::boolean(false));
    operands[i] = *v;
  }
  return done(
      emitOutput(g, "batch_norm", operands,
                 ir::attrs({{"epsilon", ir::Attr::real(floatAttr(n, "epsilon", 1e-5f))},
                            {"momentum", ir::Attr::real(1.0 - floatAttr(n, "momentum", 0.9f))}}),
                 layout));
}

const OnnxOp kOps[] = {
    {"Add", binary, "add"},
    {"AveragePool", pool, "avg_pool2d"},
    {"BatchNormalization", batchNormalization},
    {"Cast", cast},
    {"Concat", concat},
    {"Constant", constant},
    {"Conv", conv},
    {"Div", binary, "div"},
    {"Dropout", dropout},
    {"Erf", unary, "erf"},
    {"Exp", unary, "exp"},
    {"Flatten", flatten},
    {"Gather", gather},
    {"Gemm", gemm},
    {"GlobalAveragePool", globalAveragePool},
    {"Identity", identity},
    {"LayerNormalization", layerNormalization},
    {"Log", unary, "log"},
    {"LogSoftmax", softmax, "log_softmax"},
    {"MatMul", matmulOp},
    {"Max", extremum, "maximum"},
    {"MaxPool", pool, "max_pool2d"},
    {"Min", extremum, "minimum"},
    {"Mul", binary, "mul"},
    {"Neg", unary, "neg"},
    {"Pad", pad},
    {"Pow", pow},
    {"ReduceMean", reduce, "reduce_mean"},
    {"ReduceSum", reduce, "reduce_sum"},
    {"Relu", unary, "relu"},
    {"Reshape", reshape},
    {"Shape", shape},
    {"Sigmoid", unary, "sigmoid"},
    {"Slice", slice},
    {"Softmax", softmax, "softmax"},
    {"Sqrt", unary, "sqrt"},
    {"Squeeze", unsqueezeOrSqueeze},
    {"Sub", binary, "sub"},
    {"Tanh", unary, "tanh"},
    {"Transpose", transpose},
    {"Unsqueeze", unsqueezeOrSqueeze},
    {"Where", where},
};

} // namespace

llvm::Error importNode(OnnxGraph &graph) {
  const ::onnx::NodeProto &node = graph.node();
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return graph.fail("ops of domain '" + node.domain() + "' are not supported",
                      ir::ErrorCode::Unsupported);
  for (const OnnxOp &op : kOps) {
    if (node.op_type() != op.onnxType)
      continue;
    for (const std::string &input : node.input())
      if (!input.empty() && !graph.find(input))
        return graph.fail("input '" + input + "' is not defined before the node");
    if (node.output_size() == 0)
      return graph.fail("the node has no outputs");
    return op.map(graph, op);
  }
  return graph.fail("unsupported ONNX op '" + node.op_type() + "'; Prism imports " +
                        supportedOnnxOps(),
                    ir::ErrorCode::Unsupported);
}

std::string supportedOnnxOps() {
  std::string names;
  for (const OnnxOp &op : kOps)
    names += (names.empty() ? "" : ", ") + std::string(op.onnxType);
  return names;
}

} // namespace prism::frontends::onnx
