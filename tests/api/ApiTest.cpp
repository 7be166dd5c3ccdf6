// The library's interface (prism/Prism.h): models, compiling plans, sessions stepping, fetching,
// saving and restoring, and the errors a user gets for bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "prism/Prism.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

using namespace prism::api;
namespace api = prism::api;

namespace {

const char *kTiny = R"(model tiny {
  input x : f32[B, 4]
  input y : i32[B]
  var w : f32[4, 3] = glorot_uniform
  var b : f32[3] = zeros
  %logits = bias_add(matmul(x, w), b)
  %loss = softmax_cross_entropy(%logits, y)
  minimize %loss with adam(lr = 0.05)
}
)";

std::string scratchDir(const char *name) {
  llvm::SmallString<128> dir;
  EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory(name, dir));
  return std::string(dir);
}

Model tinyModel() {
  auto model = Model::parse(kTiny, "tiny.prism");
  EXPECT_TRUE(model.ok()) << model.status().message();
  return *model;
}

// A batch of 8 whose label is the index of the largest of the first three features.
void feedBatch(Session &session, int seed = 0) {
  std::vector<float> x(8 * 4);
  std::vector<int32_t> y(8);
  for (int r = 0; r < 8; ++r) {
    for (int c = 0; c < 4; ++c)
      x[r * 4 + c] = static_cast<float>(((r + seed) * 7 + c * 3) % 5) - 2.0f;
    int best = 0;
    for (int c = 1; c < 3; ++c)
      if (x[r * 4 + c] > x[r * 4 + best])
        best = c;
    y[r] = best;
  }
  auto xs = Tensor::fromVector<float>({8, 4}, x);
  auto ys = Tensor::fromVector<int32_t>({8}, y);
  ASSERT_TRUE(xs.ok() && ys.ok());
  ASSERT_TRUE(session.feed("x", *xs).ok());
  ASSERT_TRUE(session.feed("y", *ys).ok());
}

// Feeds a batch and steps, `steps` times; the loss of the first step goes to *firstLoss.
void trainSteps(Session &session, int steps, double *firstLoss) {
  for (int i = 0; i < steps; ++i) {
    feedBatch(session);
    Status s = session.step();
    ASSERT_TRUE(s.ok()) << s.message();
    if (i == 0)
      *firstLoss = session.loss();
  }
}

bool sameElements(const Tensor &a, const Tensor &b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape())
    return false;
  for (int64_t i = 0; i < a.numElements(); ++i)
    if (a.at(i) != b.at(i))
      return false;
  return true;
}

TEST(ApiModel, DescribesInputsAndVariables) {
  Model model = tinyModel();
  EXPECT_EQ(model.name(), "tiny");
  auto inputs = model.inputs();
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].name, "x");
  EXPECT_EQ(inputs[0].dtype, DType::F32);
  EXPECT_EQ(inputs[0].shape, (std::vector<int64_t>{kBatchDim, 4}));
  EXPECT_EQ(inputs[1].dtype, DType::I32);
  EXPECT_EQ(model.variables().size(), 2u);
  EXPECT_EQ(model.optimizer(), "adam(lr = 0.05)");
  EXPECT_FALSE(model.isTrainingStep());
  auto step = model.trainingStep();
  ASSERT_TRUE(step.ok()) << step.status().message();
  EXPECT_TRUE(step->isTrainingStep());
  // Adam's slots are variables of the training step.
  EXPECT_GT(step->variables().size(), model.variables().size());
}

TEST(ApiModel, ParseErrorNamesTheLocation) {
  auto model =
      Model::parse("model m {\n  input x : f32[B, 4]\n  %y = nosuchop(x)\n}\n", "bad.prism");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), ErrorCode::Invalid);
  EXPECT_NE(model.status().message().find("bad.prism:3:"), std::string::npos)
      << model.status().message();
  auto missing = Model::load("/nonexistent/model.prism");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/model.prism"), std::string::npos);
}

TEST(ApiTensor, FromVectorChecksTheSize) {
  auto ok = Tensor::fromVector<float>({2, 2}, {1, 2, 3, 4});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->typeString(), "f32[2, 2]");
  EXPECT_EQ(ok->at(3), 4);
  EXPECT_NE(ok->data<float>(), nullptr);
  EXPECT_EQ(ok->data<int32_t>(), nullptr);
  auto bad = Tensor::fromVector<float>({2, 3}, {1, 2, 3});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::Invalid);
  EXPECT_NE(bad.status().message().find("f32[2, 3]"), std::string::npos);
  // Copies share the elements; clones do not.
  Tensor shared = *ok, cloned = ok->clone();
  ok->data<float>()[0] = 9;
  EXPECT_EQ(shared.at(0), 9);
  EXPECT_EQ(cloned.at(0), 1);
}

