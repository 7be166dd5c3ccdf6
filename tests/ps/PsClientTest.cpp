// The parameter-server client against real servers on loopback: rows across shard boundaries,
// only owning shards asked, job tokens, payload byte counts and layout checks.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include "PsTestCluster.h"
#include "runtime/dist/Tls.h"
#include "runtime/ps/Wire.h"
#include "runtime/ps/ps.grpc.pb.h"
#include "llvm/Support/FileSystem.h"

using namespace prism::runtime;
using namespace prism::runtime::ps;
using namespace prism::runtime::ps::testing;

namespace {

template <typename T> Tensor indices(std::vector<int64_t> shape, std::vector<int64_t> rows) {
  Tensor t(sizeof(T) == 4 ? prism::ir::DType::I32 : prism::ir::DType::I64, std::move(shape));
  for (size_t i = 0; i < rows.size(); ++i)
    t.data<T>()[i] = static_cast<T>(rows[i]);
  return t;
}

// Row `row` of the [10, 3] table `table` equals row `position` of `rows`.
void expectRow(const Tensor &rows, int64_t position, const Tensor &table, int64_t row) {
  for (int64_t k = 0; k < 3; ++k)
    EXPECT_EQ(rows.data<float>()[position * 3 + k], table.data<float>()[row * 3 + k])
        << "position " << position << " row " << row;
}

} // namespace

TEST(PsClient, PullAssemblesEveryShard) {
  TestCluster cluster(1);
  auto client = cluster.client();
  for (const VariableSpec &spec : testVariables()) {
    auto value = client->pull(spec.name, 0);
    ASSERT_TRUE(bool(value)) << llvm::toString(value.takeError());
    ASSERT_EQ(value->shape(), spec.shape);
    for (int64_t i = 0; i < value->numElements(); ++i)
      EXPECT_EQ(value->data<float>()[i], static_cast<float>(initialValue(spec.name, i)));
  }
}

TEST(PsClient, PullManyAsksOnlyTheServersHoldingThem) {
  TestCluster cluster(1);
  auto client = cluster.client();
  auto values = client->pullMany({"bias", "emb", "w"}, 0);
  ASSERT_TRUE(bool(values)) << llvm::toString(values.takeError());
  ASSERT_EQ(values->size(), 3u);
  for (size_t v = 0; v < 3; ++v) {
    const std::string name = std::vector<std::string>{"bias", "emb", "w"}[v];
    auto alone = client->pull(name, 0);
    ASSERT_TRUE(bool(alone)) << llvm::toString(alone.takeError());
    ASSERT_EQ((*values)[v].shape(), alone->shape()) << name;
    EXPECT_EQ(std::memcmp((*values)[v].raw(), alone->raw(), alone->numBytes()), 0) << name;
  }
  auto unknown = client->pullMany({"w", "nothing"}, 0);
  ASSERT_FALSE(bool(unknown));
  EXPECT_NE(llvm::toString(unknown.takeError()).find("nothing"), std::string::npos);

  cluster.servers[1]->shutdown(); // holds rows of emb and bias, none of w
  auto w = client->pullMany({"w"}, 0);
  ASSERT_TRUE(bool(w)) << llvm::toString(w.takeError());
  EXPECT_EQ(w->front().data<float>()[5], static_cast<float>(initialValue("w", 5)));
  auto both = client->pullMany({"w", "bias"}, 0);
  ASSERT_FALSE(bool(both));
  EXPECT_NE(llvm::toString(both.takeError()).find(cluster.servers[1]->endpoint()),
            std::string::npos);
}

