// What ONNX names stand for during an import, layouts, and variables from initializers.
#include "frontends/onnx/OnnxGraph.h"

#include <cstring>
#include <limits>
#include <numeric>

#include "frontends/onnx/FreshInit.h"
#include "ir/Builder.h"
#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "ir/Type.h"
#include "llvm/ADT/STLExtras.h"

namespace prism::frontends::onnx {
namespace {

// ONNX's 4-D NCHW to Prism's NHWC and back, as transpose perms.
const std::vector<int64_t> kToNhwc = {0, 2, 3, 1};
const std::vector<int64_t> kToNchw = {0, 3, 1, 2};

bool isIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

} // namespace

std::string dimText(int64_t dim) {
  if (!isBatchMultiple(dim))
    return std::to_string(dim);
  return batchFactor(dim) == 1 ? "B" : "B*" + std::to_string(batchFactor(dim));
}

std::string dimsText(llvm::ArrayRef<int64_t> dims) {
  std::string s = "[";
  for (size_t k = 0; k < dims.size(); ++k)
    s += (k ? ", " : "") + dimText(dims[k]);
  return s + "]";
}

bool DimGroups::trivial() const {
  return llvm::all_of(sizes, [](int64_t s) { return s == 1; });
}

int64_t DimGroups::begin(int64_t axis) const {
  return std::accumulate(sizes.begin(), sizes.begin() + axis, int64_t(0));
}

std::vector<int64_t> DimGroups::prismAxes(int64_t axis) const {
  std::vector<int64_t> axes(sizes[axis]);
  std::iota(axes.begin(), axes.end(), begin(axis));
  return axes;
}

std::vector<int64_t> DimGroups::prismDims(llvm::ArrayRef<int64_t> prismAll, int64_t axis) const {
  return prismAll.slice(begin(axis), sizes[axis]).vec();
}

std::vector<int64_t> DimGroups::onnxDims(llvm::ArrayRef<int64_t> prismDims) const {
  std::vector<int64_t> dims;
  size_t next = 0;
  for (int64_t size : sizes) {
    // Static extents multiply; B, when present, makes the product a multiple of it.
    int64_t product = 1;
    bool batch = false;
    for (int64_t k = 0; k < size; ++k, ++next) {
      batch |= prismDims[next] == ir::kBatchDim;
      product *= prismDims[next] == ir::kBatchDim ? 1 : prismDims[next];
    }
    dims.push_back(batch ? batchMultiple(product) : product);
  }
  return dims;
}

std::pair<std::vector<int64_t>, DimGroups> DimGroups::permute(llvm::ArrayRef<int64_t> perm) const {
  std::vector<int64_t> prismPerm;
  DimGroups permuted;
  for (int64_t axis : perm) {
    for (int64_t a : prismAxes(axis))
      prismPerm.push_back(a);
    permuted.sizes.push_back(sizes[axis]);
  }
  return {prismPerm, permuted};
}

int64_t ConstTensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : dims)
    if (__builtin_mul_overflow(n, d, &n))
      return std::numeric_limits<int64_t>::max(); // more than any check accepts
  return n;
}

OnnxGraph::OnnxGraph(ir::Module &module, std::string fileName, std::string valuesFile)
    : module_(module), fileName_(std::move(fileName)), valuesFile_(std::move(valuesFile)) {}

llvm::Error OnnxGraph::fail(const llvm::Twine &message, ir::ErrorCode code) const {
  std::string where;
  // Node names are optional in ONNX: an unnamed node is named by its first output.
  if (node_ && !node_->name().empty())
    where = "node '" + node_->name() + "' (" + node_->op_type() + "): ";
  else if (node_)
    where = "the node (" + node_->op_type() + ") computing '" +
            (node_->output_size() > 0 ? node_->output(0) : std::string()) + "': ";
  return ir::withLocation(ir::makeError(code, where + message), fileName_, {});
}

std::string OnnxGraph::sanitize(llvm::StringRef onnxName) {
  llvm::StringRef trimmed = onnxName.ltrim('/');
  std::string name;
  for (char c : trimmed)
    name += c == '/' || c == '.' ? '.' : isIdentChar(c) ? c : '_';
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_'))
    name = "v" + name;
  return name;
}

