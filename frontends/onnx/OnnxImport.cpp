// The model-level part of an ONNX import: the ModelProto, its opset, the graph's inputs and
// initializers, the nodes in order (OnnxOps.cpp), then the loss and the optimizer.
#include "frontends/onnx/OnnxImport.h"

#include <climits>

#include "frontends/onnx/FreshInit.h"
#include "frontends/onnx/OnnxGraph.h"
#include "frontends/text/Parser.h"
#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "ir/Type.h"
#include "ir/Verifier.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

namespace prism::frontends::onnx {
namespace {

constexpr int64_t kMinOpset = 13, kMaxOpset = 17;

llvm::Error fileError(llvm::StringRef file, const llvm::Twine &message,
                      ir::ErrorCode code = ir::ErrorCode::Invalid) {
  return ir::withLocation(ir::makeError(code, message), file, {});
}

llvm::Error checkOpset(const ::onnx::ModelProto &model, llvm::StringRef file) {
  for (const ::onnx::OperatorSetIdProto &opset : model.opset_import()) {
    if (!opset.domain().empty() && opset.domain() != "ai.onnx")
      continue;
    if (opset.version() < kMinOpset || opset.version() > kMaxOpset)
      return fileError(file,
                       "opset " + llvm::Twine(opset.version()) + " is not supported; Prism " +
                           "imports opsets " + llvm::Twine(kMinOpset) + " to " +
                           llvm::Twine(kMaxOpset) + " (torch.onnx.export(..., opset_version=13))",
                       ir::ErrorCode::Unsupported);
    return llvm::Error::success();
  }
  return fileError(file, "the model imports no version of the default ONNX opset");
}

std::optional<ir::DType> dtypeOf(int32_t elemType) {
  using T = ::onnx::TensorProto;
  switch (elemType) {
  case T::FLOAT:
    return ir::DType::F32;
  case T::DOUBLE:
    return ir::DType::F64;
  case T::INT32:
    return ir::DType::I32;
  case T::INT64:
    return ir::DType::I64;
  case T::BOOL:
    return ir::DType::Bool;
  default:
    return std::nullopt;
  }
}

// A graph input as a Prism input: a dynamic first dimension is the batch B.
llvm::Error addInput(OnnxGraph &graph, const ::onnx::ValueInfoProto &input, llvm::StringRef file) {
  const std::string what = "input '" + input.name() + "'";
  if (!input.type().has_tensor_type())
    return fileError(file, what + " is not a tensor", ir::ErrorCode::Unsupported);
  const ::onnx::TypeProto::Tensor &tensor = input.type().tensor_type();
  std::optional<ir::DType> dtype = dtypeOf(tensor.elem_type());
  if (!dtype)
    return fileError(file,
                     what + " has the element type " +
                         ::onnx::TensorProto::DataType_Name(
                             static_cast<::onnx::TensorProto::DataType>(tensor.elem_type())) +
                         "; Prism inputs are float, double, int32, int64 or bool",
                     ir::ErrorCode::Unsupported);
  if (!tensor.has_shape())
    return fileError(file, what + " has no shape");
  std::vector<int64_t> dims;
  for (int k = 0; k < tensor.shape().dim_size(); ++k) {
    const ::onnx::TensorShapeProto::Dimension &d = tensor.shape().dim(k);
    if (d.has_dim_value() && d.dim_value() >= 0)
      dims.push_back(d.dim_value());
    else if (k == 0)
      dims.push_back(ir::kBatchDim);
    else
      return fileError(file,
                       what + ": dimension " + llvm::Twine(k) + " ('" + d.dim_param() +
                           "') is dynamic; only the first (the batch) may be",
                       ir::ErrorCode::Unsupported);
  }
  const std::string name = OnnxGraph::sanitize(input.name());
  if (graph.module().lookup(name))
    return fileError(file, what + " is named like another input ('" + name + "')");
  ir::Input *added = graph.module().addInput(name, ir::TensorType(*dtype, dims));
  graph.define(input.name(), added->value.get());
  return llvm::Error::success();
}

// The optimizer spec, read by the text format's parser so that it means what it means there.
llvm::Expected<ir::Optimizer> parseOptimizer(llvm::StringRef spec) {
  auto parsed = frontends::parseModule(
      "model optimizer {\n  input loss : f32[]\n  minimize loss with " + spec.str() + "\n}\n",
      "--optimizer");
  if (!parsed)
    return ir::makeError("--optimizer '" + spec + "': " + ir::messageOf(parsed.takeError()));
  ir::Optimizer optimizer = *(*parsed)->optimizer;
  optimizer.loc = {};
  for (ir::SchedulePhase &phase : optimizer.schedule)
    phase.loc = {};
  return optimizer;
}

llvm::Error addLoss(OnnxGraph &graph, const ::onnx::GraphProto &onnxGraph, llvm::StringRef file,
                    const ImportOptions &options) {
  if (onnxGraph.output_size() != 1)
    return fileError(file,
                     "the graph has " + llvm::Twine(onnxGraph.output_size()) +
                         " outputs; Prism imports graphs with one (the logits, or with " +
                         "--loss none the loss)",
                     ir::ErrorCode::Unsupported);
  auto output = graph.tensor(onnxGraph.output(0).name());
  if (!output)
    return output.takeError();
  ir::Module &module = graph.module();
  ir::Value *loss = *output;
  const ir::TensorType &type = loss->type();
  if (options.loss == "none") {
    if (type.rank() != 0)
      return fileError(file, "with --loss none the graph's output must be a scalar loss, got " +
                                 type.str());
  } else if (options.loss == "softmax_cross_entropy") {
    if (type.rank() != 2)
      return fileError(file, "softmax_cross_entropy needs the graph's output to be logits " +
                                 llvm::Twine("[batch, classes], got ") + type.str());
    if (module.lookup(options.labels))
      return fileError(file, "--labels '" + options.labels +
                                 "' names a value of the graph already; pick another name");
    ir::Input *labels =
        module.addInput(options.labels, ir::TensorType(ir::DType::I32, {type.dims[0]}));
    const ir::OpDef *def = ir::lookupOp("softmax_cross_entropy");
    ir::Op *op =
        module.createOp(*def, {loss, labels->value.get()}, {}, {module.uniqueName("loss")});
    auto types = ir::inferResultTypes(*op);
    if (!types)
      return types.takeError();
    op->result()->setType((*types)[0]);
    loss = op->result();
  } else {
    return ir::makeError("--loss '" + options.loss +
                         "' is not known; accepted: softmax_cross_entropy, none");
  }
  auto optimizer = parseOptimizer(options.optimizer);
  if (!optimizer)
    return optimizer.takeError();
  ir::Loss declared;
  declared.value = loss;
  module.loss = std::move(declared);
  module.optimizer = std::move(*optimizer);
  return llvm::Error::success();
}

// The graph's outputs as Prism values in the ONNX layout, for a forward-only import.
llvm::Expected<std::vector<std::string>> outputNames(OnnxGraph &graph,
                                                     const ::onnx::GraphProto &onnxGraph) {
  std::vector<std::string> names;
  for (const ::onnx::ValueInfoProto &output : onnxGraph.output()) {
    auto value = graph.tensor(output.name());
    if (!value)
      return value.takeError();
    names.push_back((*value)->name());
  }
  return names;
}

std::string moduleName(const ImportOptions &options, llvm::StringRef file) {
  if (!options.modelName.empty())
    return OnnxGraph::sanitize(options.modelName);
  llvm::StringRef stem = llvm::sys::path::stem(file);
  return stem.empty() || stem.startswith("<") ? "imported" : OnnxGraph::sanitize(stem);
}

void addHeader(ir::Module &module, const ::onnx::ModelProto &model, llvm::StringRef file,
               const ImportOptions &options, const std::vector<std::string> &notes) {
  std::vector<std::string> &comments = module.headerTrivia.leadingComments;
  std::string producer = model.producer_name().empty()
                             ? std::string("an unnamed producer")
                             : model.producer_name() + " " + model.producer_version();
  int64_t opset = 0;
  for (const ::onnx::OperatorSetIdProto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = o.version();
  comments.push_back("Imported by prism import from " + llvm::sys::path::filename(file).str() +
                     " (" + producer + ", opset " + std::to_string(opset) + ").");
  if (options.init == "fresh")
    comments.push_back("Variables start afresh, initialized as PyTorch initializes their roles " +
                       std::string("(prism import --init fresh, docs/import.md)."));
  else
    comments.push_back("Variables = values(...) read their first values from " +
                       options.valuesFile + " (docs/import.md).");
  for (const std::string &note : notes)
    comments.push_back("Note: " + note + ".");
}

// --sync-batch-norm: every op that normalizes with its batch's statistics (batch_norm) does so
// over the whole step's batch, every worker and tower (sync = true).
void synchronizeBatchStatistics(ir::Module &module) {
  for (const auto &op : module.ops())
    if (op->def().has(ir::kBatchStatistics) && op->def().attrSpec(ir::kSyncAttr))
      op->attrs.set(ir::kSyncAttr, ir::Attr::boolean(true));
}

} // namespace

llvm::Expected<ImportedModel> importOnnx(llvm::StringRef bytes, llvm::StringRef fileName,
                                         const ImportOptions &options) {
  ::onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(INT_MAX) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return fileError(fileName, "not an ONNX model: the file does not parse as a ModelProto " +
                                   llvm::Twine("(truncated, damaged, or another format)"));
  if (!model.has_graph() || model.graph().node_size() == 0)
    return fileError(fileName, "not an ONNX model: it has no graph nodes");
  if (auto e = checkOpset(model, fileName))
    return std::move(e);
  const ::onnx::GraphProto &onnxGraph = model.graph();

  if (options.init != "onnx" && options.init != "fresh")
    return ir::makeError("--init '" + options.init + "' is not known; accepted: onnx, fresh");
  ImportedModel imported;
  imported.module = std::make_unique<ir::Module>(moduleName(options, fileName));
  OnnxGraph graph(*imported.module, fileName.str(), options.valuesFile);
  std::optional<FreshInitRules> fresh;
  if (options.init == "fresh") {
    fresh.emplace(onnxGraph);
    graph.setFreshInit(&*fresh);
  }
  llvm::StringSet<> initializers;
  for (const ::onnx::TensorProto &init : onnxGraph.initializer()) {
    auto tensor = readTensor(init);
    if (!tensor)
      return ir::withLocation(ir::withContext(tensor.takeError(), "initializer"), fileName, {});
    graph.defineConstant(init.name(), std::move(*tensor), /*initializer=*/true);
    initializers.insert(init.name());
  }
  for (const ::onnx::NodeProto &node : onnxGraph.node())
    for (const std::string &input : node.input())
      graph.markRead(input);
  for (const ::onnx::ValueInfoProto &output : onnxGraph.output())
    graph.markRead(output.name());
  for (const ::onnx::ValueInfoProto &input : onnxGraph.input())
    if (!initializers.contains(input.name()))
      if (auto e = addInput(graph, input, fileName))
        return std::move(e);
  for (const ::onnx::NodeProto &node : onnxGraph.node()) {
    graph.setNode(&node);
    if (auto e = importNode(graph))
      return std::move(e);
  }
  graph.setNode(nullptr);
  if (options.syncBatchNorm)
    synchronizeBatchStatistics(*imported.module);
  if (options.forwardOnly) {
    auto outputs = outputNames(graph, onnxGraph);
    if (!outputs)
      return outputs.takeError();
    imported.outputs = std::move(*outputs);
  } else if (auto e = addLoss(graph, onnxGraph, fileName, options)) {
    return std::move(e);
  }
  if (!options.data.empty())
    imported.module->data = ir::DataDefault{options.data, {}, {}};
  addHeader(*imported.module, model, fileName, options, graph.notes());
  if (auto e = ir::verify(*imported.module))
    return ir::withNote(std::move(e), "while importing " + fileName);
  if (!fresh)
    imported.values = graph.values().bytes();
  return imported;
}

llvm::Expected<ImportedModel> importOnnxFile(llvm::StringRef path, const ImportOptions &options) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return ir::makeError(ir::ErrorCode::NotFound,
                         "cannot read " + path + ": " + buffer.getError().message());
  return importOnnx((*buffer)->getBuffer(), path, options);
}

} // namespace prism::frontends::onnx
