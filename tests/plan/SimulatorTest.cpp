// The step simulator on hand-made plans and a synthetic profile: every expected time below is
// worked out by hand from the profile's figures.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontends/text/Parser.h"
#include "plan/CostProfile.h"
#include "plan/Simulator.h"
#include "llvm/Support/FileSystem.h"

namespace prism::plan {
namespace {

constexpr double kMs = 1e-3;

// Kernels cost their latency only: matmul 2 ms, anything else 1 ms. An all-reduce costs 1 ms
// plus 1 ms per 32 bytes a rank sends; a PS call 1 ms plus 1 ms per 32 bytes; an update 0.5 ms
// plus 0.5 ms per 32 bytes.
CostProfile syntheticProfile() {
  CostProfile p;
  p.host = "test";
  p.threads = 1;
  p.defaultKernel = {1 * kMs, 0, 0};
  p.kernels["matmul"] = {2 * kMs, 0, 0};
  p.allReduce = {1 * kMs, 1 * kMs / 32};
  p.ps = {1 * kMs, 32 / kMs, 0.5 * kMs, 0.5 * kMs / 32};
  return p;
}

// `workers` workers (and `servers` parameter servers on the first host), one host per worker;
// hosts are on loopback unless `bitsPerSecond` is given.
Plan makePlan(int workers, int servers, uint64_t bitsPerSecond = 0) {
  Plan plan;
  plan.mutable_run()->set_global_batch(8 * workers);
  for (int h = 0; h < workers; ++h) {
    Host *host = plan.mutable_cluster()->add_hosts();
    host->set_name("h" + std::to_string(h));
    host->set_address(bitsPerSecond ? "10.0.0." + std::to_string(h + 1) : "127.0.0.1");
    host->set_bandwidth_bits_per_sec(bitsPerSecond);
  }
  auto addTask = [&](const std::string &role, int index, int host) {
    Task *t = plan.mutable_cluster()->add_tasks();
    t->set_name(role + ":" + std::to_string(index));
    t->set_role(role);
    t->set_index(index);
    t->set_host(host);
  };
  for (int w = 0; w < workers; ++w)
    addTask("worker", w, w);
  for (int s = 0; s < servers; ++s)
    addTask("ps", s, 0);
  Variable *w = plan.add_variables();
  w->set_name("w");
  w->set_dtype("f32");
  w->add_shape(4);
  w->add_shape(2);
  w->set_bytes(32);
  w->set_trainable(true);
  w->set_placement(servers ? "ps" : "allreduce");
  if (servers) {
    Shard *s = w->add_shards();
    s->set_task("ps:0");
    s->set_row_end(4);
  } else {
    CollectiveGroup *g = plan.add_groups();
    g->set_name("workers");
    Bucket *b = g->add_buckets();
    b->set_id(0);
    b->add_values("d.w.mean");
    b->add_variables("w");
    b->set_bytes(32);
  }
  return plan;
}

// Adds a host after the workers' (hN on 10.0.0.N+1 for N hosts before it) and moves the
// parameter servers to it.
void moveServersToAHostOfTheirOwn(Plan &plan, uint64_t bitsPerSecond) {
  const int index = plan.cluster().hosts_size();
  Host *server = plan.mutable_cluster()->add_hosts();
  server->set_name("h" + std::to_string(index));
  server->set_address("10.0.0." + std::to_string(index + 1));
  server->set_bandwidth_bits_per_sec(bitsPerSecond);
  for (Task &t : *plan.mutable_cluster()->mutable_tasks())
    if (t.role() == "ps")
      t.set_host(index);
}

std::unique_ptr<ir::Module> program(const std::string &ops) {
  const std::string text = "model t {\n"
                           "  input x : f32[B, 4]\n"
                           "  input y : i32[B]\n"
                           "  var w : f32[4, 2] = zeros\n" +
                           ops + "}\n";
  auto module = frontends::parseModule(text, "<test>");
  EXPECT_TRUE(static_cast<bool>(module)) << llvm::toString(module.takeError());
  return std::move(*module);
}

Prediction simulate(const Plan &plan, const ir::Module &worker) {
  auto p = simulateStep(plan, worker, syntheticProfile());
  EXPECT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
  return std::move(*p);
}

// The step of `plan` on the synthetic profile measured on a machine of `cores` cores, its kernels
// on `threads` threads.
double stepOnCores(const Plan &plan, const ir::Module &worker, int cores, int threads = 1) {
  CostProfile profile = syntheticProfile();
  profile.threads = threads;
  profile.cores = cores;
  auto p = simulateStep(plan, worker, profile);
  EXPECT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
  return p ? p->stepSeconds : 0.0;
}

const TaskPrediction &task(const Prediction &p, const std::string &name) {
  for (const TaskPrediction &t : p.tasks)
    if (t.task == name)
      return t;
  ADD_FAILURE() << "no task " << name;
  return p.tasks.front();
}

TEST(Simulator, ComputeOnlyIsTheSumOfTheKernels) {
  auto worker = program("  %logits = matmul(x, w) : f32[B, 2]\n"
                        "  %loss = softmax_cross_entropy(%logits, y) : f32[]\n");
  Prediction p = simulate(makePlan(1, 0), *worker);
  // matmul 2 ms + softmax_cross_entropy 1 ms.
  EXPECT_NEAR(p.stepSeconds, 3 * kMs, 1e-12);
  EXPECT_NEAR(p.samplesPerSecond, 8 / (3 * kMs), 1e-6);
  EXPECT_NEAR(task(p, "worker:0").computeSeconds, 3 * kMs, 1e-12);
  EXPECT_NEAR(task(p, "worker:0").idleSeconds, 0, 1e-12);
}

// The trainer assembles a worker's batch before its first kernel: 8 examples of x f32[4] and
// y i32[] are 8 * (16 + 4) = 160 bytes, at 1 ms + 1 ms per 160 bytes, 2 ms. The kernels follow
// (3 ms); on a one-core machine shared by two workers the batch takes twice as long, as the
// kernels do.
TEST(Simulator, TheBatchIsAssembledBeforeTheFirstKernel) {
  auto worker = program("  %logits = matmul(x, w) : f32[B, 2]\n"
                        "  %loss = softmax_cross_entropy(%logits, y) : f32[]\n");
  CostProfile profile = syntheticProfile();
  profile.data = {1 * kMs, 1 * kMs / 160};
  SimulateOptions options;
  options.spans = true;
  auto p = simulateStep(makePlan(1, 0), *worker, profile, options);
  ASSERT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
  EXPECT_NEAR(p->stepSeconds, 5 * kMs, 1e-12);
  EXPECT_NEAR(task(*p, "worker:0").computeSeconds, 5 * kMs, 1e-12);
  int loads = 0;
  for (const SimulatedSpan &s : p->spans) {
    if (s.category == "data") {
      ++loads;
      EXPECT_EQ(s.track, "steps");
      EXPECT_EQ(s.name, "load batch");
      EXPECT_NEAR(s.begin, 0, 1e-12);
      EXPECT_NEAR(s.end, 2 * kMs, 1e-12);
    } else if (s.name == "matmul %logits") {
      EXPECT_NEAR(s.begin, 2 * kMs, 1e-12);
    }
  }
  EXPECT_EQ(loads, 1);
  Plan shared = makePlan(2, 0);
  shared.mutable_run()->set_global_batch(16); // 8 examples each
  profile.cores = 1;
  p = simulateStep(shared, *worker, profile);
  ASSERT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
  EXPECT_NEAR(task(*p, "worker:1").computeSeconds, 2 * (2 + 3) * kMs, 1e-12);
}

// Two workers of 2 threads on one 2-core machine (both hosts on 127.0.0.1, or hosts of two
// addresses that name one `machine`) need 4 threads: each runs its kernels at half the speed the
// profile measured alone, 6 ms instead of 3. With 4 cores, on machines of their own, or with
// cores unknown, they do not slow down.
TEST(Simulator, WorkersOnOneMachineShareItsCores) {
  auto worker = program("  %logits = matmul(x, w) : f32[B, 2]\n"
                        "  %loss = softmax_cross_entropy(%logits, y) : f32[]\n");
  auto step = [&](const Plan &plan, int cores) { return stepOnCores(plan, *worker, cores, 2); };
  EXPECT_NEAR(step(makePlan(2, 0), 2), 6 * kMs, 1e-12);
  EXPECT_NEAR(step(makePlan(2, 0), 4), 3 * kMs, 1e-12);
  EXPECT_NEAR(step(makePlan(2, 0, 1000000), 2), 3 * kMs, 1e-12); // 10.0.0.1 and 10.0.0.2
  Plan namespaces = makePlan(2, 0, 1000000); // 10.0.0.1 and 10.0.0.2 on one machine
  for (Host &host : *namespaces.mutable_cluster()->mutable_hosts())
    host.set_machine("box");
  EXPECT_NEAR(step(namespaces, 2), 6 * kMs, 1e-12);
  EXPECT_NEAR(step(makePlan(2, 0), 0), 3 * kMs, 1e-12);
  EXPECT_NEAR(step(makePlan(1, 0), 2), 3 * kMs, 1e-12);
}

// The median of the slowest of n draws lies at one draw's quantile 0.5^(1/n), the fastest's at
// 1 − 0.5^(1/n); the second of three at the median, by symmetry.
TEST(Simulator, OrderStatisticQuantiles) {
  EXPECT_NEAR(orderStatisticQuantile(1, 1), 0.5, 1e-12);
  EXPECT_NEAR(orderStatisticQuantile(2, 2), std::sqrt(0.5), 1e-12);
  EXPECT_NEAR(orderStatisticQuantile(4, 4), std::pow(0.5, 0.25), 1e-12);
  EXPECT_NEAR(orderStatisticQuantile(1, 4), 1 - std::pow(0.5, 0.25), 1e-12);
  EXPECT_NEAR(orderStatisticQuantile(2, 3), 0.5, 1e-12);
  EXPECT_NEAR(orderStatisticQuantile(1000, 1000), std::pow(0.5, 1e-3), 1e-9);
}

// A synchronous step waits for its slowest worker. With steps that vary as 1 + p (the ratio to
// the median step at probability p: 1 at p = 0, 2 at p = 1), two workers' step is one worker's
// at p = √½: the 3 ms of kernels take 3 × (1 + √½) ms; four workers' at p = ½^¼; under one
// backup worker of four, the third fastest of four's. One worker, asynchronous workers that
// all-reduce nothing, and a profile without the spread keep the median step.
TEST(Simulator, ASynchronousStepWaitsForItsSlowestWorker) {
  auto worker = program("  %logits = matmul(x, w) : f32[B, 2]\n"
                        "  %loss = softmax_cross_entropy(%logits, y) : f32[]\n");
  CostProfile profile = syntheticProfile();
  for (int i = 0; i < kStepSpreadPoints; ++i)
    profile.stepSpread.push_back(1 + static_cast<double>(i) / (kStepSpreadPoints - 1));
  EXPECT_NEAR(profile.stepRatioAt(0.5), 1.5, 1e-12);
  EXPECT_NEAR(profile.stepRatioAt(0.53), 1.53, 1e-12);
  auto step = [&](const Plan &plan, const CostProfile &profile) {
    auto p = simulateStep(plan, *worker, profile);
    EXPECT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
    return p ? p->stepSeconds : 0.0;
  };
  EXPECT_NEAR(step(makePlan(1, 0), profile), 3 * kMs, 1e-12);
  EXPECT_NEAR(step(makePlan(2, 0), profile), 3 * (1 + std::sqrt(0.5)) * kMs, 1e-9);
  EXPECT_NEAR(step(makePlan(4, 0), profile), 3 * (1 + std::pow(0.5, 0.25)) * kMs, 1e-9);
  Plan backup = makePlan(4, 1);
  backup.mutable_run()->set_backup_workers(1);
  EXPECT_NEAR(step(backup, profile), 3 * (1 + orderStatisticQuantile(3, 4)) * kMs, 1e-9);
  Plan async = makePlan(4, 1);
  async.mutable_run()->set_sync("async");
  EXPECT_NEAR(step(async, profile), 3 * kMs, 1e-12);
  EXPECT_NEAR(step(makePlan(4, 0), syntheticProfile()), 3 * kMs, 1e-12);
}

// matmul 0–2, matmul 2–4 (the gradient), its bucket 4–6 on the communication stream (1 ms + 32
// bytes at 1 ms per 32) while relu runs 4–5; the relu of the mean waits for the bucket: 6–7.
const char *kOverlapped =
    "  %logits = matmul(x, w) : f32[B, 2]\n"
    "  %d.w = matmul(x, %logits, transpose_a = true) : f32[4, 2]\n"
    "  %d.w.mean = all_reduce(%d.w, group = workers, bucket = 0) : f32[4, 2]\n"
    "  %h = relu(%logits) : f32[B, 2]\n"
    "  %u = relu(%d.w.mean) : f32[4, 2]\n";

// w pulled from its server, two matmuls, its gradient pushed.
const char *kPulledAndPushed = "  %w.pulled = ps_pull(w) : f32[4, 2]\n"
                               "  %logits = matmul(x, %w.pulled) : f32[B, 2]\n"
                               "  %d.w = matmul(x, %logits, transpose_a = true) : f32[4, 2]\n"
                               "  ps_push(w, %d.w)\n";

TEST(Simulator, AllReduceBucketOverlapsWithCompute) {
  auto worker = program(kOverlapped);
  Prediction p = simulate(makePlan(2, 0), *worker);
  EXPECT_NEAR(p.stepSeconds, 7 * kMs, 1e-12);
  const TaskPrediction &w = task(p, "worker:1");
  EXPECT_NEAR(w.computeSeconds, 6 * kMs, 1e-12);
  EXPECT_NEAR(w.communicationSeconds, 2 * kMs, 1e-12);
  EXPECT_NEAR(w.idleSeconds, 1 * kMs, 1e-12);
  // Two ranks: each sends the bucket's 32 bytes once, and receives as much.
  EXPECT_EQ(w.bytesSent, 32);
  EXPECT_EQ(w.bytesReceived, 32);
}

// A loopback ring whose sizes the profile timed (1.5 ms at 16 bytes a rank, 4.5 at 48) moves
// the bucket's 32 bytes at their rate: 3 ms there, 2 after the 1 ms latency, where the fit's
// 1 ms per 32 bytes said 1. The bucket takes 4–7, the relu of its mean 7–8.
TEST(Simulator, ALoopbackRingTakesTheRateOfTheTimedSizesAroundIt) {
  auto worker = program(kOverlapped);
  CostProfile profile = syntheticProfile();
  profile.allReduce.rings = {{16, 1.5 * kMs}, {48, 4.5 * kMs}};
  auto p = simulateStep(makePlan(2, 0), *worker, profile);
  ASSERT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
  EXPECT_NEAR(p->stepSeconds, 8 * kMs, 1e-12);
  EXPECT_NEAR(task(*p, "worker:1").communicationSeconds, 3 * kMs, 1e-12);
}

// A bucket's calls and passes, as the runtime reduces it (ir::reducedInPlace): on two workers
// one call, its 1 MiB tensor reduced where it lies (the weighted ring weights it as it goes: no
// pass), its two 32-byte tensors gathered and copied back (two passes over 64 bytes). With 1 ms a
// call per hop, nothing per byte on the ring and 1 ms per MiB a pass, that is 1 ms + 128 /
// 1,048,576 ms. The large tensor alone: a call, 1 ms. On three workers (2 MiB a tensor for two
// hops) the whole bucket is gathered: a call over two hops and two passes over 1,048,640 bytes;
// compressed, too, on two.
TEST(Simulator, ABucketsLargeTensorsAreReducedWhereTheyLie) {
  auto worker = program("  var big : f32[262144] = zeros\n"
                        "  var s : f32[8] = zeros\n"
                        "  %big.mean, %w.mean, %s.mean = all_reduce(big, w, s, group = workers, "
                        "bucket = 0) : f32[262144], f32[4, 2], f32[8]\n");
  auto alone =
      program("  var big : f32[262144] = zeros\n"
              "  %big.mean = all_reduce(big, group = workers, bucket = 0) : f32[262144]\n");
  CostProfile profile = syntheticProfile();
  profile.allReduce = {1 * kMs, 0, 1 * kMs / (1 << 20)};
  auto step = [&](const Plan &plan, const ir::Module &program) {
    auto p = simulateStep(plan, program, profile);
    EXPECT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
    return p ? p->stepSeconds : 0.0;
  };
  Plan plan = makePlan(2, 0);
  EXPECT_NEAR(step(plan, *worker), (1 + 128.0 / 1048576) * kMs, 1e-12);
  EXPECT_NEAR(step(plan, *alone), 1 * kMs, 1e-12);
  EXPECT_NEAR(step(makePlan(3, 0), *worker), (2 + 2 * 1048640.0 / 1048576) * kMs, 1e-12);
  plan.mutable_run()->set_compress("bf16");
  EXPECT_NEAR(step(plan, *worker), (1 + 2 * 1048640.0 / 1048576) * kMs, 1e-12);
  // One worker holding the whole batch makes no call.
  EXPECT_NEAR(step(makePlan(1, 0), *worker), 0, 1e-12);
}

// A pass over a gathered bucket that fits the core's cache with its buffer (warm_staging_bytes)
// costs the warm rate, the bytes beyond it the cold one. The bucket gathers w and s (64 bytes):
// two passes over 64 bytes after a 1 ms call, nothing per byte on the ring. Cold 1 ms per 16
// bytes, warm 1 ms per 48: with 48 warm bytes a pass is 1 + 1 ms (step 1 + 2 × 2 = 5 ms); with 64
// or more, 64/48 ms (1 + 2 × 4/3 ms); not measured (0), 4 ms (1 + 2 × 4 ms).
TEST(Simulator, APassOverASmallBucketFindsItInTheCache) {
  auto worker = program("  var s : f32[8] = zeros\n"
                        "  %w.mean, %s.mean = all_reduce(w, s, group = workers, bucket = 0) : "
                        "f32[4, 2], f32[8]\n");
  auto step = [&](double warmBytes, double warmSecondsPerByte) {
    CostProfile profile = syntheticProfile();
    profile.allReduce = {1 * kMs, 0, 1 * kMs / 16};
    profile.allReduce.warmStagingBytes = warmBytes;
    profile.allReduce.warmStagingSecondsPerByte = warmSecondsPerByte;
    auto p = simulateStep(makePlan(2, 0), *worker, profile);
    EXPECT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
    return p ? p->stepSeconds : 0.0;
  };
  EXPECT_NEAR(step(48, 1 * kMs / 48), 5 * kMs, 1e-12);
  EXPECT_NEAR(step(1024, 1 * kMs / 48), (1 + 2 * 64.0 / 48) * kMs, 1e-12);
  EXPECT_NEAR(step(1024, 0), 9 * kMs, 1e-12);
}

// Where the workers' kernels take every core of their machine, a ring on loopback takes its
// worker's core from the kernels that follow it for its CPU work (the bytes through the kernel,
// the passes), not for its latency. Two workers, a thread each: the matmuls run 0-2 and 2-4, the
// bucket 4-6 (1 ms a call, 32 bytes at 1 ms per 32: 1 ms of CPU work). With 4 cores relu(%logits)
// and %h2 run 4-5 and 5-6 beside the ring, the relu of the mean 6-7: 7 ms. On 2 cores they start
// after the ring's 1 ms of work, 5-6 and 6-7, and the relu of the mean 7-8. Over a link between
// hosts on one machine (the ring's bytes on the wire) they run beside it again.
TEST(Simulator, ALoopbackRingTakesACoreWhereTheKernelsFillThemAll) {
  auto worker = program("  %logits = matmul(x, w) : f32[B, 2]\n"
                        "  %d.w = matmul(x, %logits, transpose_a = true) : f32[4, 2]\n"
                        "  %d.w.mean = all_reduce(%d.w, group = workers, bucket = 0) : f32[4, 2]\n"
                        "  %h = relu(%logits) : f32[B, 2]\n"
                        "  %h2 = relu(%h) : f32[B, 2]\n"
                        "  %u = relu(%d.w.mean) : f32[4, 2]\n");
  EXPECT_NEAR(stepOnCores(makePlan(2, 0), *worker, 4), 7 * kMs, 1e-12);
  EXPECT_NEAR(stepOnCores(makePlan(2, 0), *worker, 2), 8 * kMs, 1e-12);
  // 256 bit/s: the ring's 32 bytes take 1 s on the wire, the kernels beside them.
  EXPECT_NEAR(stepOnCores(makePlan(2, 0, 256), *worker, 2), (4 + 1 + 1000 + 1) * kMs, 1e-9);
}

// A slower link: hosts at 128 kbit/s (16,000 bytes/s) carry the ring's 32 bytes in 2 ms, so the
// bucket takes 1 + 2 ms (4–7) and the relu of the mean runs 7–8.
TEST(Simulator, ASlowerLinkDelaysTheBucket) {
  auto worker = program(kOverlapped);
  Prediction p = simulate(makePlan(2, 0, 128000), *worker);
  EXPECT_NEAR(p.stepSeconds, 8 * kMs, 1e-12);
  ASSERT_EQ(p.links.size(), 2u);
  EXPECT_EQ(p.links[0].bytesOut, 32);
  EXPECT_EQ(p.links[0].bytesIn, 32);
  EXPECT_NEAR(p.links[0].busySeconds, 4 * kMs, 1e-12); // 2 ms out and 2 ms in
}

// Links whose ring the profile measured (`prism calibrate --cluster`) move bytes at the measured
// rate and the ring pays the measured latency. The 128 kbit/s links measured at 8 bytes per ms
// with a 3 ms latency on two ranks: the ring's 32 bytes take 4 ms after 3, the bucket 4–11, the
// relu of the mean 11–12; each direction of a link is busy 4 ms. Measured on four ranks, the
// 3 ms are three hop pairs' (1 ms each): the bucket takes 1 + 4 ms, the step 10. A measurement
// of other links (1 Gbit) leaves these at their bandwidth: 8 ms as above. A measured rate above
// the wire's is held to the wire's.
TEST(Simulator, MeasuredLinksTakeTheMeasuredRateAndLatency) {
  auto worker = program(kOverlapped);
  CostProfile profile = syntheticProfile();
  profile.links = {{128000, 2, 3 * kMs, 1 * kMs / 8}};
  auto run = [&](const Plan &plan, const ir::Module &program) {
    auto p = simulateStep(plan, program, profile);
    EXPECT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
    return p ? std::move(*p) : Prediction();
  };
  Prediction p = run(makePlan(2, 0, 128000), *worker);
  EXPECT_NEAR(p.stepSeconds, 12 * kMs, 1e-12);
  ASSERT_EQ(p.links.size(), 2u);
  EXPECT_NEAR(p.links[0].busySeconds, 8 * kMs, 1e-12);
  profile.links = {{128000, 4, 3 * kMs, 1 * kMs / 8}};
  EXPECT_NEAR(run(makePlan(2, 0, 128000), *worker).stepSeconds, 10 * kMs, 1e-12);
  profile.links = {{1000000000, 2, 3 * kMs, 1 * kMs / 8}};
  EXPECT_NEAR(run(makePlan(2, 0, 128000), *worker).stepSeconds, 8 * kMs, 1e-12);
  // Measured faster than the wire (32 bytes per ms), the bytes move at the wire's 16 per ms: the
  // ring's 32 bytes take 2 ms after the measured 3, the bucket 4–9, the step 10.
  profile.links = {{128000, 2, 3 * kMs, 1 * kMs / 32}};
  EXPECT_NEAR(run(makePlan(2, 0, 128000), *worker).stepSeconds, 10 * kMs, 1e-12);
  // Rings timed at sizes around the ring's 32 bytes a rank (5 ms at 16, 9 ms at 48): 7 ms there,
  // 4 after the 3 ms latency, 8 bytes per ms where the fit says the wire's 16: the step of the
  // first case, 12 ms.
  profile.links = {{128000, 2, 3 * kMs, 1 * kMs / 16, 0, {{16, 5 * kMs}, {48, 9 * kMs}}}};
  EXPECT_NEAR(run(makePlan(2, 0, 128000), *worker).stepSeconds, 12 * kMs, 1e-12);
  // Measured after the ranks' work too, the ring pays that latency (a step's rings follow its
  // kernels): 5 ms on two ranks, the bucket 4–13, the step 14; on four, 5/3 ms a hop pair.
  profile.links = {{128000, 2, 3 * kMs, 1 * kMs / 8, 5 * kMs}};
  EXPECT_NEAR(run(makePlan(2, 0, 128000), *worker).stepSeconds, 14 * kMs, 1e-12);
  profile.links = {{128000, 4, 3 * kMs, 1 * kMs / 8, 5 * kMs}};
  EXPECT_NEAR(run(makePlan(2, 0, 128000), *worker).stepSeconds, (9 + 5.0 / 3) * kMs, 1e-12);
  // A PS call over a measured link: the pull's 1 ms latency, then the 32 bytes back at 8 per ms
  // (0–5); the matmuls 5–9; the push's 1 ms and 32 bytes (9–14); the update (14–15). At the
  // links' 16 bytes per ms: 0–3, 3–7, 7–10, 10–11.
  auto pulled = program(kPulledAndPushed);
  Plan plan = makePlan(1, 1, 128000);
  moveServersToAHostOfTheirOwn(plan, 128000);
  profile.links = {{128000, 2, 3 * kMs, 1 * kMs / 8}};
  EXPECT_NEAR(run(plan, *pulled).stepSeconds, 15 * kMs, 1e-12);
  profile.links.clear();
  EXPECT_NEAR(run(plan, *pulled).stepSeconds, 11 * kMs, 1e-12);
}

// `hosts` hosts (10.0.0.1, ...) of `gpus` GPU workers each, links at `bitsPerSecond`, the
// bucket of makePlan's all-reduce plan.
Plan makeGpuPlan(int hosts, int gpus, uint64_t bitsPerSecond) {
  Plan plan = makePlan(hosts, 0, bitsPerSecond);
  plan.mutable_run()->set_global_batch(8 * hosts * gpus);
  plan.mutable_cluster()->clear_tasks();
  for (int w = 0; w < hosts * gpus; ++w) {
    Task *t = plan.mutable_cluster()->add_tasks();
    t->set_name("worker:" + std::to_string(w));
    t->set_role("worker");
    t->set_index(w);
    t->set_host(w / gpus);
    t->add_devices("gpu:" + std::to_string(w % gpus));
  }
  return plan;
}

// A GPU of 0.5 ms kernels and NVLink at 64 bytes per ms, hosts' links at 8 bytes per ms.
CostProfile gpuProfile() {
  CostProfile p = syntheticProfile();
  p.gpu.name = "test gpu";
  p.gpu.defaultKernel = {0.5 * kMs, 0, 0};
  p.gpu.nvlinkBytesPerSecond = 64 / kMs;
  return p;
}

Prediction simulateGpu(const Plan &plan, const ir::Module &worker, int cores = 0) {
  CostProfile profile = gpuProfile();
  profile.cores = cores;
  auto p = simulateStep(plan, worker, profile);
  EXPECT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
  return std::move(*p);
}

// GPU workers run their kernels at the GPU's figures (matmul 0–0.5 ms, softmax_cross_entropy
// 0.5–1, not 2 and 1 ms), and two of them on one single-core host do not share its core.
TEST(Simulator, GpuWorkersUseTheGpuKernels) {
  auto worker = program("  %logits = matmul(x, w) : f32[B, 2]\n"
                        "  %loss = softmax_cross_entropy(%logits, y) : f32[]\n");
  Prediction p = simulateGpu(makeGpuPlan(1, 2, 0), *worker, /*cores=*/1);
  EXPECT_NEAR(p.stepSeconds, 1 * kMs, 1e-12);
  EXPECT_NEAR(task(p, "worker:1").computeSeconds, 1 * kMs, 1e-12);
}

// 2 hosts × 2 GPUs: the ring worker:0 → 1 (NVLink) → 2 (link) → 3 (NVLink) → 0 (link). Each rank
// sends 2(4−1)/4 × 32 = 48 bytes: 6 ms at the links' 8 bytes per ms (the slowest hop), after a
// latency of 3 steps' pairs (1 ms × (4−1)). The bucket starts at 1 ms (two 0.5 ms matmuls) and
// ends at 10; the relu of the mean runs 10–10.5. On one host of 4 GPUs every hop is NVLink: 48
// bytes at 64 per ms, 0.75 ms, so the bucket ends at 4.75 and the step at 5.25.
TEST(Simulator, RingHopsOnOneHostUseNvlinkAndBetweenHostsTheLink) {
  auto worker = program(kOverlapped);
  Prediction two = simulateGpu(makeGpuPlan(2, 2, 64000), *worker);
  EXPECT_NEAR(two.stepSeconds, 10.5 * kMs, 1e-12);
  EXPECT_NEAR(task(two, "worker:3").communicationSeconds, 9 * kMs, 1e-12);
  EXPECT_EQ(task(two, "worker:3").bytesSent, 48);
  ASSERT_EQ(two.links.size(), 2u);
  EXPECT_EQ(two.links[0].bytesOut, 48); // worker:1 → worker:2 leaves h0
  EXPECT_EQ(two.links[0].bytesIn, 48);  // worker:3 → worker:0 arrives
  EXPECT_NEAR(two.links[0].busySeconds, 12 * kMs, 1e-12);
  Prediction one = simulateGpu(makeGpuPlan(1, 4, 64000), *worker);
  EXPECT_NEAR(one.stepSeconds, 5.25 * kMs, 1e-12);
  EXPECT_NEAR(one.links[0].busySeconds, 0, 1e-12);
}

// Four CPU workers on loopback: the ring's latency is 3 × 1 ms, its 48 bytes take 1.5 ms at the
// profile's 32 bytes per ms: the bucket runs 4–8.5 after the two 2 ms matmuls, the relu 8.5–9.5.
TEST(Simulator, RingLatencyGrowsWithTheRanks) {
  auto worker = program(kOverlapped);
  Prediction p = simulate(makePlan(4, 0), *worker);
  EXPECT_NEAR(p.stepSeconds, 9.5 * kMs, 1e-12);
}

// Four single-threaded CPU workers on one machine of 2 cores: their kernels run at half speed
// (the matmuls 0–4 and 4–8), and so does their ring on loopback, timed with a core per rank:
// 2 × (3 × 1 ms + 1.5 ms) = 9 ms, 8–17; the relu of the mean 17–19. On 4 cores, as above: 9.5 ms.
TEST(Simulator, RanksSharingAMachinesCoresSlowTheRing) {
  auto worker = program(kOverlapped);
  EXPECT_NEAR(stepOnCores(makePlan(4, 0), *worker, 2), 19 * kMs, 1e-12);
  EXPECT_NEAR(stepOnCores(makePlan(4, 0), *worker, 4), 9.5 * kMs, 1e-12);
}

// A call's latency after the ranks' work (wake_latency, 2 ms here) where the machine has cores to
// spare: four workers on 4 cores pay it, 3 × 2 ms + 1.5 ms = 7.5 ms of ring (the 9.5 ms step
// above, with the 1 ms latency, becomes 12.5); on 2 cores, none idle, the back-to-back 1 ms,
// shared: 19 ms as above.
TEST(Simulator, RanksWithCoresToSparePayTheWakeLatency) {
  auto worker = program(kOverlapped);
  auto step = [&](int cores) {
    CostProfile profile = syntheticProfile();
    profile.cores = cores;
    profile.allReduce.wakeLatency = 2 * kMs;
    auto p = simulateStep(makePlan(4, 0), *worker, profile);
    EXPECT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
    return p ? p->stepSeconds : 0.0;
  };
  EXPECT_NEAR(step(4), 12.5 * kMs, 1e-12);
  EXPECT_NEAR(step(2), 19 * kMs, 1e-12);
}

// A link's direction takes a transfer in its first free time, not behind the ones placed before
// it in replay order. Workers 0 and 1 share one single-core machine (hosts h0 and h1 on
// 10.0.0.1) and run at half speed; worker 2 (10.0.0.3) alone; the server on h3. Links at 32
// bytes per ms. relu ends at 2 ms for workers 0 and 1, at 1 for worker 2; each pull's answer
// (32 bytes, 1 ms on the wire) leaves the server's host after the 1 ms call latency: worker 0's
// at 3–4, worker 1's behind it at 4–5, and worker 2's, replayed last but offered at 2, in the
// gap before them, 2–3: its pull takes 2 ms, not 5.
TEST(Simulator, LinksTakeTransfersInTheirFirstFreeTime) {
  auto worker = program("  %h = relu(x) : f32[B, 4]\n"
                        "  %w.pulled = ps_pull(w) : f32[4, 2]\n"
                        "  %logits = matmul(%h, %w.pulled) : f32[B, 2]\n");
  Plan plan = makePlan(3, 1, 256000);
  plan.mutable_cluster()->mutable_hosts(1)->set_address("10.0.0.1");
  moveServersToAHostOfTheirOwn(plan, 256000);
  CostProfile profile = syntheticProfile();
  profile.cores = 1;
  auto p = simulateStep(plan, *worker, profile);
  ASSERT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
  EXPECT_NEAR(task(*p, "worker:0").communicationSeconds, 2 * kMs, 1e-12);
  EXPECT_NEAR(task(*p, "worker:1").communicationSeconds, 3 * kMs, 1e-12);
  EXPECT_NEAR(task(*p, "worker:2").communicationSeconds, 2 * kMs, 1e-12);
  // Worker 1's matmul, 4 ms at half speed, runs 5–9.
  EXPECT_NEAR(p->stepSeconds, 9 * kMs, 1e-12);
}

// The pull: 1 ms latency, no bytes out, 32 bytes back in 1 ms (0–2); matmuls 2–4 and 4–6; the
// push at the end: 1 ms + 32 bytes in 1 ms (6–8); the server's update 0.5 + 0.5 ms (8–9).
TEST(Simulator, PsPullAndPushAreCallsAndTheUpdateFollows) {
  auto worker = program(kPulledAndPushed);
  Prediction p = simulate(makePlan(1, 1), *worker);
  EXPECT_NEAR(p.stepSeconds, 9 * kMs, 1e-12);
  const TaskPrediction &w = task(p, "worker:0");
  EXPECT_NEAR(w.computeSeconds, 4 * kMs, 1e-12);
  EXPECT_NEAR(w.communicationSeconds, 4 * kMs, 1e-12);
  EXPECT_EQ(w.bytesSent, 32);
  EXPECT_EQ(w.bytesReceived, 32);
  const TaskPrediction &server = task(p, "ps:0");
  EXPECT_NEAR(server.computeSeconds, 1 * kMs, 1e-12);
  EXPECT_EQ(server.bytesReceived, 32);
}

// Two workers and their server on three hosts (10.0.0.1–3) over 1 Gbit links (32 bytes in
// 0.256 µs). A pull's CPU work, half the 1 ms latency at the worker and half at the server, runs
// on a core of its side's machine. On one machine of one core ("box") the two pulls take it in
// turn: worker 0's 0–1 ms, worker 1's 1–2. On machines of their own of a core each, only the
// server's halves queue: worker 1's ends at 1.5. With cores unknown both take 1 ms, worker 1's
// answer leaving h2 after worker 0's; and so on a machine of GPU workers, whose cores the
// profile (measured on a CPU machine) does not give.
TEST(Simulator, PsCallsShareTheCoresOfTheirMachine) {
  auto worker = program("  %w.pulled = ps_pull(w) : f32[4, 2]\n");
  auto pulls = [&](bool oneMachine, int cores, bool gpus = false) {
    Plan plan = makePlan(2, 1, 1000000000);
    moveServersToAHostOfTheirOwn(plan, 1000000000);
    for (Task &t : *plan.mutable_cluster()->mutable_tasks())
      if (gpus && t.role() == "worker")
        t.add_devices("gpu:0");
    if (oneMachine)
      for (Host &host : *plan.mutable_cluster()->mutable_hosts())
        host.set_machine("box");
    CostProfile profile = syntheticProfile();
    profile.cores = cores;
    auto p = simulateStep(plan, *worker, profile);
    EXPECT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
    return p ? std::make_pair(task(*p, "worker:0").communicationSeconds,
                              task(*p, "worker:1").communicationSeconds)
             : std::make_pair(0.0, 0.0);
  };
  constexpr double kWire = 32 * 8 / 1e9;
  auto [first, second] = pulls(true, 1);
  EXPECT_NEAR(first, 1 * kMs + kWire, 1e-12);
  EXPECT_NEAR(second, 2 * kMs + kWire, 1e-12);
  std::tie(first, second) = pulls(false, 1);
  EXPECT_NEAR(first, 1 * kMs + kWire, 1e-12);
  EXPECT_NEAR(second, 1.5 * kMs + kWire, 1e-12);
  for (auto [cores, gpus] : {std::make_pair(0, false), std::make_pair(1, true)}) {
    std::tie(first, second) = pulls(true, cores, gpus);
    EXPECT_NEAR(first, 1 * kMs + kWire, 1e-12) << cores;
    EXPECT_NEAR(second, 1 * kMs + 2 * kWire, 1e-12) << cores;
  }
}

// The step pulls w (32 bytes) and v (16 bytes) whole in one call at its first pull, as the
// runtime does: 1 ms latency, 48 bytes in 1.5 ms (0–2.5); the matmuls 2.5–4.5 and 4.5–6.5, the
// second pull free. One call per variable would have made it 7.5 ms.
TEST(Simulator, AStepPullsItsWholeVariablesInOneCall) {
  auto worker = program("  var v : f32[2, 2] = zeros\n"
                        "  %w.pulled = ps_pull(w) : f32[4, 2]\n"
                        "  %logits = matmul(x, %w.pulled) : f32[B, 2]\n"
                        "  %v.pulled = ps_pull(v) : f32[2, 2]\n"
                        "  %out = matmul(%logits, %v.pulled) : f32[B, 2]\n");
  Plan plan = makePlan(1, 1);
  Variable *v = plan.add_variables();
  v->set_name("v");
  v->set_dtype("f32");
  v->add_shape(2);
  v->add_shape(2);
  v->set_bytes(16);
  v->set_trainable(true);
  v->set_placement("ps");
  Shard *shard = v->add_shards();
  shard->set_task("ps:0");
  shard->set_row_end(2);
  Prediction p = simulate(plan, *worker);
  EXPECT_NEAR(p.stepSeconds, 6.5 * kMs, 1e-12);
  const TaskPrediction &w = task(p, "worker:0");
  EXPECT_NEAR(w.communicationSeconds, 2.5 * kMs, 1e-12);
  EXPECT_EQ(w.bytesReceived, 48);
  int pulls = 0;
  for (const SimulatedSpan &span : p.spans)
    if (span.task == "worker:0" && span.category == "ps_pull") {
      ++pulls;
      EXPECT_EQ(span.name, "pull w, v");
    }
  EXPECT_EQ(pulls, 1);
}

// The server's update program costs its kernels besides the per-byte apply: apply_sgd over w,
// 1 ms (the profile's default kernel), after 0.5 + 0.5 ms: the update runs 8–10 (reading the
// combined gradient, `ps_gradient`, is the per-byte apply's).
TEST(Simulator, TheServersUpdateKernelsAddToItsApply) {
  auto worker = program(kPulledAndPushed);
  Plan plan = makePlan(1, 1);
  Program *update = plan.add_programs();
  update->set_name("ps:0");
  update->add_tasks("ps:0");
  update->set_ir("model t {\n"
                 "  var w : f32[4, 2] = zeros\n"
                 "  %d.w.ps = ps_gradient(w) : f32[4, 2]\n"
                 "  apply_sgd(w, %d.w.ps, lr = 0.1)\n"
                 "}\n");
  Prediction p = simulate(plan, *worker);
  EXPECT_NEAR(p.stepSeconds, 10 * kMs, 1e-12);
  EXPECT_NEAR(task(p, "ps:0").computeSeconds, 2 * kMs, 1e-12);

  update->set_ir("model t {\n  %x = relu(y) : f32[4]\n}\n"); // y is not defined
  auto broken = simulateStep(plan, *worker, syntheticProfile());
  ASSERT_FALSE(static_cast<bool>(broken));
  EXPECT_NE(llvm::toString(broken.takeError()).find("<plan program ps:0>:2:"), std::string::npos);
}

// Two workers on loopback pull from and push to one server, which moves one message at a time:
// the answers to the pulls (32 bytes, 1 ms) take 1–2 and 2–3, so worker 1's matmuls run 3–7;
// the pushes, sent at 6 and 7, arrive 7–8 and 8–9. The server combines them and updates once,
// 0.5 + 64 bytes at 0.5 ms per 32 = 1.5 ms (9–10.5).
TEST(Simulator, SynchronousServerUpdatesOnceForAllPushes) {
  auto worker = program(kPulledAndPushed);
  Prediction p = simulate(makePlan(2, 1), *worker);
  EXPECT_NEAR(p.stepSeconds, 10.5 * kMs, 1e-12);
  EXPECT_NEAR(task(p, "worker:0").communicationSeconds, 4 * kMs, 1e-12);
  EXPECT_NEAR(task(p, "worker:1").communicationSeconds, 5 * kMs, 1e-12);
  EXPECT_NEAR(task(p, "ps:0").computeSeconds, 1.5 * kMs, 1e-12);
}

// The same with the server moving half of each message one at a time (ps.serial_share 0.5): the
// pulls' answers (1 ms each) hold the server 1–1.5 and 1.5–2 and end at 2 and 2.5, so worker 1's
// matmuls run 2.5–6.5; the pushes, sent at 6 and 6.5, hold it 6.5–7 and 7–7.5 and arrive at 8 and
// 8.5 (the server's 0.5 ms included); the update 8.5–10. With no share (0), both pulls end at 2,
// both pushes arrive at 8, and the update ends at 9.5.
TEST(Simulator, ServerMovesItsSerialShareOfAMessageOneAtATime) {
  auto worker = program(kPulledAndPushed);
  CostProfile profile = syntheticProfile();
  profile.ps.serialShare = 0.5;
  auto p = simulateStep(makePlan(2, 1), *worker, profile);
  ASSERT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
  EXPECT_NEAR(p->stepSeconds, 10 * kMs, 1e-12);
  EXPECT_NEAR(task(*p, "worker:0").communicationSeconds, 4 * kMs, 1e-12);
  EXPECT_NEAR(task(*p, "worker:1").communicationSeconds, 4.5 * kMs, 1e-12);
  profile.ps.serialShare = 0;
  p = simulateStep(makePlan(2, 1), *worker, profile);
  ASSERT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
  EXPECT_NEAR(p->stepSeconds, 9.5 * kMs, 1e-12);
  EXPECT_NEAR(task(*p, "worker:1").communicationSeconds, 4 * kMs, 1e-12);
}

// A worker that pulls rows of w (its table) and pushes their gradient.
constexpr const char *kRowsPulledAndPushed =
    "  %rows = ps_pull_rows(w, y) : f32[B, 2]\n"
    "  %g.w = gather_grad(%rows, y, num_rows = 4) : sparse f32[4, 2]\n"
    "  ps_push_rows(w, %g.w)\n";

// `plan` with an estimate of `rows` of w a step.
Plan withRowsPerStep(Plan plan, double rows) {
  TableEstimate *table = plan.mutable_estimate()->add_tables();
  table->set_variable("w");
  table->set_rows_per_step(rows);
  return plan;
}

// A row pull and a row push move the plan's estimated rows, 3 of w's (8 bytes each, their
// indices 8): the pull 0.5 ms at the worker, 24 B of indices (0.75 ms), 0.5 ms at the server,
// 24 B of rows (0.75 ms): 2.5 ms; gather_grad 1 ms; the push 0.5 + 48 B (1.5 ms) + 0.5: 2.5 ms.
// At 1 ms a row (ps.seconds_per_row), half on each side, each call takes 3 ms more.
TEST(Simulator, RowCallsCostTheirRows) {
  auto worker = program(kRowsPulledAndPushed);
  Plan plan = withRowsPerStep(makePlan(1, 1), 3);
  auto communication = [&](double secondsPerRow) {
    CostProfile profile = syntheticProfile();
    profile.ps.secondsPerRow = secondsPerRow;
    auto p = simulateStep(plan, *worker, profile);
    EXPECT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
    return p ? task(*p, "worker:0").communicationSeconds : 0.0;
  };
  EXPECT_NEAR(communication(0), 5 * kMs, 1e-12);
  EXPECT_NEAR(communication(1 * kMs), 11 * kMs, 1e-12);
}

// A row push coalesces its gradient's rows on the compute thread before the step's push: the
// gather_grad's 8 indices (the local batch) of rows of 2 floats are 64 bytes in, at 1 ms + 1 ms
// per 32 bytes 3 ms, which the worker's compute and the step both take on top.
TEST(Simulator, RowPushCoalescesItsRowsOnTheComputeThread) {
  auto worker = program(kRowsPulledAndPushed);
  Plan plan = withRowsPerStep(makePlan(1, 1), 3);
  CostProfile profile = syntheticProfile();
  auto before = simulateStep(plan, *worker, profile);
  ASSERT_TRUE(static_cast<bool>(before)) << llvm::toString(before.takeError());
  profile.ps.coalesceLatency = 1 * kMs;
  profile.ps.coalesceSecondsPerByte = 1 * kMs / 32;
  auto after = simulateStep(plan, *worker, profile);
  ASSERT_TRUE(static_cast<bool>(after)) << llvm::toString(after.takeError());
  EXPECT_NEAR(after->stepSeconds - before->stepSeconds, 3 * kMs, 1e-12);
  EXPECT_NEAR(task(*after, "worker:0").computeSeconds - task(*before, "worker:0").computeSeconds,
              3 * kMs, 1e-12);
}

// A row pull asks for the local batch's 8 ids, 3 distinct rows by the estimate: the 5 ids asked
// again cost 1 ms each (ps.seconds_per_repeated_row) on the worker, 5 ms more in the call.
TEST(Simulator, RowPullPaysForTheIdsItAsksForAgain) {
  auto worker = program(kRowsPulledAndPushed);
  Plan plan = withRowsPerStep(makePlan(1, 1), 3);
  CostProfile profile = syntheticProfile();
  auto before = simulateStep(plan, *worker, profile);
  ASSERT_TRUE(static_cast<bool>(before)) << llvm::toString(before.takeError());
  profile.ps.secondsPerRepeatedRow = 1 * kMs;
  auto after = simulateStep(plan, *worker, profile);
  ASSERT_TRUE(static_cast<bool>(after)) << llvm::toString(after.takeError());
  EXPECT_NEAR(task(*after, "worker:0").communicationSeconds -
                  task(*before, "worker:0").communicationSeconds,
              5 * kMs, 1e-12);
  EXPECT_NEAR(after->stepSeconds - before->stepSeconds, 5 * kMs, 1e-12);
}

// Two servers hold w's rows 0..2 and 2..4, and answer in parallel. With the rows a step reads
// spread as the table's are, each serves 1.5 of the 3: a pull 0.5 ms at the worker, 12 B of
// indices (0.375 ms), 0.5 at the server, 12 B of rows (0.375): 1.75 ms; the push 0.5 + 24 B
// (0.75) + 0.5: 1.75 ms. With the plan's row shares putting all of them in the first half of the
// table (sampled ids crowd the first rows), ps:0 serves all 3 as the one server above did
// (2.5 ms each way), and ps:1's empty calls (1 ms) finish first.
TEST(Simulator, RowCallsFollowTheRowSharesOfTheEstimate) {
  auto worker = program(kRowsPulledAndPushed);
  Plan plan = withRowsPerStep(makePlan(1, 2), 3);
  Variable &w = *plan.mutable_variables(0);
  w.mutable_shards(0)->set_row_end(2);
  Shard *second = w.add_shards();
  second->set_task("ps:1");
  second->set_row_begin(2);
  second->set_row_end(4);
  EXPECT_NEAR(task(simulate(plan, *worker), "worker:0").communicationSeconds, 3.5 * kMs, 1e-12);
  TableEstimate &table = *plan.mutable_estimate()->mutable_tables(0);
  for (double share : {1.0, 0.0, 0.0, 0.0}) // four ranges of w's rows
    table.add_row_shares(share);
  EXPECT_NEAR(task(simulate(plan, *worker), "worker:0").communicationSeconds, 5 * kMs, 1e-12);

  // Shares that are no fractions of the rows are an error naming the table and the share.
  table.set_row_shares(1, -0.5);
  auto negative = simulateStep(plan, *worker, syntheticProfile());
  ASSERT_FALSE(static_cast<bool>(negative));
  EXPECT_EQ(llvm::toString(negative.takeError()),
            "error: estimate.tables (w): row_shares[1] is -0.5, not a fraction");
  table.set_row_shares(1, 0.5);
  auto over = simulateStep(plan, *worker, syntheticProfile());
  ASSERT_FALSE(static_cast<bool>(over));
  EXPECT_EQ(llvm::toString(over.takeError()),
            "error: estimate.tables (w): row_shares sum to 1.5, not 1");
}

// The server's update of pushed rows is the per-byte apply's, which `prism calibrate` times with
// SGD (reading the gradient, reading and writing the variable: 3 bytes per pushed byte). The push
// of 3 rows of w carries 48 bytes: under SGD the update takes 0.5 + 48 B at 0.5 ms per 32 = 1.25
// ms; lazy Adam also reads and writes m and v (7 bytes per pushed byte), 0.5 + 0.75 × 7 / 3 =
// 2.25 ms. A dense update's kernels stay the profile's (TheServersUpdateKernelsAddToItsApply).
TEST(Simulator, RowUpdatesThatWriteStateSlotsReadMoreOfTheServer) {
  auto worker = program(kRowsPulledAndPushed);
  Plan plan = withRowsPerStep(makePlan(1, 1), 3);
  Program *update = plan.add_programs();
  update->set_name("ps:0");
  update->add_tasks("ps:0");
  auto serverSeconds = [&](const std::string &ir) {
    update->set_ir("model t {\n"
                   "  var w : f32[4, 2] = zeros\n"
                   "  var w.m : f32[4, 2] = zeros\n"
                   "  var w.v : f32[4, 2] = zeros\n"
                   "  var t : f32[] = zeros\n"
                   "  %d.w.ps = ps_gradient_rows(w) : sparse f32[4, 2]\n" +
                   ir + "}\n");
    auto p = simulateStep(plan, *worker, syntheticProfile());
    EXPECT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
    return p ? task(*p, "ps:0").computeSeconds : 0.0;
  };
  EXPECT_NEAR(serverSeconds("  apply_sgd(w, %d.w.ps, lr = 0.1)\n"), 1.25 * kMs, 1e-12);
  EXPECT_NEAR(serverSeconds("  apply_adam(w, w.m, w.v, %d.w.ps, t, lr = 0.1)\n"), 2.25 * kMs,
              1e-12);
}

// A worker's update of a table from its sparse gradient touches the rows a step reads, not the
// whole table its cost rule counts: apply_adam at 672 bytes per 4 ms (the rule's bytes for w's
// sparse gradient at the worker's batch of 8: 32 bytes of values and 64 of indices, 7 times)
// takes 1 ms with the plan's estimate of 1 of w's 4 rows a step; without one, the gather's 8
// indices as uniform draws touch 4 (1 − (3/4)^8) rows of 4: 4 (1 − (3/4)^8) ms. The gather and
// gather_grad before it take 1 ms each.
TEST(Simulator, AWorkersRowUpdateCostsTheRowsAStepReads) {
  auto worker = program("  var w.m : f32[4, 2] = zeros\n"
                        "  var w.v : f32[4, 2] = zeros\n"
                        "  var t : f32[] = zeros\n"
                        "  %rows = gather(w, y) : f32[B, 2]\n"
                        "  %g.w = gather_grad(%rows, y, num_rows = 4) : sparse f32[4, 2]\n"
                        "  apply_adam(w, w.m, w.v, %g.w, t, lr = 0.1)\n");
  CostProfile profile = syntheticProfile();
  profile.kernels["apply_adam"] = {0, 0, 672 / (4 * kMs)};
  Plan plan = makePlan(1, 0);
  auto compute = [&] {
    auto p = simulateStep(plan, *worker, profile);
    EXPECT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
    return p ? task(*p, "worker:0").computeSeconds : 0.0;
  };
  EXPECT_NEAR(compute(), (2 + 4 * (1 - std::pow(0.75, 8))) * kMs, 1e-9);
  plan = withRowsPerStep(plan, 1);
  EXPECT_NEAR(compute(), 3 * kMs, 1e-9);
}

// An op's predicted span has the name its measured one has (ir::opSpanName), an update without
// results the variable it updates, so that a measured and a predicted step can be told op by op.
TEST(Simulator, OpSpansAreNamedAsMeasuredOnes) {
  auto worker = program("  var w.m : f32[4, 2] = zeros\n"
                        "  var w.v : f32[4, 2] = zeros\n"
                        "  var t : f32[] = zeros\n"
                        "  %rows = gather(w, y) : f32[B, 2]\n"
                        "  %g.w = gather_grad(%rows, y, num_rows = 4) : sparse f32[4, 2]\n"
                        "  apply_adam(w, w.m, w.v, %g.w, t, lr = 0.1)\n");
  Prediction p = simulate(makePlan(1, 0), *worker);
  std::vector<std::string> names;
  for (const SimulatedSpan &s : p.spans)
    if (s.track == "ops" && s.category == "op")
      names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"gather %rows", "gather_grad %g.w", "apply_adam w"}));
}

