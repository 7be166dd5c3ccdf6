// The module verifier.
#include "ir/Verifier.h"
#include "ir/VariablePlacement.h"

#include <cmath>

#include "ir/Initializer.h"
#include "ir/LearningRateSchedule.h"
#include "ir/OpTable.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace prism::ir {
namespace {

class Verifier {
public:
  // `callable`: the functions a call in `m` may name (a body's: those defined before it).
  Verifier(const Module &m, VerifyOptions o, llvm::ArrayRef<Function> callable)
      : m_(m), options_(o), callable_(callable) {}

  llvm::Error run() {
    for (size_t i = 0; i < m_.functions.size(); ++i)
      if (auto e = verifyFunction(m_.functions[i], llvm::ArrayRef(m_.functions).take_front(i)))
        return e;
    for (const auto &in : m_.inputs())
      if (auto e = declare(in->value.get(), in->loc, "input"))
        return e;
    for (const auto &var : m_.variables()) {
      if (auto e = declare(var->value.get(), var->loc, "variable"))
        return e;
      if (var->value->hasType() && var->type().hasBatchDim())
        return error(var->loc, "variable '" + var->name() +
                                   "' cannot have the batch dimension B: " + var->type().str());
      if (auto e = checkInitializer(var->init))
        return located(withContext(std::move(e), "variable '" + var->name() + "'"), var->loc);
      if (auto e = checkPlacementAttrs(*var))
        return located(std::move(e), var->loc);
    }
    for (const auto &in : m_.inputs())
      if (auto e = checkShape(in->value.get(), in->loc))
        return e;
    for (const auto &var : m_.variables())
      if (auto e = checkShape(var->value.get(), var->loc))
        return e;
    for (const auto &op : m_.ops())
      if (auto e = verifyOp(*op))
        return e;
    if (auto e = verifyOptimizer())
      return e;
    return verifyGradients();
  }

private:
  llvm::Error error(SourceLoc loc, const llvm::Twine &msg) {
    return makeError(m_.sourceFile(), loc, msg);
  }
  llvm::Error located(llvm::Error err, SourceLoc loc) {
    return withLocation(std::move(err), m_.sourceFile(), loc);
  }

  llvm::Error declare(const Value *v, SourceLoc loc, llvm::StringRef what) {
    if (v->name().empty())
      return error(loc, "a " + what + " has no name");
    if (!names_.insert(v->name()).second)
      return error(loc, "'" + v->name() + "' is defined twice");
    defined_.insert(v);
    return llvm::Error::success();
  }

  llvm::Error checkShape(const Value *v, SourceLoc loc) {
    if (!v->hasType())
      return options_.requireTypes ? error(loc, v->ref() + " has no type") : llvm::Error::success();
    int64_t n = 1;
    for (int64_t d : v->type().dims) {
      if (d == kBatchDim || d == kDynamicDim)
        continue;
      if (d < 0)
        return error(loc, v->ref() + " has a negative dimension: " + v->type().str());
      if (d != 0 && n > kMaxElements / d)
        return error(loc, v->ref() + " is too large: " + v->type().str());
      n *= d;
    }
    return llvm::Error::success();
  }

  llvm::Error verifyOp(const Op &op) {
    std::string where = "'" + op.name().str() + "'" +
                        (op.numResults() ? " defining " + op.result(0)->ref() : std::string());
    for (unsigned i = 0; i < op.numOperands(); ++i) {
      const Value *v = op.operand(i);
      if (!v)
        return error(op.loc, where + ": operand " + llvm::Twine(i) + " is missing");
      if (!defined_.count(v))
        return error(op.loc, where + ": operand " + v->ref() +
                                 " is used before it is defined (or defined in a cycle)");
      if (op.def().writes(i) && v->kind() != ValueKind::Variable)
        return error(op.loc, where + ": operand " + llvm::Twine(i) + " (" + v->ref() +
                                 ") must be a variable");
      if (op.def().writes(i) && !written_.insert(v).second)
        return error(op.loc, "variable " + v->ref() + " is written twice in one step");
    }
    if (auto e = checkSignature(op.def(), op.numOperands(), op.attrs))
      return located(withContext(std::move(e), where), op.loc);
    if (unsigned expected = op.def().resultCount(op.numOperands());
        !op.def().has(kCall) && op.numResults() != expected)
      return error(op.loc, where + ": has " + llvm::Twine(op.numResults()) + " results, expected " +
                               llvm::Twine(expected));
    if (op.def().has(kCall))
      return verifyCall(op);
    bool operandsTyped = true;
    for (const Value *v : op.operands())
      operandsTyped &= v->hasType();
    if (operandsTyped) {
      auto types = inferResultTypes(op);
      if (!types)
        return located(withContext(types.takeError(), where), op.loc);
      for (unsigned i = 0; i < op.numResults(); ++i) {
        const Value *r = op.result(i);
        if (r->hasType() && r->type() != (*types)[i])
          return error(op.loc, where + ": result " + r->ref() + " is declared " + r->type().str() +
                                   " but the op gives " + (*types)[i].str());
      }
    }
    return declareResults(op);
  }

