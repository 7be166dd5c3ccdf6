// Questions about a plan's tasks (see PlanTasks.h).
#include "plan/PlanTasks.h"

#include <algorithm>
#include <cstdlib>
#include <set>

namespace prism::plan {

const Task *findTask(const Plan &plan, llvm::StringRef name) {
  for (const Task &t : plan.cluster().tasks())
    if (t.name() == name)
      return &t;
  return nullptr;
}

int countTasks(const Plan &plan, llvm::StringRef role) {
  int n = 0;
  for (const Task &t : plan.cluster().tasks())
    n += t.role() == role;
  return n;
}

bool onLoopback(const Plan &plan) {
  for (const Task &t : plan.cluster().tasks())
    if (!llvm::StringRef(t.address()).startswith("127."))
      return false;
  return true;
}

std::string jobToken(const Plan &plan) {
  const char *fromEnvironment = std::getenv("PRISM_JOB_TOKEN");
  return fromEnvironment && *fromEnvironment ? fromEnvironment : plan.run().job_token();
}

std::string taskFileName(llvm::StringRef task) {
  std::string name = task.str();
  std::replace(name.begin(), name.end(), ':', '-');
  return name;
}

std::vector<std::string> taskGpus(const Task &task) {
  std::vector<std::string> gpus;
  for (const std::string &device : task.devices())
    if (llvm::StringRef(device).startswith("gpu:"))
      gpus.push_back(device);
  return gpus;
}

const std::string &machineOf(const Host &host) {
  return host.machine().empty() ? host.address() : host.machine();
}

std::string machineOfTask(const Plan &plan, const Task &task) {
  const auto &hosts = plan.cluster().hosts();
  return task.host() >= 0 && task.host() < hosts.size() ? machineOf(hosts[task.host()])
                                                        : task.name();
}

int countMachines(const Plan &plan) {
  std::set<std::string> machines;
  for (const Host &host : plan.cluster().hosts())
    machines.insert(machineOf(host));
  return static_cast<int>(machines.size());
}

} // namespace prism::plan
