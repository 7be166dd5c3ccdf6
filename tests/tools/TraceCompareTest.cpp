// `prism trace compare` on hand-made traces: which step a span belongs to, the median over the
// counted steps, the order of the rows, and the errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/Diagnostic.h"
#include "tools/TraceCompare.h"

namespace prism::tools {
namespace {

// Metadata naming pid 0 "worker:0" (tracks steps 0, ops 1) and pid 1 "ps:0" (apply 0).
const std::string kMeta =
    R"({"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "worker:0"}},
       {"ph": "M", "name": "thread_name", "pid": 0, "tid": 0, "args": {"name": "steps"}},
       {"ph": "M", "name": "thread_name", "pid": 0, "tid": 1, "args": {"name": "ops"}},
       {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "ps:0"}},
       {"ph": "M", "name": "thread_name", "pid": 1, "tid": 0, "args": {"name": "apply"}})";

std::string span(int pid, int tid, const std::string &name, const std::string &cat, int ts,
                 int dur) {
  return R"(, {"ph": "X", "pid": )" + std::to_string(pid) + R"(, "tid": )" + std::to_string(tid) +
         R"(, "name": ")" + name + R"(", "cat": ")" + cat + R"(", "ts": )" + std::to_string(ts) +
         R"(, "dur": )" + std::to_string(dur) + "}";
}

std::string trace(const std::string &spans) {
  return R"({"traceEvents": [)" + kMeta + spans + "]}";
}

// Four measured steps of 100 µs from 0, 100, 200, 300 (the first one skipped); matmul in each,
// 10, 20, 30 µs in the counted ones; gather twice in step 2 (5 + 5) and not in the others, so its
// counted steps are 0, 10, 0: median 0; the server's apply, which has no steps of its own, in the
// worker's steps 1 and 3 (40, 60 µs) and one after the last step (left out): median of 40, 0, 60.
// Predicted: one step of 110 µs, matmul 15, a relu the run did not have.
std::string measured() {
  std::string s;
  for (int i = 0; i < 4; ++i)
    s += span(0, 0, "step " + std::to_string(i), "step", i * 100, 100);
  s += span(0, 1, "matmul %h", "op", 1, 99); // step 0: skipped
  s += span(0, 1, "matmul %h", "op", 101, 10);
  s += span(0, 1, "matmul %h", "op", 201, 20);
  s += span(0, 1, "matmul %h", "op", 301, 30);
  s += span(0, 1, "gather %e", "op", 210, 5);
  s += span(0, 1, "gather %e", "op", 220, 5);
  s += span(1, 0, "apply step 1", "ps_apply", 150, 40);
  s += span(1, 0, "apply step 3", "ps_apply", 350, 60);
  s += span(1, 0, "apply step 4", "ps_apply", 450, 70);
  return trace(s);
}

std::string predicted() {
  return trace(span(0, 0, "step 0", "step", 0, 110) + span(0, 1, "matmul %h", "op", 0, 15) +
               span(0, 1, "relu %r", "op", 15, 3));
}

const SpanComparison &row(const TraceComparison &c, const std::string &name) {
  for (const SpanComparison &s : c.spans)
    if (s.name == name)
      return s;
  static SpanComparison none;
  ADD_FAILURE() << "no row " << name;
  return none;
}

TEST(TraceCompare, SpansAreTimedPerStepOverTheCountedSteps) {
  auto c = compareTraces(measured(), "m.json", predicted(), "p.json", 1);
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->countedSteps, 3);
  const SpanComparison &step = c->spans.front();
  EXPECT_EQ(step.task, "worker:0");
  EXPECT_EQ(step.name, "step N");
  EXPECT_NEAR(*step.measuredSeconds, 100e-6, 1e-12);
  EXPECT_NEAR(*step.predictedSeconds, 110e-6, 1e-12);
  EXPECT_NEAR(*row(*c, "matmul %h").measuredSeconds, 20e-6, 1e-12);
  EXPECT_NEAR(*row(*c, "matmul %h").predictedSeconds, 15e-6, 1e-12);
  EXPECT_NEAR(*row(*c, "gather %e").measuredSeconds, 0, 1e-12);
  EXPECT_FALSE(row(*c, "gather %e").predictedSeconds);
  const SpanComparison &apply = row(*c, "apply step N");
  EXPECT_EQ(apply.task, "ps:0");
  EXPECT_EQ(apply.track, "apply");
  EXPECT_NEAR(*apply.measuredSeconds, 40e-6, 1e-12);
  EXPECT_FALSE(row(*c, "relu %r").measuredSeconds);
  EXPECT_NEAR(row(*c, "relu %r").difference(), 3e-6, 1e-12);
}

// The step first, then the largest |predicted − measured|: apply (−40), matmul (−5), relu (+3),
// gather (0).
TEST(TraceCompare, RowsComeLargestDifferenceFirst) {
  auto c = compareTraces(measured(), "m.json", predicted(), "p.json", 1);
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  std::vector<std::string> names;
  for (const SpanComparison &s : c->spans)
    names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"step N", "apply step N", "matmul %h", "relu %r",
                                             "gather %e"}));
  const std::string text = formatComparison(*c, 2);
  EXPECT_NE(text.find("median of 3 measured steps"), std::string::npos) << text;
  EXPECT_NE(text.find("matmul %h"), std::string::npos) << text;
  EXPECT_NE(text.find("-0.005 (-25%)"), std::string::npos) << text;
  EXPECT_EQ(text.find("relu %r"), std::string::npos) << text;
  EXPECT_NE(text.find("(2 more spans, each within 0.003 ms"), std::string::npos) << text;
  const std::string json = comparisonToJson(*c);
  EXPECT_NE(json.find("\"counted_steps\": 3"), std::string::npos) << json;
  EXPECT_NE(json.find("\"predicted_seconds\": null"), std::string::npos) << json;
}

TEST(TraceCompare, ErrorsNameTheFile) {
  auto message = [](llvm::Expected<TraceComparison> c) {
    EXPECT_FALSE(static_cast<bool>(c));
    return c ? std::string() : ir::messageOf(c.takeError());
  };
  EXPECT_EQ(message(compareTraces("{", "m.json", predicted(), "p.json", 0)), "m.json: not JSON");
  EXPECT_EQ(message(compareTraces(measured(), "m.json", "[]", "p.json", 0)),
            "p.json: not a trace: no \"traceEvents\" array");
  EXPECT_TRUE(static_cast<bool>(compareTraces(predicted(), "m.json", predicted(), "p.json", 0)));
  EXPECT_EQ(message(compareTraces(predicted(), "m.json", predicted(), "p.json", 1)),
            "m.json: worker:0 has 1 step; --skip 1 leaves none");
  EXPECT_EQ(message(compareTraces(trace(span(0, 1, "matmul %h", "op", 0, 1)), "m.json", predicted(),
                                  "p.json", 0)),
            "m.json: no steps (spans of category \"step\" on the track \"steps\"): give a "
            "measured trace (`--trace DIR`, `prism trace merge`)");
  EXPECT_EQ(message(compareTraces(trace(R"(, {"ph": "X", "pid": 0, "tid": 0, "name": "x"})"),
                                  "m.json", predicted(), "p.json", 0)),
            "m.json: traceEvents[5]: a span (\"ph\": \"X\") needs a string \"name\" and numbers "
            "\"ts\" and \"dur\"");
}

} // namespace
} // namespace prism::tools