TEST(ApiSession, StepsAndTheLossFalls) {
  auto session = Session::open(tinyModel());
  ASSERT_TRUE(session.ok()) << session.status().message();
  EXPECT_TRUE(std::isnan(session->loss()));
  double first = 0;
  ASSERT_NO_FATAL_FAILURE(trainSteps(*session, 30, &first));
  EXPECT_EQ(session->globalStep(), 30);
  EXPECT_TRUE(std::isfinite(session->loss()));
  EXPECT_LT(session->loss(), first * 0.5);
}

bool cpuHasBf16() {
  std::ifstream in("/proc/cpuinfo");
  std::string flags((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return flags.find("avx512_bf16") != std::string::npos ||
         flags.find("amx_bf16") != std::string::npos;
}

// bf16 compute through the API: the training step's matmul carries it, the loss still falls;
// an unknown precision is an error naming it.
TEST(ApiSession, Bf16Precision) {
  auto step = tinyModel().trainingStep(true, "bf16");
  ASSERT_TRUE(step.ok()) << step.status().message();
  EXPECT_NE(step->text().find("compute = bf16"), std::string::npos) << step->text();
  SessionOptions bad;
  bad.precision = "fp8";
  auto refused = Session::open(tinyModel(), bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("unknown precision 'fp8'"), std::string::npos)
      << refused.status().message();
  CompileOptions badCompile;
  badCompile.precision = "fp8";
  EXPECT_FALSE(compile(tinyModel(), badCompile).ok());
  if (!cpuHasBf16())
    GTEST_SKIP() << "this CPU has no AVX512_BF16 to run bf16 kernels";
  SessionOptions options;
  options.precision = "bf16";
  auto session = Session::open(tinyModel(), options);
  ASSERT_TRUE(session.ok()) << session.status().message();
  double first = 0;
  ASSERT_NO_FATAL_FAILURE(trainSteps(*session, 30, &first));
  EXPECT_LT(session->loss(), first * 0.5);
}

// fp16 compute with dynamic loss scaling through the API, on any CPU: a first scale of 2^24
// overflows fp16 in backward (2^24 / 8 examples times |p - y|), so the first steps are skipped
// (the weights stay) and the scale halves until it fits; then the loss falls. The scale state is
// fetched like any variable.
TEST(ApiSession, Fp16PrecisionScalesTheLoss) {
  std::string text = kTiny;
  text.replace(text.find("adam(lr = 0.05)"), 15, "adam(lr = 0.05, loss_scale = 16777216.0)");
  auto model = Model::parse(text, "tiny.prism");
  ASSERT_TRUE(model.ok()) << model.status().message();
  SessionOptions options;
  options.precision = "fp16";
  auto session = Session::open(*model, options);
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto w0 = session->fetch("w");
  ASSERT_TRUE(w0.ok()) << w0.status().message();
  feedBatch(*session);
  ASSERT_TRUE(session->step().ok());
  auto w1 = session->fetch("w");
  auto skipped = session->fetch("loss.skipped_steps");
  auto scale = session->fetch("loss.scale");
  ASSERT_TRUE(w1.ok() && skipped.ok() && scale.ok());
  auto values = [](const Tensor &t) {
    return std::vector<float>(t.data<float>(), t.data<float>() + t.numElements());
  };
  EXPECT_EQ(values(*w0), values(*w1)); // the overflowing step was skipped
  EXPECT_EQ(values(*skipped)[0], 1.0f);
  EXPECT_EQ(values(*scale)[0], 8388608.0f);
  double first = session->loss(), ignored = 0;
  ASSERT_NO_FATAL_FAILURE(trainSteps(*session, 40, &ignored));
  EXPECT_LT(session->loss(), first * 0.5);
  scale = session->fetch("loss.scale");
  ASSERT_TRUE(scale.ok());
  EXPECT_LT(values(*scale)[0], 16777216.0f);
  EXPECT_GT(values(*scale)[0], 1.0f);
}

// Gradient accumulation through the API: 4 micro-batches of 2 per step train exactly as steps of
// the whole batch of 8; a count the batch cannot hold is an error at the step.
TEST(ApiSession, AccumulationEqualsTheWholeBatch) {
  auto whole = Session::open(tinyModel());
  SessionOptions micro;
  micro.accumulate = 4;
  auto accumulated = Session::open(tinyModel(), micro);
  ASSERT_TRUE(whole.ok() && accumulated.ok());
  for (int i = 0; i < 5; ++i) {
    feedBatch(*whole, i);
    feedBatch(*accumulated, i);
    ASSERT_TRUE(whole->step().ok());
    Status s = accumulated->step();
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_NEAR(accumulated->loss(), whole->loss(), 1e-5 * std::abs(whole->loss()));
  }
  auto a = whole->fetch("w"), b = accumulated->fetch("w");
  ASSERT_TRUE(a.ok() && b.ok());
  for (int64_t i = 0; i < a->numElements(); ++i)
    EXPECT_NEAR(a->data<float>()[i], b->data<float>()[i], 1e-5) << "w[" << i << "]";
  SessionOptions tooMany;
  tooMany.accumulate = 9;
  auto refused = Session::open(tinyModel(), tooMany);
  ASSERT_TRUE(refused.ok());
  feedBatch(*refused);
  Status s = refused->step();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--accumulate 9"), std::string::npos) << s.message();
  SessionOptions zero;
  zero.accumulate = 0;
  EXPECT_FALSE(Session::open(tinyModel(), zero).ok());
}

TEST(ApiSession, FetchAssignAndEvaluate) {
  auto session = Session::open(tinyModel());
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto w = session->fetch("w");
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->typeString(), "f32[4, 3]");
  // A fetch is a copy: changing it changes nothing until assigned.
  w->data<float>()[0] = 42;
  EXPECT_NE(session->fetch("w")->at(0), 42);
  ASSERT_TRUE(session->assign("w", *w).ok());
  EXPECT_EQ(session->fetch("w")->at(0), 42);

  feedBatch(*session);
  auto values = session->evaluate({"logits", "loss"});
  ASSERT_TRUE(values.ok()) << values.status().message();
  EXPECT_EQ(values->at("logits").typeString(), "f32[8, 3]");
  EXPECT_TRUE(std::isfinite(values->at("loss").at(0)));
  // Evaluation trains nothing and keeps the feeds: a step follows.
  EXPECT_EQ(session->fetch("w")->at(0), 42);
  ASSERT_TRUE(session->step().ok());
  EXPECT_NEAR(session->loss(), values->at("loss").at(0), 1e-5);
}

TEST(ApiSession, BadInputGivesClearErrors) {
  auto session = Session::open(tinyModel());
  ASSERT_TRUE(session.ok());
  Status unknown = session->feed("z", Tensor(DType::F32, {8, 4}));
  EXPECT_EQ(unknown.code(), ErrorCode::NotFound);
  EXPECT_NE(unknown.message().find("has no input 'z' (its inputs: x, y)"), std::string::npos)
      << unknown.message();
  Status wrongType = session->feed("x", Tensor(DType::I32, {8, 4}));
  EXPECT_EQ(wrongType.code(), ErrorCode::Invalid);
  EXPECT_NE(wrongType.message().find("input 'x' is f32[B, 4], fed i32[8, 4]"), std::string::npos)
      << wrongType.message();
  Status wrongShape = session->feed("x", Tensor(DType::F32, {8, 5}));
  EXPECT_FALSE(wrongShape.ok());
  ASSERT_TRUE(session->feed("x", Tensor(DType::F32, {8, 4})).ok());
  Status unfed = session->step();
  EXPECT_EQ(unfed.code(), ErrorCode::NotFound);
  EXPECT_NE(unfed.message().find("input 'y' was not fed"), std::string::npos) << unfed.message();
  auto noVariable = session->fetch("nope");
  EXPECT_EQ(noVariable.status().code(), ErrorCode::NotFound);
  Status wrongAssign = session->assign("w", Tensor(DType::F32, {3, 4}));
  EXPECT_FALSE(wrongAssign.ok());
  // A label out of range fails in the step, naming the op, and the session goes on.
  ASSERT_TRUE(session->feed("x", Tensor(DType::F32, {1, 4})).ok());
  ASSERT_TRUE(session->feed("y", *Tensor::fromVector<int32_t>({1}, {7})).ok());
  Tensor before = *session->fetch("w");
  Status badLabel = session->step();
  EXPECT_FALSE(badLabel.ok());
  EXPECT_NE(badLabel.message().find("softmax_cross_entropy"), std::string::npos)
      << badLabel.message();
  EXPECT_TRUE(sameElements(before, *session->fetch("w")));
  feedBatch(*session);
  EXPECT_TRUE(session->step().ok());

  SessionOptions onNoDevice;
  onNoDevice.device = "tpu:0";
  EXPECT_FALSE(Session::open(tinyModel(), onNoDevice).ok());
}

TEST(ApiSession, SaveRestoreRoundTrip) {
  std::string dir = scratchDir("prism-api-ckpt");
  auto a = Session::open(tinyModel());
  ASSERT_TRUE(a.ok());
  for (int i = 0; i < 3; ++i) {
    feedBatch(*a, i);
    ASSERT_TRUE(a->step().ok());
  }
  Status saved = a->save(dir);
  ASSERT_TRUE(saved.ok()) << saved.message();

  SessionOptions otherSeed;
  otherSeed.seed = 5;
  auto b = Session::open(tinyModel(), otherSeed);
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(sameElements(*a->fetch("w"), *b->fetch("w")));
  Status restored = b->restore(dir);
  ASSERT_TRUE(restored.ok()) << restored.message();
  EXPECT_EQ(b->globalStep(), 3);
  for (const ValueInfo &v : b->model().variables())
    EXPECT_TRUE(sameElements(*a->fetch(v.name), *b->fetch(v.name))) << v.name;
  // Both continue alike, bit for bit.
  for (int i = 3; i < 6; ++i) {
    feedBatch(*a, i);
    feedBatch(*b, i);
    ASSERT_TRUE(a->step().ok());
    ASSERT_TRUE(b->step().ok());
    EXPECT_EQ(a->loss(), b->loss());
  }

  // Another model's checkpoint is refused, and nothing changes.
  auto other = Model::parse(std::string(kTiny).replace(6, 4, "else"));
  ASSERT_TRUE(other.ok()) << other.status().message();
  auto c = Session::open(*other);
  ASSERT_TRUE(c.ok());
  Tensor before = *c->fetch("w");
  Status refused = c->restore(dir);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("made for model 'tiny'"), std::string::npos)
      << refused.message();
  EXPECT_TRUE(sameElements(before, *c->fetch("w")));
  EXPECT_FALSE(c->restore(dir + "/missing").ok());
  llvm::sys::fs::remove_directories(dir);
}

