// The state of one ONNX import: what each ONNX value name stands for (a Prism value with its
// layout and the grouping of its dimensions, or a tensor known at import), the variables made
// from initializers with their values file, and the helpers op mappings share (OnnxOps.cpp).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/Module.h"
#include "ir/Type.h"
#include "ir/ValuesFile.h"
#include "onnx/onnx_pb.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

namespace prism::frontends::onnx {

// How a 4-D value's elements are laid out. ONNX images are NCHW; Prism's conv2d and pools work
// on NHWC, so their results stay NHWC (`Nhwc`: the ONNX value [N, C, H, W] held as
// [N, H, W, C]) until an op that depends on the layout reads them.
enum class Layout { Onnx, Nhwc };

// Multiples of the batch size. Prism's types have one symbolic dimension, B, while graphs that
// PyTorch exports also compute k·B (attention's [T, B·heads, D]). At import such an integer is
// held in an int64 as batchMultiple(k), ir::kBatchDim being 1·B: in ConstTensor ints (shape
// arithmetic) and in the ONNX dimensions dimsOf reports. k is at most kMaxBatchFactor.
constexpr int64_t kMaxBatchFactor = int64_t(1) << 40;
constexpr int64_t batchMultiple(int64_t k) {
  return ir::kBatchDim + (k - 1);
}
constexpr bool isBatchMultiple(int64_t v) {
  return v >= ir::kBatchDim && v < ir::kBatchDim + kMaxBatchFactor;
}
// k of k·B, or the integer itself when it is static.
constexpr int64_t batchFactor(int64_t v) {
  return isBatchMultiple(v) ? v - ir::kBatchDim + 1 : v;
}
// "B", "B*4" or "8".
std::string dimText(int64_t dim);
std::string dimsText(llvm::ArrayRef<int64_t> dims);

// How a value's Prism dimensions make its ONNX dimensions: ONNX dimension k is the row-major
// product of sizes[k] consecutive Prism dimensions. A dimension that is a multiple of the batch
// is held as several, B among them (the ONNX [8, B*4, 8] as the Prism [8, B, 4, 8], sizes
// [1, 2, 1]), since Prism's types name B alone; other dimensions are one Prism dimension each.
// This is the one place that maps ONNX axes to Prism axes.
struct DimGroups {
  std::vector<int64_t> sizes;

  static DimGroups ones(size_t rank) { return {std::vector<int64_t>(rank, 1)}; }
  bool trivial() const;
  // The first Prism axis of ONNX axis `axis`, and all of them.
  int64_t begin(int64_t axis) const;
  std::vector<int64_t> prismAxes(int64_t axis) const;
  // ONNX dimensions from the Prism ones (products of the groups).
  std::vector<int64_t> onnxDims(llvm::ArrayRef<int64_t> prismDims) const;
  // The Prism dimensions of ONNX axis `axis`.
  std::vector<int64_t> prismDims(llvm::ArrayRef<int64_t> prismAll, int64_t axis) const;
  // A transpose by the ONNX `perm`: the Prism perm, and the result's groups.
  std::pair<std::vector<int64_t>, DimGroups> permute(llvm::ArrayRef<int64_t> perm) const;
};

// A tensor known at import: an initializer, a Constant node, or shape arithmetic folded from
// them. Integer elements may be multiples of the batch size (batchMultiple, from Shape of a
// batched value and arithmetic on it).
struct ConstTensor {
  bool integer = false;
  std::vector<int64_t> dims;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  int64_t numElements() const;
};

// What an ONNX value name stands for.
struct ImportedValue {
  ir::Value *value = nullptr; // null for a constant
  Layout layout = Layout::Onnx;
  DimGroups groups; // of `value` (one Prism dimension per ONNX one, except multiples of B)
  std::optional<ConstTensor> constant;
  bool initializer = false; // a graph initializer: becomes a trained variable when read as one
};

class FreshInitRules;

class OnnxGraph {
public:
  // `fileName` names the ONNX file in errors; `valuesFile` is the values file as the module's
  // `values` initializers name it.
  OnnxGraph(ir::Module &module, std::string fileName, std::string valuesFile);

  ir::Module &module() { return module_; }
  ir::ValuesFileWriter &values() { return values_; }
  // With rules, variables get fresh initializers from them instead of `values` records.
  void setFreshInit(const FreshInitRules *rules) { fresh_ = rules; }
  // Notes for the generated file's header (an op imported with a caveat).
  std::vector<std::string> &notes() { return notes_; }

  // Records that a node or the graph's output reads `name`.
  void markRead(const std::string &name) { read_.insert(name); }
  // Whether output `i` of the current node is read (optional outputs such as Dropout's mask
  // may be produced and left unread).
  bool outputRead(unsigned i) const { return !output(i).empty() && read_.count(output(i).str()); }

  // The node being imported, for errors.
  void setNode(const ::onnx::NodeProto *node) { node_ = node; }
  // `FILE: error: node 'NAME' (OpType): message` (with `code`).
  llvm::Error fail(const llvm::Twine &message, ir::ErrorCode code = ir::ErrorCode::Invalid) const;

  // `groups` empty: one Prism dimension per ONNX one.
  void define(const std::string &name, ir::Value *value, Layout layout = Layout::Onnx,
              DimGroups groups = {});
  void defineConstant(const std::string &name, ConstTensor constant, bool initializer = false);
  // Makes `name` stand for what `other` stands for.
  void alias(const std::string &name, const std::string &other);
  const ImportedValue *find(llvm::StringRef name) const;