TEST(Simulator, SpansFollowTheMeasuredTracks) {
  auto worker = program(kOverlapped);
  Prediction p = simulate(makePlan(2, 0), *worker);
  int ops = 0, buckets = 0, steps = 0;
  for (const SimulatedSpan &s : p.spans) {
    ops += s.task == "worker:0" && s.track == "ops" && s.category == "op";
    if (s.category == "step") { // each worker's, the whole step
      ++steps;
      EXPECT_EQ(s.track, "steps");
      EXPECT_EQ(s.name, "step 0");
      EXPECT_NEAR(s.begin, 0, 1e-12);
      EXPECT_NEAR(s.end, p.stepSeconds, 1e-12);
    }
    if (s.track == "all-reduce") {
      ++buckets;
      EXPECT_NEAR(s.begin, 4 * kMs, 1e-12);
      EXPECT_NEAR(s.end, 6 * kMs, 1e-12);
    }
  }
  EXPECT_EQ(ops, 4);
  EXPECT_EQ(buckets, 2); // one per worker
  EXPECT_EQ(steps, 2);
}

// The executor's own work on a CPU worker: 0.5 ms a step after the batch (none here), 0.25 ms
// before each op: matmul (2 ms) from 0.75 to 2.75, relu (1 ms) from 3 to 4.
TEST(Simulator, TheExecutorsOwnWorkIsAStepsAndAnOpsLatency) {
  auto worker = program("  %logits = matmul(x, w) : f32[B, 2]\n"
                        "  %r = relu(%logits) : f32[B, 2]\n");
  CostProfile profile = syntheticProfile();
  profile.executor = {0.5 * kMs, 0.25 * kMs};
  SimulateOptions options;
  options.spans = true;
  auto p = simulateStep(makePlan(1, 0), *worker, profile, options);
  ASSERT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
  EXPECT_NEAR(p->stepSeconds, 4 * kMs, 1e-12);
  EXPECT_NEAR(task(*p, "worker:0").computeSeconds, 4 * kMs, 1e-12);
  int relus = 0;
  for (const SimulatedSpan &s : p->spans)
    if (s.name == "relu %r") {
      ++relus;
      EXPECT_NEAR(s.begin, 3 * kMs, 1e-12);
      EXPECT_NEAR(s.end, 4 * kMs, 1e-12);
    }
  EXPECT_EQ(relus, 1);
}

