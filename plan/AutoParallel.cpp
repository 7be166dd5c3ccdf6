// The automatic choices (see AutoParallel.h), made one after another: the strategy (a whole-model
// strategy, then variable by variable), the partition count of the PS tables, the all-reduce
// bucket size. Each stage compiles its candidates with the choices so far and predicts their
// steps; a candidate the partitioner refuses is recorded with its error.
#include "plan/AutoParallel.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "ir/Attribute.h"
#include "ir/Diagnostic.h"
#include "plan/CommunicationCost.h"
#include "plan/PlanVariables.h"
#include "plan/Simulator.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

namespace prism::plan {
namespace {

using passes::Strategy;

constexpr Strategy kStrategies[] = {Strategy::Hybrid, Strategy::AllReduce,
                                    Strategy::ParameterServer};
// The bucket sizes weighed (MiB); the default (passes::RouteGradientsOptions) is among them.
constexpr double kBucketSizesMb[] = {0.5, 2, 8, 25, 64};
// At most this many variables are weighed one by one: the tables, then the largest dense ones.
constexpr size_t kVariablesWeighed = 8;
// A dense variable is weighed on its own when it holds at least this share of the trained bytes.
constexpr double kWeighedShare = 0.05;

// The margin as the decisions' reasons write it.
const std::string kMarginText = std::to_string(static_cast<int>(kDecisionMargin * 100)) + "%";

const char *placementName(bool onPs) {
  return onPs ? "ps" : "all-reduce";
}

std::string firstLine(std::string text) {
  if (auto eol = text.find('\n'); eol != std::string::npos)
    text.resize(eol);
  if (text.rfind("error: ", 0) == 0)
    text.erase(0, 7);
  return text;
}

// A candidate compiled and predicted.
struct Candidate {
  std::string option;
  PartitionOptions options;
  std::optional<PartitionResult> result;
  double stepSeconds = 0;
  std::string refused;
  bool ok() const { return result.has_value(); }
};

// Where the rows a step reads crowd one of a table's ranges (the estimate's sampled row shares):
// "the busiest of emb's 4 ranges serves 86% of a step's rows", for the table whose busiest range
// serves the most beyond its part of the table; none where no range serves 1.5 times its part.
std::string busiestRange(const Plan &plan) {
  std::string note;
  double worst = 1.5;
  for (const TableEstimate &t : plan.estimate().tables()) {
    const llvm::ArrayRef<double> shares = rowSharesOf(t);
    for (const Variable &v : plan.variables()) {
      if (v.name() != t.variable() || v.shards_size() < 2 || shares.empty())
        continue;
      for (const Shard &s : v.shards()) {
        const double share = shardRowFraction(v, s, shares);
        const double over = share / std::max(1e-12, shardFraction(v, s));
        if (over < worst)
          continue;
        worst = over;
        note = "the busiest of " + v.name() + "'s " + std::to_string(v.shards_size()) +
               " ranges serves " + std::to_string(static_cast<int>(std::lround(share * 100))) +
               "% of a step's rows";
      }
    }
  }
  return note;
}

// Which trained variables are on the parameter servers, by name.
using Assignment = std::map<std::string, bool>;

Assignment assignmentOf(const Plan &plan) {
  Assignment onPs;
  for (const Variable &v : plan.variables())
    if (v.trainable())
      onPs[v.name()] = onParameterServers(v);
  return onPs;
}

// The options that place every trained variable as `onPs` says.
PartitionOptions withAssignment(PartitionOptions options, const Assignment &onPs) {
  options.placement.psVariables.clear();
  options.placement.allReduceVariables.clear();
  for (const auto &[name, ps] : onPs)
    (ps ? options.placement.psVariables : options.placement.allReduceVariables).push_back(name);
  return options;
}

class Search {
public:
  Search(const ir::Module &model, const cluster::Cluster &cluster, const PartitionOptions &options,
         const CostProfile &profile, std::string profileSource)
      : model_(model), cluster_(cluster), profile_(profile),
        profileSource_(std::move(profileSource)) {
    best_.options = options;
    best_.options.automatic = {};
  }

  llvm::Expected<PartitionResult> run(const AutomaticChoices &automatic) {
    if (!searchable(model_, cluster_.numWorkers())) {
      keepDefaults(automatic);
      auto result = partition(model_, cluster_, best_.options);
      if (!result)
        return result.takeError();
      return withDecisions(std::move(*result));
    }
    if (automatic.strategy)
      if (auto e = chooseStrategy())
        return std::move(e);
    if (!best_.ok()) {
      best_ = evaluate("as given", best_.options);
      if (!best_.ok())
        return partition(model_, cluster_, best_.options).takeError();
    }
    if (automatic.strategy)
      chooseVariables();
    if (automatic.partitions)
      choosePartitions();
    if (automatic.bucketMb)
      chooseBucket();
    PartitionResult result = withDecisions(std::move(*best_.result));
    if (automatic.strategy && !strategyNamed_)
      result.plan.set_strategy("auto");
    return std::move(result);
  }

private:
  PartitionResult withDecisions(PartitionResult result) {
    for (Decision &d : decisions_)
      *result.plan.add_decisions() = std::move(d);
    decisions_.clear();
    return result;
  }

