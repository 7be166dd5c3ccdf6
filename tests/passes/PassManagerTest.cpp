// The pass manager: pipelines, options, verify-each, dumps and the statistics report.
#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace prism;
using namespace prism::ir;
using passes::PassManager;
using passes::PassManagerOptions;
using passes::PassOptions;

namespace {

// x -> relu -> relu (the loss), plus one op nothing reads.
std::unique_ptr<Module> smallModule() {
  ModuleBuilder b("m");
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 4}));
  Value *h = b.relu(x, "h");
  b.op("exp", {x}, {}, "unused");
  Value *y = b.op("reduce_sum", {h}, {}, "y");
  b.minimize(y, "sgd", attrs({{"lr", Attr::real(0.1)}}));
  auto m = b.finish();
  EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
  return std::move(*m);
}

// Moves the last op to the front, so it reads values before they are defined.
class BreakingPass : public passes::Pass {
public:
  llvm::StringRef name() const override { return "break-order"; }
  llvm::StringRef summary() const override { return "test only: puts the last op first"; }
  llvm::Expected<bool> run(Module &module, const PassOptions &) override {
    module.moveOp(module.ops().back().get(), module.ops().front().get());
    return true;
  }
};

// Reads `--workers` and fails with a plain error when it is negative.
class WorkersPass : public passes::Pass {
public:
  llvm::StringRef name() const override { return "read-workers"; }
  llvm::StringRef summary() const override { return "test only: reads --workers"; }
  std::vector<std::string> optionKeys() const override { return {"workers"}; }
  llvm::Expected<bool> run(Module &, const PassOptions &options) override {
    auto workers = options.getInt("workers", 1);
    if (!workers)
      return workers.takeError();
    if (*workers < 0)
      return makeError("workers must not be negative");
    seen = *workers;
    return false;
  }
  int64_t seen = 0;
};

std::string message(llvm::Error err) {
  return llvm::toString(std::move(err));
}

} // namespace

TEST(PassRegistry, ListsEveryPassOnceWithNameAndSummary) {
  std::vector<std::string> names;
  for (const passes::PassInfo &info : passes::allPasses()) {
    auto pass = info.create();
    ASSERT_TRUE(pass);
    EXPECT_EQ(pass->name(), info.name);
    EXPECT_FALSE(pass->summary().empty()) << info.name;
    names.push_back(info.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "inline", "infer-shapes", "expand", "autodiff", "lower-optimizer", "dce",
                       "cse", "fuse-bias-activation", "fuse-elementwise", "mixed-precision",
                       "classify-variables", "place-variables", "replicate-in-graph",
                       "replicate-between-graph", "route-gradients"}));
  EXPECT_EQ(passes::createPass("no-such-pass"), nullptr);
  EXPECT_EQ(passes::createPass("dce")->name(), "dce");
}

TEST(PassOptions, ParsesNumbersAndNamesTheOptionOnError) {
  PassOptions options;
  options.set("workers", "4");
  options.set("ratio", "0.25");
  options.set("bad", "x");
  EXPECT_EQ(*options.getInt("workers", 1), 4);
  EXPECT_EQ(*options.getInt("absent", 7), 7);
  EXPECT_DOUBLE_EQ(*options.getFloat("ratio", 1), 0.25);
  EXPECT_DOUBLE_EQ(*options.getFloat("workers", 1), 4.0);
  EXPECT_EQ(options.get("absent", "dflt"), "dflt");

  auto bad = options.getInt("bad", 1);
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(message(bad.takeError()).find("option --bad: expected an integer, got 'x'"),
            std::string::npos);
  auto fraction = options.getInt("ratio", 1);
  ASSERT_FALSE(bool(fraction));
  EXPECT_NE(message(fraction.takeError()).find("expected an integer, got '0.25'"),
            std::string::npos);
  auto badFloat = options.getFloat("bad", 1);
  ASSERT_FALSE(bool(badFloat));
  EXPECT_NE(message(badFloat.takeError()).find("option --bad: expected a number, got 'x'"),
            std::string::npos);
}