// A plan of one worker runs in a session, and trains as the model's own step does: between-graph
// on one task, and in-graph over two towers.
TEST(ApiSession, OpensAPlanOfOneWorker) {
  for (const char *replication : {"between-graph", "in-graph"}) {
    SCOPED_TRACE(replication);
    CompileOptions options;
    options.cluster = std::string(replication) == "in-graph" ? "local:1,devices=2" : "local:1";
    options.replication = replication;
    options.batch = 8;
    auto plan = compile(tinyModel(), options);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    auto fromPlan = Session::open(*plan);
    ASSERT_TRUE(fromPlan.ok()) << fromPlan.status().message();
    auto fromModel = Session::open(tinyModel());
    ASSERT_TRUE(fromModel.ok());
    for (int i = 0; i < 5; ++i) {
      feedBatch(*fromPlan, i);
      feedBatch(*fromModel, i);
      Status s = fromPlan->step();
      ASSERT_TRUE(s.ok()) << s.message();
      ASSERT_TRUE(fromModel->step().ok());
      EXPECT_NEAR(fromPlan->loss(), fromModel->loss(), 1e-5 * std::abs(fromModel->loss()));
    }
    Tensor a = *fromPlan->fetch("w"), b = *fromModel->fetch("w");
    for (int64_t i = 0; i < a.numElements(); ++i)
      EXPECT_NEAR(a.at(i), b.at(i), 1e-5);
  }
  CompileOptions two;
  two.cluster = "local:2";
  auto plan = compile(tinyModel(), two);
  ASSERT_TRUE(plan.ok());
  auto refused = Session::open(*plan);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::Unsupported);
  EXPECT_NE(refused.status().message().find("2 workers"), std::string::npos);
}

