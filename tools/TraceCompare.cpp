// A measured step against a predicted one, span by span (see TraceCompare.h).
#include "tools/TraceCompare.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "ir/Diagnostic.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {
namespace {

using Key = std::tuple<std::string, std::string, std::string>; // task, track, name

struct Span {
  std::string task, track, name, category;
  double begin = 0, seconds = 0;
};

// "push step 12" → "push step N": the spans of every step under one name.
std::string withoutStepNumbers(const std::string &name) {
  static const std::string kStep = "step ";
  std::string out;
  for (size_t i = 0; i < name.size();) {
    if (name.compare(i, kStep.size(), kStep) == 0 && i + kStep.size() < name.size() &&
        std::isdigit(static_cast<unsigned char>(name[i + kStep.size()]))) {
      out += kStep + "N";
      i += kStep.size();
      while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])))
        ++i;
      continue;
    }
    out += name[i++];
  }
  return out;
}

// The complete spans ("ph": "X") of a trace-event file, with their processes' and threads' names
// (the tasks and tracks) from its metadata.
llvm::Expected<std::vector<Span>> readSpans(llvm::StringRef text, llvm::StringRef file) {
  auto fail = [&](const std::string &what) { return ir::makeError(file + ": " + what); };
  nlohmann::json trace = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (trace.is_discarded())
    return fail("not JSON");
  const nlohmann::json *events = nullptr;
  if (trace.is_object() && trace.contains("traceEvents"))
    events = &trace["traceEvents"];
  if (!events || !events->is_array())
    return fail("not a trace: no \"traceEvents\" array");
  std::map<int64_t, std::string> tasks;
  std::map<std::pair<int64_t, int64_t>, std::string> tracks;
  for (const auto &e : *events) {
    if (!e.is_object() || e.value("ph", "") != "M" || !e.contains("args") ||
        !e["args"].is_object() || !e["args"].contains("name") || !e["args"]["name"].is_string())
      continue;
    const std::string what = e.value("name", "");
    const int64_t pid = e.value("pid", int64_t{-1}), tid = e.value("tid", int64_t{-1});
    if (what == "process_name")
      tasks[pid] = e["args"]["name"].get<std::string>();
    else if (what == "thread_name")
      tracks[{pid, tid}] = e["args"]["name"].get<std::string>();
  }
  std::vector<Span> spans;
  for (size_t i = 0; i < events->size(); ++i) {
    const auto &e = (*events)[i];
    if (!e.is_object() || e.value("ph", "") != "X")
      continue;
    if (!e.contains("ts") || !e["ts"].is_number() || !e.contains("dur") || !e["dur"].is_number() ||
        !e.contains("name") || !e["name"].is_string())
      return fail("traceEvents[" + std::to_string(i) +
                  "]: a span (\"ph\": \"X\") needs a string \"name\" and numbers \"ts\" and "
                  "\"dur\"");
    const int64_t pid = e.value("pid", int64_t{-1}), tid = e.value("tid", int64_t{-1});
    Span s;
    auto task = tasks.find(pid);
    s.task = task != tasks.end() ? task->second : "pid " + std::to_string(pid);
    auto track = tracks.find({pid, tid});
    s.track = track != tracks.end() ? track->second : "tid " + std::to_string(tid);
    s.name = withoutStepNumbers(e["name"].get<std::string>());
    s.category = e.contains("cat") && e["cat"].is_string() ? e["cat"].get<std::string>() : "";
    s.begin = e["ts"].get<double>() * 1e-6;
    s.seconds = e["dur"].get<double>() * 1e-6;
    spans.push_back(std::move(s));
  }
  return spans;
}

bool isStep(const Span &s) {
  return s.track == "steps" && s.category == "step";
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

} // namespace

