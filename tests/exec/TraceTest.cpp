// Timelines (`--trace`): what a recorder writes is trace-event JSON with named tracks and spans
// in Unix microseconds plus the clock offset; merging orders the tasks and names bad files.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "runtime/exec/Trace.h"
#include "llvm/Support/FileSystem.h"

namespace prism::runtime {
namespace {

std::string tempDir() {
  llvm::SmallString<128> dir;
  EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("prism-trace-test", dir));
  return std::string(dir);
}

nlohmann::json readJson(const std::string &path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(Trace, SpansGoOnNamedTracksInUnixMicroseconds) {
  TraceRecorder recorder("worker:1");
  recorder.setClockOffset(1000);
  auto before = std::chrono::duration_cast<std::chrono::microseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  {
    TraceSpan step(&recorder, "steps", "step 0", "step");
    TraceSpan op(&recorder, "ops", "matmul %h", "op");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    op.finish();
    TraceSpan reduce(&recorder, "all-reduce", "bucket 0", "all_reduce");
    reduce.addArg("bytes", 4096);
  }
  TraceSpan off(nullptr, "ops", "not recorded", "op"); // no recorder: nothing
  off.finish();
  EXPECT_EQ(recorder.size(), 3u);
  std::string dir = tempDir();
  ASSERT_FALSE(bool(recorder.write(dir + "/worker-1.json")));
  nlohmann::json trace = readJson(dir + "/worker-1.json");
  EXPECT_EQ(trace["otherData"]["task"], "worker:1");
  EXPECT_EQ(trace["otherData"]["clock_offset_us"], 1000);
  std::map<int, std::string> tracks;
  std::map<std::string, nlohmann::json> spans;
  for (const nlohmann::json &e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name")
      tracks[e["tid"].get<int>()] = e["args"]["name"];
    if (e["ph"] == "X")
      spans[e["name"]] = e;
  }
  EXPECT_EQ(tracks, (std::map<int, std::string>{{0, "ops"}, {1, "all-reduce"}, {2, "steps"}}));
  ASSERT_EQ(spans.size(), 3u);
  const nlohmann::json &op = spans["matmul %h"];
  EXPECT_EQ(tracks[op["tid"].get<int>()], "ops");
  EXPECT_EQ(op["cat"], "op");
  EXPECT_GE(op["dur"].get<int64_t>(), 2000);
  EXPECT_GE(op["ts"].get<int64_t>(), before + 1000 - 100);
  EXPECT_EQ(spans["bucket 0"]["args"]["bytes"], 4096.0);
  // The step contains the op and the all-reduce (Perfetto nests them on its track).
  const nlohmann::json &step = spans["step 0"];
  EXPECT_LE(step["ts"].get<int64_t>(), op["ts"].get<int64_t>());
  EXPECT_GE(step["ts"].get<int64_t>() + step["dur"].get<int64_t>(),
            spans["bucket 0"]["ts"].get<int64_t>() + spans["bucket 0"]["dur"].get<int64_t>());
}

TEST(Trace, MergeOrdersTasksAndRenumbersProcesses) {
  std::string dir = tempDir();
  std::vector<std::string> paths;
  for (const char *task : {"ps:0", "worker:10", "worker:2"}) {
    TraceRecorder recorder(task);
    recorder.span("ops", "op", "op", TraceRecorder::Clock::now(), TraceRecorder::Clock::now());
    std::string path =
        dir + "/" + std::string(task).replace(std::string(task).find(':'), 1, "-") + ".json";
    ASSERT_FALSE(bool(recorder.write(path)));
    paths.push_back(path);
  }
  auto merged = mergeTraceFiles(paths);
  ASSERT_TRUE(bool(merged)) << llvm::toString(merged.takeError());
  nlohmann::json trace = nlohmann::json::parse(*merged);
  EXPECT_EQ(trace["otherData"]["tasks"], nlohmann::json::array({"worker:2", "worker:10", "ps:0"}));
  std::map<int, std::string> processes;
  for (const nlohmann::json &e : trace["traceEvents"])
    if (e["name"] == "process_name")
      processes[e["pid"].get<int>()] = e["args"]["name"];
  EXPECT_EQ(processes,
            (std::map<int, std::string>{{0, "worker:2"}, {1, "worker:10"}, {2, "ps:0"}}));

  auto twice = mergeTraceFiles({paths[0], paths[0]});
  ASSERT_FALSE(bool(twice));
  EXPECT_NE(llvm::toString(twice.takeError()).find("two traces of ps:0"), std::string::npos);
  std::ofstream(dir + "/junk.json") << "{\"traceEvents\": 3}";
  auto junk = mergeTraceFiles({paths[0], dir + "/junk.json"});
  ASSERT_FALSE(bool(junk));
  EXPECT_NE(llvm::toString(junk.takeError()).find("junk.json: not a task's trace"),
            std::string::npos);
  auto none = mergeTraceFiles({});
  EXPECT_FALSE(bool(none));
  llvm::consumeError(none.takeError());
  llvm::sys::fs::remove_directories(dir);
}

} // namespace
} // namespace prism::runtime