TEST(ApiCompile, PlansSaveAndLoad) {
  CompileOptions options;
  options.cluster = "local:2";
  options.batch = 16;
  auto plan = compile(tinyModel(), options);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->model(), "tiny");
  EXPECT_EQ(plan->workers(), 2);
  EXPECT_EQ(plan->parameterServers(), 0);
  EXPECT_EQ(plan->globalBatch(), 16);
  EXPECT_EQ(plan->strategy(), "hybrid");
  EXPECT_TRUE(plan->path().empty());

  std::string dir = scratchDir("prism-api-plan");
  ASSERT_TRUE(plan->save(dir + "/plan.pb").ok());
  EXPECT_EQ(plan->path(), dir + "/plan.pb");
  auto loaded = Plan::load(dir + "/plan.pb");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->tasks(), plan->tasks());
  auto text = loaded->dump();
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("plan tiny"), std::string::npos);
  EXPECT_FALSE(loaded->dump("yaml").ok());
  llvm::sys::fs::remove_directories(dir);
}

TEST(ApiCompile, BadOptionsAreErrors) {
  CompileOptions badCluster;
  badCluster.cluster = "local:0";
  EXPECT_FALSE(compile(tinyModel(), badCluster).ok());
  CompileOptions badBatch;
  badBatch.batch = 0;
  auto batch = compile(tinyModel(), badBatch);
  ASSERT_FALSE(batch.ok());
  EXPECT_NE(batch.status().message().find("compile option 'batch': expected at least 1, got 0"),
            std::string::npos)
      << batch.status().message();
  CompileOptions badStrategy;
  badStrategy.strategy = "gossip";
  EXPECT_FALSE(compile(tinyModel(), badStrategy).ok());
  // A training step is not a model to parallelize.
  EXPECT_FALSE(compile(*tinyModel().trainingStep()).ok());
  EXPECT_FALSE(Plan::load("/nonexistent/plan.pb").ok());
}

