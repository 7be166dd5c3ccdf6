// route-gradients: sends each gradient where its variable lives. All-reduce variables: their
// dense gradients (sparse ones densified) are reduced over the workers in fusion buckets, filled
// in the order backward produces the gradients (reverse topological order of the forward), so
// the first bucket can travel while backward still runs. PS variables: their gradients are pushed
// (rows only, for sparse ones) as soon as they exist, their update ops read the shards' combined
// gradients, and the worker reads them from the PS: only the rows a batch gathers, or the whole
// value when it is read densely.
#include <algorithm>
#include <string>
#include <vector>

#include "ir/Collectives.h"
#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "ir/TypeInference.h"
#include "ir/VariablePlacement.h"
#include "passes/ParallelizeOptions.h"
#include "passes/Pass.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace prism::passes {
namespace {

using ir::Attr;
using ir::AttrMap;
using ir::Op;
using ir::Value;

// The op after `value`'s definition (null: the end), where a reader of it may go first.
Op *justAfter(ir::Module &module, const Value *value) {
  if (!value->definingOp())
    return module.ops().empty() ? nullptr : module.ops().front().get();
  return value->definingOp()->next();
}

// Whether `a` is computed before `b`: inputs and variables before every op result.
bool definedBefore(const Value *a, const Value *b) {
  if (!a->definingOp() || !b->definingOp())
    return !a->definingOp() && b->definingOp();
  return a->definingOp()->isBefore(*b->definingOp());
}

int64_t bytesOf(const Value &value) {
  return value.type().numElements() * ir::dtypeBytes(value.type().dtype);
}

// A gradient to all-reduce.
struct Reduced {
  ir::Variable *variable;
  Value *gradient;
  Value *touched = nullptr; // a densified sparse gradient: the rows it had, 1 or 0
};

// The gradients, by where their variables live.
struct Routes {
  std::vector<Reduced> reduced;
  std::vector<const ir::Gradient *> pushed;
};

// The mean an all_reduce gives for one of its operands, and that all_reduce.
using ReducedValues = llvm::DenseMap<const Value *, std::pair<Value *, Op *>>;

class RouteGradients : public Pass {
public:
  llvm::StringRef name() const override { return "route-gradients"; }
  llvm::StringRef summary() const override {
    return "dense gradients to all-reduce buckets, sparse ones to PS shards (rows only)";
  }
  std::vector<std::string> optionKeys() const override { return {"bucket-mb"}; }

  llvm::Expected<bool> run(ir::Module &module, const PassOptions &passOptions) override {
    auto options = RouteGradientsOptions::fromPassOptions(passOptions);
    if (!options)
      return options.takeError();
    auto routes = splitByPlacement(module);
    if (!routes)
      return routes.takeError();
    // Reject before changing anything.
    if (auto err = checkPushedGradientReaders(module, routes->pushed))
      return std::move(err);

    rowPulls_ = densePulls_ = 0;
    for (const ir::Gradient *g : routes->pushed)
      routeToParameterServers(module, *g);
    std::vector<Reduced> &reduced = routes->reduced;
    std::vector<Reduced> masks = densifySparseGradients(module, reduced);
    reduced.insert(reduced.end(), masks.begin(), masks.end());
    sortByDefinition(reduced);
    auto buckets = fillBuckets(reduced, options->bucketMb * 1024 * 1024);
    ReducedValues reducedOf = emitAllReduces(module, buckets);
    for (const Reduced &r : reduced)
      if (r.touched)
        readRowsOfMean(module, r, reducedOf);
    // What read a densified gradient (clipping) now computes dense values: retype it all.
    if (!masks.empty())
      if (auto retyped = ir::inferTypes(module, ir::DeclaredTypes::Replace); !retyped)
        return retyped.takeError();

    count("all-reduce buckets", static_cast<int64_t>(buckets.size()));
    count("gradients all-reduced", static_cast<int64_t>(reduced.size() - masks.size()));
    count("sparse gradients densified", static_cast<int64_t>(masks.size()));
    count("gradients pushed to PS", static_cast<int64_t>(routes->pushed.size()));
    count("row pulls", rowPulls_);
    count("dense pulls", densePulls_);
    return !reduced.empty() || !routes->pushed.empty();
  }

private:
  static llvm::Expected<Routes> splitByPlacement(const ir::Module &module) {
    Routes routes;
    for (const ir::Gradient &g : module.gradients) {
      std::optional<ir::VariablePlacement> placement = ir::placementOf(*g.variable);
      if (placement && placement->where == ir::Placement::AllReduce)
        routes.reduced.push_back({g.variable, g.value});
      else if (placement && placement->where == ir::Placement::ParameterServer)
        routes.pushed.push_back(&g);
      else
        return ir::makeError(module.sourceFile(), g.variable->loc,
                             "variable '" + g.variable->name() +
                                 "' has no placement; run place-variables first");
    }
    return routes;
  }

