// Scale on paper as a library: the clusters it builds, and a sweep's points and efficiencies.
#include <gtest/gtest.h>

#include "frontends/text/Parser.h"
#include "plan/ScaleStudy.h"

namespace prism::plan {
namespace {

// 17 workers on 8-GPU hosts: two full hosts and one with the last GPU, each on its own address
// and link, with its parameter servers.
TEST(ScaleStudy, ClusterOfGpuHosts) {
  cluster::ClusterSpec spec = scaleClusterSpec(17, 8, 2, 10'000'000'000);
  ASSERT_EQ(spec.hosts.size(), 3u);
  EXPECT_EQ(spec.hosts[0].devices.size(), 8u);
  EXPECT_EQ(spec.hosts[2].devices.size(), 1u);
  EXPECT_EQ(spec.hosts[1].devices[7].str(), "gpu:7");
  EXPECT_NE(spec.hosts[0].address, spec.hosts[1].address);
  EXPECT_NE(spec.hosts[0].address.rfind("127.", 0), 0u);
  for (const cluster::Host &h : spec.hosts) {
    EXPECT_EQ(h.psTasks, 2);
    EXPECT_EQ(h.bandwidthBitsPerSec, 10'000'000'000u);
  }
  auto cluster = cluster::Cluster::resolve(spec, cluster::Replication::BetweenGraph);
  ASSERT_TRUE(static_cast<bool>(cluster)) << llvm::toString(cluster.takeError());
  EXPECT_EQ(cluster->numWorkers(), 17);
  EXPECT_EQ(cluster->numParameterServers(), 6);
}

// A sweep gives a point per count and strategy in order, weak scaling (64 samples per worker),
// efficiency 1 on one worker, and an efficiency that is the samples/s over the workers times
// the one-worker samples/s, when the counts leave 1 out too.
TEST(ScaleStudy, PointsAndEfficiency) {
  auto model = frontends::parseModuleFile(std::string(PRISM_SOURCE_DIR) + "/models/mlp.prism");
  ASSERT_TRUE(static_cast<bool>(model)) << llvm::toString(model.takeError());
  ScaleOptions options;
  options.workers = {1, 4, 16};
  options.strategies = {passes::Strategy::AllReduce, passes::Strategy::ParameterServer};
  auto points = simulateScaling(**model, options, defaultProfile());
  ASSERT_TRUE(static_cast<bool>(points)) << llvm::toString(points.takeError());
  ASSERT_EQ(points->size(), 6u);
  for (size_t i = 0; i < points->size(); ++i) {
    const ScalePoint &p = (*points)[i];
    EXPECT_EQ(p.workers, options.workers[i / 2]);
    EXPECT_EQ(p.strategy, options.strategies[i % 2]);
    EXPECT_EQ(p.globalBatch, 64 * p.workers);
    EXPECT_EQ(p.hosts, (p.workers + 7) / 8);
    EXPECT_NEAR(p.samplesPerSecond * p.stepSeconds, static_cast<double>(p.globalBatch), 1e-6);
    const ScalePoint &one = (*points)[i % 2];
    EXPECT_NEAR(p.efficiency, p.samplesPerSecond / (p.workers * one.samplesPerSecond), 1e-12);
  }
  EXPECT_NEAR((*points)[0].efficiency, 1, 1e-12);
  options.workers = {16};
  auto alone = simulateScaling(**model, options, defaultProfile());
  ASSERT_TRUE(static_cast<bool>(alone)) << llvm::toString(alone.takeError());
  ASSERT_EQ(alone->size(), 2u);
  EXPECT_NEAR((*alone)[0].efficiency, (*points)[4].efficiency, 1e-12);
}

} // namespace
} // namespace prism::plan
