// The typed options of the parallelizing passes: defaults, parsing, errors naming the option
// and the text, and the text written back.
#include <gtest/gtest.h>

#include "ir/Diagnostic.h"
#include "passes/ParallelizeOptions.h"

using namespace prism;
using namespace prism::passes;

namespace {

std::string errorOf(llvm::Error err) {
  return err ? ir::messageOf(std::move(err)) : std::string("no error");
}

TEST(ParallelizeOptions, DefaultsAreDefinedOnce) {
  auto place = PlaceVariablesOptions::fromPassOptions({});
  ASSERT_TRUE(bool(place)) << llvm::toString(place.takeError());
  EXPECT_EQ(place->strategy, Strategy::Hybrid);
  EXPECT_EQ(place->psTasks, 1);
  EXPECT_EQ(place->partitions, 0);
  EXPECT_EQ(place->partitionThresholdMb, 8);
  auto route = RouteGradientsOptions::fromPassOptions({});
  ASSERT_TRUE(bool(route));
  EXPECT_EQ(route->bucketMb, 25);
  auto replicate = ReplicateOptions::fromPassOptions({});
  ASSERT_TRUE(bool(replicate));
  EXPECT_EQ(replicate->workers, 1);
  EXPECT_EQ(replicate->devices, 1);
}

TEST(ParallelizeOptions, StrategiesReadBackByName) {
  for (Strategy s : {Strategy::Hybrid, Strategy::AllReduce, Strategy::ParameterServer}) {
    auto parsed = parseStrategy(strategyName(s));
    ASSERT_TRUE(bool(parsed));
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_EQ(errorOf(parseStrategy("x").takeError()),
            "option --strategy: expected hybrid, allreduce or ps, got 'x'");
}

TEST(ParallelizeOptions, ErrorsNameTheOptionAndTheText) {
  auto expectError = [](std::initializer_list<std::pair<const char *, const char *>> values,
                        auto parse, const std::string &message) {
    PassOptions options;
    for (auto [key, value] : values)
      options.set(key, value);
    auto parsed = parse(options);
    EXPECT_EQ(errorOf(parsed ? llvm::Error::success() : parsed.takeError()), message);
  };
  expectError({{"strategy", "gossip"}}, PlaceVariablesOptions::fromPassOptions,
              "option --strategy: expected hybrid, allreduce or ps, got 'gossip'");
  expectError({{"ps", "two"}}, PlaceVariablesOptions::fromPassOptions,
              "option --ps: expected an integer, got 'two'");
  expectError({{"ps", "-1"}}, PlaceVariablesOptions::fromPassOptions,
              "option --ps: expected 0 or more parameter-server tasks, got '-1'");
  expectError({{"partitions", "-2"}}, PlaceVariablesOptions::fromPassOptions,
              "option --partitions: expected 0 (automatic) or more, got '-2'");
  expectError({{"partition-threshold-mb", "0"}}, PlaceVariablesOptions::fromPassOptions,
              "option --partition-threshold-mb: expected a positive number, got '0'");
  expectError({{"bucket-mb", "-1"}}, RouteGradientsOptions::fromPassOptions,
              "option --bucket-mb: expected a positive size in MiB, got '-1'");
  expectError({{"workers", "0"}}, ReplicateOptions::fromPassOptions,
              "option --workers: expected at least 1 worker, got '0'");
  expectError({{"devices", "2000"}}, ReplicateOptions::fromPassOptions,
              "option --devices: expected 1 to 1024 towers, got '2000'");
}

TEST(ParallelizeOptions, AddToWritesWhatFromPassOptionsReads) {
  PlaceVariablesOptions place;
  place.strategy = Strategy::ParameterServer;
  place.psTasks = 3;
  place.partitions = 2;
  place.partitionThresholdMb = 0.03;
  RouteGradientsOptions route;
  route.bucketMb = 0.002;
  ReplicateOptions replicate;
  replicate.workers = 4;
  replicate.devices = 2;
  PassOptions options;
  place.addTo(options);
  route.addTo(options);
  replicate.addTo(options);
  EXPECT_EQ(options.get("strategy"), "ps");
  auto placeBack = PlaceVariablesOptions::fromPassOptions(options);
  auto routeBack = RouteGradientsOptions::fromPassOptions(options);
  auto replicateBack = ReplicateOptions::fromPassOptions(options);
  ASSERT_TRUE(placeBack && routeBack && replicateBack);
  EXPECT_EQ(placeBack->strategy, place.strategy);
  EXPECT_EQ(placeBack->psTasks, 3);
  EXPECT_EQ(placeBack->partitions, 2);
  EXPECT_EQ(placeBack->partitionThresholdMb, 0.03);
  EXPECT_EQ(routeBack->bucketMb, 0.002);
  EXPECT_EQ(replicateBack->workers, 4);
  EXPECT_EQ(replicateBack->devices, 2);
}

} // namespace
