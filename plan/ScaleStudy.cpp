// Scaling on paper (see ScaleStudy.h): a cluster per worker count, a plan per strategy, a
// simulated step each.
#include "plan/ScaleStudy.h"

#include <map>

#include "ir/Diagnostic.h"
#include "plan/Simulator.h"

namespace prism::plan {

cluster::ClusterSpec scaleClusterSpec(int workers, int gpusPerHost, int psPerHost,
                                      uint64_t linkBitsPerSec) {
  cluster::ClusterSpec spec;
  spec.source = "<scale>";
  const int hosts = (workers + gpusPerHost - 1) / gpusPerHost;
  for (int h = 0; h < hosts; ++h) {
    cluster::Host host;
    host.name = "h" + std::to_string(h);
    // Not loopback, so the simulator puts the hosts' traffic on their links.
    host.address = "10.0." + std::to_string(h / 250) + "." + std::to_string(h % 250 + 1);
    const int devices = std::min(gpusPerHost, workers - h * gpusPerHost);
    for (int d = 0; d < devices; ++d)
      host.devices.push_back({cluster::DeviceKind::Gpu, d});
    host.psTasks = psPerHost;
    host.bandwidthBitsPerSec = linkBitsPerSec;
    spec.hosts.push_back(std::move(host));
  }
  return spec;
}

namespace {

llvm::Expected<ScalePoint> simulatePoint(const ir::Module &model, const ScaleOptions &options,
                                         const CostProfile &profile, int workers,
                                         passes::Strategy strategy) {
  // All-reduce alone uses no parameter server: the hosts run none.
  const int psPerHost = strategy == passes::Strategy::AllReduce ? 0 : options.psPerHost;
  auto cluster = cluster::Cluster::resolve(
      scaleClusterSpec(workers, options.gpusPerHost, psPerHost, options.linkBitsPerSec),
      cluster::Replication::BetweenGraph);
  if (!cluster)
    return cluster.takeError();
  PartitionOptions partitionOptions = options.partition;
  // Each point is one strategy's, as the study compares them; `--partitions auto` (the default)
  // is the rule below and `--bucket-mb auto` the default size: a search per point would compile
  // a dozen 1,024-worker plans for each.
  partitionOptions.automatic = {};
  partitionOptions.placement.strategy = strategy;
  partitionOptions.globalBatch = options.batchPerWorker * workers;
  // Unless given, a table is split over every server: the size rule (a range per
  // partition-threshold-mb, at most the servers) was made for a few hosts, and would put all
  // of a thousand workers' rows on the few servers of a table's ranges.
  if (partitionOptions.placement.partitions == 0 && psPerHost > 0)
    partitionOptions.placement.partitions = static_cast<int64_t>(cluster->hosts.size()) * psPerHost;
  auto partitioned = partition(model, *cluster, partitionOptions);
  if (!partitioned)
    return partitioned.takeError();
  const ir::Module *worker = nullptr;
  for (int i = 0; i < partitioned->plan.programs_size(); ++i)
    if (partitioned->plan.programs(i).name() == "worker")
      worker = partitioned->programs[i].get();
  if (!worker)
    return ir::makeError(ir::ErrorCode::Invalid, "the plan has no worker program");
  SimulateOptions simulate;
  simulate.spans = false; // the sweep keeps only the step
  auto prediction = simulateStep(partitioned->plan, *worker, profile, simulate);
  if (!prediction)
    return prediction.takeError();
  ScalePoint point;
  point.workers = workers;
  point.hosts = static_cast<int>(cluster->hosts.size());
  point.strategy = strategy;
  point.globalBatch = prediction->globalBatch;
  point.stepSeconds = prediction->stepSeconds;
  point.samplesPerSecond = prediction->samplesPerSecond;
  return point;
}

} // namespace

llvm::Expected<std::vector<ScalePoint>>
simulateScaling(const ir::Module &model, const ScaleOptions &options, const CostProfile &profile) {
  std::map<passes::Strategy, double> single; // samples/s with one worker
  for (passes::Strategy strategy : options.strategies) {
    auto point = simulatePoint(model, options, profile, 1, strategy);
    if (!point)
      return point.takeError();
    single[strategy] = point->samplesPerSecond;
  }
  std::vector<ScalePoint> points;
  for (int workers : options.workers)
    for (passes::Strategy strategy : options.strategies) {
      auto point = simulatePoint(model, options, profile, workers, strategy);
      if (!point)
        return point.takeError();
      const double linear = workers * single[strategy];
      point->efficiency = linear > 0 ? point->samplesPerSecond / linear : 0;
      points.push_back(*point);
    }
  return points;
}

} // namespace prism::plan