TEST(PsClient, PullRowsAcrossShardsWithRepeatedUnsortedIndices) {
  TestCluster cluster(1);
  auto client = cluster.client();
  auto table = client->pull("emb", 0);
  ASSERT_TRUE(bool(table)) << llvm::toString(table.takeError());

  std::vector<int64_t> rows32 = {9, 0, 4, 3, 9, 5};
  auto got32 = client->pullRows("emb", indices<int32_t>({2, 3}, rows32), 0);
  ASSERT_TRUE(bool(got32)) << llvm::toString(got32.takeError());
  EXPECT_EQ(got32->shape(), (std::vector<int64_t>{2, 3, 3}));
  for (size_t i = 0; i < rows32.size(); ++i)
    expectRow(*got32, static_cast<int64_t>(i), *table, rows32[i]);

  std::vector<int64_t> rows64 = {7, 3, 3, 4, 0, 8, 7};
  auto got64 = client->pullRows("emb", indices<int64_t>({7}, rows64), 0);
  ASSERT_TRUE(bool(got64)) << llvm::toString(got64.takeError());
  EXPECT_EQ(got64->shape(), (std::vector<int64_t>{7, 3}));
  for (size_t i = 0; i < rows64.size(); ++i)
    expectRow(*got64, static_cast<int64_t>(i), *table, rows64[i]);

  auto outside = client->pullRows("emb", indices<int64_t>({2}, {1, 10}), 0);
  ASSERT_FALSE(bool(outside));
  EXPECT_NE(llvm::toString(outside.takeError()).find("row 10 of emb is out of range"),
            std::string::npos);
}

TEST(PsClient, PullRowsAsksOnlyTheShardsOwningThem) {
  TestCluster cluster(1);
  auto client = cluster.client();
  cluster.servers[1]->shutdown(); // holds emb rows [4, 10)
  auto first = client->pullRows("emb", indices<int32_t>({3}, {3, 0, 3}), 0);
  ASSERT_TRUE(bool(first)) << llvm::toString(first.takeError());
  EXPECT_EQ(first->data<float>()[0], static_cast<float>(initialValue("emb", 9)));
  auto second = client->pullRows("emb", indices<int32_t>({2}, {3, 4}), 0);
  ASSERT_FALSE(bool(second));
  EXPECT_NE(llvm::toString(second.takeError()).find(cluster.servers[1]->endpoint()),
            std::string::npos);
}

TEST(PsClient, UniqueRowsAreFetchedOnce) {
  TestCluster cluster(1);
  auto client = cluster.client();
  ASSERT_TRUE(bool(client->pullRows("emb", indices<int64_t>({1}, {5}), 0)));
  uint64_t oneRow = client->bytesReceived();
  std::vector<int64_t> many(64, 5);
  ASSERT_TRUE(bool(client->pullRows("emb", indices<int64_t>({64}, many), 0)));
  EXPECT_EQ(client->bytesReceived() - oneRow, oneRow);
}

TEST(PsClient, CountsPayloadBytes) {
  TestCluster cluster(1);
  auto client = cluster.client();
  EXPECT_EQ(client->bytesSent(), 0u);
  ASSERT_TRUE(bool(client->pull("emb", 0)));
  EXPECT_GT(client->bytesSent(), 0u);
  EXPECT_GE(client->bytesReceived(), 10u * 3u * sizeof(float));
  uint64_t sent = client->bytesSent();
  Tensor w(prism::ir::DType::F32, {4, 2});
  w.fillZero();
  ASSERT_FALSE(bool(client->push(0, 1, 0, {Gradient::ofDense("w", w)})));
  EXPECT_GE(client->bytesSent() - sent, 8u * sizeof(float));
}