void OnnxGraph::define(const std::string &name, ir::Value *value, Layout layout, DimGroups groups) {
  ImportedValue v;
  v.value = value;
  v.layout = layout;
  v.groups = groups.sizes.empty() ? DimGroups::ones(value->type().rank()) : std::move(groups);
  imported_[name] = std::move(v);
}

void OnnxGraph::defineConstant(const std::string &name, ConstTensor constant, bool initializer) {
  ImportedValue v;
  v.constant = std::move(constant);
  v.initializer = initializer;
  imported_[name] = std::move(v);
}

void OnnxGraph::alias(const std::string &name, const std::string &other) {
  imported_[name] = imported_.at(other);
  // An alias of a variable's initializer is the same variable.
  for (auto it = variables_.begin(); it != variables_.end(); ++it)
    if (it->first.first == other)
      variables_.emplace(std::make_pair(name, it->first.second), it->second);
}

const ImportedValue *OnnxGraph::find(llvm::StringRef name) const {
  auto it = imported_.find(name.str());
  return it == imported_.end() ? nullptr : &it->second;
}

llvm::StringRef OnnxGraph::input(unsigned i) const {
  return static_cast<int>(i) < node_->input_size() ? llvm::StringRef(node_->input(i)) : "";
}

llvm::StringRef OnnxGraph::output(unsigned i) const {
  return static_cast<int>(i) < node_->output_size() ? llvm::StringRef(node_->output(i)) : "";
}

const ConstTensor *OnnxGraph::constantInput(unsigned i) const {
  const ImportedValue *v = find(input(i));
  return v && v->constant ? &*v->constant : nullptr;
}

llvm::Expected<std::vector<int64_t>> OnnxGraph::intsInput(unsigned i, llvm::StringRef what) const {
  const ConstTensor *c = constantInput(i);
  if (!c || !c->integer)
    return fail(what + " must be an integer constant (an initializer or a Constant node)",
                ir::ErrorCode::Unsupported);
  return c->ints;
}

Layout OnnxGraph::layoutOf(unsigned i) const {
  const ImportedValue *v = find(input(i));
  return v && v->value ? v->layout : Layout::Onnx;
}

DimGroups OnnxGraph::groupsOf(unsigned i) const {
  const ImportedValue *v = find(input(i));
  if (!v)
    return {};
  if (v->constant)
    return DimGroups::ones(v->constant->dims.size());
  return v->groups;
}

llvm::Expected<int64_t> OnnxGraph::prismAxis(unsigned i, int64_t axis,
                                             const llvm::Twine &what) const {
  auto dims = dimsOf(i);
  if (!dims)
    return dims.takeError();
  const int64_t rank = static_cast<int64_t>(dims->size());
  const int64_t onnxAxis = axis < 0 ? axis + rank : axis;
  if (onnxAxis < 0 || onnxAxis >= rank)
    return fail("axis " + llvm::Twine(axis) + " is outside the rank of " + dimsText(*dims));
  const DimGroups groups = groupsOf(i);
  if (groups.sizes[onnxAxis] != 1) {
    auto held = prismDimsOf(i);
    if (!held)
      return held.takeError();
    return fail(what + " over axis " + llvm::Twine(onnxAxis) + " of " + dimsText(*dims) +
                    " is not supported: that dimension is a multiple of the batch size, held " +
                    "in Prism as the dimensions " + dimsText(groups.prismDims(*held, onnxAxis)),
                ir::ErrorCode::Unsupported);
  }
  return groups.begin(onnxAxis);
}

llvm::Expected<std::vector<int64_t>> OnnxGraph::prismDimsOf(unsigned i) const {
  const ImportedValue *v = find(input(i));
  if (!v)
    return fail("input '" + input(i) + "' is not defined before the node");
  if (v->constant)
    return v->constant->dims;
  if (!v->value->hasType())
    return fail("input '" + input(i) + "' has no known shape");
  std::vector<int64_t> dims(v->value->type().dims.begin(), v->value->type().dims.end());
  if (v->layout == Layout::Nhwc)
    dims = {dims[0], dims[3], dims[1], dims[2]};
  return dims;
}

llvm::Expected<std::vector<int64_t>> OnnxGraph::dimsOf(unsigned i) const {
  auto dims = prismDimsOf(i);
  if (!dims)
    return dims.takeError();
  return groupsOf(i).onnxDims(*dims);
}

