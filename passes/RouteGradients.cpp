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
#include "passes/Pass.h"
#include "llvm/ADT/DenseMap.h"

namespace prism::passes {
namespace {

using ir::Attr;
using ir::AttrMap;
using ir::Op;
using ir::Value;

// The op after `value`'s definition (null: the end), where a reader of it may go first.
Op *justAfter(ir::Module &module, const Value *value) {
  if (value->kind() != ir::ValueKind::OpResult)
    return module.ops().empty() ? nullptr : module.ops().front().get();
  size_t index = module.indexOf(value->definingOp()) + 1;
  return index < module.ops().size() ? module.ops()[index].get() : nullptr;
}

class RouteGradients : public Pass {
public:
  llvm::StringRef name() const override { return "route-gradients"; }
  llvm::StringRef summary() const override {
    return "dense gradients to all-reduce buckets, sparse ones to PS shards (rows only)";
  }
  std::vector<std::string> optionKeys() const override { return {"bucket-mb"}; }

  llvm::Expected<bool> run(ir::Module &module, const PassOptions &options) override {
    auto bucketMb = options.getFloat("bucket-mb", 25);
    if (!bucketMb)
      return bucketMb.takeError();
    if (!(*bucketMb > 0))
      return ir::makeError("option --bucket-mb: expected a positive size in MiB, got '" +
                           options.get("bucket-mb") + "'");
    const double bucketBytes = *bucketMb * 1024 * 1024;

    struct Reduced {
      ir::Variable *variable;
      Value *gradient;
      size_t position;          // of the gradient's definition
      Value *touched = nullptr; // a densified sparse gradient: the rows it had, 1 or 0
    };
    std::vector<Reduced> reduced;
    std::vector<const ir::Gradient *> pushed;
    for (const ir::Gradient &g : module.gradients) {
      std::string placement = g.variable->attrs.getString("placement");
      if (placement == "allreduce") {
        reduced.push_back({g.variable, g.value, 0});
      } else if (placement == "ps") {
        pushed.push_back(&g);
      } else {
        return ir::makeError(module.sourceFile(), g.variable->loc,
                             "variable '" + g.variable->name() +
                                 "' has no placement; run place-variables first");
      }
    }
    auto users = module.users();
    // Reject before changing anything: a PS variable's gradient may only feed its update,
    // which moves to the PS task (global-norm clipping would need every gradient in one place).
    for (const ir::Gradient *g : pushed)
      for (Op *user : users.lookup(g->value))
        if (!user->def().has(ir::kOptimizerUpdate))
          return ir::makeError(module.sourceFile(), user->loc,
                               "the gradient of '" + g->variable->name() +
                                   "', held by parameter servers, is read by '" +
                                   std::string(user->name()) +
                                   "'; gradients of PS variables may feed only their update "
                                   "(global-norm clipping needs --strategy allreduce)");

    int64_t pushes = 0, rowPulls = 0, densePulls = 0, densified = 0;
    for (const ir::Gradient *g : pushed) {
      ir::Variable *variable = g->variable;
      Value *var = variable->value.get();
      bool sparse = g->value->type().sparse;
      // The push goes out as soon as the gradient exists.
      module.createOp(ir::getOp(sparse ? "ps_push_rows" : "ps_push"), {var, g->value}, {}, {},
                      justAfter(module, g->value));
      ++pushes;
      // The update reads the shards' combined gradient instead of this task's.
      for (Op *user : users.lookup(g->value)) {
        Op *combined =
            module.createOp(ir::getOp(sparse ? "ps_gradient_rows" : "ps_gradient"), {var}, {},
                            {module.uniqueName(g->value->name() + ".ps")}, user);
        combined->result()->setType(g->value->maybeType());
        for (unsigned i = 0; i < user->numOperands(); ++i)
          if (user->operand(i) == g->value)
            user->setOperand(i, combined->result());
      }
      // Reads: gathers become row pulls, unless the value is also read densely: then it is
      // pulled whole once and gathered locally.
      std::vector<std::pair<Op *, unsigned>> rowReads, denseReads;
      for (Op *user : users.lookup(var)) {
        if (user->def().has(ir::kOptimizerUpdate))
          continue;
        for (unsigned i = 0; i < user->numOperands(); ++i)
          if (user->operand(i) == var)
            (user->def().sparseGradient(i) && i == 0 ? rowReads : denseReads).push_back({user, i});
      }
      if (!denseReads.empty()) {
        Op *first = denseReads.front().first;
        for (auto &read : rowReads)
          if (module.indexOf(read.first) < module.indexOf(first))
            first = read.first;
        Op *pull = module.createOp(ir::getOp("ps_pull"), {var}, {},
                                   {module.uniqueName(variable->name() + ".pulled")}, first);
        pull->result()->setType(var->maybeType());
        for (auto &read : denseReads)
          read.first->setOperand(read.second, pull->result());
        for (auto &read : rowReads)
          read.first->setOperand(read.second, pull->result());
        ++densePulls;
        continue;
      }
      for (auto &[gather, operand] : rowReads) {
        llvm::SmallVector<Value *, 2> operands(gather->operands().begin(),
                                               gather->operands().end());
        std::string name = gather->result()->name();
        module.renameValue(gather->result(), module.uniqueName(name + ".local"));
        Op *pull =
            module.createOp(ir::getOp("ps_pull_rows"), operands, gather->attrs, {name}, gather);
        pull->loc = gather->loc;
        pull->trivia = gather->trivia;
        pull->result()->setType(gather->result()->maybeType());
        module.replaceAllUses(gather->result(), pull->result());
        module.eraseOp(gather);
        ++rowPulls;
      }
    }

    // All-reduce buckets, in the order backward produces the gradients: the first gradient
    // ready (the output layer's) opens the first bucket, which travels while backward goes on.
    // A sparse gradient travels dense (as Horovod and DDP send it), with the mask of the rows
    // it has, so the update stays the lazy, row-wise one single-device training does.
    std::vector<Reduced> masks;
    for (Reduced &r : reduced) {
      if (r.gradient->type().sparse) {
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
        masks.push_back({r.variable, touched->result(), 0});
        ++densified;
      }
    }
    reduced.insert(reduced.end(), masks.begin(), masks.end());
    for (Reduced &r : reduced)
      r.position = r.gradient->kind() == ir::ValueKind::OpResult
                       ? module.indexOf(r.gradient->definingOp()) + 1
                       : 0;
    std::stable_sort(reduced.begin(), reduced.end(),
                     [](const Reduced &a, const Reduced &b) { return a.position < b.position; });
    std::vector<std::vector<Reduced>> buckets;
    double filled = 0;
    for (const Reduced &r : reduced) {
      double bytes = static_cast<double>(r.gradient->type().numElements() *
                                         ir::dtypeBytes(r.gradient->type().dtype));
      if (buckets.empty() || (filled + bytes > bucketBytes && !buckets.back().empty())) {
        buckets.emplace_back();
        filled = 0;
      }
      buckets.back().push_back(r);
      filled += bytes;
    }
    llvm::DenseMap<const Value *, std::pair<Value *, Op *>> reducedOf; // operand -> (mean, op)
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
      // Right after its last member is computed.
      Op *reduce = module.createOp(ir::getOp("all_reduce"), operands, std::move(attrs), names,
                                   justAfter(module, buckets[b].back().gradient));
      for (unsigned i = 0; i < reduce->numResults(); ++i) {
        reduce->result(i)->setType(operands[i]->maybeType());
        module.replaceAllUses(operands[i], reduce->result(i));
        reducedOf[operands[i]] = {reduce->result(i), reduce};
      }
      reduce->setOperands(operands);
    }
    // The update of a densified table reads the rows some worker had, from the mean.
    for (const Reduced &r : reduced) {
      if (!r.touched)
        continue;
      auto [mean, meanOp] = reducedOf.lookup(r.gradient);
      auto [mask, maskOp] = reducedOf.lookup(r.touched);
      Op *later = module.indexOf(meanOp) > module.indexOf(maskOp) ? meanOp : maskOp;
      size_t at = module.indexOf(later) + 1;
      Op *rows = module.createOp(ir::getOp("sparse_from_dense"), {mean, mask}, {},
                                 {module.uniqueName(r.variable->name() + ".rows")},
                                 at < module.ops().size() ? module.ops()[at].get() : nullptr);
      rows->result()->setType(ir::TensorType(mean->type().dtype, mean->type().dims, true));
      for (const auto &op : module.ops())
        if (op.get() != rows)
          for (unsigned i = 0; i < op->numOperands(); ++i)
            if (op->operand(i) == mean)
              op->setOperand(i, rows->result());
    }

    // What read a densified gradient (clipping) now computes dense values: retype it all.
    if (densified)
      for (const auto &op : module.ops()) {
        auto types = ir::inferResultTypes(*op);
        if (!types)
          return ir::makeError(module.sourceFile(), op->loc, llvm::toString(types.takeError()));
        for (unsigned i = 0; i < op->numResults(); ++i)
          op->result(i)->setType((*types)[i]);
      }

    count("all-reduce buckets", static_cast<int64_t>(buckets.size()));
    count("gradients all-reduced", static_cast<int64_t>(reduced.size() - masks.size()));
    count("sparse gradients densified", densified);
    count("gradients pushed to PS", pushes);
    count("row pulls", rowPulls);
    count("dense pulls", densePulls);
    return !reduced.empty() || !pushed.empty();
  }
};

} // namespace

std::unique_ptr<Pass> createRouteGradientsPass() {
  return std::make_unique<RouteGradients>();
}

} // namespace prism::passes