// What an op's time depends on: its name, types (B for the batch) and attributes but the
// floating-point ones and the device.
TEST(Simulator, OpSignaturesNameWhatAnOpsTimeDependsOn) {
  auto worker = program("  %logits = matmul(x, w) : f32[B, 2]\n"
                        "  %m = reduce_mean(%logits, axes = [1]) : f32[B]\n"
                        "  %g.w = constant(value = 0.5, shape = [4, 2]) : f32[4, 2]\n");
  auto op = worker->ops().begin();
  EXPECT_EQ(opSignature(**op), "matmul(f32[B, 4], f32[4, 2]) -> (f32[B, 2])");
  EXPECT_EQ(opSignature(**++op), "reduce_mean(f32[B, 2]) -> (f32[B]) {axes = [1]}");
  EXPECT_EQ(opSignature(**++op), "constant() -> (f32[4, 2]) {shape = [4, 2]}");
  (*op)->attrs.set(ir::kDeviceAttr, ir::Attr::string("cpu:1"));
  EXPECT_EQ(opSignature(**op), "constant() -> (f32[4, 2]) {shape = [4, 2]}");
}

// matmul timed at batches 4 (3 ms) and 16 (9 ms); its roofline b ms at batch b (16 flops an
// example at 16 flops a ms). At 4 and 16 the times, at 8 between them (5 ms), at 32 the time at
// 16 scaled by the roofline's 32 / 16 (18 ms); relu, not timed, its roofline (1 ms). A profile
// without the entry costs matmul by its roofline (8 ms at 8).
TEST(Simulator, OpsTimedAsTheyAreTakeThePlaceOfTheRoofline) {
  auto worker = program("  %logits = matmul(x, w) : f32[B, 2]\n"
                        "  %r = relu(%logits) : f32[B, 2]\n");
  CostProfile profile = syntheticProfile();
  profile.kernels["matmul"] = {0, 16 / kMs, 0};
  auto computeAt = [&](int64_t batch) {
    Plan plan = makePlan(1, 0);
    plan.mutable_run()->set_global_batch(batch);
    auto p = simulateStep(plan, *worker, profile);
    EXPECT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
    return p ? task(*p, "worker:0").computeSeconds : 0.0;
  };
  EXPECT_NEAR(computeAt(8), 9 * kMs, 1e-12);
  profile.ops[opSignature(*worker->ops().front())] = {{4, 3 * kMs}, {16, 9 * kMs}};
  EXPECT_NEAR(computeAt(4), 4 * kMs, 1e-12);
  EXPECT_NEAR(computeAt(8), 6 * kMs, 1e-12);
  EXPECT_NEAR(computeAt(16), 10 * kMs, 1e-12);
  EXPECT_NEAR(computeAt(32), 19 * kMs, 1e-12);
  EXPECT_NEAR(computeAt(2), 2.5 * kMs, 1e-12); // 3 ms × 2 / 4, and relu
}

