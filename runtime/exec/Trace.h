// A task's timeline (`--trace DIR`): spans on named tracks (the executor's ops, all-reduce
// buckets, parameter-server pulls and pushes, data loading, steps), written as Chrome
// trace-event JSON that chrome://tracing and Perfetto open; `prism trace merge` joins the
// tasks' files into one. Timestamps are Unix microseconds, plus an offset the task measured
// against the coordinator's clock, so the tasks of a job line up. Recording a span is two clock
// reads and an append under a mutex; without a recorder nothing is recorded.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime {

class TraceRecorder {
public:
  using Clock = std::chrono::steady_clock;
  using Args = std::vector<std::pair<std::string, double>>;

  // `task` names the timeline ("worker:0").
  explicit TraceRecorder(std::string task);

  // A span [begin, end) named `name` on `track` ("ops", "all-reduce", "ps"), of `category`
  // ("op", "all_reduce", "ps_pull", ...: a string literal, kept by pointer), with numeric
  // arguments (bytes, rows). Thread-safe.
  void span(llvm::StringRef track, std::string name, const char *category, Clock::time_point begin,
            Clock::time_point end, Args args = {});
  // Microseconds to add to this process's clock to read the coordinator's.
  void setClockOffset(int64_t micros);
  // `t` as this recorder writes it, in Unix microseconds before the offset (its steady and
  // system clocks are paired once, when it is made).
  int64_t unixMicros(Clock::time_point t) const;
  int64_t clockOffset() const;

  size_t size() const;
  // The spans recorded so far, in order: name, category and duration (`prism calibrate` times
  // kernels from them).
  struct Recorded {
    std::string name;
    const char *category;
    int64_t durationMicros;
  };
  std::vector<Recorded> recorded() const;
  const std::string &task() const { return task_; }
  // {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {"task": ..., ...}}, written
  // atomically.
  llvm::Error write(llvm::StringRef path) const;

private:
  struct Event {
    size_t track;
    std::string name;
    const char *category;
    int64_t beginMicros; // Unix time, before the offset
    int64_t durationMicros;
    Args args;
  };
  std::string task_;
  Clock::time_point steadyStart_;
  int64_t unixStartMicros_;
  mutable std::mutex mutex_;
  int64_t offsetMicros_ = 0;
  std::vector<std::string> tracks_;
  std::vector<Event> events_;
};

// The tasks' timelines in `paths` (TraceRecorder::write's files) as one trace: a process per
// task (workers, then parameter servers, by index), each with its tracks; merged traces among
// the files (an earlier merge into the same directory) are left out. Errors name the file.
llvm::Expected<std::string> mergeTraceFiles(llvm::ArrayRef<std::string> paths);

// Records a span from construction to destruction (or finish()) when `recorder` is non-null.
class TraceSpan {
public:
  TraceSpan(TraceRecorder *recorder, llvm::StringRef track, std::string name, const char *category)
      : recorder_(recorder), track_(track), name_(std::move(name)), category_(category),
        begin_(recorder ? TraceRecorder::Clock::now() : TraceRecorder::Clock::time_point()) {}
  TraceSpan(const TraceSpan &) = delete;
  TraceSpan &operator=(const TraceSpan &) = delete;
  ~TraceSpan() { finish(); }
  void addArg(std::string name, double value) {
    if (recorder_)
      args_.emplace_back(std::move(name), value);
  }
  void finish() {
    if (!recorder_)
      return;
    recorder_->span(track_, std::move(name_), category_, begin_, TraceRecorder::Clock::now(),
                    std::move(args_));
    recorder_ = nullptr;
  }

private:
  TraceRecorder *recorder_;
  llvm::StringRef track_;
  std::string name_;
  const char *category_;
  TraceRecorder::Clock::time_point begin_;
  TraceRecorder::Args args_;
};

} // namespace prism::runtime