  // A model too large to search: the defaults, each decision saying why.
  void keepDefaults(const AutomaticChoices &automatic) {
    const std::string reason =
        "the default: the model has " + std::to_string(model_.ops().size()) + " ops and the " +
        "cluster " + std::to_string(cluster_.numWorkers()) +
        " workers, and a search compiles and simulates a plan per candidate (it does up to " +
        std::to_string(kSearchedOps) + " ops, and ops times workers up to " +
        ir::formatDouble(kSearchedOpsTimesWorkers) + "); give the value to choose";
    Candidate kept;
    if (automatic.strategy) {
      kept.option = passes::strategyName(best_.options.placement.strategy).str();
      decide("strategy", {}, kept, reason);
    }
    if (automatic.partitions) {
      kept.option = std::to_string(best_.options.placement.partitions);
      decide("partitions", {}, kept, reason);
    }
    if (automatic.bucketMb) {
      kept.option = ir::formatDouble(best_.options.routing.bucketMb);
      decide("bucket-mb", {}, kept, reason);
    }
  }

  Candidate evaluate(std::string option, const PartitionOptions &options) const {
    Candidate c;
    c.option = std::move(option);
    c.options = options;
    auto result = partition(model_, cluster_, options);
    if (!result) {
      c.refused = firstLine(ir::messageOf(result.takeError()));
      return c;
    }
    SimulateOptions simulate;
    simulate.spans = false;
    auto prediction = simulateStep(result->plan, *result->programs.front(), profile_, simulate);
    if (!prediction) {
      c.refused = firstLine(ir::messageOf(prediction.takeError()));
      return c;
    }
    c.stepSeconds = prediction->stepSeconds;
    c.result = std::move(*result);
    return c;
  }

  void decide(std::string subject, const std::vector<Candidate> &candidates,
              const Candidate &chosen, std::string reason) {
    Decision &d = decisions_.emplace_back();
    d.set_subject(std::move(subject));
    d.set_chosen(chosen.option);
    d.set_reason(std::move(reason));
    d.set_profile(profileSource_);
    for (const Candidate &c : candidates) {
      Alternative *a = d.add_alternatives();
      a->set_option(c.option);
      a->set_step_seconds(c.stepSeconds);
      a->set_refused(c.refused);
    }
  }

  // The fastest candidate, unless `preferred` (an index) predicts within the margin of it.
  static size_t pick(const std::vector<Candidate> &candidates, std::optional<size_t> preferred,
                     std::string &reason) {
    size_t fastest = candidates.size();
    for (size_t i = 0; i < candidates.size(); ++i)
      if (candidates[i].ok() && (fastest == candidates.size() ||
                                 candidates[i].stepSeconds < candidates[fastest].stepSeconds))
        fastest = i;
    if (fastest == candidates.size())
      return fastest;
    if (preferred && candidates[*preferred].ok() && *preferred != fastest &&
        candidates[*preferred].stepSeconds <=
            candidates[fastest].stepSeconds * (1 + kDecisionMargin)) {
      reason = "the default: the fastest, " + candidates[fastest].option + ", predicts a step " +
               "less than " + kMarginText + " shorter";
      return *preferred;
    }
    reason = "the fastest predicted step";
    return fastest;
  }

  // A whole-model strategy first. Backup workers leave no choice (every trained variable on the
  // parameter servers).
  llvm::Error chooseStrategy() {
    if (best_.options.synchronization.backupWorkers > 0) {
      best_.options.placement.strategy = Strategy::ParameterServer;
      Candidate only = evaluate("ps", best_.options);
      if (!only.ok())
        return partition(model_, cluster_, best_.options).takeError();
      decide("strategy", {}, only,
             "--backup-workers puts every trained variable on the parameter servers");
      best_ = std::move(only);
      strategyNamed_ = true;
      return llvm::Error::success();
    }
    std::vector<Candidate> candidates;
    for (Strategy s : kStrategies) {
      PartitionOptions options = best_.options;
      options.placement.strategy = s;
      candidates.push_back(evaluate(passes::strategyName(s).str(), options));
    }
    std::string reason;
    const size_t chosen = pick(candidates, 0, reason);
    if (chosen == candidates.size()) {
      // No strategy compiles: the default's error says why (with its place in the model).
      PartitionOptions options = best_.options;
      options.placement.strategy = Strategy::Hybrid;
      return partition(model_, cluster_, options).takeError();
    }
    decide("strategy", candidates, candidates[chosen], reason);
    for (size_t i = 0; i < candidates.size(); ++i)
      if (candidates[i].ok())
        strategyAssignments_.emplace_back(candidates[i].options.placement.strategy,
                                          assignmentOf(candidates[i].result->plan));
    best_ = std::move(candidates[chosen]);
    strategyNamed_ = true;
    return llvm::Error::success();
  }

