// Local aggregation per host: which hosts' workers combine their parameter-server traffic and
// send it through one of them (the leader), decided from the plan's cluster and programs; the
// contributors each server counts follow from it. The partitioner, the verifier, the estimate,
// the dump and the runtime all read it from here.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/plan.pb.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::plan {

// --local-aggregation: auto (where it helps), on (an error where it cannot be), off.
enum class LocalAggregationMode { Auto, On, Off };
// "auto", "on", "off"; the error names the text and the choices.
llvm::Expected<LocalAggregationMode> parseLocalAggregation(llvm::StringRef text);
llvm::StringRef localAggregationName(LocalAggregationMode mode);

// Fills plan.host_aggregation and run.local_aggregation: with auto or on, every host with more
// than one worker aggregates when the replication is between-graph and some trainable variable on
// parameter servers is pulled or pushed by rows (`rowTraffic`: the worker program has
// ps_pull_rows or ps_push_rows). With on, an error says which condition fails.
llvm::Error decideLocalAggregation(Plan &plan, LocalAggregationMode mode, bool rowTraffic);

// The aggregation `task` (a worker's name) belongs to; null when its host does not aggregate.
const HostAggregation *aggregationOf(const Plan &plan, llvm::StringRef task);
// The worker indices that push to the parameter servers, ascending: the leader of each
// aggregating host and every worker of the other hosts. Each server counts them as its
// contributors.
std::vector<int64_t> psContributors(const Plan &plan);

// Checks plan.host_aggregation against the cluster (the plan verifier calls it): known hosts,
// every worker of the host in index order, more than one, the leader first; between-graph only;
// none when run.local_aggregation is off.
llvm::Error verifyLocalAggregation(const Plan &plan);

} // namespace prism::plan
