// Local aggregation per host (see LocalAggregation.h).
#include "plan/LocalAggregation.h"

#include <algorithm>
#include <map>

#include "ir/Diagnostic.h"
#include "plan/PlanTasks.h"

namespace prism::plan {
namespace {

// The workers of each host, by host index, in index order (tasks are listed by index).
std::map<int, std::vector<const Task *>> workersByHost(const Plan &plan) {
  std::map<int, std::vector<const Task *>> result;
  for (const Task &t : plan.cluster().tasks())
    if (t.role() == "worker")
      result[t.host()].push_back(&t);
  for (auto &[host, workers] : result)
    std::sort(workers.begin(), workers.end(),
              [](const Task *a, const Task *b) { return a->index() < b->index(); });
  return result;
}

// Why local aggregation cannot be on for this plan; empty when it can.
std::string whyNot(const Plan &plan, bool rowTraffic,
                   const std::map<int, std::vector<const Task *>> &byHost) {
  if (plan.replication() != "between-graph")
    return "it is for between-graph replication (in-graph towers combine inside their process "
           "already), and the plan is " +
           plan.replication();
  if (plan.run().elastic_max() > 0)
    return "a host's leader waits for every member of its host, and under --elastic a member may "
           "be lost or join";
  if (plan.run().sync() == "async" || plan.run().backup_workers() > 0)
    return "a host's workers would wait for each other at its leader every step, which " +
           std::string(plan.run().sync() == "async" ? "--sync async" : "--backup-workers") +
           " is there to avoid";
  if (!rowTraffic)
    return "no worker pulls or pushes rows of a table on parameter servers (strategy " +
           plan.strategy() + ")";
  for (const auto &[host, workers] : byHost)
    if (workers.size() > 1)
      return "";
  return "no host runs more than one worker";
}

} // namespace

llvm::Expected<LocalAggregationMode> parseLocalAggregation(llvm::StringRef text) {
  if (text == "auto")
    return LocalAggregationMode::Auto;
  if (text == "on")
    return LocalAggregationMode::On;
  if (text == "off")
    return LocalAggregationMode::Off;
  return ir::makeError("expected auto, on or off, got '" + text + "'");
}

llvm::StringRef localAggregationName(LocalAggregationMode mode) {
  switch (mode) {
  case LocalAggregationMode::Auto:
    return "auto";
  case LocalAggregationMode::On:
    return "on";
  case LocalAggregationMode::Off:
    return "off";
  }
  return "auto";
}

llvm::Error decideLocalAggregation(Plan &plan, LocalAggregationMode mode, bool rowTraffic) {
  plan.clear_host_aggregation();
  plan.mutable_run()->set_local_aggregation(localAggregationName(mode).str());
  if (mode == LocalAggregationMode::Off)
    return llvm::Error::success();
  const auto byHost = workersByHost(plan);
  if (std::string reason = whyNot(plan, rowTraffic, byHost); !reason.empty()) {
    if (mode == LocalAggregationMode::On)
      return ir::makeError("--local-aggregation on: " + reason);
    return llvm::Error::success();
  }
  for (const auto &[host, workers] : byHost) {
    if (workers.size() < 2)
      continue;
    HostAggregation *aggregation = plan.add_host_aggregation();
    aggregation->set_host(plan.cluster().hosts(host).name());
    aggregation->set_leader(workers.front()->name());
    for (const Task *w : workers)
      aggregation->add_members(w->name());
  }
  return llvm::Error::success();
}

const HostAggregation *aggregationOf(const Plan &plan, llvm::StringRef task) {
  for (const HostAggregation &a : plan.host_aggregation())
    for (const std::string &member : a.members())
      if (member == task)
        return &a;
  return nullptr;
}

std::vector<int64_t> psContributors(const Plan &plan) {
  std::vector<int64_t> result;
  for (const Task &t : plan.cluster().tasks()) {
    if (t.role() != "worker")
      continue;
    const HostAggregation *a = aggregationOf(plan, t.name());
    if (!a || a->leader() == t.name())
      result.push_back(t.index());
  }
  std::sort(result.begin(), result.end());
  return result;
}

llvm::Error verifyLocalAggregation(const Plan &plan) {
  auto fail = [](const llvm::Twine &message) {
    return ir::makeError("plan.host_aggregation: " + message);
  };
  const std::string &mode = plan.run().local_aggregation();
  if (!mode.empty())
    if (auto parsed = parseLocalAggregation(mode); !parsed)
      return ir::makeError("run.local_aggregation: " + ir::messageOf(parsed.takeError()));
  if (plan.host_aggregation_size() == 0)
    return llvm::Error::success();
  if (mode.empty() || mode == "off")
    return fail("hosts aggregate, but run.local_aggregation is " +
                llvm::Twine(mode.empty() ? "unset" : "off"));
  if (plan.replication() != "between-graph")
    return fail("local aggregation is for between-graph replication, the plan is " +
                plan.replication());
  if (plan.run().elastic_max() > 0)
    return fail("hosts aggregate in an elastic plan (run.elastic_max)");
  if (plan.run().sync() == "async" || plan.run().backup_workers() > 0)
    return fail("hosts aggregate in a plan whose workers do not wait for each other "
                "(run.sync async or run.backup_workers)");
  const auto byHost = workersByHost(plan);
  std::map<std::string, int> hostIndex;
  for (int h = 0; h < plan.cluster().hosts_size(); ++h)
    hostIndex[plan.cluster().hosts(h).name()] = h;
  std::map<std::string, int> seen;
  for (const HostAggregation &a : plan.host_aggregation()) {
    auto host = hostIndex.find(a.host());
    if (host == hostIndex.end())
      return fail("host '" + a.host() + "' is not in the cluster");
    if (!seen.emplace(a.host(), 0).second)
      return fail("host '" + a.host() + "' aggregates twice");
    auto workers = byHost.find(host->second);
    std::vector<std::string> expected;
    if (workers != byHost.end())
      for (const Task *w : workers->second)
        expected.push_back(w->name());
    if (expected.size() < 2)
      return fail("host '" + a.host() + "' runs " + llvm::Twine(expected.size()) +
                  " worker(s); aggregation needs two or more");
    std::vector<std::string> members(a.members().begin(), a.members().end());
    if (members != expected)
      return fail("the members of host '" + a.host() +
                  "' must be its workers in index order, from " + expected.front() + " to " +
                  expected.back());
    if (a.leader() != expected.front())
      return fail("the leader of host '" + a.host() + "' must be " + expected.front() + ", not '" +
                  a.leader() + "'");
  }
  return llvm::Error::success();
}

} // namespace prism::plan
