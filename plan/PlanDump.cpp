// The placement dump (PlanDump.h): one view of the plan (who holds what, who talks to whom) and
// its three renderings, text, JSON and DOT.
#include "plan/PlanDump.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "cluster/Cluster.h"
#include "ir/Attribute.h"
#include "ir/Collectives.h"
#include "ir/Diagnostic.h"
#include "plan/AutoParallel.h"
#include "plan/CommunicationCost.h"
#include "plan/LocalAggregation.h"
#include "plan/PartitionSearch.h"
#include "plan/PlanTasks.h"
#include "plan/PlanVariables.h"
#include "plan/PlanVerifier.h"
#include "plan/Synchronization.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::plan {
namespace {

using Json = nlohmann::ordered_json;

std::string formatUnit(const char *fmt, double value, const char *unit) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format(fmt, value, unit);
  return s;
}

std::string humanBytes(double bytes) {
  return formatBytes(bytes);
}

std::string humanFlops(double flops) {
  const char *units[] = {"FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"};
  int u = 0;
  for (; flops >= 1000 && u < 5; ++u)
    flops /= 1000;
  return formatUnit("%.3g %s", flops, units[u]);
}

std::string humanSeconds(double seconds) {
  if (seconds <= 0)
    return "-";
  if (seconds < 1e-3)
    return formatUnit("%.1f %s", seconds * 1e6, "µs");
  if (seconds < 1)
    return formatUnit("%.1f %s", seconds * 1e3, "ms");
  return formatUnit("%.2f %s", seconds, "s");
}

std::string maybeBytes(std::optional<double> bytes) {
  return bytes ? humanBytes(*bytes) : "?";
}

std::string rowsText(int64_t begin, int64_t end) {
  return "rows " + std::to_string(begin) + ".." + std::to_string(end);
}

std::string typeText(const Variable &v) {
  std::string s = v.dtype() + "[";
  for (int i = 0; i < v.shape_size(); ++i)
    s += (i ? ", " : "") + std::to_string(v.shape(i));
  return s + "]";
}

// One task at the other end of a communication, with what travels to and from it per step
// (unknown: no table estimate for a row-wise op).
struct Peer {
  std::string task;
  std::optional<std::pair<int64_t, int64_t>> rows; // the shard, for PS traffic
  std::optional<double> sent, received;            // from this task's side
};

// One communication op of a task's program (or, on a PS task, the workers' ops it answers).
struct Communication {
  std::string op;
  std::string variable;              // PS ops
  std::string group;                 // all_reduce
  int64_t bucket = 0;                // all_reduce
  const Bucket *bucketDef = nullptr; // all_reduce, when the plan lists the bucket
  unsigned values = 0;               // all_reduce operands
  // Local aggregation: a PS op of a host's member, answered by its leader over loopback.
  bool local = false;
  std::vector<Peer> peers;

  std::optional<double> total(std::optional<double> Peer::*side) const {
    double sum = 0;
    for (const Peer &p : peers) {
      if (!(p.*side))
        return std::nullopt;
      sum += *(p.*side);
    }
    return sum;
  }
};

struct TaskView {
  const Task *task = nullptr;
  const Program *program = nullptr;
  const TaskEstimate *estimate = nullptr;
  std::vector<Communication> communication;
  std::set<std::string> variables; // trained ones and their optimizer state
};

// Everything the renderings show, found once: the tasks' communication from their programs,
// where each variable lives, and which state belongs to which variable.
struct PlanView {
  const Plan &plan;
  std::vector<TaskView> tasks;                                // in cluster order
  std::map<std::string, const Variable *> variables;          // by name
  std::map<std::string, std::vector<const Variable *>> state; // trained variable -> its state
  std::map<std::string, const Bucket *> bucketOf;             // variable -> its gradient's bucket

  explicit PlanView(const Plan &p) : plan(p) {}
  TaskView *find(llvm::StringRef name) {
    for (TaskView &t : tasks)
      if (t.task->name() == name)
        return &t;
    return nullptr;
  }
  const TaskView *find(llvm::StringRef name) const {
    return const_cast<PlanView *>(this)->find(name);
  }
  // A state variable shown under its trained variable rather than on its own.
  bool folded(const Variable &v) const {
    return !v.state_of().empty() && variables.count(v.state_of());
  }
  std::string hostName(const Task &task) const {
    const auto &hosts = plan.cluster().hosts();
    return task.host() >= 0 && task.host() < hosts.size() ? hosts[task.host()].name() : "?";
  }
};

// The table estimates the PS ops of `worker` move rows by: the plan's (one worker's rows), or
// with local aggregation its host's (the rows of all its workers, which the leader moves).
const google::protobuf::RepeatedPtrField<TableEstimate> &tablesOf(const PlanView &view,
                                                                  const HostAggregation *host) {
  if (host)
    for (const LocalAggregationEstimate &e : view.plan.estimate().local_aggregation())
      if (e.host() == host->host())
        return e.tables();
  return view.plan.estimate().tables();
}

// The worker's side of a PS op on `v`: one peer per shard, with the bytes the estimate counts.
// A row op moves the table's rows per step (its estimate), split over the table's row pulls;
// without an estimate its bytes are unknown. With local aggregation a host's leader moves its
// host's rows, and the other workers send theirs to the leader over loopback, uncompressed.
Communication psCommunication(const PlanView &view, llvm::StringRef op, PsTransfer transfer,
                              const Variable &v, double pullRowsOps, const std::string &worker) {
  Communication c;
  c.op = op.str();
  c.variable = v.name();
  const HostAggregation *host = aggregationOf(view.plan, worker);
  c.local = host && host->leader() != worker;
  std::optional<double> rows;
  llvm::ArrayRef<double> shares;
  for (const TableEstimate &t : tablesOf(view, c.local ? nullptr : host))
    if (t.variable() == v.name()) {
      rows = transfer == PsTransfer::PullRows && t.rows_pulled_per_step() > 0
                 ? t.rows_pulled_per_step()
                 : t.rows_per_step();
      shares = rowSharesOf(t);
    }
  if (rows && transfer == PsTransfer::PullRows)
    *rows /= std::max(1.0, pullRowsOps);
  RunConfig run = view.plan.run();
  if (c.local)
    run.clear_compress();
  for (const Shard &s : v.shards()) {
    Peer p{s.task(), std::make_pair(s.row_begin(), s.row_end()), std::nullopt, std::nullopt};
    if (!movesRows(transfer) || rows) {
      ShardTraffic traffic = psShardTraffic(run, transfer, v, s, rows.value_or(0), shares);
      double times = timesPerStep(view.plan, transfer);
      p.sent = times * traffic.toPs;
      p.received = times * traffic.fromPs;
    }
    c.peers.push_back(std::move(p));
  }
  if (c.local) {
    // One peer, the leader, with everything the shards would have moved.
    Peer leader{host->leader(), std::nullopt, c.total(&Peer::sent), c.total(&Peer::received)};
    c.peers = {leader};
  }
  return c;
}

