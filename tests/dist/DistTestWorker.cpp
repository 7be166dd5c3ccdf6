// The worker process the multi-process tests start: registers with the coordinator, heartbeats,
// joins an all-reduce group and checks its sums; or, as `die`, registers and then dies.
//
//   prism_dist_test_worker ADDRESS TOKEN RANK SIZE GROUP allreduce|die
//
// Exit status: 0 success, 1 an error (printed), 2 bad arguments, 3 the job was aborted,
// 7 died on purpose.
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "DistTestSupport.h"

using namespace prism::runtime::dist;
using namespace std::chrono_literals;

namespace {

int fail(const std::string &task, const std::string &what) {
  std::fprintf(stderr, "%s: %s\n", task.c_str(), what.c_str());
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s ADDRESS TOKEN RANK SIZE GROUP allreduce|die\n", argv[0]);
    return 2;
  }
  const std::string address = argv[1], token = argv[2], group = argv[5], mode = argv[6];
  const int rank = std::atoi(argv[3]), size = std::atoi(argv[4]);
  const std::string task = "worker:" + std::to_string(rank);

  CoordinatorClient client(testing::clientOptions(address, task, token));
  if (llvm::Error error = client.registerTask())
    return fail(task, llvm::toString(std::move(error)));
  llvm::Error started = client.startHeartbeats(100ms, [task](std::string reason) {
    std::fprintf(stderr, "%s: job aborted: %s\n", task.c_str(), reason.c_str());
    std::_Exit(3);
  });
  if (started)
    return fail(task, llvm::toString(std::move(started)));
  if (mode == "die") {
    std::this_thread::sleep_for(200ms); // a few heartbeats, then silence
    std::_Exit(7);
  }

  auto collective = Collective::create(client, group, rank, size, "127.0.0.1", 30s);
  if (!collective)
    return fail(task, llvm::toString(collective.takeError()));
  for (size_t count : {size_t(1), size_t(1000), size_t(1000003)})
    if (std::string problem = testing::checkFloatAllReduce(**collective, count); !problem.empty())
      return fail(task, problem);
  if (llvm::Error error = (*collective)->barrier())
    return fail(task, llvm::toString(std::move(error)));
  if (llvm::Error error = client.finish())
    return fail(task, llvm::toString(std::move(error)));
  return 0;
}
