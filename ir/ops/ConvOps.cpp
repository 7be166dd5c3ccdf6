// Convolution and pooling over NHWC tensors, with their backward ops.
#include "ir/ops/OpHelpers.h"

namespace prism::ir::ops {
namespace {

// Output extent of one spatial dimension. `same`: ceil(in / stride); `valid`:
// floor((in - window) / stride) + 1.
llvm::Expected<int64_t> outputExtent(int64_t in, int64_t window, int64_t stride,
                                     llvm::StringRef padding) {
  if (stride <= 0 || window <= 0)
    return shapeError("window and stride must be positive");
  if (padding == "same")
    return (in + stride - 1) / stride;
  if (padding == "valid") {
    if (in < window)
      return shapeError("window " + llvm::Twine(window) + " is larger than the input extent " +
                        llvm::Twine(in) + " with padding = valid");
    return (in - window) / stride + 1;
  }
  return shapeError("padding must be same or valid, got " + padding);
}

llvm::Error checkPair(const AttrMap &attrs, llvm::StringRef name) {
  auto v = attrs.getInts(name);
  if (v.size() != 2 || v[0] <= 0 || v[1] <= 0)
    return shapeError("attribute '" + name + "' must be two positive integers");
  return llvm::Error::success();
}

// The image operand of convolutions and pools: dense float [N, H, W, C].
llvm::Error expectImage(const TensorType &x) {
  if (auto e = expectDense(x, "input"))
    return e;
  if (auto e = expectFloat(x, "input"))
    return e;
  return expectRank(x, 4, "input (NHWC)");
}

ShapeResult conv2dShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  const TensorType &x = in[0], &w = in[1];
  if (auto e = expectImage(x))
    return std::move(e);
  if (auto e = expectRank(w, 4, "filter (KH, KW, C, O)"))
    return std::move(e);
  if (auto e = checkPair(attrs, "stride"))
    return std::move(e);
  if (x.dims[3] != w.dims[2] || x.dtype != w.dtype)
    return shapeError("filter " + w.str() + " does not match the channels of input " + x.str());
  if (x.dims[1] < 0 || x.dims[2] < 0)
    return shapeError("spatial dimensions of the input must be static, got " + x.str());
  auto stride = attrs.getInts("stride");
  std::string padding = attrs.getString("padding");
  auto oh = outputExtent(x.dims[1], w.dims[0], stride[0], padding);
  if (!oh)
    return oh.takeError();
  auto ow = outputExtent(x.dims[2], w.dims[1], stride[1], padding);
  if (!ow)
    return ow.takeError();
  return Types{TensorType(x.dtype, {x.dims[0], *oh, *ow, w.dims[3]})};
}

OpCost conv2dCost(llvm::ArrayRef<TensorType> in, llvm::ArrayRef<TensorType> out,
                  const AttrMap &attrs, int64_t batch) {
  OpCost c = elementwiseCost(in, out, attrs, batch);
  const TensorType &w = in[1];
  c.flops = 2.0 * elements(out[0], batch) * static_cast<double>(w.dims[0] * w.dims[1] * w.dims[2]);
  return c;
}

// Backward ops cost what the forward op costs.
OpCost conv2dBackInputCost(llvm::ArrayRef<TensorType> in, llvm::ArrayRef<TensorType> out,
                           const AttrMap &attrs, int64_t batch) {
  OpCost c = elementwiseCost(in, out, attrs, batch);
  const TensorType &w = in[1];
  c.flops = 2.0 * elements(in[0], batch) * static_cast<double>(w.dims[0] * w.dims[1] * w.dims[2]);
  return c;
}

OpCost conv2dBackFilterCost(llvm::ArrayRef<TensorType> in, llvm::ArrayRef<TensorType> out,
                            const AttrMap &attrs, int64_t batch) {
  OpCost c = elementwiseCost(in, out, attrs, batch);
  const TensorType &w = out[0];
  c.flops = 2.0 * elements(in[1], batch) * static_cast<double>(w.dims[0] * w.dims[1] * w.dims[2]);
  return c;
}

AttrMap convAttrs(GradientContext &c) {
  AttrMap a = c.resolvedAttrs();
  AttrMap out;
  out.set("stride", *a.find("stride"));
  out.set("padding", *a.find("padding"));
  return out;
}

void conv2dGrad(GradientContext &c) {
  Value *dy = c.resultGrad();
  if (!dy)
    return;
  c.setGrad(0, c.emit("conv2d_backprop_input", {dy, c.operand(1), c.operand(0)}, convAttrs(c)));
  c.setGrad(1, c.emit("conv2d_backprop_filter", {c.operand(0), dy, c.operand(1)}, convAttrs(c)));
}

// (dy, w, x) -> type of x, after checking that conv2d(x, w) has dy's type.
ShapeResult backInputShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  TensorType ops[2] = {in[2], in[1]};
  auto fwd = conv2dShape(ops, attrs);
  if (!fwd)
    return fwd.takeError();
  if (auto e = expectSameType((*fwd)[0], in[0], "output gradient and conv2d output"))
    return std::move(e);
  return Types{in[2]};
}

// (x, dy, w) -> type of w.
ShapeResult backFilterShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  TensorType ops[2] = {in[0], in[2]};
  auto fwd = conv2dShape(ops, attrs);
  if (!fwd)
    return fwd.takeError();
  if (auto e = expectSameType((*fwd)[0], in[1], "output gradient and conv2d output"))
    return std::move(e);
  return Types{in[2]};
}

