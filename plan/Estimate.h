// The plan's estimate: bytes on the wire per step for every task and host link, parameter and
// activation memory per task, FLOPs per worker step. docs/plan.md gives the formulas.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "ir/Module.h"
#include "plan/CommunicationCost.h"
#include "plan/plan.pb.h"

namespace prism::plan {

// Expected distinct values among `draws` uniform draws from `range` values:
// range · (1 − (1 − 1/range)^draws).
double expectedDistinct(double range, double draws);

// The bytes of a worker's inputs (its batch) per step at `batch` examples.
double inputBytes(const ir::Module &worker, int64_t batch);

// Fills plan.estimate from the worker program and the PS programs (in PS task order).
// `rowsPerStep`, when set, is the distinct rows a worker reads per step from each PS table;
// otherwise indices are taken as uniform draws over the table's rows (an upper bound for the
// skewed ids of real data).
// With local aggregation, `rowsOfWorkers` maps a number m of a host's workers to the distinct
// rows they read together per step (sampled from data); without an entry m workers read
// m × rowsPerStep rows (no overlap), or m workers' indices as uniform draws.
// `rowShares`, by PS table, is how its rows fall over its rows (TableEstimate.row_shares,
// sampled from data); a table without an entry has them spread as its rows are.
void estimatePlan(Plan &plan, const ir::Module &worker, const std::vector<const ir::Module *> &ps,
                  std::optional<double> rowsPerStep,
                  const std::map<int, double> &rowsOfWorkers = {}, const RowShares &rowShares = {});

} // namespace prism::plan
