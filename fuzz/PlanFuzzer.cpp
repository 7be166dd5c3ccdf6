// libFuzzer target: the plan loader, as `prism run` and `prism task` read a plan file: any bytes
// give a verified plan or an error naming the defect; every program of a verified plan then
// parses or is an error. Never a crash, a hang or an allocation the file cannot back.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "plan/PlanFile.h"
#include "plan/PlanVerifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string path = "/tmp/prism-fuzz-plan-" + std::to_string(getpid());
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  auto plan = prism::plan::readPlan(path);
  if (!plan) {
    llvm::consumeError(plan.takeError());
    return 0;
  }
  for (const prism::plan::Program &program : plan->programs()) {
    auto module = prism::plan::parseProgram(program);
    if (!module)
      llvm::consumeError(module.takeError());
  }
  return 0;
}
