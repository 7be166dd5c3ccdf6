// The calibration's parameter server in a child process: calls reach it from this process, its
// update times come back through shared memory once a push returns, a server that cannot start
// is an error carrying the child's message, and a child never asked to start goes away.
#include <gtest/gtest.h>

#include <unistd.h>

#include "runtime/ps/PsClient.h"
#include "tools/CalibrateServer.h"

using namespace prism;
using namespace prism::runtime;
using prism::tools::ServerProcess;
using prism::tools::UpdateTimes;

namespace {

const ps::PsShard kShard{"v", ir::DType::F32, 0, 4, {4}};

// A server of one variable [1, 2, 3, 4] whose update records the process it runs in.
ps::ParameterServerOptions serverOf(UpdateTimes &updates) {
  ps::ParameterServerOptions options;
  options.jobToken = "test";
  options.variables = std::make_shared<VariableStore>();
  options.shards = {kShard};
  Tensor value(ir::DType::F32, {4});
  for (int i = 0; i < 4; ++i)
    value.data<float>()[i] = static_cast<float>(i + 1);
  options.variables->set("v", std::move(value));
  options.apply = [&updates](int64_t, const ps::GradientSet &) {
    updates.record(static_cast<double>(::getpid()));
    return llvm::Error::success();
  };
  return options;
}

} // namespace

// One test: every child is forked before this process first uses gRPC (as `prism calibrate`
// forks its server first).
TEST(CalibrateServer, ServesFromAChildProcessAndReportsItsUpdates) {
  auto served = ServerProcess::fork(serverOf);
  ASSERT_TRUE(bool(served)) << llvm::toString(served.takeError());
  auto failing = ServerProcess::fork([](UpdateTimes &updates) {
    ps::ParameterServerOptions options = serverOf(updates);
    options.jobToken.clear();
    return options;
  });
  ASSERT_TRUE(bool(failing)) << llvm::toString(failing.takeError());
  auto idle = ServerProcess::fork(serverOf);
  ASSERT_TRUE(bool(idle)) << llvm::toString(idle.takeError());
  idle->reset(); // never started: the child leaves when its pipe closes

  auto endpoint = (*served)->start(std::chrono::seconds(30));
  ASSERT_TRUE(bool(endpoint)) << llvm::toString(endpoint.takeError());
  ps::PsClientOptions options;
  options.jobToken = "test";
  options.variables["v"] = {ir::DType::F32, {4}, {{*endpoint, 0, 4}}};
  auto client = ps::PsClient::create(options);
  ASSERT_TRUE(bool(client)) << llvm::toString(client.takeError());
  auto pulled = (*client)->pull("v", 0);
  ASSERT_TRUE(bool(pulled)) << llvm::toString(pulled.takeError());
  EXPECT_EQ(pulled->data<float>()[2], 3.0f);
  const UpdateTimes &updates = (*served)->updates();
  EXPECT_EQ(updates.count(), 0);
  ASSERT_FALSE(bool((*client)->push(0, 1.0, 0, {ps::Gradient::ofDense("v", *pulled)})));
  // The push returned after the update, which ran in another process and recorded its pid here.
  ASSERT_EQ(updates.count(), 1);
  EXPECT_GT(updates.at(0), 0);
  EXPECT_NE(updates.at(0), static_cast<double>(::getpid()));

  auto refused = (*failing)->start(std::chrono::seconds(30));
  ASSERT_FALSE(bool(refused));
  const std::string message = llvm::toString(refused.takeError());
  EXPECT_NE(message.find("the calibration's parameter server: "), std::string::npos) << message;
  EXPECT_NE(message.find("needs a job token"), std::string::npos) << message;
}
