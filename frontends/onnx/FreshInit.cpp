// `prism import --init fresh`: an initializer from the IR's list for each ONNX initializer,
// chosen by the role the graph gives it, as PyTorch initializes a module in that role.
#include "frontends/onnx/FreshInit.h"

#include <algorithm>
#include <cmath>

#include "frontends/onnx/OnnxGraph.h"
#include "ir/Diagnostic.h"

namespace prism::frontends::onnx {
namespace {

ir::Initializer simple(llvm::StringRef kind) {
  ir::Initializer init;
  init.kind = kind.str();
  return init;
}

// nn.Linear and nn.Conv2d: kaiming_uniform_(a = sqrt(5)) for the weight and the bias alike give
// uniform(-b, b) with b = 1 / sqrt(fan_in).
ir::Initializer fanInUniform(int64_t fanIn) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fanIn));
  ir::Initializer init = simple("uniform");
  init.params.set("min", ir::Attr::real(-bound));
  init.params.set("max", ir::Attr::real(bound));
  return init;
}

ir::Initializer normal01() {
  ir::Initializer init = simple("normal");
  init.params.set("mean", ir::Attr::real(0));
  init.params.set("stddev", ir::Attr::real(1));
  return init;
}

int64_t product(llvm::ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

} // namespace

FreshInitRules::FreshInitRules(const ::onnx::GraphProto &graph) {
  for (const ::onnx::TensorProto &init : graph.initializer())
    initializerDims_[init.name()] = std::vector<int64_t>(init.dims().begin(), init.dims().end());
  for (const ::onnx::NodeProto &node : graph.node()) {
    for (int k = 0; k < node.input_size(); ++k)
      if (!node.input(k).empty())
        uses_[node.input(k)].push_back({&node, k});
    for (const std::string &output : node.output())
      producers_[output] = &node;
  }
}

std::optional<std::vector<int64_t>> FreshInitRules::weightDims(const std::string &name) const {
  if (auto it = initializerDims_.find(name); it != initializerDims_.end())
    return it->second;
  auto producer = producers_.find(name);
  if (producer == producers_.end() || producer->second->input_size() < 1)
    return std::nullopt;
  const ::onnx::NodeProto &node = *producer->second;
  if (node.op_type() == "Identity")
    return weightDims(node.input(0));
  if (node.op_type() == "Transpose") {
    auto dims = weightDims(node.input(0));
    if (!dims)
      return std::nullopt;
    std::vector<int64_t> perm = intsAttr(node, "perm");
    if (perm.empty())
      return std::vector<int64_t>(dims->rbegin(), dims->rend());
    if (perm.size() != dims->size())
      return std::nullopt;
    std::vector<int64_t> permuted;
    for (int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(dims->size()))
        return std::nullopt;
      permuted.push_back((*dims)[p]);
    }
    return permuted;
  }
  return std::nullopt;
}

std::optional<int64_t> FreshInitRules::weightFanIn(const ::onnx::NodeProto &node) const {
  if (node.input_size() < 2)
    return std::nullopt;
  auto dims = weightDims(node.input(1));
  if (!dims || dims->size() < 2)
    return std::nullopt;
  if (node.op_type() == "Conv")
    return product(llvm::ArrayRef<int64_t>(*dims).drop_front());
  if (node.op_type() == "Gemm")
    return intAttr(node, "transB", 0) ? (*dims)[1] : (*dims)[0];
  if (node.op_type() == "MatMul")
    return (*dims)[dims->size() - 2];
  return std::nullopt;
}

llvm::Expected<ir::Initializer> FreshInitRules::ruleForUse(const Use &use) const {
  const ::onnx::NodeProto &node = *use.node;
  const std::string &op = node.op_type();
  // Through Identity and Transpose (nn.Linear on a 3-D input exports its weight transposed
  // before a MatMul) to the node that gives the value its role.
  if ((op == "Identity" || op == "Transpose") && use.index == 0 && node.output_size() == 1)
    return ruleFor(node.output(0));
  const int k = use.index;
  auto fromWeight = [&](const ::onnx::NodeProto &layer) -> llvm::Expected<ir::Initializer> {
    if (auto fanIn = weightFanIn(layer); fanIn && *fanIn > 0)
      return fanInUniform(*fanIn);
    return ir::makeError("it is the bias of " + layer.op_type() + " node '" + layer.name() +
                         "', whose weight is no initializer (its fan-in is unknown)");
  };
  if ((op == "Conv" || op == "Gemm" || op == "MatMul") && k == 1)
    return fromWeight(node);
  if ((op == "Conv" || op == "Gemm") && k == 2)
    return fromWeight(node);
  if (op == "Add" && node.input_size() == 2) {
    // A bias added to a MatMul's (or a bias-less Gemm's) product: nn.Linear on a 3-D input.
    auto producer = producers_.find(node.input(1 - k));
    if (producer != producers_.end() &&
        (producer->second->op_type() == "MatMul" ||
         (producer->second->op_type() == "Gemm" && producer->second->input_size() < 3)))
      return fromWeight(*producer->second);
  }
  if (op == "BatchNormalization" && k >= 1 && k <= 4)
    return simple(k == 1 || k == 4 ? "ones" : "zeros");
  if (op == "LayerNormalization" && (k == 1 || k == 2))
    return simple(k == 1 ? "ones" : "zeros");
  if (op == "Gather" && k == 0)
    return normal01();
  return ir::makeError("it is input " + llvm::Twine(k) + " of " + op + " node '" + node.name() +
                       "', a role with no fresh rule (weights and biases of Conv, Gemm and " +
                       "MatMul, normalization parameters and embedding tables have one; " +
                       "import with --init onnx to keep the exported values)");
}

llvm::Expected<ir::Initializer> FreshInitRules::ruleFor(const std::string &name) const {
  auto uses = uses_.find(name);
  if (uses == uses_.end() || uses->second.empty())
    return ir::makeError("no node reads it");
  std::optional<ir::Initializer> rule;
  for (const Use &use : uses->second) {
    auto r = ruleForUse(use);
    if (!r)
      return r.takeError();
    if (rule && !(*rule == *r))
      return ir::makeError("its readers give it two roles (" + use.node->op_type() + " node '" +
                           use.node->name() + "' another than the first)");
    rule = std::move(*r);
  }
  return *rule;
}

llvm::Expected<ir::Initializer> FreshInitRules::initializerFor(const std::string &name,
                                                               const ConstTensor &value,
                                                               bool initializer) const {
  if (initializer)
    return ruleFor(name);
  // A graph constant, not a weight: its values are part of the model. One value repeated is
  // `constant(value)`; anything else needs the values file.
  if (!value.floats.empty() && std::all_of(value.floats.begin(), value.floats.end(),
                                           [&](float v) { return v == value.floats[0]; })) {
    ir::Initializer init = simple("constant");
    init.params.set("value", ir::Attr::real(value.floats[0]));
    return init;
  }
  return ir::makeError("it is a constant of the graph with " + llvm::Twine(value.numElements()) +
                       " different elements, which only a values file holds (import " +
                       "with --init onnx)");
}

} // namespace prism::frontends::onnx