llvm::Expected<TraceComparison> compareTraces(llvm::StringRef measured,
                                              llvm::StringRef measuredName,
                                              llvm::StringRef predicted,
                                              llvm::StringRef predictedName, int skipSteps) {
  auto measuredSpans = readSpans(measured, measuredName);
  if (!measuredSpans)
    return measuredSpans.takeError();
  auto predictedSpans = readSpans(predicted, predictedName);
  if (!predictedSpans)
    return predictedSpans.takeError();

  // Each task's step starts, in order; the end of its last step closes the last one.
  std::vector<std::string> order; // tasks as they first appear
  std::map<std::string, std::vector<std::pair<double, double>>> steps;
  for (const Span &s : *measuredSpans) {
    if (std::find(order.begin(), order.end(), s.task) == order.end())
      order.push_back(s.task);
    if (isStep(s))
      steps[s.task].push_back({s.begin, s.begin + s.seconds});
  }
  if (steps.empty())
    return ir::makeError(measuredName +
                         ": no steps (spans of category \"step\" on the track \"steps\"): give "
                         "a measured trace (`--trace DIR`, `prism trace merge`)");
  // The steps of the first task that has them: a task without steps of its own (a server) takes
  // them.
  const std::vector<std::pair<double, double>> *firstSteps = nullptr;
  for (const std::string &task : order)
    if (auto it = steps.find(task); it != steps.end()) {
      firstSteps = &it->second;
      break;
    }
  int counted = -1;
  for (auto &[task, windows] : steps) {
    std::sort(windows.begin(), windows.end());
    const int n = static_cast<int>(windows.size()) - skipSteps;
    if (n <= 0)
      return ir::makeError(measuredName + ": " + task + " has " + std::to_string(windows.size()) +
                           (windows.size() == 1 ? " step" : " steps") + "; --skip " +
                           std::to_string(skipSteps) + " leaves none");
    counted = counted < 0 ? n : std::min(counted, n);
  }

  // Per measured span name, its time in each counted step of its task.
  std::map<Key, std::vector<double>> perStep;
  std::map<std::string, int> windowsOf;
  for (const Span &s : *measuredSpans) {
    auto own = steps.find(s.task);
    const auto &windows = own != steps.end() ? own->second : *firstSteps;
    // The step it starts in: the last that starts at or before it, if it starts before that
    // step's end or the next step's start.
    auto next = std::upper_bound(windows.begin(), windows.end(), std::make_pair(s.begin, 1e300));
    if (next == windows.begin())
      continue;
    const size_t index = static_cast<size_t>(next - windows.begin()) - 1;
    if (next == windows.end() && s.begin >= windows[index].second)
      continue; // after the last step
    if (static_cast<int>(index) < skipSteps)
      continue;
    auto &times = perStep[{s.task, s.track, s.name}];
    times.resize(windows.size() - static_cast<size_t>(skipSteps), 0.0);
    times[index - static_cast<size_t>(skipSteps)] += s.seconds;
  }
  std::map<Key, double> predictedTimes;
  for (const Span &s : *predictedSpans)
    predictedTimes[{s.task, s.track, s.name}] += s.seconds;

  TraceComparison out;
  out.countedSteps = counted;
  std::map<Key, SpanComparison> rows;
  auto row = [&](const Key &key) -> SpanComparison & {
    SpanComparison &r = rows[key];
    std::tie(r.task, r.track, r.name) = key;
    return r;
  };
  for (const auto &[key, times] : perStep)
    row(key).measuredSeconds = median(times);
  for (const auto &[key, seconds] : predictedTimes)
    row(key).predictedSeconds = seconds;
  std::vector<SpanComparison> stepRows, others;
  for (auto &[key, r] : rows)
    (r.track == "steps" && r.name == "step N" ? stepRows : others).push_back(std::move(r));
  auto taskOrder = [&](const std::string &task) {
    return std::find(order.begin(), order.end(), task) - order.begin();
  };
  std::stable_sort(stepRows.begin(), stepRows.end(),
                   [&](const SpanComparison &a, const SpanComparison &b) {
                     return taskOrder(a.task) < taskOrder(b.task);
                   });
  std::stable_sort(others.begin(), others.end(),
                   [](const SpanComparison &a, const SpanComparison &b) {
                     return std::abs(a.difference()) > std::abs(b.difference());
                   });
  out.spans = std::move(stepRows);
  out.spans.insert(out.spans.end(), others.begin(), others.end());
  return out;
}

std::string formatComparison(const TraceComparison &comparison, size_t top) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto ms = [](const std::optional<double> &s) {
    std::string out;
    llvm::raw_string_ostream cell(out);
    if (s)
      cell << llvm::format("%12.3f", *s * 1e3);
    else
      cell << llvm::format("%12s", static_cast<const char *>("-"));
    return cell.str();
  };
  os << "per step: the median of " << comparison.countedSteps
     << " measured steps a task, and the predicted step\n";
  os << "task       track        span                                      measured ms "
        "predicted ms   difference\n";
  size_t others = 0, left = 0;
  double leftSeconds = 0;
  for (const SpanComparison &s : comparison.spans) {
    const bool step = s.track == "steps" && s.name == "step N";
    if (!step && top > 0 && others++ >= top) {
      ++left;
      leftSeconds = std::max(leftSeconds, std::abs(s.difference()));
      continue;
    }
    os << llvm::format("%-10s %-12s %-40s ", s.task.c_str(), s.track.c_str(), s.name.c_str())
       << ms(s.measuredSeconds) << " " << ms(s.predictedSeconds) << " "
       << llvm::format("%+12.3f", s.difference() * 1e3);
    if (s.measuredSeconds && s.predictedSeconds && *s.measuredSeconds > 0)
      os << llvm::format(" (%+.0f%%)", s.difference() / *s.measuredSeconds * 100);
    os << "\n";
  }
  if (left > 0)
    os << llvm::format("(%zu more spans, each within %.3f ms; --top 0 shows every one)\n", left,
                       leftSeconds * 1e3);
  return os.str();
}

std::string comparisonToJson(const TraceComparison &comparison) {
  nlohmann::ordered_json spans = nlohmann::ordered_json::array();
  auto seconds = [](const std::optional<double> &s) {
    return s ? nlohmann::ordered_json(*s) : nlohmann::ordered_json(nullptr);
  };
  for (const SpanComparison &s : comparison.spans)
    spans.push_back({{"task", s.task},
                     {"track", s.track},
                     {"name", s.name},
                     {"measured_seconds", seconds(s.measuredSeconds)},
                     {"predicted_seconds", seconds(s.predictedSeconds)}});
  nlohmann::ordered_json out = {{"counted_steps", comparison.countedSteps}, {"spans", spans}};
  return out.dump(1) + "\n";
}

} // namespace prism::tools
