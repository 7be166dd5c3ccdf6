// `prism import --init fresh`: each ONNX initializer's role in the graph (what reads it) picks
// an initializer from the IR's list that mirrors PyTorch's default initialization for that role
// (docs/import.md, "Fresh initialization").
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/Module.h"
#include "onnx/onnx_pb.h"
#include "llvm/Support/Error.h"

namespace prism::frontends::onnx {

struct ConstTensor;

class FreshInitRules {
public:
  explicit FreshInitRules(const ::onnx::GraphProto &graph);

  // The initializer of the variable made from `name`: by its role for a graph initializer
  // (`initializer` true), `constant(value)` for another float constant whose elements are all
  // equal; an error (without a location) saying why there is none otherwise.
  llvm::Expected<ir::Initializer> initializerFor(const std::string &name, const ConstTensor &value,
                                                 bool initializer) const;

private:
  struct Use {
    const ::onnx::NodeProto *node;
    int index;
  };
  llvm::Expected<ir::Initializer> ruleFor(const std::string &name) const;
  llvm::Expected<ir::Initializer> ruleForUse(const Use &use) const;
  // The dimensions of an initializer as `name` sees it through Identity and Transpose nodes;
  // nullopt when `name` is no (transposed) initializer.
  std::optional<std::vector<int64_t>> weightDims(const std::string &name) const;
  // The fan-in of a Conv, Gemm or MatMul node's weight (input 1), as PyTorch computes it.
  std::optional<int64_t> weightFanIn(const ::onnx::NodeProto &node) const;

  std::map<std::string, std::vector<int64_t>> initializerDims_;
  std::map<std::string, std::vector<Use>> uses_;
  std::map<std::string, const ::onnx::NodeProto *> producers_;
};

} // namespace prism::frontends::onnx
