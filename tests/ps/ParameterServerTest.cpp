// The parameter servers in synchronous training, over real gRPC on loopback: the weighted-mean
// SGD against a float64 oracle, bit-identical results whatever the push order, bounded waits,
// step errors, checkpoints and apply failures; backup workers' dropped pushes, asynchronous
// pushes applied on arrival and the staleness bound.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include "PsTestCluster.h"
#include "llvm/Support/FileSystem.h"

using namespace prism::runtime;
using namespace prism::runtime::ps;
using namespace prism::runtime::ps::testing;
using std::chrono::milliseconds;

namespace {

const std::vector<double> kWeights = {2, 3, 5}; // the contributors' local batch sizes

float gradientValue(int64_t contributor, int64_t step, int64_t variable, int64_t element) {
  return static_cast<float>(
      0.1 * std::cos(1.3 * static_cast<double>(contributor) + 0.7 * static_cast<double>(step) +
                     0.31 * static_cast<double>(element) + static_cast<double>(variable)));
}

// Rows of `emb` that contributor `c` reads at `step`: unsorted, with a repeat. Contributor 2
// reads only rows of the first shard on even steps, so the second server gets no emb rows from it.
std::vector<int64_t> embRows(int64_t c, int64_t step) {
  if (c == 2 && step % 2 == 0)
    return {3, 1, 3, 0};
  std::vector<int64_t> rows;
  for (int64_t j = 0; j < 5; ++j)
    rows.push_back((c * 3 + step * 5 + j * 7) % 10);
  rows.push_back(rows[0]);
  return rows;
}

Tensor indicesTensor(const std::vector<int64_t> &rows, bool asI32) {
  // Shape [2, n/2]: any shape works.
  std::vector<int64_t> shape = {2, static_cast<int64_t>(rows.size()) / 2};
  Tensor t(asI32 ? prism::ir::DType::I32 : prism::ir::DType::I64, shape);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (asI32)
      t.data<int32_t>()[i] = static_cast<int32_t>(rows[i]);
    else
      t.data<int64_t>()[i] = rows[i];
  }
  return t;
}

// Contributor 1 has no gradient for `bias` on odd steps (it counts as zero).
bool pushesBias(int64_t c, int64_t step) {
  return !(c == 1 && step % 2 == 1);
}

std::vector<Gradient> gradientsOf(int64_t c, int64_t step) {
  std::vector<Gradient> gradients;
  std::vector<int64_t> rows = embRows(c, step);
  Tensor embRowsValue(prism::ir::DType::F32, {2, static_cast<int64_t>(rows.size()) / 2, 3});
  for (int64_t i = 0; i < embRowsValue.numElements(); ++i)
    embRowsValue.data<float>()[i] = gradientValue(c, step, 0, i);
  gradients.push_back(Gradient::ofRows("emb", indicesTensor(rows, c % 2 == 0), embRowsValue));
  Tensor w(prism::ir::DType::F32, {4, 2});
  for (int64_t i = 0; i < w.numElements(); ++i)
    w.data<float>()[i] = gradientValue(c, step, 1, i);
  gradients.push_back(Gradient::ofDense("w", w));
  if (pushesBias(c, step)) {
    Tensor bias(prism::ir::DType::F32, {6});
    for (int64_t i = 0; i < bias.numElements(); ++i)
      bias.data<float>()[i] = gradientValue(c, step, 2, i);
    gradients.push_back(Gradient::ofDense("bias", bias));
  }
  return gradients;
}

// The same training in float64 on whole variables: v -= lr * Σ w_c g_c / Σ w_c.
std::map<std::string, std::vector<double>> oracle(int64_t steps) {
  std::map<std::string, std::vector<double>> values;
  for (const VariableSpec &spec : testVariables()) {
    int64_t n = spec.shape[0] * rowElements(spec.shape);
    for (int64_t i = 0; i < n; ++i)
      values[spec.name].push_back(static_cast<float>(initialValue(spec.name, i)));
  }
  double total = 0;
  for (double w : kWeights)
    total += w;
  for (int64_t step = 0; step < steps; ++step) {
    std::map<std::string, std::vector<double>> mean;
    for (auto &[name, v] : values)
      mean[name].assign(v.size(), 0.0);
    for (int64_t c = 0; c < 3; ++c) {
      double scale = kWeights[c] / total;
      std::vector<int64_t> rows = embRows(c, step);
      for (size_t r = 0; r < rows.size(); ++r)
        for (int64_t k = 0; k < 3; ++k)
          mean["emb"][rows[r] * 3 + k] += scale * gradientValue(c, step, 0, r * 3 + k);
      for (int64_t i = 0; i < 8; ++i)
        mean["w"][i] += scale * gradientValue(c, step, 1, i);
      if (pushesBias(c, step))
        for (int64_t i = 0; i < 6; ++i)
          mean["bias"][i] += scale * gradientValue(c, step, 2, i);
    }
    for (auto &[name, v] : values)
      for (size_t i = 0; i < v.size(); ++i)
        v[i] -= kLearningRate * mean[name][i];
  }
  return values;
}