Communication allReduceCommunication(const PlanView &view, const ir::Op &op,
                                     const std::string &self) {
  Communication c;
  c.op = "all_reduce";
  c.group = op.attrs.getString("group");
  c.bucket = op.attrs.getInt("bucket");
  c.values = op.numOperands();
  const CollectiveGroup *group = nullptr;
  for (const CollectiveGroup &g : view.plan.groups())
    if (g.name() == c.group)
      group = &g;
  if (!group)
    return c;
  for (const Bucket &b : group->buckets())
    if (b.id() == c.bucket)
      c.bucketDef = &b;
  // A ring, as the estimate counts it: each rank sends 2(N−1)/N of the bucket to the next rank
  // and receives as much from the previous one.
  const int n = group->tasks_size();
  auto rank = llvm::find(group->tasks(), self) - group->tasks().begin();
  if (n < 2 || rank == n)
    return c;
  std::optional<double> share;
  if (c.bucketDef)
    share = ringAllReduceBytes(bucketWireBytes(view.plan, *c.bucketDef), n);
  const std::string &next = group->tasks((rank + 1) % n), &prev = group->tasks((rank + n - 1) % n);
  if (next == prev) {
    c.peers.push_back({next, std::nullopt, share, share});
  } else {
    c.peers.push_back({next, std::nullopt, share, 0.0});
    c.peers.push_back({prev, std::nullopt, 0.0, share});
  }
  return c;
}

// The PS side of a worker's op: the same traffic, seen from each shard's task, one entry per op
// and shard (a task may hold several row ranges of a table); a member's local op is seen from its
// host's leader.
void mirrorOnParameterServers(PlanView &view, const Communication &c, const std::string &worker) {
  for (const Peer &p : c.peers) {
    TaskView *ps = view.find(p.task);
    if (!ps)
      continue;
    auto it = llvm::find_if(ps->communication, [&](const Communication &e) {
      return e.op == c.op && e.variable == c.variable && e.local == c.local && !e.peers.empty() &&
             e.peers[0].rows == p.rows;
    });
    Communication *mirror = it != ps->communication.end() ? &*it : nullptr;
    if (!mirror) {
      mirror = &ps->communication.emplace_back();
      mirror->op = c.op;
      mirror->variable = c.variable;
      mirror->local = c.local;
    }
    mirror->peers.push_back({worker, p.rows, p.received, p.sent});
  }
}

// The variables and the communication of the tasks that run `program`.
llvm::Error addProgram(PlanView &view, const Program &program) {
  auto module = parseProgram(program);
  if (!module)
    return module.takeError();
  std::map<std::string, double> pullRowsOps;
  for (const auto &op : (*module)->ops())
    if (op->name() == "ps_pull_rows")
      ++pullRowsOps[op->operand(0)->name()];
  for (const std::string &name : program.tasks()) {
    TaskView *t = view.find(name);
    if (!t)
      continue;
    for (const auto &v : (*module)->variables())
      t->variables.insert(v->name());
    for (const auto &op : (*module)->ops()) {
      if (op->name() == "all_reduce") {
        t->communication.push_back(allReduceCommunication(view, *op, name));
        continue;
      }
      auto transfer = psTransferOf(op->name());
      auto v = transfer ? view.variables.find(op->operand(0)->name()) : view.variables.end();
      if (v == view.variables.end())
        continue;
      Communication c =
          psCommunication(view, op->name(), *transfer, *v->second, pullRowsOps[v->first], name);
      mirrorOnParameterServers(view, c, name);
      t->communication.push_back(std::move(c));
    }
  }
  return llvm::Error::success();
}

llvm::Expected<PlanView> buildView(const Plan &plan) {
  PlanView view(plan);
  for (const Variable &v : plan.variables())
    view.variables[v.name()] = &v;
  for (const Variable &v : plan.variables())
    if (view.folded(v))
      view.state[v.state_of()].push_back(&v);
  for (const CollectiveGroup &g : plan.groups())
    for (const Bucket &b : g.buckets())
      for (const std::string &v : b.variables())
        view.bucketOf[v] = &b;
  for (const Task &task : plan.cluster().tasks()) {
    TaskView t;
    t.task = &task;
    for (const TaskEstimate &e : plan.estimate().tasks())
      if (e.task() == task.name())
        t.estimate = &e;
    t.program = findProgram(plan, task.name());
    view.tasks.push_back(std::move(t));
  }
  for (const Program &program : plan.programs())
    if (auto e = addProgram(view, program))
      return std::move(e);
  // What a task holds: its shards, and the optimizer state of what it holds.
  for (TaskView &t : view.tasks) {
    for (const Variable &v : plan.variables())
      for (const Shard &s : v.shards())
        if (s.task() == t.task->name())
          t.variables.insert(v.name());
    for (const std::string &v : std::set<std::string>(t.variables))
      if (auto it = view.state.find(v); it != view.state.end())
        for (const Variable *s : it->second)
          t.variables.insert(s->name());
  }
  return std::move(view);
}