llvm::Expected<ir::Value *> OnnxGraph::tensorInput(unsigned i, Layout layout) {
  if (input(i).empty())
    return fail("input " + llvm::Twine(i) + " is missing");
  return tensor(input(i).str(), layout);
}

llvm::Expected<ir::Value *> OnnxGraph::groupedInput(unsigned i) {
  const ImportedValue *v = find(input(i));
  if (v && v->value && !v->groups.trivial())
    return v->value; // grouped values are never NHWC
  return tensorInput(i);
}

llvm::Expected<ir::Value *> OnnxGraph::heldInput(unsigned i) {
  const ImportedValue *v = find(input(i));
  if (v && v->value)
    return v->value;
  return tensorInput(i);
}

llvm::Expected<ir::Value *> OnnxGraph::tensor(const std::string &name, Layout layout) {
  auto it = imported_.find(name);
  if (it == imported_.end())
    return fail("'" + name + "' is not defined");
  ImportedValue &imported = it->second;
  if (imported.constant) {
    auto value = materialize(name, imported);
    if (!value)
      return value.takeError();
    if (layout == Layout::Nhwc && (*value)->type().rank() == 4)
      return emit("transpose", {*value}, ir::attrs({{"perm", ir::Attr::ints(kToNhwc)}}));
    return value;
  }
  if (!imported.groups.trivial()) {
    auto flat = ungroup(name, imported);
    if (!flat || layout == Layout::Onnx || (*flat)->type().rank() != 4)
      return flat;
    return emit("transpose", {*flat}, ir::attrs({{"perm", ir::Attr::ints(kToNhwc)}}));
  }
  return convert(name, imported, layout);
}

llvm::Expected<ir::Value *> OnnxGraph::ungroup(const std::string &name,
                                               const ImportedValue &imported) {
  if (auto done = ungrouped_.find(name); done != ungrouped_.end())
    return done->second;
  const ir::Dims &held = imported.value->type().dims;
  const std::vector<int64_t> dims = imported.groups.onnxDims(held);
  if (llvm::any_of(dims, [](int64_t d) { return isBatchMultiple(d) && d != ir::kBatchDim; }))
    return fail("input '" + name + "' is " + dimsText(dims) + ", held in Prism as " +
                    dimsText(std::vector<int64_t>(held.begin(), held.end())) +
                    "; this op cannot take a dimension that is a multiple of the batch size",
                ir::ErrorCode::Unsupported);
  auto value = emit("reshape", {imported.value}, ir::attrs({{"shape", ir::Attr::ints(dims)}}));
  if (value)
    ungrouped_[name] = *value;
  return value;
}

llvm::Expected<ir::Value *> OnnxGraph::convert(const std::string &name, ImportedValue &imported,
                                               Layout layout) {
  if (imported.layout == layout || imported.value->type().rank() != 4)
    return imported.value;
  auto key = std::make_pair(name, layout);
  if (auto done = converted_.find(key); done != converted_.end())
    return done->second;
  auto value =
      emit("transpose", {imported.value},
           ir::attrs({{"perm", ir::Attr::ints(layout == Layout::Nhwc ? kToNhwc : kToNchw)}}));
  if (value)
    converted_[key] = *value;
  return value;
}

llvm::Expected<ir::Value *> OnnxGraph::materialize(const std::string &name,
                                                   ImportedValue &imported) {
  const ConstTensor &c = *imported.constant;
  if (c.integer)
    return fail("input '" + name + "' is an integer constant; Prism reads it only as a shape " +
                    "or an index list here",
                ir::ErrorCode::Unsupported);
  // A float constant that is no initializer and holds one value is a `constant` op; the rest
  // are variables, trained when they come from initializers.
  if (!imported.initializer && c.numElements() == 1)
    return emit(
        "constant", {},
        ir::attrs({{"value", ir::Attr::real(c.floats[0])}, {"shape", ir::Attr::ints(c.dims)}}));
  return variableFor(name, {});
}

llvm::Expected<ir::Value *> OnnxGraph::variableInput(unsigned i, llvm::ArrayRef<int64_t> perm) {
  return variableFor(input(i).str(), perm);
}

