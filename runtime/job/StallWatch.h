// The stall report: a task that waits longer than a bound on a collective or a parameter server
// says so in the job's log, naming what it waits for ("[worker:1] waiting 3.0 s so far for the
// parameter servers: push step 41"; the launcher adds the task), once per wait, and again when
// that wait ends. A background thread looks at the open waits a few times per bound; opening and
// closing a wait is a lock and a clock read.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace prism::runtime::job {

class StallWatch {
public:
  using Clock = std::chrono::steady_clock;
  // `report` receives each line (default: stderr).
  explicit StallWatch(std::chrono::milliseconds bound,
                      std::function<void(const std::string &)> report = {});
  ~StallWatch();
  StallWatch(const StallWatch &) = delete;
  StallWatch &operator=(const StallWatch &) = delete;

  // A wait, from construction to destruction; `watch` may be null (no report).
  class Wait {
  public:
    Wait(StallWatch *watch, std::string what);
    ~Wait();
    Wait(const Wait &) = delete;
    Wait &operator=(const Wait &) = delete;

  private:
    StallWatch *watch_;
    uint64_t id_ = 0;
  };

private:
  struct Open {
    std::string what;
    Clock::time_point since;
    bool reported = false;
  };
  uint64_t open(std::string what);
  void close(uint64_t id);
  void watch();

  std::chrono::milliseconds bound_;
  std::function<void(const std::string &)> report_;
  std::mutex mutex_;
  // Held from marking a wait reported until its line is out (taken under mutex_), so a wait's
  // end is never printed before its report.
  std::mutex reportMutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  uint64_t nextId_ = 1;
  std::map<uint64_t, Open> open_;
  std::thread thread_;
};

// The bound a task's waits are reported past (below the default heartbeat timeout, so a stopped
// peer is named before the job is aborted for it).
inline constexpr std::chrono::milliseconds kStallBound{3000};

} // namespace prism::runtime::job
