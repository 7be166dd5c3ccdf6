// The stall report: a wait past the bound is named once, with what it waits for, and again when
// it ends; short waits and waits without a watch say nothing.
#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

#include "runtime/job/StallWatch.h"

namespace prism::runtime::job {
namespace {

using namespace std::chrono_literals;

struct Lines {
  std::mutex mutex;
  std::vector<std::string> lines;
  std::function<void(const std::string &)> sink() {
    return [this](const std::string &line) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.push_back(line);
    };
  }
  std::vector<std::string> taken() {
    std::lock_guard<std::mutex> lock(mutex);
    return lines;
  }
};

TEST(StallWatch, ALongWaitIsNamedOnceAndWhenItEnds) {
  Lines lines;
  {
    StallWatch watch(100ms, lines.sink());
    {
      StallWatch::Wait quick(&watch, "the all-reduce of bucket 0");
      std::this_thread::sleep_for(10ms);
    }
    {
      StallWatch::Wait slow(&watch, "the parameter servers: push step 7");
      std::this_thread::sleep_for(400ms);
    }
    StallWatch::Wait unwatched(nullptr, "nothing");
  }
  std::vector<std::string> got = lines.taken();
  ASSERT_EQ(got.size(), 2u) << (got.empty() ? "" : got[0]);
  EXPECT_NE(got[0].rfind("waiting ", 0), std::string::npos) << got[0];
  EXPECT_NE(got[0].find(" s so far for the parameter servers: push step 7"), std::string::npos)
      << got[0];
  EXPECT_NE(got[1].rfind("done waiting for the parameter servers: push step 7 after 0.", 0),
            std::string::npos)
      << got[1];
}

} // namespace
} // namespace prism::runtime::job