ShapeResult poolShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  const TensorType &x = in[0];
  if (auto e = expectImage(x))
    return std::move(e);
  if (auto e = checkPair(attrs, "window"))
    return std::move(e);
  if (auto e = checkPair(attrs, "stride"))
    return std::move(e);
  if (x.dims[1] < 0 || x.dims[2] < 0)
    return shapeError("spatial dimensions of the input must be static, got " + x.str());
  auto window = attrs.getInts("window"), stride = attrs.getInts("stride");
  std::string padding = attrs.getString("padding");
  auto oh = outputExtent(x.dims[1], window[0], stride[0], padding);
  if (!oh)
    return oh.takeError();
  auto ow = outputExtent(x.dims[2], window[1], stride[1], padding);
  if (!ow)
    return ow.takeError();
  return Types{TensorType(x.dtype, {x.dims[0], *oh, *ow, x.dims[3]})};
}

// (dy, x) -> type of x.
ShapeResult poolGradShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  auto fwd = poolShape(in.drop_front(), attrs);
  if (!fwd)
    return fwd.takeError();
  if (auto e = expectSameType((*fwd)[0], in[0], "output gradient and pool output"))
    return std::move(e);
  return Types{in[1]};
}

AttrMap poolAttrs(GradientContext &c) {
  AttrMap a = c.resolvedAttrs();
  AttrMap out;
  for (const char *n : {"window", "stride", "padding"})
    out.set(n, *a.find(n));
  return out;
}

void maxPoolGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad())
    c.setGrad(0, c.emit("max_pool2d_grad", {dy, c.operand(0)}, poolAttrs(c)));
}

void avgPoolGrad(GradientContext &c) {
  if (Value *dy = c.resultGrad())
    c.setGrad(0, c.emit("avg_pool2d_grad", {dy, c.operand(0)}, poolAttrs(c)));
}

// x[N, H, W, C] -> [N, C]
ShapeResult globalPoolShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  const TensorType &x = in[0];
  if (auto e = expectImage(x))
    return std::move(e);
  if (x.dims[1] < 0 || x.dims[2] < 0)
    return shapeError("spatial dimensions of the input must be static, got " + x.str());
  return Types{TensorType(x.dtype, {x.dims[0], x.dims[3]})};
}

// One add per input element.
OpCost globalPoolCost(llvm::ArrayRef<TensorType> in, llvm::ArrayRef<TensorType> out,
                      const AttrMap &attrs, int64_t batch) {
  OpCost c = elementwiseCost(in, out, attrs, batch);
  c.flops = elements(in[0], batch);
  return c;
}

// The mean over H and W is reduce_mean's, so its gradient is reduce_mean's: dy spread evenly.
void globalAvgPoolGrad(GradientContext &c) {
  Value *dy = c.resultGrad();
  if (!dy)
    return;
  AttrMap a;
  a.set("axes", Attr::ints({1, 2}));
  a.set("mean", Attr::boolean(true));
  c.setGrad(0, c.emit("expand_like", {dy, c.operand(0)}, a));
}

std::vector<AttrSpec> convAttrSpecs() {
  return {attr("stride", AttrKind::Ints, Attr::ints({1, 1}), "[sh, sw]"),
          attr("padding", AttrKind::String, Attr::string("same"),
               "same (output = ceil(in / stride)) or valid (no padding)")};
}

std::vector<AttrSpec> poolAttrSpecs() {
  return {attr("window", AttrKind::Ints, Attr::ints({2, 2}), "[kh, kw]"),
          attr("stride", AttrKind::Ints, Attr::ints({2, 2}), "[sh, sw]"),
          attr("padding", AttrKind::String, Attr::string("valid"), "same or valid")};
}

} // namespace

void registerConvOps(std::vector<OpDef> &t) {
  OpDef conv = makeOp("conv2d", "2-D convolution of x[N,H,W,C] with filter[KH,KW,C,O]",
                      {"x", "filter"}, conv2dShape, conv2dGrad, convAttrSpecs());
  conv.cost = conv2dCost;
  conv.reducedPrecisionOperands = 0b11;
  t.push_back(conv);
  OpDef bi = makeOp("conv2d_backprop_input", "gradient of conv2d with respect to its input",
                    {"dy", "filter", "x"}, backInputShape, nullptr, convAttrSpecs(), kGradientOnly);
  bi.cost = conv2dBackInputCost;
  bi.reducedPrecisionOperands = 0b11; // dy, filter (x gives the shape)
  t.push_back(bi);
  OpDef bf =
      makeOp("conv2d_backprop_filter", "gradient of conv2d with respect to its filter",
             {"x", "dy", "filter"}, backFilterShape, nullptr, convAttrSpecs(), kGradientOnly);
  bf.cost = conv2dBackFilterCost;
  bf.reducedPrecisionOperands = 0b11; // x, dy (filter gives the shape)
  t.push_back(bf);
  t.push_back(makeOp("max_pool2d", "maximum over windows of x[N,H,W,C]", {"x"}, poolShape,
                     maxPoolGrad, poolAttrSpecs()));
  t.push_back(makeOp("avg_pool2d", "mean over windows of x[N,H,W,C] (padding not counted)", {"x"},
                     poolShape, avgPoolGrad, poolAttrSpecs()));
  OpDef global = makeOp("global_avg_pool", "mean over H and W of x[N,H,W,C], giving [N,C]", {"x"},
                        globalPoolShape, globalAvgPoolGrad);
  global.cost = globalPoolCost;
  t.push_back(global);
  t.push_back(makeOp("max_pool2d_grad", "dy routed to the first maximum of each window",
                     {"dy", "x"}, poolGradShape, nullptr, poolAttrSpecs(), kGradientOnly));
  t.push_back(makeOp("avg_pool2d_grad", "dy spread evenly over each window", {"dy", "x"},
                     poolGradShape, nullptr, poolAttrSpecs(), kGradientOnly));
}

} // namespace prism::ir::ops
