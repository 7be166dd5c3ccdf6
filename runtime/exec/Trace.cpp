// Trace spans in memory, written once at the end as trace-event JSON (see Trace.h).
#include "runtime/exec/Trace.h"

#include <algorithm>
#include <tuple>

#include <nlohmann/json.hpp>

#include "ir/Diagnostic.h"
#include "support/AtomicFile.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::runtime {

TraceRecorder::TraceRecorder(std::string task)
    : task_(std::move(task)), steadyStart_(Clock::now()),
      unixStartMicros_(std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count()) {}

int64_t TraceRecorder::unixMicros(Clock::time_point t) const {
  return unixStartMicros_ +
         std::chrono::duration_cast<std::chrono::microseconds>(t - steadyStart_).count();
}

void TraceRecorder::span(llvm::StringRef track, std::string name, const char *category,
                         Clock::time_point begin, Clock::time_point end, Args args) {
  int64_t beginMicros = unixMicros(begin);
  int64_t duration = std::max<int64_t>(0, unixMicros(end) - beginMicros);
  std::lock_guard<std::mutex> lock(mutex_);
  size_t index = std::find(tracks_.begin(), tracks_.end(), track) - tracks_.begin();
  if (index == tracks_.size())
    tracks_.push_back(track.str());
  events_.push_back({index, std::move(name), category, beginMicros, duration, std::move(args)});
}

void TraceRecorder::setClockOffset(int64_t micros) {
  std::lock_guard<std::mutex> lock(mutex_);
  offsetMicros_ = micros;
}

int64_t TraceRecorder::clockOffset() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return offsetMicros_;
}

std::vector<TraceRecorder::Recorded> TraceRecorder::recorded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Recorded> out;
  out.reserve(events_.size());
  for (const Event &e : events_)
    out.push_back({e.name, e.category, e.durationMicros});
  return out;
}

size_t TraceRecorder::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.size();
}

llvm::Error TraceRecorder::write(llvm::StringRef path) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return support::writeFileAtomically(path, [&](llvm::raw_ostream &os) {
    // One process (the task); a thread per track, named, in the order they first appeared.
    os << "{\"traceEvents\": [\n";
    os << nlohmann::json({{"ph", "M"},
                          {"name", "process_name"},
                          {"pid", 0},
                          {"tid", 0},
                          {"args", {{"name", task_}}}})
              .dump();
    for (size_t t = 0; t < tracks_.size(); ++t) {
      os << ",\n"
         << nlohmann::json({{"ph", "M"},
                            {"name", "thread_name"},
                            {"pid", 0},
                            {"tid", t},
                            {"args", {{"name", tracks_[t]}}}})
                .dump();
      os << ",\n"
         << nlohmann::json({{"ph", "M"},
                            {"name", "thread_sort_index"},
                            {"pid", 0},
                            {"tid", t},
                            {"args", {{"sort_index", t}}}})
                .dump();
    }
    for (const Event &e : events_) {
      nlohmann::json event = {{"ph", "X"},
                              {"name", e.name},
                              {"cat", e.category},
                              {"pid", 0},
                              {"tid", e.track},
                              {"ts", e.beginMicros + offsetMicros_},
                              {"dur", e.durationMicros}};
      if (!e.args.empty()) {
        nlohmann::json args = nlohmann::json::object();
        for (const auto &[key, value] : e.args)
          args[key] = value;
        event["args"] = std::move(args);
      }
      os << ",\n" << event.dump();
    }
    os << "\n], \"displayTimeUnit\": \"ms\", \"otherData\": "
       << nlohmann::json({{"task", task_}, {"clock_offset_us", offsetMicros_}}).dump() << "}\n";
  });
}

namespace {

// Workers first, then parameter servers, each by index; other names after, alphabetically.
std::tuple<int, long long, std::string> taskOrder(const std::string &task) {
  auto colon = task.find(':');
  std::string role = task.substr(0, colon);
  long long index = 0;
  if (colon != std::string::npos &&
      !llvm::StringRef(task).drop_front(colon + 1).getAsInteger(10, index))
    return {role == "worker" ? 0 : role == "ps" ? 1 : 2, index, role};
  return {3, 0, task};
}

} // namespace

llvm::Expected<std::string> mergeTraceFiles(llvm::ArrayRef<std::string> paths) {
  if (paths.empty())
    return ir::makeError("no trace files to merge");
  struct TaskTrace {
    std::string task;
    nlohmann::json events;
  };
  std::vector<TaskTrace> traces;
  for (const std::string &path : paths) {
    auto text = llvm::MemoryBuffer::getFile(path);
    if (!text)
      return ir::makeError(path + ": " + text.getError().message());
    nlohmann::json trace = nlohmann::json::parse((*text)->getBuffer().begin(),
                                                 (*text)->getBuffer().end(), nullptr, false);
    // An earlier merge in the same directory (otherData.tasks) is left out.
    if (!trace.is_discarded() && trace.is_object() && trace.contains("otherData") &&
        trace["otherData"].is_object() && trace["otherData"].contains("tasks") &&
        trace["otherData"]["tasks"].is_array())
      continue;
    if (trace.is_discarded() || !trace.is_object() || !trace.contains("traceEvents") ||
        !trace["traceEvents"].is_array() || !trace.contains("otherData") ||
        !trace["otherData"].is_object() || !trace["otherData"].contains("task") ||
        !trace["otherData"]["task"].is_string())
      return ir::makeError(path + ": not a task's trace (trace-event JSON with otherData.task)");
    traces.push_back(
        {trace["otherData"]["task"].get<std::string>(), std::move(trace["traceEvents"])});
  }
  if (traces.empty())
    return ir::makeError("no task traces among the files, only merged ones");
  std::sort(traces.begin(), traces.end(), [](const TaskTrace &a, const TaskTrace &b) {
    return taskOrder(a.task) < taskOrder(b.task);
  });
  for (size_t i = 1; i < traces.size(); ++i)
    if (traces[i].task == traces[i - 1].task)
      return ir::makeError("two traces of " + traces[i].task + " among the files");
  nlohmann::json merged = nlohmann::json::array();
  nlohmann::json tasks = nlohmann::json::array();
  for (size_t pid = 0; pid < traces.size(); ++pid) {
    tasks.push_back(traces[pid].task);
    merged.push_back({{"ph", "M"},
                      {"name", "process_sort_index"},
                      {"pid", pid},
                      {"tid", 0},
                      {"args", {{"sort_index", pid}}}});
    for (nlohmann::json &event : traces[pid].events) {
      if (!event.is_object())
        return ir::makeError("the trace of " + traces[pid].task + " holds an event that is not " +
                             "an object");
      event["pid"] = pid;
      merged.push_back(std::move(event));
    }
  }
  nlohmann::json result = {{"traceEvents", std::move(merged)},
                           {"displayTimeUnit", "ms"},
                           {"otherData", {{"tasks", std::move(tasks)}}}};
  return result.dump() + "\n";
}

} // namespace prism::runtime