  llvm::Error declareResults(const Op &op) {
    for (unsigned i = 0; i < op.numResults(); ++i) {
      if (auto e = declare(op.result(i), op.loc, "result"))
        return e;
      if (auto e = checkShape(op.result(i), op.loc))
        return e;
    }
    return llvm::Error::success();
  }

  // A body is verified as a module of its own (its parameters untyped), with the functions
  // defined before it callable; the results must be its values.
  llvm::Error verifyFunction(const Function &f, llvm::ArrayRef<Function> before) {
    std::string what = "function @" + f.name;
    if (!f.body || f.body->inputs().size() != f.params.size())
      return error(f.loc, what + ": its parameters and its body's inputs differ");
    for (const Function &other : before)
      if (other.name == f.name)
        return error(f.loc, what + " is defined twice");
    if (f.params.empty())
      return error(f.loc, what + " has no parameters");
    if (f.results.empty())
      return error(f.loc, what + " has no results");
    VerifyOptions bodyOptions = options_;
    bodyOptions.requireTypes = false;
    Verifier body(*f.body, bodyOptions, before);
    if (auto e = body.run())
      return e;
    for (const ValueUse &result : f.results)
      if (!result || !body.defined_.count(result.get()))
        return error(f.loc, what + ": a result is not a value of its body");
    return llvm::Error::success();
  }

  // The callee exists, takes this many arguments, gives this many results, and each bare
  // parameter is bound to an input or a variable.
  llvm::Error verifyCall(const Op &op) {
    std::string callee = op.attrs.getString("callee");
    const Function *f = nullptr;
    for (const Function &candidate : callable_)
      if (candidate.name == callee)
        f = &candidate;
    if (!f)
      return error(op.loc, "call of undefined function '@" + callee + "'" +
                               (m_.findFunction(callee) ? " (a body calls only the functions "
                                                          "defined before it)"
                                                        : ""));
    if (op.numOperands() != f->params.size())
      return error(op.loc, "'@" + callee + "' takes " + llvm::Twine(f->params.size()) +
                               " arguments, " + llvm::Twine(op.numOperands()) + " given");
    if (op.numResults() != f->results.size())
      return error(op.loc, "'@" + callee + "' gives " + llvm::Twine(f->results.size()) +
                               " results, " + llvm::Twine(op.numResults()) + " named");
    for (unsigned i = 0; i < op.numOperands(); ++i) {
      const Value *v = op.operand(i);
      if (!f->params[i].isValue && v->kind() == ValueKind::OpResult)
        return error(op.loc, "argument " + llvm::Twine(i + 1) + " of '@" + callee +
                                 "' is bound to parameter '" + f->body->inputs()[i]->name() +
                                 "', which takes an input or a variable; " + v->ref() +
                                 " is an op result (write the parameter as '%" +
                                 f->body->inputs()[i]->name() + "' to take any value)");
    }
    return declareResults(op);
  }