// Contributor `c`: per step, pulls what it reads, waits `delay`, then pushes. Returns the errors.
std::string runContributor(const TestCluster &cluster, int64_t c, int64_t steps,
                           milliseconds delay) {
  auto client = cluster.client();
  if (!client)
    return "no client";
  for (int64_t step = 0; step < steps; ++step) {
    auto w = client->pull("w", step);
    if (!w)
      return llvm::toString(w.takeError());
    auto rows = client->pullRows("emb", indicesTensor(embRows(c, step), false), step);
    if (!rows)
      return llvm::toString(rows.takeError());
    std::this_thread::sleep_for(delay);
    if (auto error = client->push(step, kWeights[c], c, gradientsOf(c, step)))
      return llvm::toString(std::move(error));
  }
  return "";
}

// Trains `steps` steps with three contributor threads, contributor c waiting delays[c] before
// each push, and returns the final variables.
std::map<std::string, Tensor> train(int64_t steps, const std::vector<milliseconds> &delays) {
  TestCluster cluster(3);
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int64_t c = 0; c < 3; ++c)
    threads.emplace_back([&, c] { errors[c] = runContributor(cluster, c, steps, delays[c]); });
  for (auto &t : threads)
    t.join();
  for (int64_t c = 0; c < 3; ++c)
    EXPECT_EQ(errors[c], "") << "contributor " << c;
  for (const auto &server : cluster.servers)
    EXPECT_EQ(server->version(), steps);
  std::map<std::string, Tensor> result;
  auto client = cluster.client();
  for (const VariableSpec &spec : testVariables()) {
    auto value = client->pull(spec.name, steps);
    EXPECT_TRUE(bool(value)) << llvm::toString(value.takeError());
    if (value)
      result[spec.name] = *value;
  }
  return result;
}

std::string scratchDir() {
  llvm::SmallString<128> dir;
  EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("prism-ps-test", dir));
  return std::string(dir);
}

} // namespace

TEST(ParameterServer, WeightedMeanSgdMatchesFloat64Oracle) {
  constexpr int64_t kSteps = 4;
  auto trained = train(kSteps, {milliseconds(0), milliseconds(0), milliseconds(0)});
  auto expected = oracle(kSteps);
  for (const VariableSpec &spec : testVariables()) {
    ASSERT_TRUE(trained.count(spec.name)) << spec.name;
    const Tensor &value = trained[spec.name];
    ASSERT_EQ(value.shape(), spec.shape);
    for (int64_t i = 0; i < value.numElements(); ++i)
      EXPECT_NEAR(value.data<float>()[i], expected[spec.name][i], 1e-6)
          << spec.name << " element " << i;
  }
}

TEST(ParameterServer, ResultIsBitIdenticalWhateverThePushOrder) {
  auto first = train(3, {milliseconds(0), milliseconds(15), milliseconds(30)});
  auto second = train(3, {milliseconds(30), milliseconds(15), milliseconds(0)});
  auto third = train(3, {milliseconds(15), milliseconds(30), milliseconds(0)});
  for (const VariableSpec &spec : testVariables()) {
    ASSERT_EQ(first[spec.name].numBytes(), second[spec.name].numBytes());
    EXPECT_EQ(
        std::memcmp(first[spec.name].raw(), second[spec.name].raw(), first[spec.name].numBytes()),
        0)
        << spec.name;
    EXPECT_EQ(
        std::memcmp(first[spec.name].raw(), third[spec.name].raw(), first[spec.name].numBytes()), 0)
        << spec.name;
  }
}