  // A PS variable's gradient may only feed its update, which moves to the PS task (global-norm
  // clipping and loss scaling's finiteness check would need every gradient in one place).
  static llvm::Error checkPushedGradientReaders(const ir::Module &module,
                                                llvm::ArrayRef<const ir::Gradient *> pushed) {
    for (const ir::Gradient *g : pushed)
      for (Op *user : g->value->users())
        if (!user->def().has(ir::kOptimizerUpdate))
          return ir::makeError(module.sourceFile(), user->loc,
                               "the gradient of '" + g->variable->name() +
                                   "', held by parameter servers, is read by '" +
                                   std::string(user->name()) +
                                   "'; gradients of PS variables may feed only their update "
                                   "(global-norm clipping and loss scaling, which --precision fp16 "
                                   "adds, need --strategy allreduce)");
    return llvm::Error::success();
  }

  // Pushes the gradient of a PS variable, has its updates read the shards' combined gradient,
  // and pulls the variable where the worker reads it.
  void routeToParameterServers(ir::Module &module, const ir::Gradient &g) {
    Value *var = g.variable->value.get();
    Value *gradient = g.value;
    bool sparse = gradient->type().sparse;
    // The worker's reads, before the push and the combined gradients below read it too.
    llvm::SmallVector<Op *, 2> readers;
    for (Op *user : var->users())
      if (!user->def().has(ir::kOptimizerUpdate))
        readers.push_back(user);
    // The updates read the shards' combined gradient instead of this task's.
    for (Op *update : gradient->users()) {
      Op *combined = module.createOp(ir::getOp(sparse ? "ps_gradient_rows" : "ps_gradient"), {var},
                                     {}, {module.uniqueName(gradient->name() + ".ps")}, update);
      combined->result()->setType(gradient->maybeType());
      module.replaceUsesIf(gradient, combined->result(),
                           [&](const ir::OpUse &use) { return use.op == update; });
    }
    // The push goes out as soon as the gradient exists.
    module.createOp(ir::getOp(sparse ? "ps_push_rows" : "ps_push"), {var, gradient}, {}, {},
                    justAfter(module, gradient));
    pullWhereRead(module, *g.variable, readers);
  }

  // Reads: gathers become row pulls, unless the value is also read densely: then it is pulled
  // whole once, before its first reader, and gathered locally.
  void pullWhereRead(ir::Module &module, ir::Variable &variable, llvm::ArrayRef<Op *> readers) {
    Value *var = variable.value.get();
    llvm::SmallVector<Op *, 2> gathers;
    bool readDensely = false;
    for (Op *reader : readers)
      for (unsigned i = 0; i < reader->numOperands(); ++i)
        if (reader->operand(i) == var) {
          bool rows = reader->def().sparseGradient(i) && i == 0;
          readDensely |= !rows;
          if (rows)
            gathers.push_back(reader);
        }
    if (readDensely) {
      Op *pull = module.createOp(ir::getOp("ps_pull"), {var}, {},
                                 {module.uniqueName(variable.name() + ".pulled")}, readers.front());
      pull->result()->setType(var->maybeType());
      llvm::DenseSet<const Op *> readerSet(readers.begin(), readers.end());
      module.replaceUsesIf(var, pull->result(),
                           [&](const ir::OpUse &use) { return readerSet.count(use.op) != 0; });
      ++densePulls_;
      return;
    }
    for (Op *gather : gathers) {
      llvm::SmallVector<Value *, 2> operands(gather->operands().begin(), gather->operands().end());
      std::string name = gather->result()->name();
      module.renameValue(gather->result(), module.uniqueName(name + ".local"));
      Op *pull =
          module.createOp(ir::getOp("ps_pull_rows"), operands, gather->attrs, {name}, gather);
      pull->loc = gather->loc;
      pull->trivia = gather->trivia;
      pull->result()->setType(gather->result()->maybeType());
      module.replaceAllUses(gather->result(), pull->result());
      module.eraseOp(gather);
      ++rowPulls_;
    }
  }