  // The variables worth weighing one by one: every table, and the dense variables that hold a
  // share of the trained bytes.
  std::vector<const Variable *> weighedVariables() const {
    std::vector<const Variable *> tables, dense;
    double total = 0;
    for (const Variable &v : best_.result->plan.variables())
      if (v.trainable())
        total += static_cast<double>(v.bytes());
    for (const Variable &v : best_.result->plan.variables()) {
      if (!v.trainable())
        continue;
      if (v.kind() == "sparse" || v.kind() == "mixed")
        tables.push_back(&v);
      else if (static_cast<double>(v.bytes()) >= kWeighedShare * total)
        dense.push_back(&v);
    }
    auto larger = [](const Variable *a, const Variable *b) {
      return a->bytes() != b->bytes() ? a->bytes() > b->bytes() : a->name() < b->name();
    };
    std::sort(tables.begin(), tables.end(), larger);
    std::sort(dense.begin(), dense.end(), larger);
    tables.insert(tables.end(), dense.begin(), dense.end());
    if (tables.size() > kVariablesWeighed)
      tables.resize(kVariablesWeighed);
    return tables;
  }

  // Then each weighed variable: moved to the other side when that predicts a shorter step.
  void chooseVariables() {
    if (best_.options.synchronization.backupWorkers > 0)
      return;
    Assignment current = assignmentOf(best_.result->plan);
    std::vector<std::string> names;
    for (const Variable *v : weighedVariables())
      names.push_back(v->name());
    for (const std::string &name : names) {
      Assignment flipped = current;
      flipped[name] = !flipped[name];
      Candidate stay = std::move(best_);
      stay.option = placementName(current[name]);
      Candidate move =
          evaluate(placementName(flipped[name]), withAssignment(stay.options, flipped));
      std::vector<Candidate> pair;
      pair.push_back(std::move(stay));
      pair.push_back(std::move(move));
      std::string reason;
      const size_t chosen = pick(pair, 0, reason);
      if (chosen == 1) {
        current = flipped;
        reason = "the fastest predicted step";
      } else {
        reason = pair[1].ok() ? "the other side predicts no step " + kMarginText + " shorter"
                              : "the other side is refused";
      }
      decide("placement of " + name, pair, pair[chosen], reason);
      best_ = std::move(pair[chosen]);
    }
    strategyNamed_ = false;
    for (const auto &[strategy, assignment] : strategyAssignments_)
      if (assignment == current) {
        best_.options.placement.strategy = strategy;
        best_.options.placement.psVariables.clear();
        best_.options.placement.allReduceVariables.clear();
        best_.result->plan.set_strategy(passes::strategyName(strategy).str());
        strategyNamed_ = true;
        return;
      }
    best_.options = withAssignment(best_.options, current);
  }

  // The partition count of the PS tables: powers of two up to the PS task count, and the count
  // itself. Nothing to choose without a table on the parameter servers.
  void choosePartitions() {
    int64_t largestRows = 0;
    for (const Variable &v : best_.result->plan.variables())
      if (v.trainable() && onParameterServers(v) && (v.kind() == "sparse" || v.kind() == "mixed"))
        largestRows = std::max<int64_t>(largestRows, v.shape_size() > 0 ? v.shape(0) : 1);
    if (largestRows < 2)
      return;
    // A server holds one row range of a table: at most a range per server.
    const int64_t psTasks = static_cast<int64_t>(cluster_.parameterServers().size());
    std::set<int64_t> counts;
    for (int64_t p = 1; p <= psTasks; p *= 2)
      counts.insert(p);
    counts.insert(std::max<int64_t>(1, psTasks));
    std::vector<Candidate> candidates;
    for (int64_t p : counts) {
      if (p > largestRows)
        continue;
      PartitionOptions options = best_.options;
      options.placement.partitions = p;
      candidates.push_back(evaluate(std::to_string(p), options));
    }
    std::string reason;
    const size_t chosen = pick(candidates, std::nullopt, reason);
    if (chosen == candidates.size())
      return;
    // Among counts within the margin of the choice, the fewest: more ranges are more messages.
    size_t fewest = chosen;
    for (size_t i = 0; i < chosen; ++i)
      if (candidates[i].ok() &&
          candidates[i].stepSeconds <= candidates[chosen].stepSeconds * (1 + kDecisionMargin)) {
        fewest = i;
        break;
      }
    if (fewest != chosen)
      reason = "the fewest ranges within " + kMarginText + " of the fastest";
    // The most ranges tried show how the sampled rows spread over them.
    for (auto c = candidates.rbegin(); c != candidates.rend(); ++c)
      if (c->ok()) {
        if (const std::string note = busiestRange(c->result->plan); !note.empty())
          reason += (reason.empty() ? "" : "; ") + note;
        break;
      }
    decide("partitions", candidates, candidates[fewest], reason);
    best_ = std::move(candidates[fewest]);
  }