// A program other than `prism` runs a job: the launcher starts the tasks as the prism it names.
TEST(ApiRun, RunsAPlanThroughThePrismCommand) {
  if (!llvm::sys::fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "no Fashion-MNIST";
  auto model = Model::load(PRISM_SOURCE_DIR "/models/mlp.prism");
  ASSERT_TRUE(model.ok()) << model.status().message();
  CompileOptions options;
  options.cluster = "local:2";
  options.batch = 32;
  auto plan = compile(*model, options);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  std::string dir = scratchDir("prism-api-run");
  RunOptions run;
  run.steps = 3;
  run.quiet = true;
  run.evaluate = false;
  run.taskProgram = PRISM_BINARY_DIR "/tools/prism";
  run.variablesDir = dir + "/variables";
  Status ran = api::run(*plan, run);
  ASSERT_TRUE(ran.ok()) << ran.message();
  EXPECT_FALSE(plan->path().empty()); // written to a temporary file for the tasks
  EXPECT_TRUE(llvm::sys::fs::exists(dir + "/variables"));
  llvm::sys::fs::remove(plan->path());
  llvm::sys::fs::remove_directories(dir);
}

// Without options.data, train and run take the data the model names; a spec there that does not
// parse is an error at its statement; options.data wins.
TEST(ApiData, TheModelsDataIsTheDefault) {
  auto model = Model::load(PRISM_SOURCE_DIR "/models/embedding_classifier.prism");
  ASSERT_TRUE(model.ok()) << model.status().message();
  TrainOptions train;
  train.steps = 2;
  train.batch = 16;
  train.quiet = true;
  train.evaluate = false;
  auto trained = api::train(*model, train); // zipf tokens: fashion-mnist has no 'tokens'
  ASSERT_TRUE(trained.ok()) << trained.status().message();
  EXPECT_EQ(trained->steps, 2);
  train.data = "fashion-mnist";
  auto other = api::train(*model, train);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("no field of that name"), std::string::npos)
      << other.status().message();

  auto bad = Model::parse("model bad {\n  input x : f32[B, 4]\n  data \"zipf:0\"\n  var w : "
                          "f32[4, 1] = zeros\n  %p = matmul(x, w)\n  %l = reduce_sum(%p)\n  "
                          "minimize %l with sgd(lr = 0.1)\n}\n",
                          "bad.prism");
  ASSERT_TRUE(bad.ok()) << bad.status().message();
  TrainOptions plain;
  plain.steps = 1;
  plain.quiet = true;
  auto refused = api::train(*bad, plain);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("bad.prism:3:8: error: data: data spec 'zipf:0'"),
            std::string::npos)
      << refused.status().message();

  CompileOptions options;
  options.cluster = "local:2,ps=1";
  options.batch = 16;
  auto plan = compile(*model, options);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  RunOptions run;
  run.steps = 2;
  run.quiet = true;
  run.evaluate = false;
  run.taskProgram = PRISM_BINARY_DIR "/tools/prism";
  Status ran = api::run(*plan, run);
  EXPECT_TRUE(ran.ok()) << ran.message();
  llvm::sys::fs::remove(plan->path());
}

} // namespace
