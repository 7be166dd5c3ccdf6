// Parser of fused_elementwise expressions: a small recursive descent over `op(args)` and `$N`.
#include "ir/ops/ElementwiseExpr.h"

#include <algorithm>
#include <cctype>

#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/Twine.h"

namespace prism::ir {
namespace {

constexpr llvm::StringRef kFusableOps[] = {
    "add",          "sub",       "mul",      "div",       "neg",     "exp",    "log",
    "sqrt",         "relu",      "sigmoid",  "tanh",      "erf",     "gelu",   "relu_grad",
    "sigmoid_grad", "tanh_grad", "erf_grad", "gelu_grad", "maximum", "minimum"};

// Operand references above this are surely a mistake, and a bound keeps the parse total.
constexpr int kMaxOperandReference = 1 << 16;

class ExprParser {
public:
  explicit ExprParser(llvm::StringRef text) : text_(text) {}

  llvm::Expected<ElementwiseExpr> parse() {
    if (auto e = parseNode())
      return std::move(e);
    skipSpace();
    if (pos_ != text_.size())
      return error("unexpected '" + text_.substr(pos_, 1) + "'");
    return std::move(expr_);
  }

private:
  llvm::Error error(const llvm::Twine &msg) const {
    return makeError("expr \"" + text_ + "\" at offset " + llvm::Twine(pos_) + ": " + msg);
  }

  void skipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_])))
      ++pos_;
  }

  bool consume(char c) {
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  // Appends one node (after its arguments) to expr_.
  llvm::Error parseNode() {
    // Nesting is bounded so that a hostile expression cannot exhaust the stack.
    if (++depth_ > 256)
      return error("expression nested too deeply");
    auto done = llvm::make_scope_exit([&] { --depth_; });
    skipSpace();
    if (consume('$')) {
      size_t start = pos_;
      int64_t value = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_])) &&
             value <= kMaxOperandReference)
        value = value * 10 + (text_[pos_++] - '0');
      if (pos_ == start)
        return error("expected an operand number after '$'");
      if (value > kMaxOperandReference)
        return error("operand reference too large");
      ExprNode node;
      node.operand = static_cast<int>(value);
      expr_.nodes.push_back(std::move(node));
      return llvm::Error::success();
    }
    size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
      ++pos_;
    llvm::StringRef name = text_.slice(start, pos_);
    if (name.empty())
      return error("expected an op name or an operand reference");
    const OpDef *def = lookupOp(name);
    if (!def)
      return error("unknown op '" + name + "'");
    unsigned arity = def->minOperands();
    if (!def->has(kElementwise) || def->variadic || arity < 1 || arity > 2 ||
        !isFusableElementwiseOp(name))
      return error("'" + name + "' is not a unary or binary elementwise op that can be fused");
    if (!consume('('))
      return error("expected '(' after '" + name + "'");
    ExprNode node;
    node.op = name.str();
    for (unsigned i = 0; i < arity; ++i) {
      if (i > 0 && !consume(','))
        return error("'" + name + "' takes " + llvm::Twine(arity) + " operands");
      if (auto e = parseNode())
        return e;
      node.args.push_back(static_cast<int>(expr_.nodes.size()) - 1);
    }
    if (!consume(')'))
      return error("'" + name + "' takes " + llvm::Twine(arity) + " operands");
    expr_.nodes.push_back(std::move(node));
    return llvm::Error::success();
  }

  llvm::StringRef text_;
  size_t pos_ = 0;
  int depth_ = 0;
  ElementwiseExpr expr_;
};

} // namespace

llvm::ArrayRef<llvm::StringRef> fusableElementwiseOps() {
  return kFusableOps;
}

bool isFusableElementwiseOp(llvm::StringRef name) {
  return llvm::is_contained(kFusableOps, name);
}

llvm::Expected<ElementwiseExpr> parseElementwiseExpr(llvm::StringRef text) {
  return ExprParser(text).parse();
}

} // namespace prism::ir