  // The all-reduce bucket size, when gradients are all-reduced; sizes that make the same buckets
  // as a smaller one are left out.
  void chooseBucket() {
    double reducedBytes = 0;
    for (const Variable &v : best_.result->plan.variables())
      if (v.trainable() && placementOf(v) == ir::Placement::AllReduce)
        reducedBytes += static_cast<double>(v.bytes());
    if (reducedBytes <= 0 || cluster_.numWorkers() * towers() < 2)
      return;
    std::vector<Candidate> candidates;
    std::optional<size_t> defaultIndex;
    bool wholeModelSeen = false;
    for (double mb : kBucketSizesMb) {
      const bool wholeModel = mb * 1024 * 1024 >= reducedBytes;
      const bool isDefault = mb == passes::RouteGradientsOptions().bucketMb;
      if (wholeModel && wholeModelSeen && !isDefault)
        continue;
      wholeModelSeen |= wholeModel;
      PartitionOptions options = best_.options;
      options.routing.bucketMb = mb;
      if (isDefault)
        defaultIndex = candidates.size();
      candidates.push_back(evaluate(ir::formatDouble(mb), options));
    }
    std::string reason;
    const size_t chosen = pick(candidates, defaultIndex, reason);
    if (chosen == candidates.size())
      return;
    decide("bucket-mb", candidates, candidates[chosen], reason);
    best_ = std::move(candidates[chosen]);
  }

  int64_t towers() const { return std::max(1, best_.result->plan.run().towers_per_worker()); }

  const ir::Module &model_;
  const cluster::Cluster &cluster_;
  const CostProfile &profile_;
  const std::string profileSource_;
  Candidate best_;
  std::vector<std::pair<Strategy, Assignment>> strategyAssignments_;
  bool strategyNamed_ = true;
  std::vector<Decision> decisions_;
};

std::string milliseconds(double seconds) {
  return llvm::formatv("{0:F3} ms", seconds * 1e3).str();
}

} // namespace

llvm::Expected<PartitionResult> partitionAutomatically(const ir::Module &model,
                                                       const cluster::Cluster &cluster,
                                                       const PartitionOptions &options) {
  std::string source;
  CostProfile loaded;
  const CostProfile *profile = options.profile.get();
  if (profile) {
    source = options.profileSource.empty() ? "given" : options.profileSource;
  } else {
    auto cached = cachedOrDefaultProfile(source);
    if (!cached)
      return cached.takeError();
    loaded = std::move(*cached);
    profile = &loaded;
  }
  return Search(model, cluster, options, *profile, source).run(options.automatic);
}

void printDecisions(const Plan &plan, llvm::raw_ostream &os) {
  if (plan.decisions_size() == 0)
    return;
  os << "decisions (predicted steps, profile " << plan.decisions(0).profile() << ")\n";
  for (const Decision &d : plan.decisions()) {
    os << "  " << d.subject() << ": " << d.chosen() << " (" << d.reason() << ")\n";
    double chosenSeconds = 0;
    for (const Alternative &a : d.alternatives())
      if (a.option() == d.chosen() && a.refused().empty())
        chosenSeconds = a.step_seconds();
    for (const Alternative &a : d.alternatives()) {
      os << "    " << (a.option() == d.chosen() ? "* " : "  ") << llvm::left_justify(a.option(), 12)
         << " ";
      if (!a.refused().empty()) {
        os << "refused: " << a.refused() << "\n";
        continue;
      }
      os << llvm::right_justify(milliseconds(a.step_seconds()), 12);
      if (a.option() != d.chosen() && chosenSeconds > 0) {
        const long percent = std::lround((a.step_seconds() / chosenSeconds - 1) * 100);
        os << "  " << (percent >= 0 ? "+" : "") << percent << "%";
      }
      os << "\n";
    }
  }
}

} // namespace prism::plan