// Rows of cells in left-aligned columns, two spaces apart.
class Table {
public:
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  void print(llvm::raw_ostream &os, llvm::StringRef indent) const {
    std::vector<size_t> width;
    for (const auto &row : rows_)
      for (size_t i = 0; i < row.size(); ++i) {
        width.resize(std::max(width.size(), row.size()));
        width[i] = std::max(width[i], columnWidth(row[i]));
      }
    for (const auto &row : rows_) {
      std::string line = indent.str();
      for (size_t i = 0; i < row.size(); ++i) {
        line += row[i];
        if (i + 1 < row.size())
          line += std::string(width[i] - columnWidth(row[i]) + 2, ' ');
      }
      os << llvm::StringRef(line).rtrim() << "\n";
    }
  }

private:
  // Characters, not bytes: "µs" is one column narrower than its UTF-8.
  static size_t columnWidth(llvm::StringRef s) {
    return llvm::count_if(s, [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
  }
  std::vector<std::vector<std::string>> rows_;
};

// " rows 0..50" for part of `v`'s rows; "" for all of them.
std::string partRows(const Variable &v, int64_t begin, int64_t end) {
  bool whole = begin == 0 && static_cast<double>(end) == tableRows(v);
  return whole ? "" : " " + rowsText(begin, end);
}

// "worker:0, worker:1"; past four names, the first two, the last and the count.
std::string peerList(const std::vector<std::string> &names) {
  if (names.size() <= 4)
    return llvm::join(names, ", ");
  return names[0] + ", " + names[1] + ", ..., " + names.back() + " (" +
         std::to_string(names.size()) + ")";
}

std::string placementText(const PlanView &view, const Variable &v) {
  auto placement = placementOf(v);
  if (placement == ir::Placement::AllReduce) {
    auto b = view.bucketOf.find(v.name());
    return b == view.bucketOf.end() ? "all-reduce"
                                    : "all-reduce (bucket " + std::to_string(b->second->id()) + ")";
  }
  if (placement != ir::Placement::ParameterServer)
    return v.placement().empty() ? "-" : v.placement();
  std::string s;
  for (const Shard &shard : v.shards())
    s += (s.empty() ? "" : ", ") + shard.task() + partRows(v, shard.row_begin(), shard.row_end());
  return s;
}

// "+ 2 adam slots (6.4 kB)": the optimizer state of `v`, or of the part `fraction` of its rows.
std::string stateText(const PlanView &view, const Variable &v, double fraction = 1) {
  auto it = view.state.find(v.name());
  if (it == view.state.end() || it->second.empty())
    return "";
  double bytes = 0;
  for (const Variable *s : it->second)
    bytes += static_cast<double>(s->bytes()) * fraction;
  llvm::StringRef optimizer = llvm::StringRef(view.plan.run().optimizer()).split('(').first.trim();
  size_t n = it->second.size();
  return "+ " + std::to_string(n) + (optimizer.empty() ? "" : " " + optimizer.str()) +
         (n == 1 ? " slot (" : " slots (") + humanBytes(bytes) + ")";
}

// What `task` holds: "emb rows 0..50  1.6 kB  + 2 adam slots (3.2 kB)", state folded.
std::vector<std::vector<std::string>> heldShards(const PlanView &view, const Task &task) {
  std::vector<std::vector<std::string>> rows;
  for (const Variable &v : view.plan.variables())
    for (const Shard &s : v.shards())
      if (s.task() == task.name() && !view.folded(v))
        rows.push_back({v.name(), rowsText(s.row_begin(), s.row_end()),
                        humanBytes(shardBytes(v, s)), stateText(view, v, shardFraction(v, s))});
  return rows;
}

std::string count(int n, const char *one, const char *many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// The plan's header: strategy, cluster, batch, run configuration.
// "0.032 = 0.001 × 4096 / 128 (linear scaling rule), schedule cosine(total = 100)": the rate
// the updates use and where it comes from; empty for a constant rate without a rule.
std::string learningRateLine(const RunConfig &run) {
  bool scaled = run.lr_scale_rule() == "linear";
  if (!scaled && run.lr_schedule().empty())
    return "";
  std::string line = ir::formatDouble(run.lr());
  if (scaled)
    line += " = " + ir::formatDouble(run.base_lr()) + " × " + std::to_string(run.global_batch()) +
            " / " + std::to_string(run.lr_base_batch()) + " (linear scaling rule)";
  line += run.lr_schedule().empty() ? ", constant" : ", schedule " + run.lr_schedule();
  return line;
}

// "aggregation per host: h0 (worker:0 leads worker:1), ..." or why there is none.
std::string localAggregationLine(const Plan &plan) {
  const std::string &mode = plan.run().local_aggregation();
  if (plan.host_aggregation_size() == 0)
    return mode == "off" ? "aggregation per host off (--local-aggregation off)" : "";
  std::string hosts;
  for (const HostAggregation &a : plan.host_aggregation()) {
    std::vector<std::string> others;
    for (const std::string &m : a.members())
      if (m != a.leader())
        others.push_back(m);
    hosts += (hosts.empty() ? "" : ", ") + a.host() + " (" + a.leader() + " leads " +
             llvm::join(others, " ") + ")";
  }
  return "aggregation per host: " + hosts + "; the leader pushes and pulls for its host";
}

// --partitions search: what the job times, and each candidate's row ranges of the tables, e.g.
// "2 partitions: emb ps:0 rows 0..50000 ps:1 rows 50000..100000".
std::vector<std::string> partitionSearchLines(const Plan &plan) {
  if (!plan.has_partition_search())
    return {};
  const PartitionSearch &search = plan.partition_search();
  std::vector<std::string> lines = {
      "--partitions search over " + candidateCounts(search) + ": " +
      std::to_string(search.warmup_steps()) + " warm-up and " +
      std::to_string(search.timed_steps()) +
      " timed steps each, then training with the fastest; the placement below is " +
      (search.candidates().empty() ? "?" : std::to_string(search.candidates(0).partitions())) +
      "'s"};
  for (const PartitionCandidate &candidate : search.candidates()) {
    std::string line =
        count(static_cast<int>(candidate.partitions()), "partition", "partitions") + ":";
    for (const CandidateShards &v : candidate.variables()) {
      const Variable *variable = nullptr;
      for (const Variable &p : plan.variables())
        if (p.name() == v.variable())
          variable = &p;
      if (variable && !variable->trainable())
        continue; // optimizer state follows its variable
      line += " " + v.variable();
      for (const Shard &shard : v.shards())
        line += " " + shard.task() + " " + rowsText(shard.row_begin(), shard.row_end());
    }
    lines.push_back(line);
  }
  return lines;
}

Json partitionSearchJson(const Plan &plan) {
  if (!plan.has_partition_search())
    return nullptr;
  Json candidates = Json::array();
  for (const PartitionCandidate &candidate : plan.partition_search().candidates()) {
    Json variables = Json::array();
    for (const CandidateShards &v : candidate.variables()) {
      Json shards = Json::array();
      for (const Shard &shard : v.shards())
        shards.push_back({{"task", shard.task()}, {"rows", {shard.row_begin(), shard.row_end()}}});
      variables.push_back({{"variable", v.variable()}, {"shards", shards}});
    }
    Json programs = Json::array();
    for (const Program &program : candidate.programs())
      programs.push_back(program.name());
    candidates.push_back(
        {{"partitions", candidate.partitions()}, {"variables", variables}, {"programs", programs}});
  }
  return {{"warmup_steps", plan.partition_search().warmup_steps()},
          {"timed_steps", plan.partition_search().timed_steps()},
          {"candidates", candidates}};
}

void printHeader(const Plan &plan, llvm::raw_ostream &os) {
  std::map<std::string, int> roles;
  for (const Task &t : plan.cluster().tasks())
    ++roles[t.role()];
  int64_t workers = std::max(1, roles["worker"]);
  int64_t perWorker = plan.estimate().local_batch() > 0
                          ? plan.estimate().local_batch()
                          : (plan.run().global_batch() + workers - 1) / workers;
  os << "plan " << plan.model() << (plan.source().empty() ? "" : " (" + plan.source() + ")")
     << ", version " << plan.version() << "\n";
  Table header;
  header.add({"strategy", plan.strategy() + ", " + plan.replication() + " replication"});
  const int machines = countMachines(plan);
  header.add({"cluster", count(roles["worker"], "worker", "workers") + ", " +
                             count(roles["ps"], "parameter server", "parameter servers") + ", " +
                             count(roles["coordinator"], "coordinator", "coordinators") + " on " +
                             count(plan.cluster().hosts_size(), "host", "hosts") +
                             (machines < plan.cluster().hosts_size()
                                  ? " of " + count(machines, "machine", "machines")
                                  : "")});
  std::string batch = std::to_string(plan.run().global_batch()) + " global, " +
                      std::to_string(perWorker) + " per worker";
  if (plan.run().accumulate() > 1) {
    int64_t micro = plan.estimate().micro_batch() > 0
                        ? plan.estimate().micro_batch()
                        : (perWorker + plan.run().accumulate() - 1) / plan.run().accumulate();
    batch += " in " + std::to_string(plan.run().accumulate()) + " micro-batches of " +
             std::to_string(micro) + " (gradients accumulated, one optimizer step)";
  }
  header.add({"batch", batch});
  std::string run = plan.run().steps()
                        ? count(static_cast<int>(plan.run().steps()), "step", "steps")
                        : "steps by epochs";
  run += ", seed " + std::to_string(plan.run().seed());
  if (!plan.run().optimizer().empty())
    run += ", " + plan.run().optimizer();
  run +=
      ", " + count(std::max(1, plan.run().towers_per_worker()), "tower", "towers") + " per worker";
  if (!plan.run().data_sharding().empty())
    run += ", " + plan.run().data_sharding() + " data sharding";
  if (!plan.run().precision().empty())
    run += ", " + plan.run().precision() + " compute (matmul, conv) with f32 variables";
  if (plan.run().precision() == "fp16")
    run += " and dynamic loss scaling";
  header.add({"run", run});
  if (!plan.run().compress().empty())
    header.add({"compress", plan.run().compress() +
                                " on the wire: all-reduce buckets, PS pushes and row pulls" +
                                (plan.run().error_feedback() ? ", with error feedback" : "")});
  if (std::string sync =
          describeSynchronization(readSynchronization(plan.run()), countTasks(plan, "worker"));
      !sync.empty())
    header.add({"sync", sync});
  if (plan.run().elastic_max() > 0)
    header.add({"elastic", std::to_string(plan.run().elastic_min()) + " to " +
                               std::to_string(plan.run().elastic_max()) +
                               " workers: a lost worker leaves the others training, and "
                               "workers may join"});
  if (std::string lr = learningRateLine(plan.run()); !lr.empty())
    header.add({"lr", lr});
  if (std::string local = localAggregationLine(plan); !local.empty())
    header.add({"local", local});
  for (const std::string &line : partitionSearchLines(plan))
    header.add({line.rfind("--", 0) == 0 ? "search" : "", line});
  header.print(os, "");
}

void printVariables(const PlanView &view, const TaskView *only, llvm::raw_ostream &os) {
  os << "\nvariables\n";
  Table vars;
  vars.add({"name", "kind", "type", "bytes", "placement", "state"});
  for (const Variable &v : view.plan.variables())
    if (!view.folded(v) && (!only || only->variables.count(v.name())))
      vars.add({v.name(), v.kind(), typeText(v), humanBytes(static_cast<double>(v.bytes())),
                placementText(view, v), stateText(view, v)});
  vars.print(os, "  ");
}

// One row of a task's communication table: op, of, with, sent/step, received/step.
std::vector<std::string> communicationRow(const PlanView &view, const Task &task,
                                          const Communication &c) {
  std::string of, with;
  if (c.op == "all_reduce") {
    of = ir::bucketName(c.bucket);
    of += " (" + count(static_cast<int>(c.values), "value", "values");
    if (c.bucketDef)
      of += ", " + humanBytes(static_cast<double>(c.bucketDef->bytes()));
    of += ")";
    with = "group " + c.group;
  } else {
    // A PS task's entries are per shard; a worker's name each shard it reaches.
    const Variable &v = *view.variables.at(c.variable);
    auto rows = [&](const Peer &p) {
      return p.rows ? partRows(v, p.rows->first, p.rows->second) : "";
    };
    bool ps = task.role() == "ps";
    of = c.variable + (ps && !c.peers.empty() ? rows(c.peers[0]) : "");
    std::vector<std::string> peers;
    for (const Peer &p : c.peers)
      peers.push_back(p.task + (ps ? "" : rows(p)));
    with = peerList(peers) + (c.local ? " (loopback)" : "");
  }
  return {c.op, of, with, maybeBytes(c.total(&Peer::sent)), maybeBytes(c.total(&Peer::received))};
}

// The other tasks of the same machine (an address, or hosts naming one `machine`) on one of
// `task`'s GPUs.
std::vector<std::string> sharingGpu(const PlanView &view, const Task &task) {
  std::vector<std::string> others;
  std::vector<std::string> mine = taskGpus(task);
  const std::string machine = machineOfTask(view.plan, task);
  for (const TaskView &t : view.tasks) {
    if (t.task == &task || machineOfTask(view.plan, *t.task) != machine)
      continue;
    for (const std::string &gpu : taskGpus(*t.task))
      if (llvm::is_contained(mine, gpu)) {
        others.push_back(t.task->name());
        break;
      }
  }
  return others;
}

// A GPU worker's communication: through host memory (Gloo, the parameter servers), and the
// tasks that share its GPU. Empty for a task without a GPU or communication.
std::string gpuCommunicationNote(const PlanView &view, const TaskView &t) {
  if (taskGpus(*t.task).empty() || t.communication.empty())
    return "";
  std::string note = "collectives and PS calls through host memory (Gloo, gRPC)";
  std::vector<std::string> gpus = taskGpus(*t.task);
  if (gpus.size() > 1 && std::count(gpus.begin(), gpus.end(), gpus.front()) ==
                             static_cast<std::ptrdiff_t>(gpus.size()))
    note += "; " + std::to_string(gpus.size()) + " towers sharing " + gpus.front();
  else if (gpus.size() > 1)
    note += "; a tower on each of " + llvm::join(gpus, ", ") + ", combined on " + gpus.front() +
            " (values copied between the GPUs)";
  std::vector<std::string> sharing = sharingGpu(view, *t.task);
  if (!sharing.empty())
    note += "; shares " + taskGpus(*t.task).front() + " with " + llvm::join(sharing, ", ");
  return note;
}

// A task's section: where it runs, what it holds, whom it talks to, its estimate.
void printTask(const PlanView &view, const TaskView &t, llvm::raw_ostream &os) {
  const Task &task = *t.task;
  os << "\n"
     << task.name() << "  " << task.role() << " on " << view.hostName(task) << ", "
     << task.address() << ":" << task.port();
  if (task.devices_size())
    os << ", devices " << llvm::join(task.devices().begin(), task.devices().end(), " ");
  if (t.program)
    os << ", program " << t.program->name();
  os << "\n";
  Table holds;
  for (std::vector<std::string> &row : heldShards(view, task)) {
    row.insert(row.begin(), holds.empty() ? "holds" : "");
    holds.add(std::move(row));
  }
  holds.print(os, "  ");
  if (!t.communication.empty()) {
    os << "  communication\n";
    Table comm;
    comm.add({"op", "of", "with", "sent/step", "received/step"});
    for (const Communication &c : t.communication)
      comm.add(communicationRow(view, task, c));
    comm.print(os, "    ");
  }
  if (std::string note = gpuCommunicationNote(view, t); !note.empty())
    os << "  gpu  " << note << "\n";
  const TaskEstimate *e = t.estimate;
  if (e && (e->bytes_sent_per_step() || e->bytes_received_per_step() || e->parameter_bytes() ||
            e->activation_bytes() || e->flops_per_step()))
    os << "  estimate  sent " << humanBytes(e->bytes_sent_per_step()) << "/step, received "
       << humanBytes(e->bytes_received_per_step()) << "/step, parameters "
       << humanBytes(e->parameter_bytes()) << ", activations " << humanBytes(e->activation_bytes())
       << (e->activation_bytes_saved() > 0
               ? " (one micro-batch; " + humanBytes(e->activation_bytes_saved()) + " saved)"
               : std::string())
       << ", " << humanFlops(e->flops_per_step()) << "/step"
       << (e->host_device_bytes_per_step() > 0
               ? ", host<->device " + humanBytes(e->host_device_bytes_per_step()) + "/step"
               : std::string())
       << (e->device_copy_bytes_per_step() > 0
               ? ", between GPUs " + humanBytes(e->device_copy_bytes_per_step()) + "/step"
               : std::string())
       << "\n";
}

void printLinks(const PlanView &view, const TaskView *only, llvm::raw_ostream &os) {
  const Plan &plan = view.plan;
  if (!plan.estimate().links_size())
    return;
  os << "\nlinks (per step, to and from other hosts)\n";
  Table links;
  links.add({"host", "bandwidth", "out", "in", "time"});
  for (const LinkEstimate &l : plan.estimate().links()) {
    if (only && l.host() != view.hostName(*only->task))
      continue;
    uint64_t bandwidth = 0;
    for (const Host &h : plan.cluster().hosts())
      if (h.name() == l.host())
        bandwidth = h.bandwidth_bits_per_sec();
    links.add({l.host(), bandwidth ? cluster::formatBandwidth(bandwidth) : "unknown",
               humanBytes(l.bytes_out_per_step()), humanBytes(l.bytes_in_per_step()),
               humanSeconds(l.seconds_per_step())});
  }
  links.print(os, "  ");
}

void printText(const PlanView &view, const TaskView *only, llvm::raw_ostream &os) {
  printHeader(view.plan, os);
  printVariables(view, only, os);
  for (const TaskView &t : view.tasks)
    if (!only || &t == only)
      printTask(view, t, os);
  printLinks(view, only, os);
  if (!only && view.plan.decisions_size() > 0) {
    os << "\n";
    printDecisions(view.plan, os);
  }
}

Json orNull(std::optional<double> v) {
  return v ? Json(*v) : Json(nullptr);
}

// A repeated protobuf field as a JSON array.
template <class Repeated> Json list(const Repeated &values) {
  Json j = Json::array();
  for (const auto &v : values)
    j.push_back(v);
  return j;
}

Json variableJson(const PlanView &view, const Variable &v) {
  Json shards = Json::array();
  for (const Shard &s : v.shards())
    shards.push_back({{"task", s.task()},
                      {"rows", {s.row_begin(), s.row_end()}},
                      {"bytes", static_cast<int64_t>(std::llround(shardBytes(v, s)))}});
  auto b = view.bucketOf.find(v.name());
  Json state = Json::array();
  if (auto it = view.state.find(v.name()); it != view.state.end())
    for (const Variable *s : it->second)
      state.push_back(s->name());
  Json j = {{"name", v.name()},
            {"kind", v.kind()},
            {"dtype", v.dtype()},
            {"shape", list(v.shape())},
            {"bytes", v.bytes()},
            {"trainable", v.trainable()},
            {"placement",
             {{"type", v.placement()},
              {"shards", shards},
              {"bucket", b == view.bucketOf.end() ? Json(nullptr) : Json(b->second->id())}}},
            {"state", state}};
  if (!v.state_of().empty())
    j["state_of"] = v.state_of();
  return j;
}

Json taskJson(const PlanView &view, const TaskView &t) {
  Json comm = Json::array();
  for (const Communication &c : t.communication) {
    Json j = {{"op", c.op}};
    if (c.op == "all_reduce") {
      j["group"] = c.group;
      j["bucket"] = c.bucket;
      j["values"] = c.values;
      j["bytes"] = c.bucketDef ? Json(c.bucketDef->bytes()) : Json(nullptr);
    } else {
      j["variable"] = c.variable;
      j["local"] = c.local;
    }
    Json peers = Json::array();
    for (const Peer &p : c.peers) {
      Json pj = {{"task", p.task}};
      if (p.rows)
        pj["rows"] = {p.rows->first, p.rows->second};
      pj["bytes_sent_per_step"] = orNull(p.sent);
      pj["bytes_received_per_step"] = orNull(p.received);
      peers.push_back(pj);
    }
    j["peers"] = peers;
    j["bytes_sent_per_step"] = orNull(c.total(&Peer::sent));
    j["bytes_received_per_step"] = orNull(c.total(&Peer::received));
    comm.push_back(j);
  }
  Json estimate = nullptr;
  if (const TaskEstimate *e = t.estimate)
    estimate = {{"bytes_sent_per_step", e->bytes_sent_per_step()},
                {"bytes_received_per_step", e->bytes_received_per_step()},
                {"parameter_bytes", e->parameter_bytes()},
                {"activation_bytes", e->activation_bytes()},
                {"activation_bytes_saved", e->activation_bytes_saved()},
                {"flops_per_step", e->flops_per_step()},
                {"host_device_bytes_per_step", e->host_device_bytes_per_step()},
                {"device_copy_bytes_per_step", e->device_copy_bytes_per_step()}};
  const Task &task = *t.task;
  return {{"name", task.name()},
          {"role", task.role()},
          {"index", task.index()},
          {"host", view.hostName(task)},
          {"address", task.address()},
          {"port", task.port()},
          {"devices", list(task.devices())},
          {"gpu_communication", taskGpus(task).empty() ? Json(nullptr) : Json("host")},
          {"shares_gpu_with", list(sharingGpu(view, task))},
          {"program", t.program ? Json(t.program->name()) : Json(nullptr)},
          {"communication", comm},
          {"estimate", estimate}};
}

// The run configuration as JSON, the defaults of older plans spelled out.
Json runJson(const RunConfig &run) {
  return {{"global_batch", run.global_batch()},
          {"steps", run.steps()},
          {"seed", run.seed()},
          {"optimizer", run.optimizer()},
          {"lr", run.lr()},
          {"base_lr", run.base_lr()},
          {"lr_scale_rule", run.lr_scale_rule().empty() ? "none" : run.lr_scale_rule()},
          {"lr_base_batch", run.lr_base_batch()},
          {"lr_schedule", run.lr_schedule()},
          {"data_sharding", run.data_sharding()},
          {"towers_per_worker", run.towers_per_worker()},
          {"precision", run.precision().empty() ? "f32" : run.precision()},
          {"accumulate", std::max(1, run.accumulate())},
          {"compress", run.compress().empty() ? "none" : run.compress()},
          {"error_feedback", run.error_feedback()},
          {"local_aggregation", run.local_aggregation().empty() ? "off" : run.local_aggregation()},
          {"sync", syncModeName(readSynchronization(run).mode)},
          {"max_staleness", run.sync() == "async" && run.max_staleness() >= 0
                                ? nlohmann::json(run.max_staleness())
                                : nlohmann::json()},
          {"backup_workers", run.backup_workers()},
          {"elastic_min", run.elastic_min()},
          {"elastic_max", run.elastic_max()}};
}

// The automatic choices (plan/AutoParallel.h), each with its alternatives.
Json decisionsJson(const Plan &plan) {
  Json decisions = Json::array();
  for (const Decision &d : plan.decisions()) {
    Json alternatives = Json::array();
    for (const Alternative &a : d.alternatives()) {
      Json alternative = {{"option", a.option()}};
      if (a.refused().empty())
        alternative["step_seconds"] = a.step_seconds();
      else
        alternative["refused"] = a.refused();
      alternatives.push_back(std::move(alternative));
    }
    decisions.push_back({{"subject", d.subject()},
                         {"chosen", d.chosen()},
                         {"reason", d.reason()},
                         {"profile", d.profile()},
                         {"alternatives", alternatives}});
  }
  return decisions;
}

std::string printJson(PlanView &view, const TaskView *only) {
  const Plan &plan = view.plan;
  Json hosts = Json::array();
  for (const Host &h : plan.cluster().hosts())
    if (!only || h.name() == view.hostName(*only->task))
      hosts.push_back({{"name", h.name()},
                       {"address", h.address()},
                       {"devices", list(h.devices())},
                       {"bandwidth_bits_per_sec", h.bandwidth_bits_per_sec()},
                       {"machine", machineOf(h)}});
  Json variables = Json::array();
  for (const Variable &v : plan.variables())
    if (!only || only->variables.count(v.name()))
      variables.push_back(variableJson(view, v));
  Json tasks = Json::array();
  for (const TaskView &t : view.tasks)
    if (!only || &t == only)
      tasks.push_back(taskJson(view, t));
  Json buckets = Json::array();
  for (const CollectiveGroup &g : plan.groups())
    if (!only || llvm::is_contained(g.tasks(), only->task->name()))
      for (const Bucket &b : g.buckets())
        buckets.push_back({{"group", g.name()},
                           {"id", b.id()},
                           {"variables", list(b.variables())},
                           {"values", list(b.values())},
                           {"bytes", b.bytes()}});
  Json perTask = Json::object(), links = Json::array(), tables = Json::array();
  for (const TaskEstimate &e : plan.estimate().tasks())
    if (!only || e.task() == only->task->name())
      perTask[e.task()] = e.bytes_sent_per_step() + e.bytes_received_per_step();
  for (const LinkEstimate &l : plan.estimate().links())
    if (!only || l.host() == view.hostName(*only->task))
      links.push_back({{"host", l.host()},
                       {"bytes_out_per_step", l.bytes_out_per_step()},
                       {"bytes_in_per_step", l.bytes_in_per_step()},
                       {"seconds_per_step", l.seconds_per_step()}});
  for (const TableEstimate &t : plan.estimate().tables())
    if (!only || only->variables.count(t.variable()))
      tables.push_back(
          {{"variable", t.variable()},
           {"rows_per_step", t.rows_per_step()},
           {"rows_pulled_per_step",
            t.rows_pulled_per_step() > 0 ? t.rows_pulled_per_step() : t.rows_per_step()},
           {"row_shares", Json(std::vector<double>(t.row_shares().begin(), t.row_shares().end()))},
           {"source", t.source()}});
  Json aggregation = Json::array(), localEstimate = Json::array();
  for (const HostAggregation &a : plan.host_aggregation())
    aggregation.push_back(
        {{"host", a.host()}, {"leader", a.leader()}, {"members", list(a.members())}});
  for (const LocalAggregationEstimate &e : plan.estimate().local_aggregation()) {
    Json hostTables = Json::array();
    for (const TableEstimate &t : e.tables())
      hostTables.push_back(
          {{"variable", t.variable()},
           {"rows_per_step", t.rows_per_step()},
           {"rows_pulled_per_step",
            t.rows_pulled_per_step() > 0 ? t.rows_pulled_per_step() : t.rows_per_step()}});
    localEstimate.push_back({{"host", e.host()},
                             {"local_bytes_per_step", e.local_bytes_per_step()},
                             {"tables", hostTables}});
  }
  Json j = {{"version", plan.version()},
            {"model", plan.model()},
            {"source", plan.source()},
            {"strategy", plan.strategy()},
            {"replication", plan.replication()},
            {"hosts", hosts},
            {"variables", variables},
            {"tasks", tasks},
            {"buckets", buckets},
            {"host_aggregation", aggregation},
            {"decisions", decisionsJson(plan)},
            {"partition_search", partitionSearchJson(plan)},
            {"estimate",
             {{"local_batch", plan.estimate().local_batch()},
              {"micro_batch", plan.estimate().micro_batch()},
              {"bytes_per_step", perTask},
              {"links", links},
              {"tables", tables},
              {"local_aggregation", localEstimate}}},
            {"run", runJson(plan.run())}};
  return j.dump(2) + "\n";
}

// A DOT string literal: quotes and backslashes escaped, line breaks as \n.
std::string dotQuote(llvm::StringRef s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out + "\"";
}

// What a DOT picture shows: with --task, that task and the tasks it talks to, and edges only
// where it is one end.
struct DotScope {
  const TaskView *only = nullptr;
  std::set<std::string> shown;

  DotScope(const PlanView &view, const TaskView *task) : only(task) {
    for (const TaskView &t : view.tasks)
      if (!only || &t == only)
        shown.insert(t.task->name());
    if (only)
      for (const Communication &c : only->communication)
        for (const Peer &p : c.peers)
          shown.insert(p.task);
  }
  bool touches(const std::string &a, const std::string &b) const {
    return !only || a == only->task->name() || b == only->task->name();
  }
};

// A task's node: its name and endpoint, devices, the shards it holds, a worker's FLOPs.
std::string dotTaskNode(const PlanView &view, const TaskView &t) {
  const Task &task = *t.task;
  std::string lines = task.name() + "\n" + task.address() + ":" + std::to_string(task.port());
  if (task.devices_size())
    lines += "\n" + llvm::join(task.devices().begin(), task.devices().end(), " ");
  for (const std::vector<std::string> &row : heldShards(view, task))
    lines += "\n" + row[0] + " " + row[1] + "  " + row[2] + (row[3].empty() ? "" : "\n" + row[3]);
  if (t.estimate && task.role() == "worker")
    lines += "\n" + humanFlops(t.estimate->flops_per_step()) + "/step";
  const char *style = task.role() == "ps" ? "shape=cylinder, style=filled, fillcolor=\"#fde8c4\""
                      : task.role() == "worker"
                          ? "shape=box, style=\"rounded,filled\", fillcolor=\"#dbe8f7\""
                          : "shape=box, style=dashed, fontsize=8, color=gray40, fontcolor=gray30";
  return "    " + dotQuote(task.name()) + " [" + style + ", label=" + dotQuote(lines) + "];\n";
}

// Each host a cluster (subgraph) of its shown tasks.
void printDotHosts(const PlanView &view, const DotScope &scope, llvm::raw_ostream &os) {
  const Plan &plan = view.plan;
  for (int h = 0; h < plan.cluster().hosts_size(); ++h) {
    const Host &host = plan.cluster().hosts(h);
    std::string label = host.name() + "\n" + host.address();
    if (host.bandwidth_bits_per_sec())
      label += ", " + cluster::formatBandwidth(host.bandwidth_bits_per_sec());
    if (!host.machine().empty())
      label += "\nmachine " + host.machine();
    std::string body;
    for (const TaskView &t : view.tasks)
      if (t.task->host() == h && scope.shown.count(t.task->name()))
        body += dotTaskNode(view, t);
    if (body.empty())
      continue;
    os << "  subgraph cluster_" << h << " {\n    label=" << dotQuote(label)
       << ";\n    fontsize=11;\n    style=rounded;\n    color=gray60;\n"
       << body << "  }\n";
  }
}

// All-reduce: a ring over each group's tasks in rank order, each edge what one rank sends.
void printDotRings(const Plan &plan, const DotScope &scope, llvm::raw_ostream &os) {
  for (const CollectiveGroup &g : plan.groups()) {
    const int n = g.tasks_size();
    if (n < 2)
      continue;
    double bytes = 0;
    for (const Bucket &b : g.buckets())
      bytes += bucketWireBytes(plan, b);
    // Every edge carries as much; the first one (or the task's own) says what the ring is.
    std::string perEdge = humanBytes(ringAllReduceBytes(bytes, n)) + "/step";
    std::string label = "all-reduce " + g.name() + ": " + std::to_string(g.buckets_size()) +
                        (g.buckets_size() == 1 ? " bucket" : " buckets") + "\n" + perEdge;
    bool labelled = false;
    for (int i = 0; i < (n == 2 ? 1 : n); ++i) {
      const std::string &from = g.tasks(i), &to = g.tasks((i + 1) % n);
      if (!scope.touches(from, to))
        continue;
      os << "  " << dotQuote(from) << " -> " << dotQuote(to) << " [color=\"#2b6cb0\", "
         << (n == 2 ? "dir=both, " : "")
         << "penwidth=2, label=" << dotQuote(labelled ? perEdge : label) << "];\n";
      labelled = true;
    }
  }
}

// PS traffic: one edge per worker and PS task, a line per variable (both directions).
void printDotPsEdges(const PlanView &view, const DotScope &scope, llvm::raw_ostream &os) {
  std::map<std::pair<std::string, std::string>, std::map<std::string, std::optional<double>>> flows;
  for (const TaskView &t : view.tasks) {
    if (t.task->role() == "ps")
      continue;
    for (const Communication &c : t.communication)
      for (const Peer &p : c.peers) {
        if (c.op == "all_reduce" || c.local || !scope.touches(t.task->name(), p.task))
          continue;
        auto &bytes = flows[{t.task->name(), p.task}].try_emplace(c.variable, 0.0).first->second;
        if (bytes && p.sent && p.received)
          *bytes += *p.sent + *p.received;
        else
          bytes.reset();
      }
  }
  for (const auto &[ends, variables] : flows) {
    std::string label;
    for (const auto &[v, bytes] : variables)
      label += (label.empty() ? "" : "\n") + v + " " + maybeBytes(bytes) + "/step";
    os << "  " << dotQuote(ends.first) << " -> " << dotQuote(ends.second)
       << " [color=\"#c05621\", dir=both, arrowsize=0.7, label=" << dotQuote(label) << "];\n";
  }
}

// Local aggregation: a dashed edge from each member to its host's leader (loopback).
void printDotLocalEdges(const PlanView &view, const DotScope &scope, llvm::raw_ostream &os) {
  for (const HostAggregation &a : view.plan.host_aggregation())
    for (const std::string &member : a.members()) {
      const TaskView *t = view.find(member);
      if (member == a.leader() || !t || !scope.touches(member, a.leader()))
        continue;
      std::optional<double> bytes = 0.0;
      for (const Communication &c : t->communication)
        if (c.local) {
          auto sent = c.total(&Peer::sent), received = c.total(&Peer::received);
          bytes = bytes && sent && received ? std::optional<double>(*bytes + *sent + *received)
                                            : std::nullopt;
        }
      os << "  " << dotQuote(member) << " -> " << dotQuote(a.leader())
         << " [color=\"#2f855a\", style=dashed, dir=both, arrowsize=0.7, label="
         << dotQuote("local aggregation\n" + maybeBytes(bytes) + "/step, loopback") << "];\n";
    }
}

void printDot(const PlanView &view, const TaskView *only, llvm::raw_ostream &os) {
  const Plan &plan = view.plan;
  const DotScope scope(view, only);
  os << "digraph plan {\n"
     << "  graph [rankdir=TB, fontname=\"Helvetica\", labelloc=t, nodesep=0.5, ranksep=0.9, label="
     << dotQuote(plan.model() + ": " + plan.strategy() + ", " + plan.replication()) << "];\n"
     << "  node [fontname=\"Helvetica\", fontsize=10];\n"
     << "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  printDotHosts(view, scope, os);
  printDotRings(plan, scope, os);
  printDotPsEdges(view, scope, os);
  printDotLocalEdges(view, scope, os);
  os << "}\n";
}

} // namespace

llvm::Expected<DumpFormat> parseDumpFormat(llvm::StringRef name) {
  if (name == "text")
    return DumpFormat::Text;
  if (name == "json")
    return DumpFormat::Json;
  if (name == "dot")
    return DumpFormat::Dot;
  return ir::makeError("unknown dump format '" + name + "' (choices: text, json, dot)");
}

llvm::Expected<std::string> dumpPlan(const Plan &plan, DumpFormat format, llvm::StringRef task) {
  auto view = buildView(plan);
  if (!view)
    return view.takeError();
  const TaskView *only = nullptr;
  if (!task.empty() && !(only = view->find(task))) {
    std::string names;
    for (const TaskView &t : view->tasks)
      names += (names.empty() ? "" : ", ") + t.task->name();
    return ir::makeError("no task '" + task + "' in the plan (its tasks: " + names + ")");
  }
  if (format == DumpFormat::Json)
    return printJson(*view, only);
  std::string out;
  llvm::raw_string_ostream os(out);
  if (format == DumpFormat::Text)
    printText(*view, only, os);
  else
    printDot(*view, only, os);
  return os.str();
}

} // namespace prism::plan