TEST(ParameterServer, PullOfAFutureStepTimesOut) {
  TestCluster cluster(1, milliseconds(300));
  auto client = cluster.client();
  auto start = std::chrono::steady_clock::now();
  auto value = client->pull("emb", 2);
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(bool(value));
  std::string message = llvm::toString(value.takeError());
  EXPECT_NE(message.find("pull for step 2 timed out at version 0"), std::string::npos) << message;
  EXPECT_GE(elapsed, milliseconds(250));
  EXPECT_LT(elapsed, milliseconds(5000));
  // The client's own deadline bounds the wait too.
  PsClientOptions options = cluster.clientOptions();
  options.rpcDeadline = milliseconds(100);
  auto hurried = PsClient::create(options);
  ASSERT_TRUE(bool(hurried)) << llvm::toString(hurried.takeError());
  start = std::chrono::steady_clock::now();
  auto rows = (*hurried)->pullRows("emb", indicesTensor({1, 7}, true), 1);
  ASSERT_FALSE(bool(rows));
  llvm::Error late = rows.takeError();
  EXPECT_EQ(prism::ir::errorCode(late), prism::ir::ErrorCode::DeadlineExceeded);
  EXPECT_NE(llvm::toString(std::move(late)).find("DEADLINE_EXCEEDED"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(5000));
}

TEST(ParameterServer, PushesOfOneStepTwiceOrOfAFarStepAreErrors) {
  TestCluster cluster(2, milliseconds(200));
  auto client = cluster.client();
  // Contributor 0 alone: its push is buffered, then times out waiting for contributor 1.
  llvm::Error waited = client->push(0, 1, 0, gradientsOf(0, 0));
  ASSERT_TRUE(bool(waited));
  EXPECT_NE(llvm::toString(std::move(waited)).find("timed out"), std::string::npos);
  llvm::Error twice = client->push(0, 1, 0, gradientsOf(0, 0));
  ASSERT_TRUE(bool(twice));
  EXPECT_NE(llvm::toString(std::move(twice)).find("already pushed step 0"), std::string::npos);
  // Contributor 1 completes step 0.
  ASSERT_FALSE(bool(client->push(0, 1, 1, gradientsOf(1, 0))));
  EXPECT_EQ(cluster.servers[0]->version(), 1);
  EXPECT_EQ(cluster.servers[1]->version(), 1);
  llvm::Error far = client->push(5, 1, 0, gradientsOf(0, 5));
  ASSERT_TRUE(bool(far));
  EXPECT_NE(llvm::toString(std::move(far)).find("push of step 5 by contributor 0 refused"),
            std::string::npos);
  llvm::Error applied = client->push(0, 1, 1, gradientsOf(1, 0));
  ASSERT_TRUE(bool(applied));
  EXPECT_NE(llvm::toString(std::move(applied)).find("step 0"), std::string::npos);
  llvm::Error stranger = client->push(1, 1, 7, {});
  ASSERT_TRUE(bool(stranger));
  EXPECT_NE(llvm::toString(std::move(stranger)).find("contributors are 0 to 1"), std::string::npos);
}

// Elastic membership: a new membership drops the pushes of the step in flight and fails the
// calls waiting on it; calls of the old membership are refused; the step is then applied with
// the new number of contributors.
TEST(ParameterServer, NewMembershipDropsTheInterruptedStep) {
  TestCluster cluster(3);
  auto outcome = [](llvm::Error e) { return e ? llvm::toString(std::move(e)) : "success"; };
  auto oldClient = cluster.client();
  // Contributors 0 and 1 push step 0 and wait for it; contributor 2 never pushes.
  std::vector<std::future<std::string>> waiting;
  for (int64_t c = 0; c < 2; ++c)
    waiting.push_back(std::async(std::launch::async, [&, c] {
      return outcome(oldClient->push(0, 1, c, gradientsOf(c, 0)));
    }));
  std::this_thread::sleep_for(milliseconds(200));
  for (auto &server : cluster.servers)
    EXPECT_EQ(server->changeMembership(1, 2), 0) << "the version the new membership starts at";
  for (auto &call : waiting) {
    ASSERT_EQ(call.wait_for(std::chrono::seconds(20)), std::future_status::ready);
    std::string aborted = call.get();
    EXPECT_NE(aborted.find("of membership 0 refused: the server is at membership 1"),
              std::string::npos)
        << aborted;
  }
  std::string stale = outcome(oldClient->push(0, 1, 0, gradientsOf(0, 0)));
  EXPECT_NE(stale.find("ABORTED: push of step 0 by contributor 0 of membership 0 refused"),
            std::string::npos)
      << stale;
  // The two left redo step 0 in membership 1: only their gradients count.
  auto client = cluster.client();
  client->setMembershipEpoch(1);
  auto second = std::async(std::launch::async,
                           [&] { return outcome(client->push(0, 1, 1, gradientsOf(1, 0))); });
  EXPECT_EQ(outcome(client->push(0, 1, 0, gradientsOf(0, 0))), "success");
  EXPECT_EQ(second.get(), "success");
  EXPECT_EQ(cluster.servers[0]->version(), 1);
  EXPECT_EQ(cluster.servers[0]->changeMembership(1, 5), 1) << "an epoch seen changes nothing";
  std::string stranger = outcome(client->push(1, 1, 2, {}));
  EXPECT_NE(stranger.find("contributors are 0 to 1"), std::string::npos) << stranger;
}

TEST(ParameterServer, SaveThenLoadRestoresShardsAndVersion) {
  std::string dir = scratchDir();
  TestCluster cluster(1);
  auto client = cluster.client();
  for (int64_t step = 0; step < 2; ++step)
    ASSERT_FALSE(bool(client->push(step, 4, 0, gradientsOf(0, step))));
  std::vector<std::string> files = {dir + "/ps0.ckpt", dir + "/ps1.ckpt"};
  std::map<std::string, Tensor> saved;
  for (size_t s = 0; s < 2; ++s)
    ASSERT_FALSE(bool(cluster.servers[s]->save(files[s])));
  for (const VariableSpec &spec : testVariables())
    saved[spec.name] = *client->pull(spec.name, 2);
  // A third step changes everything; loading goes back to version 2 and its values.
  ASSERT_FALSE(bool(client->push(2, 4, 0, gradientsOf(0, 2))));
  for (size_t s = 0; s < 2; ++s) {
    ASSERT_FALSE(bool(cluster.servers[s]->load(files[s])));
    EXPECT_EQ(cluster.servers[s]->version(), 2);
  }
  // Fresh servers load the same state too.
  TestCluster fresh(1);
  for (size_t s = 0; s < 2; ++s)
    ASSERT_FALSE(bool(fresh.servers[s]->load(files[s])));
  auto freshClient = fresh.client();
  for (const VariableSpec &spec : testVariables())
    for (PsClient *c : {client.get(), freshClient.get()}) {
      auto value = c->pull(spec.name, 2);
      ASSERT_TRUE(bool(value)) << llvm::toString(value.takeError());
      EXPECT_EQ(std::memcmp(value->raw(), saved[spec.name].raw(), value->numBytes()), 0)
          << spec.name;
    }
  // Another server's file does not fit.
  llvm::Error mismatch = fresh.servers[0]->load(files[1]);
  ASSERT_TRUE(bool(mismatch));
  EXPECT_NE(llvm::toString(std::move(mismatch)).find("is unusable"), std::string::npos);
  llvm::sys::fs::remove_directories(dir);
}

TEST(ParameterServer, ApplyErrorReachesEveryCallerAndStays) {
  TestCluster cluster(3, milliseconds(20000), /*failAtStep=*/1);
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int64_t c = 0; c < 3; ++c)
    threads.emplace_back([&, c] {
      auto client = cluster.client();
      for (int64_t step = 0; step < 2; ++step)
        if (auto error = client->push(step, kWeights[c], c, gradientsOf(c, step))) {
          errors[c] = llvm::toString(std::move(error));
          return;
        }
    });
  for (auto &t : threads)
    t.join();
  for (const std::string &error : errors)
    EXPECT_NE(error.find("optimizer diverged at step 1"), std::string::npos) << error;
  auto client = cluster.client();
  auto start = std::chrono::steady_clock::now();
  auto value = client->pull("w", 2);
  ASSERT_FALSE(bool(value));
  EXPECT_NE(llvm::toString(value.takeError()).find("parameter server failed"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(5000));
  auto status = client->status(cluster.servers[0]->endpoint());
  ASSERT_TRUE(bool(status)) << llvm::toString(status.takeError());
  EXPECT_EQ(status->version, 1);
  EXPECT_NE(status->failure.find("optimizer diverged"), std::string::npos);
  llvm::Error push = client->push(1, 1, 0, {});
  ASSERT_TRUE(bool(push));
  EXPECT_NE(llvm::toString(std::move(push)).find("parameter server failed"), std::string::npos);
}

TEST(ParameterServer, StartRejectsBadOptions) {
  ParameterServerOptions options;
  options.jobToken = kToken;
  options.variables = std::make_shared<VariableStore>();
  options.apply = [](int64_t, const GradientSet &) { return llvm::Error::success(); };
  options.shards = {PsShard{"emb", prism::ir::DType::F32, 4, 12, {10, 3}}};
  auto started = ParameterServer::start(options);
  ASSERT_FALSE(bool(started));
  EXPECT_NE(llvm::toString(started.takeError()).find("not within [0, 10)"), std::string::npos);
  options.shards = {PsShard{"emb", prism::ir::DType::F32, 0, 4, {10, 3}}};
  options.variables->set("emb", Tensor(prism::ir::DType::F32, {10, 3}));
  started = ParameterServer::start(options);
  ASSERT_FALSE(bool(started));
  EXPECT_NE(llvm::toString(started.takeError()).find("another shape"), std::string::npos);
}

namespace {

// Both servers' shards of `w` and `bias` after the pushes, flattened.
std::vector<float> denseValues(const TestCluster &cluster) {
  std::vector<float> values;
  for (const auto &store : cluster.stores)
    for (const char *name : {"w", "bias"})
      if (const Tensor *t = store->find(name))
        values.insert(values.end(), t->data<float>(), t->data<float>() + t->numElements());
  return values;
}

PushPolicy quorumOf(int64_t quorum) {
  PushPolicy policy;
  policy.quorum = quorum;
  return policy;
}

PushPolicy asynchronous(std::optional<int64_t> maxStaleness) {
  PushPolicy policy;
  policy.async = true;
  policy.maxStaleness = maxStaleness;
  return policy;
}

} // namespace

TEST(ParameterServer, BackupWorkersApplyTheFirstPushesAndDropTheLateOne) {
  TestCluster cluster(3, milliseconds(20000), -1, {}, quorumOf(2));
  auto client = cluster.client();
  // Contributors 2 and 0 arrive first (each push waits for the quorum); 1 comes late.
  std::thread first(
      [&] { EXPECT_FALSE(bool(client->push(0, kWeights[2], 2, gradientsOf(2, 0)))); });
  PushOutcome outcome;
  ASSERT_FALSE(bool(client->push(0, kWeights[0], 0, gradientsOf(0, 0), &outcome)));
  first.join();
  EXPECT_FALSE(outcome.dropped);
  EXPECT_EQ(outcome.version, 1);
  ASSERT_FALSE(bool(client->push(0, kWeights[1], 1, gradientsOf(1, 0), &outcome)));
  EXPECT_TRUE(outcome.dropped);
  EXPECT_EQ(outcome.version, 1);
  for (const std::string &endpoint : client->endpoints()) {
    auto status = client->status(endpoint);
    ASSERT_TRUE(bool(status)) << llvm::toString(status.takeError());
    EXPECT_EQ(status->version, 1);
    EXPECT_EQ(status->appliedPushes, (std::vector<int64_t>{1, 0, 1}));
    EXPECT_EQ(status->droppedPushes, (std::vector<int64_t>{0, 1, 0}));
  }
  EXPECT_EQ(cluster.servers[0]->counts().examples, kWeights[0] + kWeights[2]);

  // The step is the batch-weighted mean of the two that arrived: what a two-worker job of the
  // same contributions computes.
  TestCluster pair(3, milliseconds(20000), -1, {}, quorumOf(2));
  auto other = pair.client();
  std::thread zero([&] { EXPECT_FALSE(bool(other->push(0, kWeights[0], 0, gradientsOf(0, 0)))); });
  ASSERT_FALSE(bool(other->push(0, kWeights[2], 2, gradientsOf(2, 0))));
  zero.join();
  EXPECT_EQ(denseValues(cluster), denseValues(pair));
}

TEST(ParameterServer, AsynchronousPushesAreAppliedOnArrivalOneByOne) {
  TestCluster cluster(2, milliseconds(20000), -1, {}, asynchronous(std::nullopt));
  auto client = cluster.client();
  // Contributor 0 runs three steps while 1 runs none: nothing waits.
  PushOutcome outcome;
  for (int64_t step = 0; step < 3; ++step)
    ASSERT_FALSE(bool(client->push(step, kWeights[0], 0, gradientsOf(0, step), &outcome)));
  EXPECT_EQ(outcome.version, 3);
  EXPECT_FALSE(outcome.dropped);
  auto pulled = client->pull("w", 7); // no version to wait for
  ASSERT_TRUE(bool(pulled)) << llvm::toString(pulled.takeError());
  ASSERT_FALSE(bool(client->push(0, kWeights[1], 1, gradientsOf(1, 0), &outcome)));
  EXPECT_EQ(outcome.version, 4);
  PushCounts counts = cluster.servers[0]->counts();
  EXPECT_EQ(counts.applied, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(counts.maxLead, 2);
  llvm::Error outOfOrder = client->push(5, kWeights[1], 1, gradientsOf(1, 5));
  ASSERT_TRUE(bool(outOfOrder));
  EXPECT_NE(llvm::toString(std::move(outOfOrder)).find("its next one is of step 1"),
            std::string::npos);

  // One contribution applied alone is its own gradient: SGD on w by lr * g.
  TestCluster single(1, milliseconds(20000), -1, {}, asynchronous(std::nullopt));
  auto alone = single.client();
  ASSERT_FALSE(bool(alone->push(0, kWeights[1], 0, gradientsOf(1, 0))));
  const Tensor *w = single.stores[0]->find("w");
  std::vector<Gradient> g = gradientsOf(1, 0);
  for (int64_t i = 0; i < w->numElements(); ++i)
    EXPECT_FLOAT_EQ(w->data<float>()[i],
                    static_cast<float>(initialValue("w", i)) -
                        static_cast<float>(kLearningRate) * g[1].dense.data<float>()[i]);
}

TEST(ParameterServer, StalenessBoundHoldsAContributorTooFarAhead) {
  TestCluster cluster(2, milliseconds(300), -1, {}, asynchronous(1));
  auto client = cluster.client();
  ASSERT_FALSE(bool(client->push(0, kWeights[0], 0, gradientsOf(0, 0))));
  // Step 1 is applied, but contributor 0 may not start step 2 while 1 has pushed nothing.
  llvm::Error held = client->push(1, kWeights[0], 0, gradientsOf(0, 1));
  ASSERT_TRUE(bool(held));
  EXPECT_NE(llvm::toString(std::move(held)).find("waiting for the slowest worker"),
            std::string::npos);
  EXPECT_EQ(cluster.servers[0]->version(), 2);
  auto early = client->pull("w", 2);
  ASSERT_FALSE(bool(early));
  EXPECT_NE(llvm::toString(early.takeError()).find("pull for step 2 timed out"), std::string::npos);
  // Once contributor 1 pushed a step, step 2 is within the bound.
  ASSERT_FALSE(bool(client->push(0, kWeights[1], 1, gradientsOf(1, 0))));
  EXPECT_TRUE(bool(client->pull("w", 2)));
  EXPECT_EQ(cluster.servers[0]->counts().maxLead, 1);
}

TEST(ParameterServer, OnceTheJobsPushesAreInNobodyWaitsForTheSlowest) {
  TestCluster cluster(2, milliseconds(300), -1, {}, asynchronous(0));
  auto client = cluster.client();
  client->setJobPushes(2);
  // Contributor 1 may not start step 1 before 0 pushed step 0 (staleness 0).
  llvm::Error held = client->push(0, kWeights[1], 1, gradientsOf(1, 0));
  ASSERT_TRUE(bool(held));
  EXPECT_NE(llvm::toString(std::move(held)).find("waiting for the slowest worker"),
            std::string::npos);
  // Contributor 0's push is the job's last: it is answered at once, and 0 may even go on,
  // although 1 (which stopped) is behind.
  PushOutcome outcome;
  ASSERT_FALSE(bool(client->push(0, kWeights[0], 0, gradientsOf(0, 0), &outcome)));
  EXPECT_EQ(outcome.version, 2);
  ASSERT_FALSE(bool(client->push(1, kWeights[0], 0, gradientsOf(0, 1), &outcome)));
  EXPECT_EQ(outcome.version, 3);
  EXPECT_TRUE(bool(client->pull("w", 5)));
}