  // A sparse gradient travels dense (as Horovod and DDP send it), with the mask of the rows it
  // has, so the update stays the lazy, row-wise one single-device training does. Returns the
  // masks, to all-reduce with the gradients.
  static std::vector<Reduced> densifySparseGradients(ir::Module &module,
                                                     std::vector<Reduced> &reduced) {
    std::vector<Reduced> masks;
    for (Reduced &r : reduced) {
      if (!r.gradient->type().sparse)
        continue;
      Value *sparse = r.gradient;
      Op *after = justAfter(module, sparse);
      Op *dense = module.createOp(ir::getOp("sparse_to_dense"), {sparse}, {},
                                  {module.uniqueName(sparse->name() + ".dense")}, after);
      dense->result()->setType(sparse->type().dense());
      Op *touched = module.createOp(ir::getOp("touched_rows"), {sparse}, {},
                                    {module.uniqueName(sparse->name() + ".touched")}, after);
      touched->result()->setType(ir::TensorType(sparse->type().dtype, {sparse->type().dims[0]}));
      module.replaceAllUses(sparse, dense->result());
      dense->setOperand(0, sparse);
      touched->setOperand(0, sparse);
      r.gradient = dense->result();
      r.touched = touched->result();
      masks.push_back({r.variable, touched->result()});
    }
    return masks;
  }

  // The order backward produces the gradients in.
  static void sortByDefinition(std::vector<Reduced> &reduced) {
    std::stable_sort(reduced.begin(), reduced.end(), [](const Reduced &a, const Reduced &b) {
      return definedBefore(a.gradient, b.gradient);
    });
  }

  // Buckets in that order: the first gradient ready (the output layer's) opens the first
  // bucket, which travels while backward goes on.
  static std::vector<std::vector<Reduced>> fillBuckets(llvm::ArrayRef<Reduced> reduced,
                                                       double bucketBytes) {
    std::vector<std::vector<Reduced>> buckets;
    double filled = 0;
    for (const Reduced &r : reduced) {
      double bytes = static_cast<double>(bytesOf(*r.gradient));
      if (buckets.empty() || (filled + bytes > bucketBytes && !buckets.back().empty())) {
        buckets.emplace_back();
        filled = 0;
      }
      buckets.back().push_back(r);
      filled += bytes;
    }
    return buckets;
  }

  // One all_reduce per bucket, right after its last member is computed; every reader of a
  // member (and the gradient declarations) reads the mean instead.
  static ReducedValues emitAllReduces(ir::Module &module,
                                      const std::vector<std::vector<Reduced>> &buckets) {
    ReducedValues reducedOf;
    for (size_t b = 0; b < buckets.size(); ++b) {
      llvm::SmallVector<Value *, 8> operands;
      std::vector<std::string> names;
      for (const Reduced &r : buckets[b]) {
        operands.push_back(r.gradient);
        names.push_back(module.uniqueName(r.gradient->name() + ".mean"));
      }
      AttrMap attrs;
      attrs.set("group", Attr::string(ir::kWorkerGroup));
      attrs.set("bucket", Attr::integer(static_cast<int64_t>(b)));
      Op *reduce = module.createOp(ir::getOp("all_reduce"), operands, std::move(attrs), names,
                                   justAfter(module, buckets[b].back().gradient));
      for (unsigned i = 0; i < reduce->numResults(); ++i) {
        reduce->result(i)->setType(operands[i]->maybeType());
        module.replaceAllUses(operands[i], reduce->result(i));
        reducedOf[operands[i]] = {reduce->result(i), reduce};
      }
      reduce->setOperands(operands);
    }
    return reducedOf;
  }

  // The update of a densified table reads the rows some worker had, from the mean.
  static void readRowsOfMean(ir::Module &module, const Reduced &r, const ReducedValues &reducedOf) {
    auto [mean, meanOp] = reducedOf.lookup(r.gradient);
    auto [mask, maskOp] = reducedOf.lookup(r.touched);
    Op *later = maskOp->isBefore(*meanOp) ? meanOp : maskOp;
    Op *rows = module.createOp(ir::getOp("sparse_from_dense"), {mean, mask}, {},
                               {module.uniqueName(r.variable->name() + ".rows")}, later->next());
    rows->result()->setType(ir::TensorType(mean->type().dtype, mean->type().dims, true));
    module.replaceUsesIf(mean, rows->result(),
                         [&](const ir::OpUse &use) { return use.op != rows; });
  }

  int64_t rowPulls_ = 0, densePulls_ = 0;
};

} // namespace

std::unique_ptr<Pass> createRouteGradientsPass() {
  return std::make_unique<RouteGradients>();
}

} // namespace prism::passes