  // Input `i` of the current node; "" when absent (an optional input left out).
  llvm::StringRef input(unsigned i) const;
  // The constant behind input `i`, or null when it is computed (or absent).
  const ConstTensor *constantInput(unsigned i) const;
  // The integer constant behind input `i`; an error naming the input when it is not one.
  llvm::Expected<std::vector<int64_t>> intsInput(unsigned i, llvm::StringRef what) const;
  // Input `i` as a Prism value in `layout` (a 4-D value is transposed when held in the other;
  // other ranks are always Onnx) with one Prism dimension per ONNX one: an error when a
  // dimension is a multiple of B held as several (mappings that handle those read groupedInput).
  // A float initializer becomes a trained variable, another float constant a scalar `constant`
  // op or an untrained variable.
  llvm::Expected<ir::Value *> tensorInput(unsigned i, Layout layout = Layout::Onnx);
  // The same for any ONNX value name (a graph output).
  llvm::Expected<ir::Value *> tensor(const std::string &name, Layout layout = Layout::Onnx);
  // Input `i` in the ONNX layout, its multiples of B held as groupsOf(i) says.
  llvm::Expected<ir::Value *> groupedInput(unsigned i);
  // Input `i` as it is held (layoutOf, groupsOf), for ops that keep both (elementwise ones).
  llvm::Expected<ir::Value *> heldInput(unsigned i);
  Layout layoutOf(unsigned i) const;
  DimGroups groupsOf(unsigned i) const;
  // The Prism axis of ONNX axis `axis` of input `i` (negative counts from the end); an error
  // saying that `what` cannot be computed over it when it is a multiple of B held as several.
  llvm::Expected<int64_t> prismAxis(unsigned i, int64_t axis, const llvm::Twine &what) const;
  // The ONNX dimensions of input `i` (a 4-D NHWC value reports NCHW); batch multiples for B·k.
  llvm::Expected<std::vector<int64_t>> dimsOf(unsigned i) const;
  // The Prism dimensions of input `i` as groupedInput holds it.
  llvm::Expected<std::vector<int64_t>> prismDimsOf(unsigned i) const;

  // A variable from the float constant behind input `i`, its elements permuted by `perm` (ONNX
  // dims to Prism dims: out.dims[k] = dims[perm[k]]; empty: as stored).
  llvm::Expected<ir::Value *> variableInput(unsigned i, llvm::ArrayRef<int64_t> perm = {});

  // Adds a Prism op and infers its result type; `onnxName` (an ONNX value name) names the
  // result, else the op's name does.
  llvm::Expected<ir::Value *> emit(llvm::StringRef op, llvm::ArrayRef<ir::Value *> operands,
                                   ir::AttrMap attrs = {}, llvm::StringRef onnxName = "");
  // Defines output `i` of the current node as `value` (`groups` empty: one Prism dimension per
  // ONNX one).
  void defineOutput(unsigned i, ir::Value *value, Layout layout = Layout::Onnx,
                    DimGroups groups = {});
  llvm::StringRef output(unsigned i) const;
  const ::onnx::NodeProto &node() const { return *node_; }

  // An identifier or value name for an ONNX name: `/conv1/Conv_output_0` -> `conv1.Conv_output_0`.
  static std::string sanitize(llvm::StringRef onnxName);

private:
  llvm::Expected<ir::Value *> convert(const std::string &name, ImportedValue &imported,
                                      Layout layout);
  llvm::Expected<ir::Value *> ungroup(const std::string &name, const ImportedValue &imported);
  llvm::Expected<ir::Value *> materialize(const std::string &name, ImportedValue &imported);
  llvm::Expected<ir::Value *> variableFor(const std::string &name, llvm::ArrayRef<int64_t> perm);

  ir::Module &module_;
  std::string fileName_;
  std::string valuesFile_;
  ir::ValuesFileWriter values_;
  std::vector<std::string> notes_;
  const ::onnx::NodeProto *node_ = nullptr;
  const FreshInitRules *fresh_ = nullptr;
  std::map<std::string, ImportedValue> imported_;
  std::set<std::string> read_;
  // A value already transposed into the other layout, so that it is transposed once.
  std::map<std::pair<std::string, Layout>, ir::Value *> converted_;
  // A grouped value reshaped to one Prism dimension per ONNX one (its groups hold no B).
  std::map<std::string, ir::Value *> ungrouped_;
  std::map<std::pair<std::string, std::vector<int64_t>>, ir::Value *> variables_;
};

// ONNX attributes of the current node.
const ::onnx::AttributeProto *findAttr(const ::onnx::NodeProto &node, llvm::StringRef name);
int64_t intAttr(const ::onnx::NodeProto &node, llvm::StringRef name, int64_t dflt);
float floatAttr(const ::onnx::NodeProto &node, llvm::StringRef name, float dflt);
std::vector<int64_t> intsAttr(const ::onnx::NodeProto &node, llvm::StringRef name,
                              std::vector<int64_t> dflt = {});
std::string stringAttr(const ::onnx::NodeProto &node, llvm::StringRef name,
                       llvm::StringRef dflt = "");

// A TensorProto's elements; an error for external data, unknown types and short data.
llvm::Expected<ConstTensor> readTensor(const ::onnx::TensorProto &tensor);

// Imports the current node with the mapping for its op type; an error naming the node when
// there is none or the mapping cannot take it.
llvm::Error importNode(OnnxGraph &graph);
// "Add, AveragePool, ...": the op types with a mapping, for messages and docs.
std::string supportedOnnxOps();

} // namespace prism::frontends::onnx
