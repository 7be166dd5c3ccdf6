// The stall report (see StallWatch.h).
#include "runtime/job/StallWatch.h"

#include <cstdio>

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::runtime::job {
namespace {

std::string seconds(StallWatch::Clock::duration d) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::format("%.1f", std::chrono::duration<double>(d).count());
  return os.str();
}

} // namespace

StallWatch::StallWatch(std::chrono::milliseconds bound,
                       std::function<void(const std::string &)> report)
    : bound_(bound), report_(std::move(report)) {
  if (!report_)
    report_ = [](const std::string &line) {
      std::fprintf(stderr, "%s\n", line.c_str());
      std::fflush(stderr);
    };
  thread_ = std::thread([this] { watch(); });
}

StallWatch::~StallWatch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

uint64_t StallWatch::open(std::string what) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t id = nextId_++;
  open_[id] = {std::move(what), Clock::now(), false};
  return id;
}

void StallWatch::close(uint64_t id) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = open_.find(id);
  if (it == open_.end())
    return;
  std::string line;
  if (it->second.reported)
    line = "done waiting for " + it->second.what + " after " +
           seconds(Clock::now() - it->second.since) + " s";
  open_.erase(it);
  if (line.empty())
    return;
  // After the watcher's report of this wait, which holds reportMutex_ until it is out.
  std::lock_guard<std::mutex> reporting(reportMutex_);
  lock.unlock();
  report_(line);
}

void StallWatch::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, bound_ / 4);
    std::vector<std::string> lines;
    Clock::time_point now = Clock::now();
    for (auto &[id, wait] : open_)
      if (!wait.reported && now - wait.since >= bound_) {
        wait.reported = true;
        lines.push_back("waiting " + seconds(now - wait.since) + " s so far for " + wait.what);
      }
    if (lines.empty())
      continue;
    std::unique_lock<std::mutex> reporting(reportMutex_);
    lock.unlock();
    for (const std::string &line : lines)
      report_(line);
    reporting.unlock();
    lock.lock();
  }
}

StallWatch::Wait::Wait(StallWatch *watch, std::string what) : watch_(watch) {
  if (watch_)
    id_ = watch_->open(std::move(what));
}

StallWatch::Wait::~Wait() {
  if (watch_)
    watch_->close(id_);
}

} // namespace prism::runtime::job