llvm::Expected<ir::Value *> OnnxGraph::variableFor(const std::string &name,
                                                   llvm::ArrayRef<int64_t> perm) {
  auto it = imported_.find(name);
  if (it == imported_.end() || !it->second.constant || it->second.constant->integer)
    return fail("input '" + name + "' must be a float initializer", ir::ErrorCode::Unsupported);
  auto key = std::make_pair(name, std::vector<int64_t>(perm.begin(), perm.end()));
  if (auto done = variables_.find(key); done != variables_.end())
    return done->second;
  const ConstTensor &c = *it->second.constant;
  std::vector<int64_t> dims = c.dims;
  std::vector<float> elements = c.floats;
  if (!perm.empty()) {
    if (perm.size() != c.dims.size())
      return fail("input '" + name + "' has rank " + llvm::Twine(c.dims.size()) + ", expected " +
                  llvm::Twine(perm.size()));
    // Strides of the stored (row-major) tensor, then a walk over the permuted index space.
    const size_t rank = dims.size();
    std::vector<int64_t> strides(rank, 1);
    for (size_t k = rank - 1; k > 0; --k)
      strides[k - 1] = strides[k] * c.dims[k];
    for (size_t k = 0; k < rank; ++k)
      dims[k] = c.dims[perm[k]];
    std::vector<int64_t> index(rank, 0);
    for (float &out : elements) {
      int64_t from = 0;
      for (size_t k = 0; k < rank; ++k)
        from += index[k] * strides[perm[k]];
      out = c.floats[from];
      for (size_t k = rank; k-- > 0;) {
        if (++index[k] < dims[k])
          break;
        index[k] = 0;
      }
    }
  }
  ir::Initializer init;
  if (fresh_) {
    auto fresh = fresh_->initializerFor(name, c, it->second.initializer);
    if (!fresh)
      return fail((it->second.initializer ? "initializer '" : "constant '") + name +
                      "' has no fresh initialization: " + ir::messageOf(fresh.takeError()),
                  ir::ErrorCode::Unsupported);
    init = std::move(*fresh);
  } else {
    init.kind = "values";
    init.params.set("file", ir::Attr::string(valuesFile_));
    init.params.set("offset", ir::Attr::integer(static_cast<int64_t>(values_.append(elements))));
  }
  std::string varName = module_.uniqueName(sanitize(name));
  ir::Variable *var = module_.addVariable(varName, ir::TensorType(ir::DType::F32, dims), init);
  if (!it->second.initializer)
    var->attrs.set("trainable", ir::Attr::boolean(false));
  variables_[key] = var->value.get();
  return var->value.get();
}

llvm::Expected<ir::Value *> OnnxGraph::emit(llvm::StringRef op,
                                            llvm::ArrayRef<ir::Value *> operands, ir::AttrMap attrs,
                                            llvm::StringRef onnxName) {
  const ir::OpDef *def = ir::lookupOp(op);
  if (!def)
    return fail("Prism has no op '" + op + "'", ir::ErrorCode::Internal);
  // Results the ONNX graph does not name are named after their op.
  std::string name = module_.uniqueName(onnxName.empty() ? op.str() : sanitize(onnxName));
  ir::Op *created = module_.createOp(*def, operands, std::move(attrs), {name});
  auto types = ir::inferResultTypes(*created);
  if (!types)
    return fail("'" + op + "': " + ir::messageOf(types.takeError()));
  for (unsigned r = 0; r < created->numResults(); ++r)
    created->result(r)->setType((*types)[r]);
  return created->numResults() ? created->result(0) : nullptr;
}

void OnnxGraph::defineOutput(unsigned i, ir::Value *value, Layout layout, DimGroups groups) {
  if (static_cast<int>(i) < node_->output_size())
    define(node_->output(i), value, value->type().rank() == 4 ? layout : Layout::Onnx,
           std::move(groups));
}

