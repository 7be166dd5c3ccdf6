// The calibration's parameter server in a child process: calls reach it from this process, its
// update times come back through shared memory once a push returns, a server that cannot start
// is an error carrying the child's message, and a child never asked to start goes away. A child
// process of lines (the second client of the concurrent pulls) answers each line in its own
// process, keeps its state between lines, pulls from the server with gRPC of its own, and an
// answer that does not come in time is an error saying so.
#include <gtest/gtest.h>

#include <thread>

#include <unistd.h>

#include "runtime/ps/PsClient.h"
#include "tools/CalibrateServer.h"

using namespace prism;
using namespace prism::runtime;
using prism::tools::ChildProcess;
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
  auto child = ChildProcess::fork([] {
    auto lines = std::make_shared<int>(0);
    return [lines](const std::string &line) -> std::string {
      ++*lines;
      if (line == "pid")
        return std::to_string(::getpid()) + " after " + std::to_string(*lines) + " lines";
      if (line == "sleep") {
        std::this_thread::sleep_for(std::chrono::seconds(1));
        return "awake";
      }
      ps::PsClientOptions options;
      options.jobToken = "test";
      options.variables["v"] = {ir::DType::F32, {4}, {{line, 0, 4}}};
      auto client = ps::PsClient::create(options);
      if (!client)
        return "error " + llvm::toString(client.takeError());
      auto value = (*client)->pull("v", 0);
      return value ? std::to_string(value->data<float>()[3]) : llvm::toString(value.takeError());
    };
  });
  ASSERT_TRUE(bool(child)) << llvm::toString(child.takeError());
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

  auto ask = [&](const std::string &line, std::chrono::milliseconds timeout) {
    EXPECT_FALSE(bool((*child)->send(line)));
    return (*child)->answer(timeout);
  };
  auto answer = ask("pid", std::chrono::seconds(30));
  ASSERT_TRUE(bool(answer)) << llvm::toString(answer.takeError());
  EXPECT_NE(*answer, std::to_string(::getpid()) + " after 1 lines");
  EXPECT_NE(answer->find(" after 1 lines"), std::string::npos) << *answer;
  answer = ask(*endpoint, std::chrono::seconds(30));
  ASSERT_TRUE(bool(answer)) << llvm::toString(answer.takeError());
  EXPECT_EQ(*answer, "4.000000");
  answer = ask("pid", std::chrono::seconds(30));
  ASSERT_TRUE(bool(answer)) << llvm::toString(answer.takeError());
  EXPECT_NE(answer->find(" after 3 lines"), std::string::npos) << *answer;
  answer = ask("sleep", std::chrono::milliseconds(100));
  ASSERT_FALSE(bool(answer));
  const std::string late = llvm::toString(answer.takeError());
  EXPECT_NE(late.find("a calibration's child process did not answer within 100 ms"),
            std::string::npos)
      << late;
  child->reset(); // its pipe closes: it leaves once it answered

  auto refused = (*failing)->start(std::chrono::seconds(30));
  ASSERT_FALSE(bool(refused));
  const std::string message = llvm::toString(refused.takeError());
  EXPECT_NE(message.find("the calibration's parameter server: "), std::string::npos) << message;
  EXPECT_NE(message.find("needs a job token"), std::string::npos) << message;
}
