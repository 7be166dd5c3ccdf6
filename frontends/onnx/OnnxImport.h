// Reads an ONNX model (a ModelProto, opsets 13 to 17) into an ir::Module that trains it: the
// graph's inputs become inputs, its float initializers variables whose first values go to a
// values file (ir/ValuesFile.h), its nodes Prism ops, and a loss and an optimizer are added.
// docs/import.md lists the ONNX ops it maps and how.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/Module.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::frontends::onnx {

struct ImportOptions {
  // `softmax_cross_entropy`: the graph's one output is the logits [B, C], and an i32[B] input
  // named `labels` holds the classes; `none`: the graph's one output is already a scalar loss.
  std::string loss = "softmax_cross_entropy";
  std::string labels = "y";
  // As in the text format: `adam(lr = 0.001)`, `sgd(lr = 0.1, schedule = ...)`.
  std::string optimizer = "adam(lr = 0.001)";
  // The module's `data` statement (a --data spec); empty: none.
  std::string data;
  // The module's name; empty: the ONNX graph's name (made an identifier), else `imported`.
  std::string modelName;
  // The values file as the module names it: relative to the directory of the .prism file the
  // module will be written to, e.g. `model.weights`.
  std::string valuesFile = "model.weights";
  // `onnx`: variables start from the ONNX initializers' values (`values` initializers into the
  // values file); `fresh`: from initializers that mirror PyTorch's default initialization for
  // the role the graph gives each one (FreshInit.h), with no values file.
  std::string init = "onnx";
  // The forward graph alone, for evaluating it: no loss or optimizer is added (`loss`,
  // `labels` and `optimizer` are ignored), the graph may have several outputs of any shape, and
  // ImportedModel::outputs names them.
  bool forwardOnly = false;
  // batch_norm with sync = true: statistics over the step's whole batch on every worker and
  // tower (PyTorch's SyncBatchNorm), so data-parallel training equals one device's.
  bool syncBatchNorm = false;
};

struct ImportedModel {
  std::unique_ptr<ir::Module> module;
  // The contents of the values file the module's `values` initializers point into (empty with
  // fresh initialization).
  std::string values;
  // The Prism value of each graph output, in the graph's order (forwardOnly imports).
  std::vector<std::string> outputs;
};

// Imports the serialized ModelProto `bytes`; `fileName` names it in errors, which read
// `fileName: error: node 'NAME' (OpType): ...` for a node the import cannot map (an unnamed
// node: `the node (OpType) computing 'OUTPUT'`).
llvm::Expected<ImportedModel> importOnnx(llvm::StringRef bytes, llvm::StringRef fileName,
                                         const ImportOptions &options);
// Reads the file at `path` and imports it.
llvm::Expected<ImportedModel> importOnnxFile(llvm::StringRef path, const ImportOptions &options);

} // namespace prism::frontends::onnx
