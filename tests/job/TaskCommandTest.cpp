// The task command line: what the launcher writes, the task reads back unchanged, and what a
// person types is read the same way or refused with the flag named.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/job/InjectedFault.h"
#include "runtime/job/TaskCommand.h"

namespace prism::runtime::job {
namespace {

void expectSame(const TaskCommand &a, const TaskCommand &b) {
  EXPECT_EQ(a.plan, b.plan);
  EXPECT_EQ(a.task, b.task);
  EXPECT_EQ(a.coordinator, b.coordinator);
  const JobOptions &x = a.options, &y = b.options;
  EXPECT_EQ(x.data, y.data);
  EXPECT_EQ(x.steps, y.steps);
  EXPECT_EQ(x.epochs, y.epochs);
  EXPECT_EQ(x.threads, y.threads);
  EXPECT_EQ(x.tf32, y.tf32);
  EXPECT_EQ(x.metricsOut, y.metricsOut);
  EXPECT_EQ(x.quiet, y.quiet);
  EXPECT_EQ(x.evaluate, y.evaluate);
  EXPECT_EQ(x.heartbeatTimeout.count(), y.heartbeatTimeout.count());
  EXPECT_EQ(x.variablesDir, y.variablesDir);
  EXPECT_EQ(x.saveDir, y.saveDir);
  EXPECT_EQ(x.restoreDir, y.restoreDir);
  EXPECT_EQ(x.checkpoints.dir, y.checkpoints.dir);
  EXPECT_EQ(x.checkpoints.every, y.checkpoints.every);
  EXPECT_EQ(x.injectFault, y.injectFault);
}

std::string errorOf(llvm::Expected<TaskCommand> parsed) {
  return parsed ? "" : llvm::toString(parsed.takeError());
}

TEST(TaskCommand, EveryFieldRoundTrips) {
  TaskCommand command;
  command.plan = "/tmp/job/plan.pb";
  command.task = "ps:1";
  command.coordinator = "127.0.0.1:40123";
  command.options.data = "zipf:100000,tokens=20,classes=10";
  command.options.steps = 20;
  command.options.threads = 3;
  command.options.tf32 = true;
  command.options.metricsOut = "/tmp/job/metrics.jsonl";
  command.options.quiet = true;
  command.options.evaluate = false;
  command.options.heartbeatTimeout = std::chrono::milliseconds(1234);
  command.options.variablesDir = "/tmp/job/variables";
  command.options.saveDir = "/tmp/ckpt.partial-7";
  command.options.restoreDir = "/tmp/ckpt with space";
  command.options.checkpoints.dir = "/tmp/job/checkpoints";
  command.options.checkpoints.every = 25;
  command.options.injectFault = "kill-in-checkpoint@50";
  auto parsed = TaskCommand::parse(command.toArgs());
  ASSERT_TRUE(static_cast<bool>(parsed)) << llvm::toString(parsed.takeError());
  expectSame(*parsed, command);

  TaskCommand byEpochs;
  byEpochs.plan = "plan.pb";
  byEpochs.options.epochs = 2;
  auto again = TaskCommand::parse(byEpochs.toArgs());
  ASSERT_TRUE(static_cast<bool>(again)) << llvm::toString(again.takeError());
  expectSame(*again, byEpochs);
}

TEST(TaskCommand, DefaultsWriteOnlyThePlan) {
  TaskCommand command;
  command.plan = "plan.pb";
  EXPECT_EQ(command.toArgs(), std::vector<std::string>{"plan.pb"});
  auto parsed = TaskCommand::parse({"plan.pb"});
  ASSERT_TRUE(static_cast<bool>(parsed));
  expectSame(*parsed, command);
}

TEST(TaskCommand, ReadsWhatAPersonTypes) {
  auto parsed = TaskCommand::parse({"--task=worker:1", "plan.pb", "-q", "--data", "fashion-mnist",
                                    "--heartbeat-timeout=0.5", "--steps=7"});
  ASSERT_TRUE(static_cast<bool>(parsed)) << llvm::toString(parsed.takeError());
  EXPECT_EQ(parsed->plan, "plan.pb");
  EXPECT_EQ(parsed->task, "worker:1");
  EXPECT_TRUE(parsed->options.quiet);
  EXPECT_EQ(parsed->options.data, "fashion-mnist");
  EXPECT_EQ(parsed->options.heartbeatTimeout.count(), 500);
  EXPECT_EQ(parsed->options.steps, 7);
}

TEST(TaskCommand, MistakesNameTheFlag) {
  EXPECT_NE(
      errorOf(TaskCommand::parse({"plan.pb", "--stpes", "3"})).find("unknown option '--stpes'"),
      std::string::npos);
  EXPECT_NE(errorOf(TaskCommand::parse({"plan.pb", "--steps", "0"}))
                .find("option --steps: expected a positive integer, got '0'"),
            std::string::npos);
  EXPECT_NE(errorOf(TaskCommand::parse({"plan.pb", "--threads", "2000"})).find("--threads"),
            std::string::npos);
  EXPECT_NE(errorOf(TaskCommand::parse({"plan.pb", "--task"})).find("expected a value"),
            std::string::npos);
  EXPECT_NE(errorOf(TaskCommand::parse({"plan.pb", "--steps=2", "--epochs=1"})).find("exclude"),
            std::string::npos);
  EXPECT_NE(errorOf(TaskCommand::parse({"--task", "worker:0"})).find("plan file is missing"),
            std::string::npos);
  EXPECT_NE(errorOf(TaskCommand::parse({"a.pb", "b.pb"})).find("one plan file"), std::string::npos);
  EXPECT_NE(errorOf(TaskCommand::parse({"plan.pb", "--quiet=yes"})).find("takes no value"),
            std::string::npos);
  EXPECT_NE(errorOf(TaskCommand::parse({"plan.pb", "--checkpoint-every", "0"}))
                .find("option --checkpoint-every: expected a positive integer, got '0'"),
            std::string::npos);
  EXPECT_NE(errorOf(TaskCommand::parse({"plan.pb", "--inject-fault", "explode@3"}))
                .find("injected fault 'explode@3': expected KIND@STEP"),
            std::string::npos);
}

TEST(TaskCommand, SlowWorkerFaultCarriesItsDelay) {
  auto faults = parseInjectedFaults("worker:2:slow@40");
  ASSERT_TRUE(static_cast<bool>(faults)) << errorOf(faults.takeError());
  ASSERT_EQ(faults->size(), 1u);
  EXPECT_EQ((*faults)[0].kind, InjectedFault::Kind::Slow);
  EXPECT_EQ((*faults)[0].step, 40); // milliseconds before each step
  EXPECT_EQ((*faults)[0].str(true), "worker:2:slow@40");
  auto command = TaskCommand::parse({"plan.pb", "--inject-fault", "slow@40"});
  ASSERT_TRUE(static_cast<bool>(command)) << errorOf(command.takeError());
  EXPECT_EQ(command->options.injectFault, "slow@40");
  EXPECT_NE(errorOf(parseInjectedFault("slow@0").takeError()).find("or slow@MS"),
            std::string::npos);
}

TEST(TaskCommand, UsageListsEveryFlagItWrites) {
  std::string usage = TaskCommand::usage();
  for (const char *flag : {"--task", "--coordinator", "--data", "--steps", "--epochs", "--threads",
                           "--heartbeat-timeout", "--metrics-out", "--variables-out", "--save",
                           "--restore", "--checkpoint-dir", "--checkpoint-every", "--inject-fault",
                           "--tf32", "--quiet", "--no-eval"})
    EXPECT_NE(usage.find(flag), std::string::npos) << flag;
}

} // namespace
} // namespace prism::runtime::job
