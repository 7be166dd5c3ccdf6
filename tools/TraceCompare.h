// `prism trace compare MEASURED PREDICTED`: a measured step (`--trace DIR`, merged) against the
// one `prism simulate --trace-out` predicted, span by span: where the prediction is off, and by
// how much (docs/simulate.md, "Measured against predicted").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::tools {

// One span of a step, by task, track and name (a step's number read as N: "step N", "push step
// N"): its time a step, measured (the median over the counted steps of the spans of that name in
// each step, 0 in a step without one) and predicted (the predicted step's spans of that name).
// A side without such spans has none.
struct SpanComparison {
  std::string task, track, name;
  std::optional<double> measuredSeconds, predictedSeconds;
  // predicted − measured, a missing side read as 0
  double difference() const { return predictedSeconds.value_or(0) - measuredSeconds.value_or(0); }
};

struct TraceComparison {
  int countedSteps = 0; // measured steps a task, after the skipped ones
  // The steps' own spans ("step N" on the track "steps") first, by task; then the others, the
  // largest |difference| first.
  std::vector<SpanComparison> spans;
};

// `measured`: a merged trace of a run (`prism trace merge`); `predicted`: `prism simulate
// --trace-out`'s. A measured task's steps are its spans of category "step" on the track "steps"
// (a task without them, a parameter server, takes the first task's that has them); a span
// belongs to the step it starts in (until the next one starts); the first `skipSteps` steps of
// each task are left out. Errors name the file (`measuredName`, `predictedName`) and what is
// wrong with it.
llvm::Expected<TraceComparison> compareTraces(llvm::StringRef measured,
                                              llvm::StringRef measuredName,
                                              llvm::StringRef predicted,
                                              llvm::StringRef predictedName, int skipSteps);

// A table of the step rows and the `top` others of the largest |difference| (0: every span), in
// milliseconds, with a line for the rest.
std::string formatComparison(const TraceComparison &comparison, size_t top);
// {"counted_steps": n, "spans": [{"task", "track", "name", "measured_seconds",
// "predicted_seconds"}, ...]}, a missing side null.
std::string comparisonToJson(const TraceComparison &comparison);

} // namespace prism::tools
