// The plan verifier (see PlanVerifier.h): the cluster, the variables, the programs, and how
// they agree with each other.
#include "plan/PlanVerifier.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "frontends/text/Parser.h"
#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "ir/Precision.h"
#include "ir/VariablePlacement.h"
#include "ir/Verifier.h"
#include "passes/ParallelizeOptions.h"
#include "plan/CommunicationCost.h"
#include "plan/ElasticRange.h"
#include "plan/LocalAggregation.h"
#include "plan/PartitionSearch.h"
#include "plan/PlanFile.h"
#include "plan/PlanTasks.h"
#include "plan/PlanVariables.h"
#include "plan/Synchronization.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"

namespace prism::plan {
namespace {

llvm::Error fail(const llvm::Twine &message) {
  return ir::makeError("invalid plan: " + message);
}

std::string quoted(llvm::StringRef s) {
  return "'" + s.str() + "'";
}

std::string dimsString(const std::vector<int64_t> &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

llvm::Error verifyCluster(const Plan &plan) {
  const Cluster &cluster = plan.cluster();
  if (cluster.hosts_size() == 0)
    return fail("cluster.hosts is empty");
  std::map<std::string, int> names;
  std::map<std::string, std::string> endpoints;
  int coordinators = 0, workers = 0;
  for (int i = 0; i < cluster.tasks_size(); ++i) {
    const Task &t = cluster.tasks(i);
    std::string field = "cluster.tasks[" + std::to_string(i) + "]";
    if (t.role() != "worker" && t.role() != "ps" && t.role() != "coordinator")
      return fail(field + ".role: expected worker, ps or coordinator, got " + quoted(t.role()));
    if (t.name() != t.role() + ":" + std::to_string(t.index()))
      return fail(field + ".name: " + quoted(t.name()) + " does not match role " + t.role() +
                  " and index " + std::to_string(t.index()));
    if (!names.emplace(t.name(), i).second)
      return fail(field + ".name: " + quoted(t.name()) + " appears twice");
    if (t.host() < 0 || t.host() >= cluster.hosts_size())
      return fail(field + ".host: " + std::to_string(t.host()) + " is not a host index (0.." +
                  std::to_string(cluster.hosts_size() - 1) + ")");
    if (t.address().empty())
      return fail(field + ".address is empty");
    if (t.port() < 1 || t.port() > 65535)
      return fail(field + ".port: " + std::to_string(t.port()) + " is not a port (1..65535)");
    std::string endpoint = t.address() + ":" + std::to_string(t.port());
    auto [it, inserted] = endpoints.emplace(endpoint, t.name());
    if (!inserted)
      return fail(field + ".port: " + t.name() + " and " + it->second + " both use " + endpoint);
    coordinators += t.role() == "coordinator";
    workers += t.role() == "worker";
  }
  if (coordinators != 1)
    return fail("cluster.tasks: expected one coordinator task, found " +
                std::to_string(coordinators));
  if (workers == 0)
    return fail("cluster.tasks: no worker task");
  if (plan.run().towers_per_worker() < 1)
    return fail("run.towers_per_worker: expected at least 1, got " +
                std::to_string(plan.run().towers_per_worker()));
  int64_t towers = int64_t(workers) * plan.run().towers_per_worker();
  if (plan.run().global_batch() < towers)
    return fail("run.global_batch: " + std::to_string(plan.run().global_batch()) +
                " is smaller than the " + std::to_string(towers) + " towers in all");
  if (!plan.run().precision().empty())
    if (auto precision = ir::parsePrecision(plan.run().precision()); !precision)
      return fail("run.precision: " + ir::messageOf(precision.takeError()));
  if (auto compress = parseCompression(plan.run().compress()); !compress) {
    llvm::consumeError(compress.takeError());
    return fail("run.compress: expected fp16 or bf16 (or empty), got " +
                quoted(plan.run().compress()));
  }
  if (plan.run().error_feedback() && plan.run().compress().empty())
    return fail("run.error_feedback: error feedback needs run.compress");
  if (auto e = verifySynchronization(plan.run(), workers))
    return fail(ir::messageOf(std::move(e)));
  if (auto e = checkElasticRange(plan.run().elastic_min(), plan.run().elastic_max(), workers))
    return fail("run.elastic_min/elastic_max: " + ir::messageOf(std::move(e)));
  if (plan.run().elastic_max() > 0 && !readSynchronization(plan.run()).exact())
    return fail("run.elastic_max: elastic membership in a plan whose workers are not at one step "
                "(run.sync async or run.backup_workers)");
  // Every micro-batch of every worker has an example for each tower.
  const int64_t accumulate = std::max(1, plan.run().accumulate());
  if (plan.run().accumulate() < 0 || plan.run().global_batch() < towers * accumulate)
    return fail("run.accumulate: " + std::to_string(plan.run().accumulate()) +
                " micro-batches per step need a global batch of at least " +
                std::to_string(towers * accumulate) + " (" + std::to_string(towers) +
                " towers in all), got " + std::to_string(plan.run().global_batch()));
  return llvm::Error::success();
}

llvm::Error verifyVariables(const Plan &plan) {
  std::set<std::string> seen;
  for (int i = 0; i < plan.variables_size(); ++i) {
    const Variable &v = plan.variables(i);
    std::string field = "variables[" + std::to_string(i) + "] " + quoted(v.name());
    if (!seen.insert(v.name()).second)
      return fail(field + ": declared twice");
    auto dtype = ir::parseDType(v.dtype());
    if (!dtype)
      return fail(field + ".dtype: unknown dtype " + quoted(v.dtype()));
    int64_t elements = 1;
    for (int64_t d : v.shape()) {
      if (d < 1 || d > ir::kMaxElements)
        return fail(field + ".shape: dimension " + std::to_string(d) + " is not a size");
      elements *= d;
      if (elements > ir::kMaxElements)
        return fail(field + ".shape: too many elements");
    }
    if (v.bytes() != elements * ir::dtypeBytes(*dtype))
      return fail(field + ".bytes: " + std::to_string(v.bytes()) + ", but " + v.dtype() + " with " +
                  std::to_string(elements) + " elements is " +
                  std::to_string(elements * ir::dtypeBytes(*dtype)) + " bytes");
    if (!placementOf(v))
      return fail(field + ".placement: expected allreduce, ps or replicated, got " +
                  quoted(v.placement()));
    if (!onParameterServers(v)) {
      if (v.shards_size())
        return fail(field + ".shards: a variable placed " + v.placement() + " has no shards");
      continue;
    }
    if (v.shards_size() == 0)
      return fail(field + ".shards: a PS variable needs at least one shard");
    int64_t rows = v.shape_size() ? v.shape(0) : 1, next = 0;
    for (int s = 0; s < v.shards_size(); ++s) {
      const Shard &shard = v.shards(s);
      std::string sfield = field + ".shards[" + std::to_string(s) + "]";
      const Task *task = findTask(plan, shard.task());
      if (!task || task->role() != "ps")
        return fail(sfield + ".task: " + quoted(shard.task()) + " is not a PS task");
      if (shard.row_begin() != next)
        return fail(sfield + ": rows " + std::to_string(shard.row_begin()) + ".." +
                    std::to_string(shard.row_end()) + " should start at row " +
                    std::to_string(next) + " (shards cover every row once, in order)");
      if (shard.row_end() <= shard.row_begin())
        return fail(sfield + ": empty row range " + std::to_string(shard.row_begin()) + ".." +
                    std::to_string(shard.row_end()));
      next = shard.row_end();
    }
    if (next != rows)
      return fail(field + ".shards: cover rows 0.." + std::to_string(next) + " of " +
                  std::to_string(rows));
  }
  return llvm::Error::success();
}

// What the programs say about one variable, gathered while checking them.
struct Routing {
  int pushes = 0; // ps_push / ps_push_rows in the worker program
  bool reduced = false;
  bool hasGradient = false;
};

// One all_reduce op of a program is the bucket the plan lists in its place.
llvm::Error verifyBucket(const ir::Op &op, const Bucket &bucket, const std::string &field,
                         const std::string &where) {
  if (op.attrs.getInt("bucket") != bucket.id())
    return fail(field + ".id: " + std::to_string(bucket.id()) + ", but " + where + " has bucket " +
                std::to_string(op.attrs.getInt("bucket")) + " there");
  if (static_cast<int>(op.numResults()) != bucket.values_size())
    return fail(field + ".values: " + std::to_string(bucket.values_size()) + " values, but " +
                where + "'s all_reduce has " + std::to_string(op.numResults()));
  int64_t bytes = 0;
  for (unsigned i = 0; i < op.numResults(); ++i) {
    if (op.result(i)->name() != bucket.values(static_cast<int>(i)))
      return fail(field + ".values[" + std::to_string(i) +
                  "]: " + quoted(bucket.values(static_cast<int>(i))) + ", but " + where +
                  " reduces " + quoted(op.result(i)->name()) + " there");
    bytes += op.result(i)->type().numElements() * ir::dtypeBytes(op.result(i)->type().dtype);
  }
  if (bytes != bucket.bytes())
    return fail(field + ".bytes: " + std::to_string(bucket.bytes()) + ", but its values hold " +
                std::to_string(bytes));
  return llvm::Error::success();
}

// A program's all_reduce ops over each group, in order, are the group's buckets; the program's
// tasks belong to the group; every group with buckets is reduced over.
llvm::Error verifyBuckets(const Plan &plan, const Program &program, const std::string &where,
                          const std::map<std::string, std::vector<const ir::Op *>> &reduces) {
  for (const auto &[group, ops] : reduces) {
    const CollectiveGroup *g = nullptr;
    for (const CollectiveGroup &candidate : plan.groups())
      if (candidate.name() == group)
        g = &candidate;
    if (!g)
      return fail(where + ": all_reduce over group " + quoted(group) +
                  ", which plan.groups does not declare");
    const std::set<std::string> members(g->tasks().begin(), g->tasks().end());
    for (const std::string &task : program.tasks())
      if (!members.count(task))
        return fail(where + ": " + task + " all-reduces over group " + quoted(group) +
                    " but is not one of its tasks");
    if (static_cast<int>(ops.size()) != g->buckets_size())
      return fail("groups " + quoted(group) + ": " + std::to_string(g->buckets_size()) +
                  " buckets, but " + where + " has " + std::to_string(ops.size()) +
                  " all_reduce ops");
    for (size_t b = 0; b < ops.size(); ++b)
      if (auto e = verifyBucket(*ops[b], g->buckets(static_cast<int>(b)),
                                "groups " + quoted(group) + ".buckets[" + std::to_string(b) + "]",
                                where))
        return e;
  }
  for (const CollectiveGroup &g : plan.groups())
    if (!reduces.count(g.name()) && g.buckets_size())
      return fail("groups " + quoted(g.name()) + ": " + std::to_string(g.buckets_size()) +
                  " buckets, but " + where + " has no all_reduce over it");
  return llvm::Error::success();
}

llvm::Error verifyWorkerProgram(const Plan &plan, const Program &program, const ir::Module &m,
                                llvm::StringMap<Routing> &routing) {
  llvm::StringMap<const Variable *> variables;
  for (const Variable &v : plan.variables())
    variables[v.name()] = &v;
  std::string where = "program " + quoted(program.name());
  for (const auto &variable : m.variables()) {
    const Variable *v = variables.lookup(variable->name());
    if (!v)
      return fail(where + ": variable " + quoted(variable->name()) +
                  " is not among the plan's variables");
    std::vector<int64_t> shape(v->shape().begin(), v->shape().end());
    if (ir::dtypeName(variable->type().dtype) != v->dtype() ||
        std::vector<int64_t>(variable->type().dims.begin(), variable->type().dims.end()) != shape)
      return fail(where + ": variable " + quoted(variable->name()) + " is " +
                  variable->type().str() + " but the plan says " + v->dtype() + dimsString(shape));
  }
  std::map<std::string, std::vector<const ir::Op *>> reduces; // by group, in program order
  for (const auto &op : m.ops()) {
    if (op->def().has(ir::kOnParameterServer))
      return fail(where + ": '" + op->name().str() + "' runs on parameter servers only");
    if (op->name() == "all_reduce")
      reduces[op->attrs.getString("group")].push_back(op.get());
    if ((op->name() == "ps_push" || op->name() == "ps_push_rows"))
      ++routing[op->operand(0)->name()].pushes;
    if (op->def().has(ir::kCommunication) && op->name().startswith("ps_")) {
      const Variable *v = variables.lookup(op->operand(0)->name());
      if (!v || !onParameterServers(*v))
        return fail(where + ": '" + op->name().str() + "' reads " + quoted(op->operand(0)->name()) +
                    ", which is not placed on parameter servers");
    }
  }
  for (const ir::Gradient &g : m.gradients) {
    Routing &r = routing[g.variable->name()];
    r.hasGradient = true;
    const ir::Value *value = g.value;
    r.reduced =
        value->kind() == ir::ValueKind::OpResult && value->definingOp()->name() == "all_reduce";
  }
  return verifyBuckets(plan, program, where, reduces);
}

// A PS program's variable holds exactly the plan's shards on its task, of a table of the plan's
// shape, and its type has those rows.
llvm::Error verifyHeldRows(const Variable &v, const ir::Variable &variable, const std::string &task,
                           const std::string &where) {
  std::vector<ir::RowRange> planRanges;
  int64_t planRows = 0;
  for (const Shard &s : v.shards())
    if (s.task() == task) {
      planRanges.push_back({s.row_begin(), s.row_end()});
      planRows += s.row_end() - s.row_begin();
    }
  auto held = ir::heldRowsOf(variable);
  if (!held || held->ranges != planRanges)
    return fail(where + ": variable " + quoted(v.name()) +
                " holds other rows than the plan's shards on " + task);
  std::vector<int64_t> shape(v.shape().begin(), v.shape().end());
  std::vector<int64_t> tableShape(held->tableShape.begin(), held->tableShape.end());
  if (tableShape != shape)
    return fail(where + ": variable " + quoted(v.name()) + " is rows of a " +
                dimsString(tableShape) + " table, but the plan's is " + dimsString(shape));
  int64_t programRows = variable.type().isScalar() ? 1 : variable.type().dims[0];
  if (programRows != planRows)
    return fail(where + ": variable " + quoted(v.name()) + " is " + variable.type().str() +
                ", but the plan gives " + task + " " + std::to_string(planRows) + " rows");
  return llvm::Error::success();
}

llvm::Error verifyPsProgram(const Plan &plan, const Program &program, const ir::Module &m,
                            llvm::StringMap<int> &updates) {
  std::string where = "program " + quoted(program.name());
  if (program.tasks_size() != 1)
    return fail(where + ": a PS program belongs to exactly one task, has " +
                std::to_string(program.tasks_size()));
  const std::string &task = program.tasks(0);
  llvm::StringMap<const Variable *> variables;
  for (const Variable &v : plan.variables())
    variables[v.name()] = &v;
  for (const auto &variable : m.variables()) {
    const Variable *v = variables.lookup(variable->name());
    if (!v)
      return fail(where + ": variable " + quoted(variable->name()) +
                  " is not among the plan's variables");
    if (placementOf(*v) == ir::Placement::AllReduce)
      return fail(where + ": holds " + quoted(v->name()) + ", which the plan all-reduces");
    if (onParameterServers(*v))
      if (auto e = verifyHeldRows(*v, *variable, task, where))
        return e;
  }
  for (const auto &op : m.ops()) {
    if (op->def().has(ir::kCommunication) && !op->def().has(ir::kOnParameterServer))
      return fail(where + ": '" + op->name().str() + "' runs on workers only");
    if (op->def().has(ir::kOptimizerUpdate)) {
      std::string name = op->operand(0)->name();
      ++updates[name + "@" + task];
      bool fedByPs = false;
      for (const ir::Value *v : op->operands())
        fedByPs |= v->kind() == ir::ValueKind::OpResult &&
                   v->definingOp()->def().has(ir::kOnParameterServer) &&
                   v->definingOp()->operand(0)->name() == name;
      if (!fedByPs)
        return fail(where + ": the update of " + quoted(name) +
                    " does not read the gradient the workers pushed");
    }
  }
  return llvm::Error::success();
}

llvm::Error verifyHeader(const Plan &plan) {
  if (plan.version() < kOldestPlanVersion || plan.version() > kPlanVersion)
    return fail("version " + std::to_string(plan.version()) + ": this prism reads plan versions " +
                std::to_string(kOldestPlanVersion) + " to " + std::to_string(kPlanVersion));
  // "auto": `--strategy auto` placed variable by variable, as no single strategy would.
  auto strategy = passes::parseStrategy(plan.strategy());
  if (!strategy)
    llvm::consumeError(strategy.takeError());
  if (!strategy && plan.strategy() != "auto")
    return fail("strategy: expected hybrid, allreduce, ps or auto, got " + quoted(plan.strategy()));
  if (plan.replication() != "between-graph" && plan.replication() != "in-graph")
    return fail("replication: expected between-graph or in-graph, got " +
                quoted(plan.replication()));
  return llvm::Error::success();
}

// The plan's tasks by name, for the checks that look up every task of a group or a program (a
// scan per lookup made verifying a plan of 10,000 workers quadratic).
class TaskIndex {
public:
  explicit TaskIndex(const Plan &plan) {
    for (const Task &t : plan.cluster().tasks())
      byName_[t.name()] = &t;
  }
  const Task *find(llvm::StringRef name) const {
    auto it = byName_.find(name);
    return it == byName_.end() ? nullptr : it->second;
  }

private:
  llvm::StringMap<const Task *> byName_;
};

llvm::Error verifyGroups(const Plan &plan) {
  const TaskIndex tasks(plan);
  std::set<std::string> groupNames;
  for (const CollectiveGroup &g : plan.groups()) {
    if (!groupNames.insert(g.name()).second)
      return fail("groups: " + quoted(g.name()) + " declared twice");
    for (const std::string &t : g.tasks()) {
      const Task *task = tasks.find(t);
      if (!task || task->role() != "worker")
        return fail("groups " + quoted(g.name()) + ".tasks: " + quoted(t) +
                    " is not a worker task");
    }
  }
  return llvm::Error::success();
}

// Every task but the coordinator runs exactly one program, of its own role.
llvm::Error verifyProgramOwners(const Plan &plan) {
  const TaskIndex tasks(plan);
  std::map<std::string, std::string> programOf;
  for (const Program &p : plan.programs())
    for (const std::string &t : p.tasks()) {
      const Task *task = tasks.find(t);
      if (!task || task->role() == "coordinator")
        return fail("program " + quoted(p.name()) + ".tasks: " + quoted(t) +
                    " is not a worker or PS task");
      if (!programOf.emplace(t, p.name()).second)
        return fail("program " + quoted(p.name()) + ".tasks: " + t + " already runs program " +
                    quoted(programOf[t]));
    }
  for (const Task &t : plan.cluster().tasks())
    if (t.role() != "coordinator" && !programOf.count(t.name()))
      return fail("programs: no program for " + t.name());
  return llvm::Error::success();
}

// Each program parses and agrees with the plan; what the worker program routes and how often
// each PS task updates each variable are gathered for verifyRouting.
llvm::Error verifyPrograms(const Plan &plan, llvm::ArrayRef<const ir::Module *> modules,
                           llvm::StringMap<Routing> &routing, llvm::StringMap<int> &updates) {
  const TaskIndex tasks(plan);
  for (int i = 0; i < plan.programs_size(); ++i) {
    const Program &p = plan.programs(i);
    const Task *first = tasks.find(p.tasks_size() ? p.tasks(0) : "");
    if (!first)
      return fail("program " + quoted(p.name()) + " has no tasks");
    for (const std::string &t : p.tasks())
      if (tasks.find(t)->role() != first->role())
        return fail("program " + quoted(p.name()) + " mixes worker and PS tasks");
    std::unique_ptr<ir::Module> parsed;
    const ir::Module *module = modules.empty() ? nullptr : modules[static_cast<size_t>(i)];
    if (module) {
      if (auto e = ir::verify(*module))
        return ir::withContext(std::move(e), "invalid plan: program " + quoted(p.name()));
    } else {
      auto read = parseProgram(p);
      if (!read) // its place (<plan program NAME>:line:column) names the program
        return ir::withContext(read.takeError(), "invalid plan: program " + quoted(p.name()));
      parsed = std::move(*read);
      module = parsed.get();
    }
    if (first->role() == "worker") {
      llvm::StringMap<Routing> programRouting;
      if (auto e = verifyWorkerProgram(plan, p, *module, programRouting))
        return e;
      if (routing.empty())
        routing = std::move(programRouting);
    } else if (auto e = verifyPsProgram(plan, p, *module, updates)) {
      return e;
    }
  }
  return llvm::Error::success();
}

// Every gradient routed exactly once: all-reduced, or pushed once and updated once by each
// task holding rows of it.
llvm::Error verifyRouting(const Plan &plan, const llvm::StringMap<Routing> &routing,
                          const llvm::StringMap<int> &updates) {
  for (const Variable &v : plan.variables()) {
    if (!v.trainable())
      continue;
    const Routing r = routing.lookup(v.name());
    std::string field = "variable " + quoted(v.name());
    if (placementOf(v) == ir::Placement::AllReduce) {
      if (r.pushes)
        return fail(field + " is all-reduced but the worker program pushes it to a PS");
      if (r.hasGradient && !r.reduced)
        return fail(field + ": its gradient is not all-reduced in the worker program");
    } else if (onParameterServers(v)) {
      if (r.hasGradient && r.pushes != 1)
        return fail(field + ": the worker program pushes its gradient " + std::to_string(r.pushes) +
                    " times (expected once)");
      std::set<std::string> holders;
      for (const Shard &s : v.shards())
        holders.insert(s.task());
      for (const std::string &task : holders)
        if (r.hasGradient && updates.lookup(v.name() + "@" + task) != 1)
          return fail(field + ": " + task + " updates its rows " +
                      std::to_string(updates.lookup(v.name() + "@" + task)) +
                      " times (expected once)");
    }
  }
  return llvm::Error::success();
}

} // namespace

const Program *findProgram(const Plan &plan, llvm::StringRef task) {
  for (const Program &p : plan.programs())
    for (const std::string &t : p.tasks())
      if (t == task)
        return &p;
  return nullptr;
}

llvm::Expected<std::unique_ptr<ir::Module>> parseProgram(const Program &program) {
  auto module = frontends::parseModule(program.ir(), "<plan program " + program.name() + ">");
  if (!module)
    return module.takeError();
  if (auto e = ir::verify(**module))
    return std::move(e);
  return module;
}

// Backup workers drop late pushes, which a ring all-reduce cannot do: every trained variable is
// on parameter servers. Asynchronous training needs a parameter server to apply pushes.
llvm::Error verifySynchronizedPlacement(const Plan &plan) {
  const Synchronization sync = readSynchronization(plan.run());
  bool anyOnPs = false;
  for (const Variable &v : plan.variables()) {
    if (!v.trainable())
      continue;
    anyOnPs |= onParameterServers(v);
    if (sync.backupWorkers > 0 && !onParameterServers(v))
      return fail("variables " + quoted(v.name()) + ": placed " + v.placement() +
                  " in a plan with run.backup_workers " + std::to_string(sync.backupWorkers) +
                  " (every trained variable must be on parameter servers)");
  }
  if (sync.mode == SyncMode::Async && !anyOnPs)
    return fail("run.sync: async, but no trained variable is on a parameter server");
  return llvm::Error::success();
}

namespace {

// Each candidate of --partitions search names the plan's own PS variables and programs (in the
// plan's order), and the plan it makes verifies.
llvm::Error verifyPartitionSearch(const Plan &plan) {
  const PartitionSearch &search = plan.partition_search();
  if (search.timed_steps() < 1 || search.warmup_steps() < 0)
    return fail("partition_search: " + std::to_string(search.warmup_steps()) + " warm-up and " +
                std::to_string(search.timed_steps()) + " timed steps (at least 1 timed)");
  int64_t previous = 0;
  for (int i = 0; i < search.candidates_size(); ++i) {
    const PartitionCandidate &candidate = search.candidates(i);
    const std::string field = "partition_search.candidates[" + std::to_string(i) + "]";
    if (candidate.partitions() <= previous)
      return fail(field + ".partitions: " + std::to_string(candidate.partitions()) +
                  " (counts ascend from 1)");
    previous = candidate.partitions();
    for (const CandidateShards &shards : candidate.variables()) {
      const Variable *v = nullptr;
      for (const Variable &p : plan.variables())
        if (p.name() == shards.variable())
          v = &p;
      if (!v || !onParameterServers(*v))
        return fail(field + ": " + quoted(shards.variable()) +
                    " is no variable on parameter servers");
    }
    if (candidate.programs_size() != plan.programs_size())
      return fail(field + ".programs: " + std::to_string(candidate.programs_size()) +
                  " programs for the plan's " + std::to_string(plan.programs_size()));
    for (int p = 0; p < candidate.programs_size(); ++p)
      if (candidate.programs(p).name() != plan.programs(p).name())
        return fail(field + ".programs[" + std::to_string(p) +
                    "]: " + quoted(candidate.programs(p).name()) + " where the plan has " +
                    quoted(plan.programs(p).name()));
    if (auto e = verifyPlan(candidatePlan(plan, static_cast<size_t>(i))))
      return ir::withContext(std::move(e), field);
  }
  return llvm::Error::success();
}

} // namespace

llvm::Error verifyPlan(const Plan &plan) {
  return verifyPlan(plan, {});
}

llvm::Error verifyPlan(const Plan &plan, llvm::ArrayRef<const ir::Module *> programs) {
  if (!programs.empty() && programs.size() != static_cast<size_t>(plan.programs_size()))
    return ir::makeError(ir::ErrorCode::Internal,
                         "verifyPlan: " + std::to_string(programs.size()) + " modules for " +
                             std::to_string(plan.programs_size()) + " programs");
  if (auto e = verifyHeader(plan))
    return e;
  if (auto e = verifyCluster(plan))
    return e;
  if (auto e = verifyLocalAggregation(plan))
    return fail(ir::messageOf(std::move(e)));
  if (auto e = verifyVariables(plan))
    return e;
  if (auto e = verifySynchronizedPlacement(plan))
    return e;
  if (auto e = verifyGroups(plan))
    return e;
  if (auto e = verifyProgramOwners(plan))
    return e;
  llvm::StringMap<Routing> routing;
  llvm::StringMap<int> updates;
  if (auto e = verifyPrograms(plan, programs, routing, updates))
    return e;
  if (plan.has_partition_search())
    if (auto e = verifyPartitionSearch(plan))
      return e;
  return verifyRouting(plan, routing, updates);
}

} // namespace prism::plan