TEST(PassManager, ParsesAPipelineInOrder) {
  auto pm = PassManager::fromPipeline("infer-shapes, dce,cse");
  ASSERT_TRUE(bool(pm)) << message(pm.takeError());
  ASSERT_EQ(pm->passes().size(), 3u);
  EXPECT_EQ(pm->passes()[0]->name(), "infer-shapes");
  EXPECT_EQ(pm->passes()[1]->name(), "dce");
  EXPECT_EQ(pm->passes()[2]->name(), "cse");
  EXPECT_EQ(pm->pipelineString(), "infer-shapes,dce,cse");

  auto empty = PassManager::fromPipeline("");
  ASSERT_TRUE(bool(empty));
  EXPECT_TRUE(empty->passes().empty());
}

TEST(PassManager, UnknownPassListsTheKnownOnes) {
  auto pm = PassManager::fromPipeline("infer-shapes,no-such-pass");
  ASSERT_FALSE(bool(pm));
  std::string msg = message(pm.takeError());
  EXPECT_NE(msg.find("unknown pass 'no-such-pass'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("infer-shapes, expand, autodiff, lower-optimizer, dce, cse"),
            std::string::npos)
      << msg;

  auto gap = PassManager::fromPipeline("dce,,cse");
  ASSERT_FALSE(bool(gap));
  EXPECT_NE(message(gap.takeError()).find("empty pass name"), std::string::npos);
}

TEST(PassManager, RunsPassesAndReportsChange) {
  auto module = smallModule();
  auto pm = PassManager::fromPipeline("dce");
  ASSERT_TRUE(bool(pm));
  auto changed = pm->run(*module, {});
  ASSERT_TRUE(bool(changed)) << message(changed.takeError());
  EXPECT_TRUE(*changed);
  EXPECT_EQ(module->lookup("unused"), nullptr);
  changed = pm->run(*module, {});
  ASSERT_TRUE(bool(changed));
  EXPECT_FALSE(*changed);
}

TEST(PassManager, RejectsOptionsNoPassReads) {
  auto module = smallModule();
  auto pm = PassManager::fromPipeline("dce");
  ASSERT_TRUE(bool(pm));
  PassOptions options;
  options.set("workers", "4");
  auto result = pm->run(*module, options);
  ASSERT_FALSE(bool(result));
  std::string msg = message(result.takeError());
  EXPECT_NE(msg.find("option --workers is not read by any pass in the pipeline 'dce'"),
            std::string::npos)
      << msg;
  // Nothing ran: the unused op is still there.
  EXPECT_NE(module->lookup("unused"), nullptr);

  auto workers = std::make_unique<WorkersPass>();
  WorkersPass *reader = workers.get();
  pm->addPass(std::move(workers));
  result = pm->run(*module, options);
  ASSERT_TRUE(bool(result)) << message(result.takeError());
  EXPECT_EQ(reader->seen, 4);
}

TEST(PassManager, PrefixesPassErrorsWithThePassName) {
  auto module = smallModule();
  PassManager pm;
  pm.addPass(std::make_unique<WorkersPass>());
  PassOptions options;
  options.set("workers", "-1");
  auto result = pm.run(*module, options);
  ASSERT_FALSE(bool(result));
  EXPECT_EQ(message(result.takeError()), "error: read-workers: workers must not be negative");

  options.set("workers", "many");
  result = pm.run(*module, options);
  ASSERT_FALSE(bool(result));
  EXPECT_EQ(message(result.takeError()),
            "error: read-workers: option --workers: expected an integer, got 'many'");
}

TEST(PassManager, VerifyEachBlamesThePassThatBrokeTheModule) {
  auto module = smallModule();
  auto pm = PassManager::fromPipeline("dce");
  ASSERT_TRUE(bool(pm));
  pm->addPass(std::make_unique<BreakingPass>());
  pm->addPass(passes::createPass("cse"));
  auto result = pm->run(*module, {});
  ASSERT_FALSE(bool(result));
  std::string msg = message(result.takeError());
  EXPECT_NE(msg.find("break-order: the module is invalid after this pass"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("used before it is defined"), std::string::npos) << msg;

  PassManagerOptions noVerify;
  noVerify.verifyEach = false;
  PassManager lenient(noVerify);
  lenient.addPass(std::make_unique<BreakingPass>());
  auto other = smallModule();
  EXPECT_TRUE(bool(lenient.run(*other, {})));
}

// Clears the type of the first op's result.
class ForgetTypePass : public passes::Pass {
public:
  llvm::StringRef name() const override { return "forget-type"; }
  llvm::StringRef summary() const override { return "test only: drops a type"; }
  llvm::Expected<bool> run(Module &module, const PassOptions &) override {
    module.ops().front()->result()->setType(std::nullopt);
    return true;
  }
};

TEST(PassManager, VerifyEachRequiresTypesOnceTheModuleIsTyped) {
  auto typed = smallModule();
  PassManager pm;
  pm.addPass(std::make_unique<ForgetTypePass>());
  auto result = pm.run(*typed, {});
  ASSERT_FALSE(bool(result));
  std::string msg = message(result.takeError());
  EXPECT_NE(msg.find("forget-type: the module is invalid after this pass: %h has no type"),
            std::string::npos)
      << msg;

  // An untyped module may stay untyped.
  auto untyped = smallModule();
  for (const auto &op : untyped->ops())
    op->result()->setType(std::nullopt);
  result = pm.run(*untyped, {});
  EXPECT_TRUE(bool(result)) << message(result.takeError());
}

TEST(PassManager, DumpsNumberedFilesAfterEachPass) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("prism-dumps", dir));
  PassManagerOptions options;
  options.dumpAfter = "all";
  options.dumpDir = (dir + "/nested").str();
  auto pm = PassManager::fromPipeline("dce,cse,dce", options);
  ASSERT_TRUE(bool(pm));
  auto module = smallModule();
  ASSERT_TRUE(bool(pm->run(*module, {})));
  std::vector<std::string> names;
  for (const std::string &file : pm->dumpedFiles()) {
    names.push_back(llvm::sys::path::filename(file).str());
    auto buffer = llvm::MemoryBuffer::getFile(file);
    ASSERT_TRUE(bool(buffer)) << file;
    EXPECT_TRUE((*buffer)->getBuffer().startswith("model m")) << (*buffer)->getBuffer().str();
  }
  EXPECT_EQ(names, (std::vector<std::string>{"01-dce.prism", "02-cse.prism", "03-dce.prism"}));

  // Only the named pass, keeping its position in the pipeline.
  options.dumpAfter = "cse";
  options.dumpDir = dir.str().str();
  auto one = PassManager::fromPipeline("dce,cse", options);
  ASSERT_TRUE(bool(one));
  ASSERT_TRUE(bool(one->run(*module, {})));
  ASSERT_EQ(one->dumpedFiles().size(), 1u);
  EXPECT_EQ(llvm::sys::path::filename(one->dumpedFiles()[0]), "02-cse.prism");

  options.dumpAfter = "autodiff";
  auto absent = PassManager::fromPipeline("dce", options);
  ASSERT_TRUE(bool(absent));
  auto result = absent->run(*module, {});
  ASSERT_FALSE(bool(result));
  EXPECT_NE(message(result.takeError()).find("--dump-after=autodiff names no pass"),
            std::string::npos);
  llvm::sys::fs::remove_directories(dir);
}

TEST(PassManager, PrintsAlignedStatistics) {
  ModuleBuilder b("m");
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 4}));
  Value *a = b.relu(x, "a");
  Value *c = b.relu(x, "c");
  b.op("exp", {x}, {}, "unused");
  Value *y = b.op("reduce_sum", {b.add(a, c)}, {}, "y");
  b.minimize(y, "sgd", attrs({{"lr", Attr::real(0.1)}}));
  auto module = b.finish();
  ASSERT_TRUE(bool(module));
  for (const auto &op : (*module)->ops())
    op->result()->setType(std::nullopt);

  auto pm = PassManager::fromPipeline("infer-shapes,cse,dce");
  ASSERT_TRUE(bool(pm));
  ASSERT_TRUE(bool(pm->run(**module, {})));
  std::string report;
  llvm::raw_string_ostream os(report);
  pm->printStatistics(os);
  EXPECT_EQ(os.str(), "pass          statistic     count\n"
                      "infer-shapes  values typed      5\n"
                      "cse           ops merged        1\n"
                      "dce           ops removed       1\n");
}
