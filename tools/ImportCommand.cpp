// `prism import MODEL.onnx -o MODEL.prism`: an ONNX model as a Prism module that trains it, and
// beside it the values file with its initial weights, or none with `--init fresh`
// (frontends/onnx does the work).
#include <string>

#include "frontends/onnx/OnnxImport.h"
#include "ir/Printer.h"
#include "runtime/data/DataSpec.h"
#include "tools/Commands.h"
#include "tools/OutputFile.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {
namespace {

struct ImportArgs {
  std::string model;
  std::string output;
  bool quiet = false;
  frontends::onnx::ImportOptions options;
};

// `dir/name.prism` -> `dir/name.weights`.
std::string valuesPathFor(llvm::StringRef output) {
  llvm::SmallString<256> path(output);
  llvm::sys::path::replace_extension(path, "weights");
  return std::string(path);
}

int runImport(ImportArgs &args) {
  if (!args.options.data.empty())
    if (auto spec = runtime::data::parseDataSpec(args.options.data); !spec)
      return reportError(ir::withContext(spec.takeError(), "--data"));
  const std::string valuesPath = valuesPathFor(args.output);
  args.options.valuesFile = llvm::sys::path::filename(valuesPath).str();
  if (args.options.modelName.empty())
    args.options.modelName = llvm::sys::path::stem(args.output).str();
  auto imported = frontends::onnx::importOnnxFile(args.model, args.options);
  if (!imported)
    return reportError(imported.takeError());
  const bool fresh = args.options.init == "fresh";
  // The values first: a model file never names values that are not there.
  if (!fresh)
    if (auto err = writeOutput(valuesPath, imported->values))
      return reportError(std::move(err));
  if (auto err = writeOutput(args.output, ir::printModule(*imported->module)))
    return reportError(std::move(err));
  if (args.quiet)
    return 0;
  llvm::errs() << "imported " << args.model << " as " << args.output << " ("
               << imported->module->variables().size() << " variables";
  if (fresh)
    llvm::errs() << ", initialized afresh)\n";
  else
    llvm::errs() << " in " << valuesPath << ", " << imported->values.size() << " bytes)\n";
  return 0;
}

} // namespace

void registerImportCommand(CLI::App &app) {
  auto args = std::make_shared<ImportArgs>();
  auto *cmd = app.add_subcommand(
      "import", "Import an ONNX model (opsets 13 to 17) as a Prism model that trains it");
  cmd->add_option("model", args->model, "ONNX file (.onnx)")->required();
  cmd->add_option("-o,--output", args->output,
                  "The Prism model to write (.prism); its values go beside it (.weights)")
      ->required();
  cmd->add_option("--loss", args->options.loss,
                  "softmax_cross_entropy (the output is logits [B, C]) or none (the output is "
                  "the loss)")
      ->capture_default_str();
  cmd->add_option("--labels", args->options.labels,
                  "Name of the i32[B] labels input softmax_cross_entropy adds")
      ->capture_default_str();
  cmd->add_option("--optimizer", args->options.optimizer,
                  "The optimizer, as in the text format: sgd(lr = 0.1), adam(lr = 0.001), ...")
      ->capture_default_str();
  cmd->add_option("--data", args->options.data,
                  "The data set the model names (its data statement), as prism train's --data "
                  "takes it: fashion-mnist[:DIR], zipf:VOCAB[,...], text:FILE, npy:DIR");
  cmd->add_option("--init", args->options.init,
                  "Where variables start: onnx (the exported values, written to the values "
                  "file) or fresh (PyTorch's default initialization for each variable's role: "
                  "uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) for Conv, Gemm and MatMul weights "
                  "and biases, ones and zeros for normalizations, normal(0, 1) for embedding "
                  "tables; no values file)")
      ->check(CLI::IsMember({"onnx", "fresh"}))
      ->capture_default_str();
  cmd->add_option("--name", args->options.modelName,
                  "The model's name (default: the output file's name)");
  cmd->add_flag("--sync-batch-norm", args->options.syncBatchNorm,
                "BatchNormalization normalizes with the statistics of the step's whole batch on "
                "every worker and tower (batch_norm with sync = true, as PyTorch's "
                "SyncBatchNorm); default: each part's own, as BatchNorm under DDP");
  cmd->add_flag("--quiet,-q", args->quiet, "Print only errors");
  cmd->callback([args]() {
    if (int status = runImport(*args))
      throw CLI::RuntimeError(status);
  });
}

} // namespace prism::tools
