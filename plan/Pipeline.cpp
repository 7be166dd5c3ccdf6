// The compile pipelines (see Pipeline.h): the pass lists live here and nowhere else.
#include "plan/Pipeline.h"

#include "ir/Diagnostic.h"
#include "ir/VariablePlacement.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"

namespace prism::plan {
namespace {

// From the user's model (forward, loss, optimizer) to a training step on one device.
constexpr const char *kTrainingStepPasses =
    "inline,infer-shapes,expand,autodiff,lower-optimizer,cse,dce";
constexpr const char *kFusionPasses = "fuse-bias-activation,fuse-elementwise";
constexpr const char *kPlaceAndRoutePasses = "place-variables,route-gradients";

std::string replicationPipeline(const passes::ReplicateOptions &replicate) {
  std::string pipeline = std::string(kTrainingStepPasses) + ",classify-variables";
  if (replicate.devices > 1)
    pipeline += ",replicate-in-graph";
  return pipeline + ",replicate-between-graph";
}

// Whether the strategy puts `variable` (classified) on a parameter server.
bool goesToParameterServer(const ir::Variable &variable, passes::Strategy strategy) {
  if (!variable.trainable() || strategy == passes::Strategy::AllReduce)
    return false;
  return strategy == passes::Strategy::ParameterServer ||
         ir::variableKind(variable) == ir::VariableUsage::Sparse;
}

// A strategy that needs parameter servers on a cluster without any: say so plainly, before
// place-variables fails on its option.
llvm::Error checkParameterServers(const ir::Module &module,
                                  const passes::PlaceVariablesOptions &placement) {
  if (placement.psTasks > 0)
    return llvm::Error::success();
  for (const auto &variable : module.variables())
    if (goesToParameterServer(*variable, placement.strategy))
      return ir::makeError("strategy " + passes::strategyName(placement.strategy) + " puts '" +
                           variable->name() +
                           "' on a parameter server, but the cluster has none: add ps=M "
                           "(local:N,ps=M, or `ps:` on a host) or use --strategy allreduce");
  return llvm::Error::success();
}

// fp16's range needs loss scaling: lower-optimizer adds it (bf16 has f32's range, no need).
void addLossScaling(passes::PassOptions &options, ir::ComputePrecision precision) {
  if (precision == ir::ComputePrecision::FP16)
    options.set("loss-scale", "dynamic");
}

// Every pipeline here ends in a typed module: the runtime needs the types.
llvm::Error verifyTyped(const ir::Module &module, llvm::StringRef after) {
  ir::VerifyOptions verifyOptions;
  verifyOptions.requireTypes = true;
  if (auto e = ir::verify(module, verifyOptions))
    return ir::withContext(std::move(e), "the module is invalid after the passes " + after);
  return llvm::Error::success();
}

} // namespace

// Last, so that every matrix product and convolution (backward and fused ones too) is marked.
static llvm::Error applyPrecision(ir::Module &module, ir::ComputePrecision precision,
                                  PassStatistics *statistics) {
  if (precision == ir::ComputePrecision::F32)
    return llvm::Error::success();
  passes::PassOptions options;
  options.set("precision", ir::precisionName(precision));
  return runPipeline(module, "mixed-precision", options, statistics, /*verify=*/false);
}

llvm::Error runPipeline(ir::Module &module, llvm::StringRef pipeline,
                        const passes::PassOptions &options, PassStatistics *statistics,
                        bool verify) {
  // Verified once, not after every pass: on a 500,000-op model the verifier after each pass
  // took as long as the passes.
  passes::PassManagerOptions managerOptions;
  managerOptions.verifyEach = false;
  auto manager = passes::PassManager::fromPipeline(pipeline, managerOptions);
  if (!manager)
    return manager.takeError();
  // The caller may set options for several stages; each stage takes the ones its passes read.
  passes::PassOptions read;
  for (const auto &pass : manager->passes())
    for (const std::string &key : pass->optionKeys())
      if (options.has(key))
        read.set(key, options.get(key));
  if (auto changed = manager->run(module, read); !changed)
    return changed.takeError();
  if (verify)
    if (auto e = verifyTyped(module, pipeline))
      return e;
  if (statistics)
    for (const auto &pass : manager->passes())
      for (const auto &statistic : pass->statistics())
        statistics->push_back({pass->name().str(), statistic});
  return llvm::Error::success();
}

std::string trainingPipeline(bool fuse) {
  std::string pipeline = kTrainingStepPasses;
  if (fuse)
    pipeline += std::string(",") + kFusionPasses;
  return pipeline;
}

llvm::Error compileTrainingStep(ir::Module &module, bool fuse, PassStatistics *statistics) {
  return compileTrainingStep(module, TrainingStepOptions{fuse, ir::ComputePrecision::F32},
                             statistics);
}

llvm::Error compileTrainingStep(ir::Module &module, const TrainingStepOptions &options,
                                PassStatistics *statistics) {
  passes::PassOptions passOptions;
  addLossScaling(passOptions, options.precision);
  std::string pipeline = trainingPipeline(options.fuse);
  if (auto e = runPipeline(module, pipeline, passOptions, statistics, /*verify=*/false))
    return e;
  if (auto e = applyPrecision(module, options.precision, statistics))
    return e;
  return verifyTyped(module, pipeline);
}

llvm::Error parallelize(ir::Module &module, const ParallelPipelineOptions &options,
                        PassStatistics *statistics) {
  passes::PassOptions passOptions;
  options.replicate.addTo(passOptions);
  options.placement.addTo(passOptions);
  options.routing.addTo(passOptions);
  addLossScaling(passOptions, options.precision);
  // One verification at the end: the stages' passes are named in its error.
  std::string pipeline = replicationPipeline(options.replicate);
  if (auto e = runPipeline(module, pipeline, passOptions, statistics, /*verify=*/false))
    return e;
  if (auto e = checkParameterServers(module, options.placement))
    return e;
  pipeline += std::string(",") + kPlaceAndRoutePasses;
  if (auto e = runPipeline(module, kPlaceAndRoutePasses, passOptions, statistics, false))
    return e;
  if (options.fuse) {
    pipeline += std::string(",") + kFusionPasses;
    if (auto e = runPipeline(module, kFusionPasses, passOptions, statistics, false))
      return e;
  }
  if (auto e = applyPrecision(module, options.precision, statistics))
    return e;
  return options.verify ? verifyTyped(module, pipeline) : llvm::Error::success();
}

} // namespace prism::plan