// A call that finds its server not listening (yet, or again) is retried within its deadline: a
// server that comes back moments later answers it.
TEST(PsClient, APullIsRetriedUntilItsServerListensAgain) {
  TestCluster cluster(1);
  auto client = cluster.client();
  const std::string address = cluster.servers[1]->endpoint();
  cluster.servers[1].reset(); // the port is free again

  std::promise<llvm::Expected<Tensor>> pulled;
  std::thread puller([&] { pulled.set_value(client->pull("emb", 0)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ParameterServerOptions options;
  options.jobToken = kToken;
  options.address = address;
  options.variables = cluster.stores[1];
  options.shards = TestCluster::shardsOf(1);
  options.apply = [store = cluster.stores[1]](int64_t, const GradientSet &gradients) {
    return applySgd(*store, gradients);
  };
  auto restarted = ParameterServer::start(std::move(options));
  ASSERT_TRUE(bool(restarted)) << llvm::toString(restarted.takeError());
  puller.join();
  auto value = pulled.get_future().get();
  ASSERT_TRUE(bool(value)) << llvm::toString(value.takeError());
  for (int64_t i = 0; i < value->numElements(); ++i)
    EXPECT_EQ(value->data<float>()[i], static_cast<float>(initialValue("emb", i)));
}

// --compress: f32 gradients are pushed, and rows pulled, as 16-bit floats. The rows come back
// rounded; the server applies the rounded gradient; a compressed tensor is half the bytes.
TEST(PsClient, CompressedPushesAndRowPullsTravelAs16BitFloats) {
  using prism::ir::ComputePrecision;
  TestCluster cluster(1);
  PsClientOptions options = cluster.clientOptions();
  options.compress = ComputePrecision::BF16;
  auto compressed = PsClient::create(options);
  ASSERT_TRUE(bool(compressed)) << llvm::toString(compressed.takeError());
  auto plain = cluster.client();
  auto table = plain->pull("emb", 0);
  ASSERT_TRUE(bool(table)) << llvm::toString(table.takeError());

  std::vector<int64_t> rows = {9, 0, 4, 3};
  auto got = (*compressed)->pullRows("emb", indices<int64_t>({4}, rows), 0);
  ASSERT_TRUE(bool(got)) << llvm::toString(got.takeError());
  for (size_t i = 0; i < rows.size(); ++i)
    for (int64_t k = 0; k < 3; ++k) {
      float exact = table->data<float>()[rows[i] * 3 + k];
      EXPECT_EQ(got->data<float>()[i * 3 + k],
                prism::ir::roundToPrecision(exact, ComputePrecision::BF16));
    }

  Tensor gradient(prism::ir::DType::F32, {2, 3});
  for (int64_t i = 0; i < 6; ++i)
    gradient.data<float>()[i] = 0.1f + 0.013f * static_cast<float>(i);
  std::vector<int64_t> pushed = {1, 7};
  ASSERT_FALSE(bool(
      (*compressed)
          ->push(0, 1, 0, {Gradient::ofRows("emb", indices<int64_t>({2}, pushed), gradient)})));
  auto after = plain->pull("emb", 1);
  ASSERT_TRUE(bool(after)) << llvm::toString(after.takeError());
  for (size_t r = 0; r < pushed.size(); ++r)
    for (int64_t k = 0; k < 3; ++k) {
      float g =
          prism::ir::roundToPrecision(gradient.data<float>()[r * 3 + k], ComputePrecision::BF16);
      EXPECT_EQ(after->data<float>()[pushed[r] * 3 + k],
                table->data<float>()[pushed[r] * 3 + k] - static_cast<float>(kLearningRate) * g);
    }

  Tensor big(prism::ir::DType::F32, {1000});
  for (int64_t i = 0; i < 1000; ++i)
    big.data<float>()[i] = 1.0f / static_cast<float>(i + 3);
  for (ComputePrecision precision : {ComputePrecision::FP16, ComputePrecision::BF16}) {
    ::prism::ps::Tensor message;
    toWire(big, &message, precision);
    EXPECT_EQ(message.data().size(), 2000u);
    auto back = fromWire(message);
    ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
    for (int64_t i = 0; i < 1000; ++i)
      EXPECT_EQ(back->data<float>()[i],
                prism::ir::roundToPrecision(big.data<float>()[i], precision));
  }
  // Only f32 travels compressed, and a bad encoding is named.
  ::prism::ps::Tensor ints;
  toWire(indices<int64_t>({2}, {1, 2}), &ints, ComputePrecision::FP16);
  EXPECT_TRUE(ints.encoding().empty());
  ints.set_encoding("int4");
  auto refused = fromWire(ints);
  ASSERT_FALSE(bool(refused));
  EXPECT_NE(llvm::toString(refused.takeError()).find("encoding: unknown precision 'int4'"),
            std::string::npos);
}

// A server buffers a request whole before it can read its token, so it takes none larger than
// the largest legitimate push (its shards' gradients, twice over, plus 4 MiB): a 64 MB PushStep
// sent straight to the service is turned away by gRPC itself, with or without the token, and
// nothing is applied.
TEST(PsClient, RequestsLargerThanAnyPushAreRefusedUnread) {
  TestCluster cluster(1);
  auto channel =
      grpc::CreateChannel(cluster.servers[0]->endpoint(), grpc::InsecureChannelCredentials());
  auto stub = prism::ps::ParameterServer::NewStub(channel);
  prism::ps::PushStepRequest request;
  request.set_step(0);
  prism::ps::Gradient *g = request.add_gradients();
  g->set_name("w");
  g->mutable_dense()->set_dtype("f32");
  g->mutable_dense()->add_shape(16 << 20);
  g->mutable_dense()->set_data(std::string(std::size_t(64) << 20, '\0'));
  for (bool withToken : {false, true}) {
    grpc::ClientContext context;
    if (withToken)
      context.AddMetadata(prism::runtime::ps::kJobTokenKey, kToken);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    prism::ps::PushStepResponse response;
    grpc::Status status = stub->PushStep(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << (withToken ? "with" : "without") << " the token: " << status.error_message();
  }
  EXPECT_EQ(cluster.servers[0]->version(), 0);
  // A push of the right size still goes through.
  Tensor w(prism::ir::DType::F32, {4, 2});
  w.fillZero();
  EXPECT_FALSE(bool(cluster.client()->push(0, 1, 0, {Gradient::ofDense("w", w)})));
}

TEST(PsClient, WrongOrMissingTokenIsRefused) {
  TestCluster cluster(1);
  for (const char *token : {"not-the-token", ""}) {
    auto client = cluster.client(token);
    auto value = client->pull("w", 0);
    ASSERT_FALSE(bool(value)) << "token '" << token << "'";
    llvm::Error refused = value.takeError();
    EXPECT_EQ(prism::ir::errorCode(refused), prism::ir::ErrorCode::PermissionDenied);
    EXPECT_NE(llvm::toString(std::move(refused)).find("UNAUTHENTICATED"), std::string::npos);
    llvm::Error push = client->push(0, 1, 0, {});
    ASSERT_TRUE(bool(push));
    EXPECT_NE(llvm::toString(std::move(push)).find("job token"), std::string::npos);
    EXPECT_FALSE(bool(client->status(cluster.servers[0]->endpoint())));
  }
  // Nothing was applied by the refused pushes.
  EXPECT_EQ(cluster.servers[0]->version(), 0);
  auto status = cluster.client()->status(cluster.servers[1]->endpoint());
  ASSERT_TRUE(bool(status)) << llvm::toString(status.takeError());
  EXPECT_EQ(status->version, 0);
  EXPECT_EQ(status->contributors, 1);
  ASSERT_EQ(status->shards.size(), 2u);
  EXPECT_EQ(status->shards[0].name, "emb");
  EXPECT_EQ(status->shards[0].rowBegin, 4);
  EXPECT_EQ(status->shards[0].fullShape, (std::vector<int64_t>{10, 3}));
}

// With TLS every caller is a worker of the job, and a push counts for the worker whose
// certificate sent it: worker:1's certificate cannot push as contributor 0, and a client
// without the job's certificates reaches nothing.
TEST(PsClient, WithTlsAPushComesFromTheWorkerItCountsFor) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("prism-ps-tls", dir));
  ASSERT_FALSE(bool(
      prism::runtime::dist::writeJobCertificates(dir, {"ps:0", "ps:1", "worker:0", "worker:1"})));
  auto identity = [&](const std::string &task) {
    auto read =
        prism::runtime::dist::readTlsFiles(prism::runtime::dist::jobCertificateFiles(dir, task));
    EXPECT_TRUE(bool(read)) << llvm::toString(read.takeError());
    return read ? *read : std::nullopt;
  };
  TestCluster cluster(2, std::chrono::milliseconds(20000), -1,
                      {identity("ps:0"), identity("ps:1")});
  auto clientAs = [&](std::optional<prism::runtime::dist::TlsIdentity> tls) {
    PsClientOptions options = cluster.clientOptions();
    options.rpcDeadline = std::chrono::milliseconds(3000);
    options.tls = std::move(tls);
    for (size_t i = 0; i < cluster.servers.size(); ++i)
      options.serverNames[cluster.servers[i]->endpoint()] = "ps:" + std::to_string(i);
    auto created = PsClient::create(std::move(options));
    EXPECT_TRUE(bool(created)) << llvm::toString(created.takeError());
    return created ? std::move(*created) : nullptr;
  };
  auto worker1 = clientAs(identity("worker:1"));
  ASSERT_TRUE(bool(worker1->pull("w", 0))) << "a worker pulls";
  Tensor w(prism::ir::DType::F32, {4, 2});
  w.fillZero();
  llvm::Error forged = worker1->push(0, 1, /*contributor=*/0, {Gradient::ofDense("w", w)});
  ASSERT_TRUE(bool(forged));
  EXPECT_EQ(prism::ir::errorCode(forged), prism::ir::ErrorCode::PermissionDenied);
  EXPECT_NE(llvm::toString(std::move(forged))
                .find("PushStep with the certificate of worker:1, not of worker:0"),
            std::string::npos);
  // A server's certificate is not a worker's.
  auto server = clientAs(identity("ps:1"));
  EXPECT_FALSE(bool(server->pull("w", 0)));
  // No certificate at all: the TLS handshake fails before any request.
  auto plaintext = clientAs(std::nullopt);
  EXPECT_FALSE(bool(plaintext->pull("w", 0)));
  EXPECT_EQ(cluster.servers[0]->version(), 0);
  // The two workers' own pushes make step 0.
  auto worker0 = clientAs(identity("worker:0"));
  std::thread first(
      [&] { EXPECT_FALSE(bool(worker0->push(0, 1, 0, {Gradient::ofDense("w", w)}))); });
  EXPECT_FALSE(bool(worker1->push(0, 1, 1, {Gradient::ofDense("w", w)})));
  first.join();
  EXPECT_EQ(cluster.servers[0]->version(), 1);
  llvm::sys::fs::remove_directories(dir);
}

TEST(PsClient, RejectsLayoutsThatDoNotCoverTheRows) {
  PsClientOptions options;
  options.variables["emb"] = {prism::ir::DType::F32, {10, 3}, {{"127.0.0.1:1", 0, 4}}};
  auto gap = PsClient::create(options);
  ASSERT_FALSE(bool(gap));
  EXPECT_NE(llvm::toString(gap.takeError()).find("do not cover"), std::string::npos);
  options.variables["emb"].shards.push_back({"127.0.0.1:1", 4, 10});
  auto shared = PsClient::create(options);
  ASSERT_FALSE(bool(shared));
  EXPECT_NE(llvm::toString(shared.takeError()).find("two shards of emb"), std::string::npos);
  options.variables["emb"].shards.back().endpoint = "127.0.0.1:2";
  options.variables["emb"].shards.push_back({"127.0.0.1:3", 4, 4}); // empty shards are fine
  auto good = PsClient::create(options);
  ASSERT_TRUE(bool(good)) << llvm::toString(good.takeError());
  EXPECT_EQ((*good)->endpoints().size(), 3u);
}
