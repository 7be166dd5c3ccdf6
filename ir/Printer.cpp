// Prints a module in the canonical text format (docs/ir.md): the parser reads it back to the
// same module, comments and blank lines included.
#include "ir/Printer.h"

#include <algorithm>

#include "ir/LearningRateSchedule.h"
#include "ir/Module.h"
#include "ir/OpTable.h"
#include "llvm/ADT/StringRef.h"

namespace prism::ir {
namespace {

// `a = 1, b = [2, 3]`: attributes as the text format lists them.
std::string attrList(const AttrMap &attrs) {
  std::string s;
  for (const auto &[name, value] : attrs) {
    if (!s.empty())
      s += ", ";
    s += name + " = " + value.str();
  }
  return s;
}

class ModulePrinter {
public:
  explicit ModulePrinter(llvm::raw_ostream &os) : os_(os) {}

  void print(const Module &m) {
    for (const std::string &c : m.headerTrivia.leadingComments)
      printComment("", c);
    if (m.headerTrivia.blankLineBefore && !m.headerTrivia.leadingComments.empty())
      os_ << "\n";
    os_ << "model " << m.name() << " {";
    endLine(m.headerTrivia);

    for (const auto &in : m.inputs()) {
      begin(in->trivia);
      os_ << "input " << in->name() << " : " << typeOf(*in->value);
      endLine(in->trivia);
    }
    if (m.data) {
      begin(m.data->trivia);
      os_ << "data " << quoted(m.data->spec);
      endLine(m.data->trivia);
    }
    for (const auto &var : m.variables()) {
      begin(var->trivia);
      os_ << "var " << var->name() << " : " << typeOf(*var->value) << " = " << var->init.kind;
      if (!var->init.params.empty())
        os_ << "(" << attrList(var->init.params) << ")";
      if (!var->attrs.empty())
        os_ << " {" << attrList(var->attrs) << "}";
      endLine(var->trivia);
    }
    for (const Function &f : m.functions)
      printFunction(f);
    for (const auto &op : m.ops())
      printOp(*op);
    if (m.loss) {
      begin(m.loss->trivia);
      if (m.optimizer)
        os_ << "minimize " << ref(m.loss->value) << " with " << printOptimizer(*m.optimizer);
      else
        os_ << "loss " << ref(m.loss->value);
      endLine(m.loss->trivia);
    }
    for (const Gradient &g : m.gradients) {
      begin(g.trivia);
      os_ << "gradient " << (g.variable ? g.variable->name() : std::string("<null>")) << " = "
          << ref(g.value);
      endLine(g.trivia);
    }
    for (const std::string &c : m.footerComments)
      printComment("  ", c);
    os_ << "}\n";
  }

private:
  // `func @f(%x, w) -> (%y) {`, the body's ops one level deeper, `}`.
  void printFunction(const Function &f) {
    begin(f.trivia);
    os_ << "func @" << f.name << "(";
    for (size_t i = 0; i < f.params.size(); ++i)
      os_ << (i ? ", " : "") << (f.params[i].isValue ? "%" : "") << f.body->inputs()[i]->name();
    os_ << ") -> (";
    function_ = &f;
    for (size_t i = 0; i < f.results.size(); ++i)
      os_ << (i ? ", " : "") << ref(f.results[i]);
    os_ << ") {";
    endLine(f.trivia);
    indent_ = "    ";
    for (const auto &op : f.body->ops())
      printOp(*op);
    for (const std::string &c : f.closing.leadingComments)
      printComment(indent_, c);
    indent_ = "  ";
    function_ = nullptr;
    os_ << indent_ << "}";
    endLine(f.closing);
  }

  void printOp(const Op &op) {
    begin(op.trivia);
    if (op.numResults()) {
      for (unsigned i = 0; i < op.numResults(); ++i)
        os_ << (i ? ", " : "") << op.result(i)->ref();
      os_ << " = ";
    }
    if (op.def().has(kCall))
      os_ << "@" << op.attrs.getString("callee") << "(";
    else
      os_ << op.name() << "(";
    bool first = true;
    for (const Value *v : op.operands()) {
      os_ << (first ? "" : ", ") << ref(v);
      first = false;
    }
    if (!op.attrs.empty() && !op.def().has(kCall))
      os_ << (first ? "" : ", ") << attrList(op.attrs);
    os_ << ")";
    bool allTyped = op.numResults() > 0;
    for (unsigned i = 0; i < op.numResults(); ++i)
      allTyped &= op.result(i)->hasType();
    if (allTyped) {
      os_ << " : ";
      for (unsigned i = 0; i < op.numResults(); ++i)
        os_ << (i ? ", " : "") << op.result(i)->type().str();
    }
    endLine(op.trivia);
  }

  // A blank line, the comments above, and the indent of a statement.
  void begin(const Trivia &trivia) {
    if (trivia.blankLineBefore)
      os_ << "\n";
    for (const std::string &c : trivia.leadingComments)
      printComment(indent_, c);
    os_ << indent_;
  }

  void endLine(const Trivia &trivia) {
    if (!trivia.trailingComment.empty()) {
      // A comment ends at the line's end: an embedded line break would end it early.
      std::string text = trivia.trailingComment;
      std::replace(text.begin(), text.end(), '\n', ' ');
      os_ << " // " << text;
    }
    os_ << "\n";
  }

  void printComment(llvm::StringRef indent, llvm::StringRef text) {
    llvm::SmallVector<llvm::StringRef, 2> lines;
    text.split(lines, '\n');
    for (llvm::StringRef line : lines) {
      os_ << indent << "//";
      if (!line.empty())
        os_ << " " << line;
      os_ << "\n";
    }
  }

  static std::string typeOf(const Value &v) { return v.hasType() ? v.type().str() : "<untyped>"; }
  // Inside a body, a `%` parameter prints with its `%`.
  std::string ref(const Value *v) const {
    if (!v)
      return "<null>";
    if (function_ && v->input()) {
      const auto &params = function_->body->inputs();
      for (size_t i = 0; i < params.size(); ++i)
        if (params[i].get() == v->input() && function_->params[i].isValue)
          return "%" + v->name();
    }
    return v->ref();
  }

  llvm::raw_ostream &os_;
  std::string indent_ = "  ";
  const Function *function_ = nullptr; // whose body is printing
};

} // namespace

std::string printSchedule(llvm::ArrayRef<SchedulePhase> phases) {
  auto phase = [](const SchedulePhase &p) {
    return p.params.empty() ? p.kind : p.kind + "(" + attrList(p.params) + ")";
  };
  if (phases.size() == 1)
    return phase(phases[0]);
  std::string out = "[";
  for (size_t i = 0; i < phases.size(); ++i)
    out += (i ? ", " : "") + phase(phases[i]);
  return out + "]";
}

std::string printOptimizer(const Optimizer &optimizer) {
  std::string params = attrList(optimizer.params);
  if (!optimizer.schedule.empty())
    params += (params.empty() ? "" : ", ") + std::string(kScheduleParam) + " = " +
              printSchedule(optimizer.schedule);
  return optimizer.kind + "(" + params + ")";
}

void printModule(const Module &module, llvm::raw_ostream &os) {
  ModulePrinter(os).print(module);
}

std::string printModule(const Module &module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printModule(module, os);
  os.flush();
  return text;
}

} // namespace prism::ir