  llvm::Error verifyOptimizer() {
    if (m_.optimizer && !m_.loss)
      return error(m_.optimizer->loc, "an optimizer without a loss");
    if (m_.loss) {
      const Loss &loss = *m_.loss;
      if (!loss.value || !defined_.count(loss.value))
        return error(loss.loc, "the loss is not a defined value");
      if (loss.value->hasType() &&
          (loss.value->type().rank() != 0 || !isFloat(loss.value->type().dtype)))
        return error(loss.loc, "the loss " + loss.value->ref() + " must be a float scalar, got " +
                                   loss.value->type().str());
    }
    if (!m_.optimizer)
      return llvm::Error::success();
    const Optimizer &opt = *m_.optimizer;
    static const llvm::StringSet<> known = {"sgd", "momentum", "adam"};
    if (!known.count(opt.kind))
      return error(opt.loc,
                   "unknown optimizer '" + opt.kind + "' (expected sgd, momentum or adam)");
    if (auto e = checkOptimizerParams(opt))
      return e;
    if (opt.params.getFloat("lr", -1) <= 0)
      return error(opt.loc, "optimizer '" + opt.kind + "' needs a positive lr");
    if (opt.params.has("clip_norm") && opt.params.getFloat("clip_norm", -1) <= 0)
      return error(opt.loc, "optimizer '" + opt.kind + "' needs a positive clip_norm, got " +
                                opt.params.find("clip_norm")->str());
    if (auto e = checkLossScaleParameters(opt.params))
      return withLocation(std::move(e), m_.sourceFile(), opt.loc);
    return checkSchedule(opt.schedule, m_.sourceFile());
  }

  // Every optimizer takes clip_norm (global-norm clipping) and loss_scale, loss_scale_interval
  // (dynamic loss scaling) besides its own parameters.
  llvm::Error checkOptimizerParams(const Optimizer &opt) {
    static const llvm::StringMap<std::vector<const char *>> accepted = {
        {"sgd", {"lr", "clip_norm", "loss_scale", "loss_scale_interval"}},
        {"momentum",
         {"lr", "momentum", "nesterov", "clip_norm", "loss_scale", "loss_scale_interval"}},
        {"adam",
         {"lr", "beta1", "beta2", "epsilon", "clip_norm", "loss_scale", "loss_scale_interval"}},
    };
    const std::vector<const char *> &names = accepted.find(opt.kind)->second;
    for (const auto &[name, value] : opt.params) {
      if (llvm::find(names, name) == names.end()) {
        std::string list;
        for (const char *n : names)
          list += (list.empty() ? "" : ", ") + std::string(n);
        return error(opt.loc, "optimizer '" + opt.kind + "' has no parameter '" + name +
                                  "'; accepted: " + list);
      }
      bool isBool = name == "nesterov";
      bool kindOk = isBool ? value.kind() == AttrKind::Bool
                           : value.kind() == AttrKind::Int || value.kind() == AttrKind::Float;
      if (!kindOk)
        return error(opt.loc, "parameter '" + name + "' of optimizer '" + opt.kind +
                                  "' must be a " + (isBool ? "boolean" : "number") + ", got " +
                                  value.str());
    }
    return llvm::Error::success();
  }

  llvm::Error verifyGradients() {
    llvm::DenseSet<const Variable *> seen;
    for (const Gradient &g : m_.gradients) {
      if (!g.variable)
        return error(g.loc, "a gradient names no variable");
      if (!seen.insert(g.variable).second)
        return error(g.loc, "variable '" + g.variable->name() + "' has two gradients");
      if (!g.value || !defined_.count(g.value))
        return error(g.loc, "the gradient of '" + g.variable->name() + "' is not a defined value");
      if (g.value->hasType() && g.variable->value->hasType() &&
          g.value->type().dense() != g.variable->type())
        return error(g.loc, "the gradient of '" + g.variable->name() + "' has type " +
                                g.value->type().str() + ", expected " + g.variable->type().str());
    }
    return llvm::Error::success();
  }

  const Module &m_;
  VerifyOptions options_;
  llvm::ArrayRef<Function> callable_;
  llvm::StringSet<> names_;
  llvm::DenseSet<const Value *> defined_;
  llvm::DenseSet<const Value *> written_;
};

} // namespace

llvm::Error verify(const Module &module, VerifyOptions options) {
  return Verifier(module, options, module.functions).run();
}

llvm::Error checkLossScaleParameters(const AttrMap &params) {
  if (const Attr *scale = params.find("loss_scale")) {
    bool number = scale->kind() == AttrKind::Int || scale->kind() == AttrKind::Float;
    if (!number || !(scale->getFloat() > 0) || !std::isfinite(scale->getFloat()))
      return makeError("loss_scale (the initial scale) must be a positive number, got " +
                       scale->str());
  }
  if (const Attr *interval = params.find("loss_scale_interval"))
    if (interval->kind() != AttrKind::Int || interval->getInt() < 1)
      return makeError("loss_scale_interval (finite steps before the scale grows) must be an "
                       "integer of at least 1, got " +
                       interval->str());
  return llvm::Error::success();
}

} // namespace prism::ir