const ::onnx::AttributeProto *findAttr(const ::onnx::NodeProto &node, llvm::StringRef name) {
  for (const ::onnx::AttributeProto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t intAttr(const ::onnx::NodeProto &node, llvm::StringRef name, int64_t dflt) {
  const ::onnx::AttributeProto *a = findAttr(node, name);
  return a ? a->i() : dflt;
}

float floatAttr(const ::onnx::NodeProto &node, llvm::StringRef name, float dflt) {
  const ::onnx::AttributeProto *a = findAttr(node, name);
  return a ? a->f() : dflt;
}

std::vector<int64_t> intsAttr(const ::onnx::NodeProto &node, llvm::StringRef name,
                              std::vector<int64_t> dflt) {
  const ::onnx::AttributeProto *a = findAttr(node, name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : dflt;
}

std::string stringAttr(const ::onnx::NodeProto &node, llvm::StringRef name, llvm::StringRef dflt) {
  const ::onnx::AttributeProto *a = findAttr(node, name);
  return a ? a->s() : dflt.str();
}

namespace {

// The `n` elements of `raw` (little-endian `Stored`, as ONNX keeps raw data) as `Out`.
template <typename Stored, typename Out>
llvm::Error readRaw(const std::string &raw, int64_t n, const std::string &name,
                    std::vector<Out> &out) {
  if (raw.size() != static_cast<size_t>(n) * sizeof(Stored))
    return ir::makeError(name + " has " + llvm::Twine(raw.size()) + " bytes of data for " +
                         llvm::Twine(n) + " elements");
  out.resize(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    Stored v;
    std::memcpy(&v, raw.data() + k * sizeof(Stored), sizeof(Stored));
    out[k] = static_cast<Out>(v);
  }
  return llvm::Error::success();
}

// The `n` elements of a typed field (float_data, int64_data, ...) as `Out`.
template <typename Field, typename Out>
llvm::Error readField(const Field &field, int64_t n, const std::string &name,
                      std::vector<Out> &out) {
  if (field.size() != n)
    return ir::makeError(name + " has " + llvm::Twine(field.size()) + " elements for the shape's " +
                         llvm::Twine(n));
  out.assign(field.begin(), field.end());
  return llvm::Error::success();
}

} // namespace

llvm::Expected<ConstTensor> readTensor(const ::onnx::TensorProto &tensor) {
  using T = ::onnx::TensorProto;
  const std::string name = "tensor '" + tensor.name() + "'";
  if (tensor.data_location() == T::EXTERNAL)
    return ir::makeError(ir::ErrorCode::Unsupported,
                         name + " keeps its data in an external file; save the model with its " +
                             "data inside (onnx.save(..., save_as_external_data=False))");
  ConstTensor c;
  for (int64_t d : tensor.dims()) {
    if (d < 0 || d > ir::kMaxElements)
      return ir::makeError(name + " has the dimension " + llvm::Twine(d));
    c.dims.push_back(d);
  }
  const int64_t n = c.numElements();
  if (n > ir::kMaxElements)
    return ir::makeError(name + " is too large");
  const std::string &raw = tensor.raw_data();
  const bool isRaw = tensor.has_raw_data();
  auto read = [&]() -> llvm::Error {
    switch (tensor.data_type()) {
    case T::FLOAT:
      return isRaw ? readRaw<float>(raw, n, name, c.floats)
                   : readField(tensor.float_data(), n, name, c.floats);
    case T::DOUBLE:
      return isRaw ? readRaw<double>(raw, n, name, c.floats)
                   : readField(tensor.double_data(), n, name, c.floats);
    case T::INT64:
      return isRaw ? readRaw<int64_t>(raw, n, name, c.ints)
                   : readField(tensor.int64_data(), n, name, c.ints);
    case T::INT32:
      return isRaw ? readRaw<int32_t>(raw, n, name, c.ints)
                   : readField(tensor.int32_data(), n, name, c.ints);
    case T::BOOL:
      if (auto e = isRaw ? readRaw<uint8_t>(raw, n, name, c.ints)
                         : readField(tensor.int32_data(), n, name, c.ints))
        return e;
      for (int64_t &v : c.ints)
        v = v != 0;
      return llvm::Error::success();
    default:
      return ir::makeError(ir::ErrorCode::Unsupported,
                           name + " has the element type " +
                               T::DataType_Name(static_cast<T::DataType>(tensor.data_type())) +
                               "; Prism imports float, double, int32, int64 and bool tensors");
    }
  };
  c.integer = tensor.data_type() != T::FLOAT && tensor.data_type() != T::DOUBLE;
  if (auto e = read())
    return std::move(e);
  return c;
}

} // namespace prism::frontends::onnx
