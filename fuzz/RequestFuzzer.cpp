// libFuzzer target: the request handlers of a parameter server and of the coordinator, fed
// through gRPC on loopback to one of each started in this process (the service code as a remote
// task reaches it). The first byte picks the method and whether the job token goes along; the
// rest is the request message (protobuf bytes). Any request gets a status, never a crash, a
// hang (every call has a 100 ms deadline) or an allocation its size does not justify.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "runtime/dist/Coordinator.h"
#include "runtime/dist/coordinator.grpc.pb.h"
#include "runtime/ps/ParameterServer.h"
#include "runtime/ps/Wire.h"
#include "runtime/ps/ps.grpc.pb.h"

namespace {

namespace dist = prism::runtime::dist;
namespace ps = prism::runtime::ps;
namespace proto = prism::dist;
namespace wire = prism::ps;

const char *kToken = "fuzz-token";

// A parameter server holding emb f32[16, 2] rows [0, 16) and w f32[4, 2], one contributor,
// applying SGD; it fails once an apply fails, so a fresh one is made then.
struct Servers {
  std::unique_ptr<ps::ParameterServer> server;
  std::shared_ptr<prism::runtime::VariableStore> store;
  std::unique_ptr<wire::ParameterServer::Stub> psStub;
  std::unique_ptr<dist::Coordinator> coordinator;
  std::unique_ptr<proto::CoordinatorService::Stub> coordinatorStub;

  void startServer() {
    psStub.reset();
    server.reset();
    store = std::make_shared<prism::runtime::VariableStore>();
    ps::ParameterServerOptions options;
    options.jobToken = kToken;
    options.contributors = 1;
    options.variables = store;
    options.waitTimeout = std::chrono::milliseconds(100);
    options.shards = {{"emb", prism::ir::DType::F32, 0, 16, {16, 2}},
                      {"w", prism::ir::DType::F32, 0, 4, {4, 2}}};
    auto held = store;
    options.apply = [held](int64_t, const ps::GradientSet &gradients) -> llvm::Error {
      for (const auto &[name, gradient] : gradients) {
        prism::runtime::Tensor *value = held->find(name);
        if (!value || gradient.isSparse())
          continue;
        float *v = value->data<float>();
        for (int64_t i = 0; i < value->numElements(); ++i)
          v[i] -= 0.1f * gradient.dense.data<float>()[i];
      }
      return llvm::Error::success();
    };
    auto started = ps::ParameterServer::start(std::move(options));
    if (!started) {
      llvm::consumeError(started.takeError());
      return;
    }
    server = std::move(*started);
    psStub = wire::ParameterServer::NewStub(
        grpc::CreateChannel(server->endpoint(), grpc::InsecureChannelCredentials()));
  }

  void startCoordinator() {
    coordinatorStub.reset();
    coordinator.reset();
    dist::CoordinatorOptions options;
    options.jobToken = kToken;
    options.expectedTasks = {"worker:0", "worker:1", "ps:0"};
    options.heartbeatTimeout = std::chrono::seconds(3600);
    auto started = dist::Coordinator::start(std::move(options));
    if (!started) {
      llvm::consumeError(started.takeError());
      return;
    }
    coordinator = std::move(*started);
    coordinatorStub = proto::CoordinatorService::NewStub(
        grpc::CreateChannel(coordinator->address(), grpc::InsecureChannelCredentials()));
  }
};

Servers &servers() {
  static Servers *s = [] {
    auto *made = new Servers;
    made->startServer();
    made->startCoordinator();
    return made;
  }();
  return *s;
}

// Parses `bytes` as a Request and calls `method` with it; false when the bytes are no message.
template <typename Request, typename Response, typename Stub, typename Method>
bool call(Stub *stub, Method method, const uint8_t *bytes, size_t size, bool withToken) {
  Request request;
  if (!stub || !request.ParseFromArray(bytes, static_cast<int>(size)))
    return false;
  grpc::ClientContext context;
  if (withToken)
    context.AddMetadata(ps::kJobTokenKey, kToken);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  Response response;
  (stub->*method)(&context, request, &response);
  return true;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  Servers &s = servers();
  const uint8_t *body = data + 1;
  size_t n = size - 1;
  bool token = data[0] & 0x80;
  auto *p = s.psStub.get();
  auto *c = s.coordinatorStub.get();
  using PS = wire::ParameterServer::Stub;
  using CS = proto::CoordinatorService::Stub;
  switch ((data[0] & 0x7f) % 13) {
  case 0:
    call<wire::PullRequest, wire::PullResponse>(p, &PS::Pull, body, n, token);
    break;
  case 1:
    call<wire::PullRowsRequest, wire::PullRowsResponse>(p, &PS::PullRows, body, n, token);
    break;
  case 2:
    call<wire::PushStepRequest, wire::PushStepResponse>(p, &PS::PushStep, body, n, token);
    break;
  case 3:
    call<wire::StatusRequest, wire::StatusResponse>(p, &PS::Status, body, n, token);
    break;
  case 4:
    call<proto::RegisterRequest, proto::Ack>(c, &CS::Register, body, n, token);
    break;
  case 5:
    call<proto::SetRequest, proto::Ack>(c, &CS::Set, body, n, token);
    break;
  case 6:
    call<proto::GetRequest, proto::GetReply>(c, &CS::Get, body, n, token);
    break;
  case 7:
    call<proto::WaitRequest, proto::Ack>(c, &CS::Wait, body, n, token);
    break;
  case 8:
    call<proto::CheckRequest, proto::CheckReply>(c, &CS::Check, body, n, token);
    break;
  case 9:
    call<proto::BarrierRequest, proto::Ack>(c, &CS::Barrier, body, n, token);
    break;
  case 10:
    call<proto::TaskRequest, proto::Ack>(c, &CS::Heartbeat, body, n, token);
    break;
  case 11:
    call<proto::ReportFailureRequest, proto::Ack>(c, &CS::ReportFailure, body, n, token);
    break;
  case 12:
    call<proto::TaskRequest, proto::Ack>(c, &CS::Finish, body, n, token);
    break;
  }
  // A reported failure ends a job, and a failed apply a server: fresh ones for the next input.
  if (s.coordinator && s.coordinator->abortReason())
    s.startCoordinator();
  if (s.server) {
    grpc::ClientContext context;
    context.AddMetadata(ps::kJobTokenKey, kToken);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
    wire::StatusRequest request;
    wire::StatusResponse response;
    if (s.psStub->Status(&context, request, &response).ok() && !response.failure().empty())
      s.startServer();
  }
  return 0;
}