TEST(CostProfile, RoundTripsThroughJson) {
  CostProfile p = syntheticProfile();
  auto read = parseProfile(profileToJson(p), "p.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->host, "test");
  EXPECT_EQ(read->kernel("matmul").latency, 2 * kMs);
  EXPECT_EQ(read->kernel("relu").latency, 1 * kMs);
  EXPECT_EQ(read->allReduce.secondsPerByte, p.allReduce.secondsPerByte);
  EXPECT_EQ(read->ps.bytesPerSecond, p.ps.bytesPerSecond);
  p.allReduce.stagingSecondsPerByte = 3e-10;
  read = parseProfile(profileToJson(p), "p.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->allReduce.stagingSecondsPerByte, 3e-10);
  p.allReduce.wakeLatency = 5e-4;
  read = parseProfile(profileToJson(p), "p.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->allReduce.wakeLatency, 5e-4);
  p.allReduce.warmStagingSecondsPerByte = 5e-11;
  p.allReduce.warmStagingBytes = 1 << 20;
  read = parseProfile(profileToJson(p), "p.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->allReduce.warmStagingSecondsPerByte, 5e-11);
  EXPECT_EQ(read->allReduce.warmStagingBytes, 1 << 20);
  EXPECT_TRUE(read->allReduce.rings.empty()); // not timed: left out
  p.allReduce.rings = {{2, 1e-4}, {3e7, 1.2e-2}};
  read = parseProfile(profileToJson(p), "p.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->allReduce.rings, p.allReduce.rings);
  EXPECT_EQ(read->cores, 0);
  p.cores = 16;
  p.data = {4e-6, 7e-10};
  read = parseProfile(profileToJson(p), "p.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->cores, 16);
  EXPECT_EQ(read->data.latency, 4e-6);
  EXPECT_EQ(read->data.secondsPerByte, 7e-10);
  p.ps.secondsPerRow = 3e-7;
  read = parseProfile(profileToJson(p), "p.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->ps.secondsPerRow, 3e-7);
  EXPECT_TRUE(read->stepSpread.empty()); // not measured: left out
  EXPECT_EQ(profileToJson(p).find("step_spread"), std::string::npos);
  for (int i = 0; i < kStepSpreadPoints; ++i)
    p.stepSpread.push_back(0.9 + 0.01 * i);
  read = parseProfile(profileToJson(p), "p.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->stepSpread, p.stepSpread);
}

TEST(CostProfile, TheExecutorsWorkRoundTripsAndIsOptional) {
  CostProfile p = syntheticProfile();
  EXPECT_EQ(profileToJson(p).find("\"executor\""), std::string::npos);
  p.executor = {2e-5, 1e-6};
  const std::string text = profileToJson(p);
  auto read = parseProfile(text, "p.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->executor.stepLatency, 2e-5);
  EXPECT_EQ(read->executor.opLatency, 1e-6);
  std::string bad = text;
  const std::string field = "\"op_latency\": 1e-06";
  ASSERT_NE(bad.find(field), std::string::npos) << text;
  bad.replace(bad.find(field), field.size(), "\"op_latency\": -1");
  auto r = parseProfile(bad, "bad.json");
  ASSERT_FALSE(static_cast<bool>(r));
  EXPECT_NE(llvm::toString(r.takeError()).find("bad.json: field 'executor.op_latency'"),
            std::string::npos);
}

TEST(CostProfile, OpsTimedAsTheyAreRoundTripAndAreOptional) {
  CostProfile p = syntheticProfile();
  EXPECT_EQ(profileToJson(p).find("\"ops\""), std::string::npos);
  p.ops["matmul(f32[B, 4], f32[4, 2]) -> (f32[B, 2])"] = {{16, 1e-5}, {128, 6e-5}};
  auto read = parseProfile(profileToJson(p), "p.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->ops, p.ops);
  auto error = [](const std::string &ops) {
    CostProfile q = syntheticProfile();
    std::string text = profileToJson(q);
    text.insert(text.rfind('}'), ", \"ops\": " + ops);
    auto r = parseProfile(text, "bad.json");
    return r ? std::string("no error") : llvm::toString(r.takeError());
  };
  EXPECT_NE(error("[]").find("bad.json: field 'ops': expected an object of op signatures"),
            std::string::npos);
  EXPECT_NE(error("{\"relu(f32[B]) -> (f32[B])\": {\"0\": 1e-5}}")
                .find("field 'ops[\"relu(f32[B]) -> (f32[B])\"].0': expected a batch (a positive "
                      "integer) as the key"),
            std::string::npos)
      << error("{\"relu(f32[B]) -> (f32[B])\": {\"0\": 1e-5}}");
  EXPECT_NE(error("{\"relu(f32[B]) -> (f32[B])\": {\"16\": -1}}")
                .find("'ops[\"relu(f32[B]) -> (f32[B])\"].16': expected seconds"),
            std::string::npos);
  EXPECT_NE(
      error("{\"relu(f32[B]) -> (f32[B])\": {}}").find("expected an object of batches and seconds"),
      std::string::npos);
}

// A profile's "gpu" section replaces the nominal GPU, and is written back; without it the
// nominal one stays (and is not written).
TEST(CostProfile, GpuSectionRoundTrips) {
  CostProfile p = syntheticProfile();
  EXPECT_EQ(p.gpu.name, nominalGpu().name);
  EXPECT_EQ(profileToJson(p).find("\"gpu\""), std::string::npos);
  auto read = parseProfile(profileToJson(p), "p.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->gpu.nvlinkBytesPerSecond, 450e9);
  EXPECT_EQ(read->gpu.kernel("matmul").flopsPerSecond, 67e12);
  p = gpuProfile();
  p.gpu.kernels["conv2d"] = {1 * kMs, 1e12, 0};
  read = parseProfile(profileToJson(p), "p.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->gpu.name, "test gpu");
  EXPECT_EQ(read->gpu.kernel("relu").latency, 0.5 * kMs);
  EXPECT_EQ(read->gpu.kernel("conv2d").flopsPerSecond, 1e12);
  EXPECT_EQ(read->gpu.nvlinkBytesPerSecond, 64 / kMs);
}

std::string errorOf(const std::string &text) {
  auto read = parseProfile(text, "bad.json");
  return read ? std::string("no error") : llvm::toString(read.takeError());
}

TEST(CostProfile, ErrorsNameTheFileAndTheField) {
  std::string good = profileToJson(syntheticProfile());
  auto replaced = [&](const std::string &from, const std::string &to) {
    std::string text = good;
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  {
    std::string e = errorOf("[1, 2]");
    EXPECT_NE(e.find("bad.json"), std::string::npos) << e;
  }
  std::string e = errorOf(replaced("\"seconds_per_byte\"", "\"per_byte\""));
  EXPECT_NE(e.find("bad.json: field 'all_reduce.seconds_per_byte': missing"), std::string::npos)
      << e;
  e = errorOf(replaced("\"latency\": 0.002", "\"latency\": -1"));
  EXPECT_NE(e.find("'kernels.matmul.latency'"), std::string::npos) << e;
  e = errorOf(replaced("\"version\": 1", "\"version\": 9"));
  EXPECT_NE(e.find("'version'"), std::string::npos) << e;
  e = errorOf(replaced("\"threads\": 1", "\"threads\": \"many\""));
  EXPECT_NE(e.find("'machine.threads'"), std::string::npos) << e;
  e = errorOf(replaced("\"cores\": 0", "\"cores\": -2"));
  EXPECT_NE(e.find("'machine.cores'"), std::string::npos) << e;
  std::string gpu = profileToJson(gpuProfile());
  const std::string nvlink = "\"nvlink_bytes_per_second\"";
  size_t at = gpu.find(nvlink);
  ASSERT_NE(at, std::string::npos);
  e = errorOf(gpu.replace(at, nvlink.size(), "\"nvlink\""));
  EXPECT_NE(e.find("bad.json: field 'gpu.nvlink_bytes_per_second': missing"), std::string::npos)
      << e;
  e = errorOf(replaced("\"staging_seconds_per_byte\": 0.0", "\"staging_seconds_per_byte\": []"));
  EXPECT_NE(e.find("'all_reduce.staging_seconds_per_byte'"), std::string::npos) << e;
  const std::string data = "\"data\": {\n    \"latency\": 0.0,\n    \"seconds_per_byte\": 0.0\n  }";
  e = errorOf(replaced(data, "\"data\": {\"latency\": 0.0, \"seconds_per_byte\": \"slow\"}"));
  EXPECT_NE(e.find("bad.json: field 'data.seconds_per_byte': expected a non-negative number, "
                   "got \"slow\""),
            std::string::npos)
      << e;
  e = errorOf(replaced(data, "\"data\": 3"));
  EXPECT_NE(e.find("bad.json: field 'data': expected an object"), std::string::npos) << e;
  EXPECT_NE(errorOf("{"), "no error");
}

// A step spread that is not 21 rising positive ratios is an error naming the entry.
TEST(CostProfile, StepSpreadErrorsNameTheEntry) {
  CostProfile p = syntheticProfile();
  for (int i = 0; i < kStepSpreadPoints; ++i)
    p.stepSpread.push_back(1 + 0.1 * i);
  nlohmann::json json = nlohmann::json::parse(profileToJson(p));
  json["machine"]["step_spread"][3] = 0.5;
  EXPECT_EQ(errorOf(json.dump()), "error: bad.json: field 'machine.step_spread[3]': 0.5 is below "
                                  "the value before it (the ratios rise)");
  json["machine"]["step_spread"][3] = -1;
  EXPECT_EQ(errorOf(json.dump()),
            "error: bad.json: field 'machine.step_spread[3]': expected a positive number, got -1");
  json["machine"]["step_spread"] = {1, 2};
  EXPECT_EQ(errorOf(json.dump()), "error: bad.json: field 'machine.step_spread': expected an array "
                                  "of 21 numbers (probabilities 0, 1/20, ..., 1)");
}

// A profile written before the staging pass was measured has the built-in figure.
TEST(CostProfile, StagingIsOptional) {
  std::string text = profileToJson(syntheticProfile());
  const std::string field = ",\n    \"staging_seconds_per_byte\": 0.0";
  size_t at = text.find(field);
  ASSERT_NE(at, std::string::npos) << text;
  auto read = parseProfile(text.erase(at, field.size()), "old.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->allReduce.stagingSecondsPerByte,
            defaultProfile().allReduce.stagingSecondsPerByte);
}

// A profile written before the wake latency was measured costs calls its latency either way.
TEST(CostProfile, WakeLatencyIsOptional) {
  CostProfile p = syntheticProfile();
  p.allReduce.latency = 3e-4;
  p.allReduce.wakeLatency = 9e-4;
  nlohmann::json json = nlohmann::json::parse(profileToJson(p));
  ASSERT_TRUE(json["all_reduce"].contains("wake_latency"));
  json["all_reduce"].erase("wake_latency");
  auto read = parseProfile(json.dump(), "old.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->allReduce.wakeLatency, 3e-4);
}

// A profile written before the warm pass was measured costs every byte of a pass at the cold
// rate; the two warm fields come together, and bad values name their field.
TEST(CostProfile, WarmStagingIsOptionalAndComesWhole) {
  CostProfile p = syntheticProfile();
  p.allReduce.stagingSecondsPerByte = 2e-10;
  p.allReduce.warmStagingSecondsPerByte = 5e-11;
  p.allReduce.warmStagingBytes = 1 << 20;
  nlohmann::json json = nlohmann::json::parse(profileToJson(p));
  json["all_reduce"].erase("warm_staging_seconds_per_byte");
  EXPECT_EQ(errorOf(json.dump()),
            "error: bad.json: field 'all_reduce.warm_staging_seconds_per_byte': missing");
  json["all_reduce"].erase("warm_staging_bytes");
  auto read = parseProfile(json.dump(), "old.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->allReduce.warmStagingSecondsPerByte, 0);
  EXPECT_DOUBLE_EQ(read->allReduce.stagingSeconds(1000), 2e-7);
  json["all_reduce"]["warm_staging_seconds_per_byte"] = 5e-11;
  json["all_reduce"]["warm_staging_bytes"] = -1;
  EXPECT_EQ(errorOf(json.dump()), "error: bad.json: field 'all_reduce.warm_staging_bytes': "
                                  "expected a non-negative number, got -1");
}

// A profile written before batches were timed has the built-in figures for them.
TEST(CostProfile, DataIsOptional) {
  CostProfile p = syntheticProfile();
  p.data = {1e-3, 1e-3};
  nlohmann::json json = nlohmann::json::parse(profileToJson(p));
  ASSERT_TRUE(json.contains("data"));
  json.erase("data");
  auto read = parseProfile(json.dump(), "old.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->data.latency, defaultProfile().data.latency);
  EXPECT_EQ(read->data.secondsPerByte, defaultProfile().data.secondsPerByte);
  EXPECT_GT(read->data.secondsPerByte, 0);
}

// A profile written before row calls were timed has the built-in per-row figure; a bad one is
// an error naming the field.
TEST(CostProfile, SecondsPerRowIsOptional) {
  CostProfile p = syntheticProfile();
  p.ps.secondsPerRow = 1e-3;
  nlohmann::json json = nlohmann::json::parse(profileToJson(p));
  ASSERT_TRUE(json["ps"].contains("seconds_per_row"));
  json["ps"]["seconds_per_row"] = -1;
  EXPECT_NE(errorOf(json.dump())
                .find("bad.json: field 'ps.seconds_per_row': expected a "
                      "non-negative number, got -1"),
            std::string::npos)
      << errorOf(json.dump());
  json["ps"].erase("seconds_per_row");
  auto read = parseProfile(json.dump(), "old.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->ps.secondsPerRow, defaultProfile().ps.secondsPerRow);
}

// A profile written before concurrent calls were timed moves one message at a time (serial
// share 1); a share outside [0, 1] is an error naming the field and the value.
TEST(CostProfile, SerialShareRoundTripsAndIsOptional) {
  CostProfile p = syntheticProfile();
  p.ps.serialShare = 0.25;
  auto read = parseProfile(profileToJson(p), "p.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->ps.serialShare, 0.25);
  nlohmann::json json = nlohmann::json::parse(profileToJson(p));
  json["ps"]["serial_share"] = 1.5;
  EXPECT_NE(errorOf(json.dump())
                .find("bad.json: field 'ps.serial_share': must be from 0 to 1, "
                      "got 1.5"),
            std::string::npos)
      << errorOf(json.dump());
  json["ps"].erase("serial_share");
  read = parseProfile(json.dump(), "old.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->ps.serialShare, 1);
}

// The repeated ids' figure round-trips and is optional (left out: free).
TEST(CostProfile, RepeatedRowsRoundTripAndAreOptional) {
  CostProfile p = syntheticProfile();
  p.ps.secondsPerRepeatedRow = 9e-8;
  auto read = parseProfile(profileToJson(p), "p.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->ps.secondsPerRepeatedRow, 9e-8);
  nlohmann::json json = nlohmann::json::parse(profileToJson(p));
  json["ps"]["seconds_per_repeated_row"] = -1;
  EXPECT_NE(errorOf(json.dump()).find("ps.seconds_per_repeated_row"), std::string::npos)
      << errorOf(json.dump());
  json["ps"].erase("seconds_per_repeated_row");
  read = parseProfile(json.dump(), "old.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->ps.secondsPerRepeatedRow, 0);
}

// Coalescing's figures round-trip and are optional together (left out: free); one without the
// other is an error naming the missing field.
TEST(CostProfile, CoalescingRoundTripsAndIsOptional) {
  CostProfile p = syntheticProfile();
  p.ps.coalesceLatency = 2e-6;
  p.ps.coalesceSecondsPerByte = 1.5e-10;
  auto read = parseProfile(profileToJson(p), "p.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->ps.coalesceLatency, 2e-6);
  EXPECT_EQ(read->ps.coalesceSecondsPerByte, 1.5e-10);
  nlohmann::json json = nlohmann::json::parse(profileToJson(p));
  json["ps"].erase("coalesce_latency");
  EXPECT_NE(errorOf(json.dump()).find("ps.coalesce_latency"), std::string::npos)
      << errorOf(json.dump());
  json["ps"].erase("coalesce_seconds_per_byte");
  read = parseProfile(json.dump(), "old.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->ps.coalesceLatency, 0);
  EXPECT_EQ(read->ps.coalesceSecondsPerByte, 0);
}

// A ring's seconds per byte from the sizes it was timed at: the fit's below the smallest and with
// fewer than two sizes; linear between two sizes, less the latency (at 1500 bytes, 2.5 ms less
// 1: 1 us a byte); the last two's slope beyond the largest (at 4000 bytes, 5 ms less 1); never
// below the fit's.
TEST(CostProfile, RingSecondsPerByteFromTheTimedSizes) {
  LinkCost link{1000000000, 4, 1e-3, 0.5e-6, 0, {{1000, 2e-3}, {2000, 3e-3}}};
  EXPECT_EQ(link.ringSecondsPerByte(500), 0.5e-6);
  EXPECT_NEAR(link.ringSecondsPerByte(1500), 1e-6, 1e-15);
  EXPECT_NEAR(link.ringSecondsPerByte(2000), 1e-6, 1e-15);
  EXPECT_NEAR(link.ringSecondsPerByte(4000), 1e-6, 1e-15);
  link.secondsPerByte = 2e-6;
  EXPECT_EQ(link.ringSecondsPerByte(1500), 2e-6);
  link.rings.pop_back();
  link.secondsPerByte = 0.5e-6;
  EXPECT_EQ(link.ringSecondsPerByte(4000), 0.5e-6);
}

// Measured links are written as a "links" array, and read back; a profile without them has none.
TEST(CostProfile, LinksRoundTrip) {
  CostProfile p = syntheticProfile();
  EXPECT_EQ(profileToJson(p).find("\"links\""), std::string::npos);
  p.links = {{1000000000, 4, 2e-4, 1.1e-8, 2.5e-4, {{6, 3e-4}, {1.5e6, 2e-2}}},
             {100000000, 2, 3e-4, 8.5e-8}};
  auto read = parseProfile(profileToJson(p), "p.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  ASSERT_EQ(read->links.size(), 2u);
  const LinkCost *gigabit = read->link(1000000000);
  ASSERT_NE(gigabit, nullptr);
  EXPECT_EQ(gigabit->ranks, 4);
  EXPECT_EQ(gigabit->latency, 2e-4);
  EXPECT_EQ(gigabit->secondsPerByte, 1.1e-8);
  EXPECT_EQ(gigabit->wakeLatency, 2.5e-4);
  EXPECT_EQ(gigabit->rings, p.links[0].rings);
  EXPECT_EQ(read->link(100000000)->secondsPerByte, 8.5e-8);
  EXPECT_TRUE(read->link(100000000)->rings.empty());
  EXPECT_EQ(read->link(10000000), nullptr);
  // The sizes in increasing order, each with its bytes and seconds.
  nlohmann::json bad = nlohmann::json::parse(profileToJson(p));
  bad["links"][0]["rings"][1]["bytes"] = 6;
  EXPECT_NE(errorOf(bad.dump())
                .find("field 'links[0].rings[1].bytes': expected more than the size before it, "
                      "got 6"),
            std::string::npos)
      << errorOf(bad.dump());
  bad["links"][0]["rings"][1].erase("bytes");
  EXPECT_NE(errorOf(bad.dump()).find("field 'links[0].rings[1].bytes': missing"), std::string::npos)
      << errorOf(bad.dump());
  // A profile written before the latency after work was measured: calls cost `latency`.
  nlohmann::json old = nlohmann::json::parse(profileToJson(p));
  old["links"][0].erase("wake_latency");
  read = parseProfile(old.dump(), "old.json");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->link(1000000000)->wakeLatency, 2e-4);
}

TEST(CostProfile, LinkErrorsNameTheEntryAndTheField) {
  CostProfile p = syntheticProfile();
  p.links = {{1000000000, 4, 2e-4, 1.1e-8}};
  const nlohmann::json good = nlohmann::json::parse(profileToJson(p));
  auto errorWith = [&](const std::function<void(nlohmann::json &)> &edit) {
    nlohmann::json json = good;
    edit(json);
    return errorOf(json.dump());
  };
  EXPECT_NE(errorWith([](nlohmann::json &j) {
              j["links"] = 3;
            }).find("bad.json: field 'links': expected an array"),
            std::string::npos);
  EXPECT_NE(errorWith([](nlohmann::json &j) {
              j["links"][0]["bandwidth_bits_per_sec"] = 0;
            }).find("field 'links[0].bandwidth_bits_per_sec': expected a positive integer"),
            std::string::npos);
  EXPECT_NE(errorWith([](nlohmann::json &j) {
              j["links"][0]["ranks"] = 1;
            }).find("field 'links[0].ranks': expected an integer of at least 2"),
            std::string::npos);
  EXPECT_NE(errorWith([](nlohmann::json &j) {
              j["links"][0]["latency"] = -1;
            }).find("field 'links[0].latency': expected a non-negative number, got -1"),
            std::string::npos);
  EXPECT_NE(errorWith([](nlohmann::json &j) {
              j["links"][0].erase("seconds_per_byte");
            }).find("field 'links[0].seconds_per_byte': missing"),
            std::string::npos);
  EXPECT_NE(errorWith([](nlohmann::json &j) {
              j["links"][0]["wake_latency"] = "1 ms";
            }).find("field 'links[0].wake_latency': expected a non-negative number, got \"1 ms\""),
            std::string::npos);
  EXPECT_NE(errorWith([](nlohmann::json &j) {
              j["links"].push_back(j["links"][0]);
            }).find("field 'links[1].bandwidth_bits_per_sec': a second entry for 1000000000"),
            std::string::npos);
}

TEST(CostProfile, DefaultIsUsable) {
  CostProfile p = defaultProfile();
  EXPECT_GT(p.kernel("matmul").flopsPerSecond, 0);
  EXPECT_GT(p.ps.bytesPerSecond, 0);
  auto read = parseProfile(profileToJson(p), "default");
  EXPECT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
}

} // namespace
} // namespace prism::plan
