// The parser of the IR text format: tokens to an ir::Module with its comments kept as trivia,
// then the verifier, so every error, syntactic or semantic, names file:line:column.
#include "frontends/text/Parser.h"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <vector>

#include "frontends/text/Lexer.h"
#include "ir/Initializer.h"
#include "ir/LearningRateSchedule.h"
#include "ir/OpTable.h"
#include "ir/Verifier.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"

namespace prism::frontends {
namespace {

// Deeper nesting is certainly a generated or corrupted file; the limit also bounds recursion.
constexpr unsigned kMaxNesting = 256;

// A significant token and the comments met since the previous one.
struct Lexed {
  Token token;
  std::vector<Token> comments;
};

using ResultNames = std::vector<std::pair<std::string, ir::SourceLoc>>;

// The text of a comment as kept in Trivia: without `//`, one leading space and trailing blanks.
std::string commentText(const Token &comment) {
  llvm::StringRef text = comment.text.rtrim(" \t\r\f\v");
  if (text.startswith(" "))
    text = text.drop_front();
  return text.str();
}

std::string locString(ir::SourceLoc loc) {
  return std::to_string(loc.line) + ":" + std::to_string(loc.column);
}

// Edit distance counting a swap of neighbours as one edit, the commonest typo.
size_t typoDistance(llvm::StringRef a, llvm::StringRef b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::string unknownOpMessage(llvm::StringRef name) {
  std::string message = "unknown op '" + name.str() + "'";
  if (name.size() > 64)
    return message;
  const ir::OpDef *best = nullptr;
  size_t bestDistance = std::max<size_t>(1, name.size() / 3) + 1;
  for (const ir::OpDef *def : ir::allOps()) {
    size_t distance = typoDistance(name, def->name);
    if (distance < bestDistance) {
      best = def;
      bestDistance = distance;
    }
  }
  if (best)
    message += "; did you mean '" + best->name + "'?";
  return message;
}

std::string plural(size_t n, llvm::StringRef word) {
  if (n == 0)
    return "no " + word.str();
  return std::to_string(n) + " " + word.str() + (n == 1 ? "" : "s");
}

class Parser {
public:
  Parser(llvm::StringRef text, llvm::StringRef fileName)
      : text_(text), file_(fileName.str()), lexer_(text) {
    cur_ = fetch();
  }

  llvm::Expected<std::unique_ptr<ir::Module>> parseFile();
  llvm::Expected<ir::TensorType> parseStandaloneType();

private:
  // Tokens.
  Lexed fetch() {
    Lexed lexed;
    for (;;) {
      Token token = lexer_.next();
      if (token.kind != TokenKind::Comment) {
        lexed.token = std::move(token);
        return lexed;
      }
      lexed.comments.push_back(std::move(token));
    }
  }
  const Token &tok() const { return cur_.token; }
  TokenKind kind() const { return cur_.token.kind; }
  bool isWord(llvm::StringRef word) const {
    return kind() == TokenKind::Identifier && tok().text == word;
  }
  const Token &peek() {
    if (!peeked_)
      peeked_ = fetch();
    return peeked_->token;
  }
  // Comments inside a statement are not lost: they join the statement's leading comments.
  void advance() {
    for (const Token &comment : cur_.comments)
      midComments_.push_back(commentText(comment));
    if (peeked_) {
      cur_ = std::move(*peeked_);
      peeked_.reset();
    } else {
      cur_ = fetch();
    }
  }

  // Errors.
  llvm::Error errorAt(ir::SourceLoc loc, const llvm::Twine &message) {
    return ir::makeError(file_, loc, message);
  }
  // `expected X, found Y` at the current token, or the lexer's message for a bad token.
  llvm::Error unexpected(const llvm::Twine &expected) {
    const Token &t = tok();
    if (t.kind == TokenKind::Error)
      return errorAt(t.loc, t.message);
    if (t.kind == TokenKind::EndOfFile)
      return errorAt(t.loc, "unexpected end of file, expected " + expected);
    return errorAt(t.loc, "expected " + expected + ", found " + describeToken(t));
  }
  llvm::Error expect(TokenKind k, const llvm::Twine &what) {
    if (kind() != k)
      return unexpected(what);
    advance();
    return llvm::Error::success();
  }

  // Trivia: the comments before the current token (its first one may end the previous
  // statement's line) and whether a blank line opens the block.
  ir::Trivia takeTrivia(ir::Trivia *previous) {
    ir::Trivia trivia;
    std::vector<Token> &comments = cur_.comments;
    size_t i = 0;
    if (previous && !comments.empty() && comments[0].newlinesBefore == 0) {
      previous->trailingComment = commentText(comments[0]);
      i = 1;
    }
    unsigned breaks = i < comments.size() ? comments[i].newlinesBefore : tok().newlinesBefore;
    trivia.blankLineBefore = breaks >= 2;
    for (; i < comments.size(); ++i)
      trivia.leadingComments.push_back(commentText(comments[i]));
    comments.clear();
    return trivia;
  }

  // Names.
  llvm::Error checkNewName(llvm::StringRef name, llvm::StringRef shown, ir::SourceLoc loc) {
    auto it = definedAt_.find(name);
    if (it != definedAt_.end())
      return errorAt(loc,
                     "'" + shown + "' is defined twice (first at " + locString(it->second) + ")");
    return llvm::Error::success();
  }
  llvm::Expected<ir::Value *> resolveValue(const Token &t);
  std::string freshName();

  // Pieces.
  llvm::Expected<int64_t> parseInteger(const Token &t);
  llvm::Expected<ir::Attr> parseAttrValue();
  // A parameter `special` parses itself (its value after '='; true when it took it).
  using SpecialParam =
      llvm::function_ref<llvm::Expected<bool>(const std::string &name, ir::SourceLoc loc)>;
  llvm::Error parseAttrList(ir::AttrMap &out, TokenKind close, llvm::StringRef closeText,
                            SpecialParam special = nullptr);
  // The optimizer's parameters up to ')': attributes, and `schedule = ...`.
  llvm::Error parseOptimizerParams(ir::Optimizer &optimizer);
  // `schedule = PHASE` or `schedule = [PHASE, ...]`, the name and `=` read.
  llvm::Error parseSchedule(std::vector<ir::SchedulePhase> &phases);
  llvm::Expected<ir::SchedulePhase> parseSchedulePhase();
  llvm::Expected<ir::TensorType> parseType();
  llvm::Expected<ir::Op *> parseExpr(unsigned depth, const ResultNames *results,
                                     ir::SourceLoc opLoc);

  // Statements: each sets leadingTrivia_ (where its comments go) and lastTrivia_ (whose line
  // it ends, for a trailing comment).
  llvm::Error parseBody();
  llvm::Error parseStatement(ir::Trivia trivia);
  // `NAME : TYPE`, the start of an input or variable declaration.
  struct DeclarationHead {
    std::string name;
    ir::SourceLoc loc;
    ir::TensorType type;
  };
  llvm::Expected<DeclarationHead> parseDeclarationHead(llvm::StringRef what);
  llvm::Error parseInput(ir::Trivia trivia);
  llvm::Error parseVariable(ir::Trivia trivia);
  llvm::Error parseOpStatement(ir::Trivia trivia);
  llvm::Error parseLoss(ir::Trivia trivia, bool withOptimizer);
  llvm::Error parseData(ir::Trivia trivia);
  llvm::Error parseGradient(ir::Trivia trivia);
  // `func @name(params) -> (results) { ops }`
  llvm::Error parseFunction(ir::Trivia trivia);
  llvm::Error parseFunctionParams(ir::Function &function);
  llvm::Error parseFunctionBody(ir::Function &function, llvm::ArrayRef<Token> results);

  llvm::StringRef text_;
  std::string file_;
  Lexer lexer_;
  Lexed cur_;
  std::optional<Lexed> peeked_;
  std::vector<std::string> midComments_;

  std::unique_ptr<ir::Module> module_; // the model, or the body of the function being read
  ir::Module *model_ = nullptr;        // the model, which holds the functions
  // Inside a body: its `%x` parameters, which are inputs of the body written with `%`.
  llvm::DenseSet<const ir::Value *> valueParams_;
  llvm::StringMap<ir::SourceLoc> definedAt_;
  ir::Trivia *lastTrivia_ = nullptr;
  ir::Trivia *leadingTrivia_ = nullptr;
  ir::SourceLoc lossLoc_;

  // `%N` names written anywhere in the text, so fresh names never collide with later ones.
  std::optional<llvm::StringSet<>> numericNames_;
  unsigned nextFresh_ = 1;
};

llvm::Expected<std::unique_ptr<ir::Module>> Parser::parseFile() {
  ir::Trivia header;
  for (const Token &comment : cur_.comments)
    header.leadingComments.push_back(commentText(comment));
  header.blankLineBefore = !cur_.comments.empty() && tok().newlinesBefore >= 2;
  cur_.comments.clear();

  if (!isWord("model"))
    return unexpected("'model'");
  advance();
  if (kind() != TokenKind::Identifier)
    return unexpected("the model's name");
  module_ = std::make_unique<ir::Module>(tok().text.str());
  module_->setSourceFile(file_);
  model_ = module_.get();
  advance();
  if (auto e = expect(TokenKind::LBrace, "'{'"))
    return std::move(e);
  header.leadingComments.insert(header.leadingComments.end(), midComments_.begin(),
                                midComments_.end());
  midComments_.clear();
  module_->headerTrivia = std::move(header);
  lastTrivia_ = &module_->headerTrivia;

  if (auto e = parseBody())
    return std::move(e);

  ir::VerifyOptions options;
  options.requireTypes = false;
  if (auto e = ir::verify(*module_, options))
    return std::move(e);
  return std::move(module_);
}

llvm::Error Parser::parseBody() {
  for (;;) {
    ir::Trivia trivia = takeTrivia(lastTrivia_);
    if (kind() == TokenKind::RBrace) {
      module_->footerComments = std::move(trivia.leadingComments);
      advance();
      // Comments after the closing brace are kept with the footer.
      for (const Token &comment : cur_.comments)
        module_->footerComments.push_back(commentText(comment));
      cur_.comments.clear();
      if (kind() != TokenKind::EndOfFile)
        return unexpected("the end of the file after '}'");
      return llvm::Error::success();
    }
    if (auto e = parseStatement(std::move(trivia)))
      return e;
    leadingTrivia_->leadingComments.insert(leadingTrivia_->leadingComments.end(),
                                           midComments_.begin(), midComments_.end());
    midComments_.clear();
  }
}

llvm::Error Parser::parseStatement(ir::Trivia trivia) {
  if (kind() == TokenKind::ValueName)
    return parseOpStatement(std::move(trivia));
  if (kind() != TokenKind::Identifier) {
    if (kind() == TokenKind::EndOfFile)
      return unexpected("'}'");
    return unexpected(
        "a statement (input, data, var, func, an op, minimize, loss, gradient) or '}'");
  }
  // Keywords are reserved only at the start of a statement and never name ops.
  bool call = peek().kind == TokenKind::LParen;
  if (isWord("input") && !call)
    return parseInput(std::move(trivia));
  if (isWord("var") && !call)
    return parseVariable(std::move(trivia));
  if (isWord("minimize") && !call)
    return parseLoss(std::move(trivia), /*withOptimizer=*/true);
  if (isWord("loss") && !call)
    return parseLoss(std::move(trivia), /*withOptimizer=*/false);
  if (isWord("gradient") && !call)
    return parseGradient(std::move(trivia));
  if (isWord("data") && !call)
    return parseData(std::move(trivia));
  if (isWord("func") && !call)
    return parseFunction(std::move(trivia));
  return parseOpStatement(std::move(trivia));
}

llvm::Expected<Parser::DeclarationHead> Parser::parseDeclarationHead(llvm::StringRef what) {
  if (kind() != TokenKind::Identifier)
    return unexpected(("a " + what + " name").str());
  DeclarationHead head;
  head.name = tok().text.str();
  head.loc = tok().loc;
  if (auto e = checkNewName(head.name, head.name, head.loc))
    return std::move(e);
  advance();
  if (auto e = expect(TokenKind::Colon, ("':' and the " + what + "'s type").str()))
    return std::move(e);
  auto type = parseType();
  if (!type)
    return type.takeError();
  head.type = std::move(*type);
  return head;
}

llvm::Error Parser::parseInput(ir::Trivia trivia) {
  advance(); // `input`
  auto head = parseDeclarationHead("input");
  if (!head)
    return head.takeError();
  auto &[name, loc, type] = *head;
  ir::Input *input = module_->addInput(name, type);
  input->loc = loc;
  input->trivia = std::move(trivia);
  definedAt_[name] = loc;
  leadingTrivia_ = lastTrivia_ = &input->trivia;
  return llvm::Error::success();
}

llvm::Error Parser::parseVariable(ir::Trivia trivia) {
  advance(); // `var`
  auto head = parseDeclarationHead("variable");
  if (!head)
    return head.takeError();
  auto &[name, loc, type] = *head;
  if (auto e = expect(TokenKind::Equal, "'=' and an initializer"))
    return e;
  if (kind() != TokenKind::Identifier)
    return unexpected("an initializer (" + ir::initializerNames() + ")");
  ir::Initializer init;
  init.kind = tok().text.str();
  ir::SourceLoc initLoc = tok().loc;
  advance();
  if (kind() == TokenKind::LParen) {
    advance();
    if (auto e = parseAttrList(init.params, TokenKind::RParen, "')'"))
      return e;
    advance();
  }
  if (auto e = ir::checkInitializer(init))
    return errorAt(initLoc, ir::messageOf(std::move(e)));
  ir::AttrMap attrs;
  if (kind() == TokenKind::LBrace) {
    advance();
    if (auto e = parseAttrList(attrs, TokenKind::RBrace, "'}'"))
      return e;
    advance();
  }
  ir::Variable *var = module_->addVariable(name, type, std::move(init));
  var->attrs = std::move(attrs);
  var->loc = loc;
  var->trivia = std::move(trivia);
  definedAt_[name] = loc;
  leadingTrivia_ = lastTrivia_ = &var->trivia;
  return llvm::Error::success();
}

llvm::Error Parser::parseOpStatement(ir::Trivia trivia) {
  ir::Op *lastBefore = module_->ops().empty() ? nullptr : module_->ops().back().get();
  ResultNames results;
  ir::SourceLoc opLoc = tok().loc;
  if (kind() == TokenKind::ValueName) {
    for (;;) {
      if (kind() != TokenKind::ValueName)
        return unexpected("a result name such as %h");
      std::string name = tok().text.drop_front().str();
      if (auto e = checkNewName(name, tok().text, tok().loc))
        return e;
      definedAt_[name] = tok().loc;
      results.emplace_back(name, tok().loc);
      advance();
      if (kind() != TokenKind::Comma)
        break;
      advance();
    }
    if (auto e = expect(TokenKind::Equal, "',' or '='"))
      return e;
    if (kind() != TokenKind::Identifier && kind() != TokenKind::FunctionName)
      return unexpected("an op name or a call such as @cell(...)");
  }
  auto op = parseExpr(1, &results, opLoc);
  if (!op)
    return op.takeError();
  if (kind() == TokenKind::Colon) {
    ir::SourceLoc colonLoc = tok().loc;
    advance();
    std::vector<ir::TensorType> types;
    for (;;) {
      auto type = parseType();
      if (!type)
        return type.takeError();
      types.push_back(std::move(*type));
      if (kind() != TokenKind::Comma)
        break;
      advance();
    }
    if (types.size() != (*op)->numResults())
      return errorAt(colonLoc, plural(types.size(), "type") + " given for " +
                                   plural((*op)->numResults(), "result") + " of '" + (*op)->name() +
                                   "'");
    for (unsigned i = 0; i < types.size(); ++i)
      (*op)->result(i)->setType(types[i]);
  }
  // Nested ops print first, so the statement's comments go above the first of them.
  ir::Op *first = lastBefore ? lastBefore->next() : module_->ops().front().get();
  first->trivia = std::move(trivia);
  leadingTrivia_ = &first->trivia;
  lastTrivia_ = &(*op)->trivia;
  return llvm::Error::success();
}

llvm::Expected<ir::Op *> Parser::parseExpr(unsigned depth, const ResultNames *results,
                                           ir::SourceLoc opLoc) {
  Token nameToken = tok();
  if (depth > kMaxNesting)
    return errorAt(nameToken.loc, "expressions nested deeper than " + llvm::Twine(kMaxNesting));
  // `@f(...)`: a call, checked against the function by the verifier.
  const ir::Function *callee = nullptr;
  const ir::OpDef *def = nullptr;
  if (nameToken.kind == TokenKind::FunctionName) {
    callee = model_->findFunction(nameToken.text.drop_front());
    if (!callee)
      return errorAt(nameToken.loc, "call of undefined function '" + nameToken.text +
                                        "' (a function is defined before its calls)");
    def = &ir::getOp("call");
  } else {
    def = ir::lookupOp(nameToken.text);
    if (!def)
      return errorAt(nameToken.loc, unknownOpMessage(nameToken.text));
  }
  std::string shownName = callee ? nameToken.text.str() : def->name;
  advance();
  if (auto e = expect(TokenKind::LParen, "'(' after '" + nameToken.text + "'"))
    return std::move(e);

  llvm::SmallVector<ir::Value *, 4> operands;
  ir::AttrMap attrs;
  if (kind() != TokenKind::RParen) {
    for (;;) {
      if (kind() == TokenKind::Identifier && peek().kind == TokenKind::Equal) {
        std::string name = tok().text.str();
        ir::SourceLoc nameLoc = tok().loc;
        advance();
        advance();
        auto value = parseAttrValue();
        if (!value)
          return value.takeError();
        if (attrs.has(name))
          return errorAt(nameLoc, "attribute '" + name + "' is given twice");
        attrs.set(name, std::move(*value));
      } else if (kind() == TokenKind::Identifier || kind() == TokenKind::ValueName ||
                 kind() == TokenKind::FunctionName) {
        if (!attrs.empty())
          return errorAt(tok().loc, "operand " + describeToken(tok()) +
                                        " after attributes: operands come first");
        if (kind() == TokenKind::FunctionName ||
            (kind() == TokenKind::Identifier && peek().kind == TokenKind::LParen)) {
          auto inner = parseExpr(depth + 1, nullptr, tok().loc);
          if (!inner)
            return inner.takeError();
          operands.push_back((*inner)->result(0));
        } else {
          auto value = resolveValue(tok());
          if (!value)
            return value.takeError();
          operands.push_back(*value);
          advance();
        }
      } else {
        return unexpected("an operand or an attribute");
      }
      if (kind() == TokenKind::RParen)
        break;
      if (auto e = expect(TokenKind::Comma, "',' or ')'"))
        return std::move(e);
    }
  }
  advance(); // `)`

  if (callee) {
    if (!attrs.empty())
      return errorAt(nameToken.loc, "a call takes no attributes: '" + shownName +
                                        "' has parameters (" + llvm::Twine(callee->params.size()) +
                                        ") only");
    attrs.set("callee", ir::Attr::string(callee->name));
  }
  if (auto e = ir::checkSignature(*def, static_cast<unsigned>(operands.size()), attrs))
    return errorAt(opLoc, ir::messageOf(std::move(e)));
  std::vector<std::string> names;
  unsigned numResults = callee ? static_cast<unsigned>(callee->results.size())
                               : def->resultCount(static_cast<unsigned>(operands.size()));
  if (results) {
    if (results->size() != numResults)
      return errorAt(opLoc, "'" + shownName + "' gives " + plural(numResults, "result") + ", but " +
                                plural(results->size(), "name") + " " +
                                (results->size() > 1 ? "are" : "is") + " given");
    for (const auto &result : *results)
      names.push_back(result.first);
  } else {
    if (numResults != 1)
      return errorAt(nameToken.loc, "'" + shownName + "' gives " + plural(numResults, "result") +
                                        ", so it cannot be an operand of another op");
    names.push_back(freshName());
    definedAt_[names.back()] = nameToken.loc;
  }
  ir::Op *op = module_->createOp(*def, operands, std::move(attrs), names);
  op->loc = opLoc;
  return op;
}

llvm::Error Parser::parseLoss(ir::Trivia trivia, bool withOptimizer) {
  ir::SourceLoc loc = tok().loc;
  if (module_->loss)
    return errorAt(loc, "the loss is declared twice (first at " + locString(lossLoc_) + ")");
  advance(); // `minimize` or `loss`
  if (kind() != TokenKind::ValueName && kind() != TokenKind::Identifier)
    return unexpected("the loss value, such as %loss");
  auto value = resolveValue(tok());
  if (!value)
    return value.takeError();
  advance();
  std::optional<ir::Optimizer> optimizer;
  if (withOptimizer) {
    if (!isWord("with"))
      return unexpected("'with' and an optimizer");
    advance();
    if (kind() != TokenKind::Identifier)
      return unexpected("an optimizer (sgd, momentum or adam)");
    optimizer.emplace();
    optimizer->kind = tok().text.str();
    optimizer->loc = tok().loc;
    advance();
    if (auto e = expect(TokenKind::LParen, "'(' and the optimizer's parameters"))
      return e;
    if (auto e = parseOptimizerParams(*optimizer))
      return e;
    advance();
  }
  ir::Loss loss;
  loss.value = *value;
  loss.loc = loc;
  loss.trivia = std::move(trivia);
  module_->loss = std::move(loss);
  module_->optimizer = std::move(optimizer);
  lossLoc_ = loc;
  leadingTrivia_ = lastTrivia_ = &module_->loss->trivia;
  return llvm::Error::success();
}

llvm::Error Parser::parseGradient(ir::Trivia trivia) {
  ir::SourceLoc loc = tok().loc;
  advance(); // `gradient`
  if (kind() != TokenKind::Identifier)
    return unexpected("a variable name");
  ir::Value *named = module_->lookup(tok().text);
  if (!named)
    return errorAt(tok().loc, "use of undefined variable '" + tok().text + "'");
  if (!named->variable())
    return errorAt(tok().loc, "'" + tok().text + "' is not a variable");
  advance();
  if (auto e = expect(TokenKind::Equal, "'=' and the gradient's value"))
    return e;
  if (kind() != TokenKind::ValueName && kind() != TokenKind::Identifier)
    return unexpected("the gradient's value, such as %d.w1");
  auto value = resolveValue(tok());
  if (!value)
    return value.takeError();
  advance();
  ir::Gradient gradient;
  gradient.variable = named->variable();
  gradient.value = *value;
  gradient.loc = loc;
  gradient.trivia = std::move(trivia);
  module_->gradients.push_back(std::move(gradient));
  leadingTrivia_ = lastTrivia_ = &module_->gradients.back().trivia;
  return llvm::Error::success();
}

llvm::Error Parser::parseData(ir::Trivia trivia) {
  ir::SourceLoc loc = tok().loc;
  if (module_->data)
    return errorAt(loc, "the data is named twice (first at " + locString(module_->data->loc) + ")");
  advance(); // `data`
  if (kind() != TokenKind::String)
    return unexpected("the data set as a string, such as \"zipf:1000,tokens=20\" (the syntax of "
                      "--data)");
  std::string spec = Lexer::unescape(tok().text);
  if (spec.empty())
    return errorAt(tok().loc, "the data set is empty");
  module_->data = ir::DataDefault{std::move(spec), tok().loc, std::move(trivia)};
  advance();
  leadingTrivia_ = lastTrivia_ = &module_->data->trivia;
  return llvm::Error::success();
}

llvm::Error Parser::parseFunction(ir::Trivia trivia) {
  if (module_.get() != model_)
    return errorAt(tok().loc, "a function is defined in the model, not inside another function");
  advance(); // `func`
  if (kind() != TokenKind::FunctionName)
    return unexpected("a function name such as @cell");
  ir::Function function;
  function.name = tok().text.drop_front().str();
  function.loc = tok().loc;
  if (const ir::Function *earlier = model_->findFunction(function.name))
    return errorAt(tok().loc, "function '" + tok().text + "' is defined twice (first at " +
                                  locString(earlier->loc) + ")");
  advance();
  function.body = std::make_unique<ir::Module>(function.name);
  function.body->setSourceFile(file_);
  if (auto e = parseFunctionParams(function))
    return e;
  if (auto e = expect(TokenKind::Arrow, "'->' and the function's results"))
    return e;
  if (auto e = expect(TokenKind::LParen, "'(' and the function's results, such as (%h, %c)"))
    return e;
  std::vector<Token> results;
  for (;;) {
    if (kind() != TokenKind::ValueName && kind() != TokenKind::Identifier)
      return unexpected("a result of the function, such as %h");
    results.push_back(tok());
    advance();
    if (kind() != TokenKind::Comma)
      break;
    advance();
  }
  if (auto e = expect(TokenKind::RParen, "',' or ')'"))
    return e;
  if (kind() != TokenKind::LBrace)
    return unexpected("'{' and the function's body");
  advance();
  function.trivia = std::move(trivia);
  function.trivia.leadingComments.insert(function.trivia.leadingComments.end(),
                                         midComments_.begin(), midComments_.end());
  midComments_.clear();
  if (auto e = parseFunctionBody(function, results))
    return e;
  model_->functions.push_back(std::move(function));
  leadingTrivia_ = &model_->functions.back().trivia;
  lastTrivia_ = &model_->functions.back().closing;
  return llvm::Error::success();
}

// `(%x, %h, w)`: `%` parameters take any value, bare ones an input or a variable of the caller.
llvm::Error Parser::parseFunctionParams(ir::Function &function) {
  if (auto e = expect(TokenKind::LParen, "'(' and the function's parameters"))
    return e;
  llvm::StringMap<ir::SourceLoc> seen;
  for (;;) {
    if (kind() != TokenKind::ValueName && kind() != TokenKind::Identifier)
      return unexpected("a parameter such as %x (any value) or w (an input or a variable)");
    bool isValue = kind() == TokenKind::ValueName;
    std::string name = (isValue ? tok().text.drop_front() : tok().text).str();
    auto [it, fresh] = seen.try_emplace(name, tok().loc);
    if (!fresh)
      return errorAt(tok().loc, "parameter '" + tok().text + "' is declared twice (first at " +
                                    locString(it->second) + ")");
    ir::Input *param = function.body->addInput(name, ir::TensorType());
    param->value->setType(std::nullopt); // a body takes the types of each call
    param->loc = tok().loc;
    function.params.push_back(ir::FunctionParam{isValue, tok().loc});
    advance();
    if (kind() != TokenKind::Comma)
      break;
    advance();
  }
  return expect(TokenKind::RParen, "',' or ')'");
}

// The body's ops up to `}`, read with the body as the module (names are the body's own), then
// the results the header named.
llvm::Error Parser::parseFunctionBody(ir::Function &function, llvm::ArrayRef<Token> results) {
  std::unique_ptr<ir::Module> model = std::move(module_);
  module_ = std::move(function.body);
  llvm::StringMap<ir::SourceLoc> modelNames = std::move(definedAt_);
  definedAt_.clear();
  for (size_t i = 0; i < function.params.size(); ++i) {
    const ir::Input &param = *module_->inputs()[i];
    definedAt_[param.name()] = param.loc;
    if (function.params[i].isValue)
      valueParams_.insert(param.value.get());
  }
  // Whatever happens, the model is the module again afterwards.
  auto restore = [&](llvm::Error e) {
    function.body = std::move(module_);
    module_ = std::move(model);
    definedAt_ = std::move(modelNames);
    valueParams_.clear();
    return e;
  };
  lastTrivia_ = &function.trivia;
  for (;;) {
    ir::Trivia trivia = takeTrivia(lastTrivia_);
    if (kind() == TokenKind::RBrace) {
      function.closing.leadingComments = std::move(trivia.leadingComments);
      advance();
      break;
    }
    if (kind() != TokenKind::ValueName)
      return restore(unexpected("an op such as %y = relu(%x), or '}' ending @" + function.name));
    if (auto e = parseOpStatement(std::move(trivia)))
      return restore(std::move(e));
    leadingTrivia_->leadingComments.insert(leadingTrivia_->leadingComments.end(),
                                           midComments_.begin(), midComments_.end());
    midComments_.clear();
  }
  for (const Token &result : results) {
    auto value = resolveValue(result);
    if (!value)
      return restore(value.takeError());
    function.results.emplace_back(*value);
  }
  return restore(llvm::Error::success());
}

llvm::Expected<ir::Value *> Parser::resolveValue(const Token &t) {
  bool isResultRef = t.kind == TokenKind::ValueName;
  llvm::StringRef name = isResultRef ? t.text.drop_front() : t.text;
  ir::Value *value = module_->lookup(name);
  bool writtenWithPercent =
      value && (value->kind() == ir::ValueKind::OpResult || valueParams_.count(value));
  if (value && writtenWithPercent == isResultRef)
    return value;
  std::string message = "use of undefined value '" + t.text.str() + "'";
  if (value)
    message += "; did you mean '" + std::string(writtenWithPercent ? "%" : "") + name.str() + "'?";
  return errorAt(t.loc, message);
}

std::string Parser::freshName() {
  if (!numericNames_) {
    numericNames_.emplace();
    Lexer scan(text_);
    for (Token t = scan.next(); t.kind != TokenKind::EndOfFile; t = scan.next()) {
      if (t.kind != TokenKind::ValueName)
        continue;
      llvm::StringRef name = t.text.drop_front();
      if (llvm::all_of(name, llvm::isDigit))
        numericNames_->insert(name);
    }
  }
  for (;;) {
    std::string candidate = std::to_string(nextFresh_++);
    if (!module_->lookup(candidate) && !numericNames_->count(candidate))
      return candidate;
  }
}

llvm::Expected<int64_t> Parser::parseInteger(const Token &t) {
  int64_t value = 0;
  if (t.text.getAsInteger(10, value))
    return errorAt(t.loc, "integer literal out of range: " + describeToken(t));
  return value;
}

llvm::Expected<ir::Attr> Parser::parseAttrValue() {
  Token t = tok();
  switch (t.kind) {
  case TokenKind::Integer: {
    auto value = parseInteger(t);
    if (!value)
      return value.takeError();
    advance();
    return ir::Attr::integer(*value);
  }
  case TokenKind::Float: {
    std::string digits = t.text.str();
    double value = std::strtod(digits.c_str(), nullptr);
    if (std::isinf(value))
      return errorAt(t.loc, "float literal out of range: " + describeToken(t));
    advance();
    return ir::Attr::real(value);
  }
  case TokenKind::String:
    advance();
    return ir::Attr::string(Lexer::unescape(t.text));
  case TokenKind::Minus:
    advance();
    if (!isWord("inf"))
      return unexpected("a number after '-'");
    advance();
    return ir::Attr::real(-HUGE_VAL);
  case TokenKind::Identifier:
    if (t.text == "B")
      return errorAt(t.loc, "'B' stands for the batch only inside a list such as [B, 10]; "
                            "write \"B\" for the name");
    advance();
    if (t.text == "true" || t.text == "false")
      return ir::Attr::boolean(t.text == "true");
    if (t.text == "inf")
      return ir::Attr::real(HUGE_VAL);
    if (t.text == "nan")
      return ir::Attr::real(std::nan(""));
    return ir::Attr::string(t.text.str());
  case TokenKind::LBracket: {
    advance();
    llvm::SmallVector<int64_t, 4> items;
    if (kind() != TokenKind::RBracket) {
      for (;;) {
        if (kind() == TokenKind::Integer) {
          auto value = parseInteger(tok());
          if (!value)
            return value.takeError();
          items.push_back(*value);
        } else if (isWord("B")) {
          items.push_back(ir::kBatchDim);
        } else if (kind() == TokenKind::Question) {
          items.push_back(ir::kDynamicDim);
        } else {
          return unexpected("an integer, 'B' or '?'");
        }
        advance();
        if (kind() == TokenKind::RBracket)
          break;
        if (auto e = expect(TokenKind::Comma, "',' or ']'"))
          return std::move(e);
      }
    }
    advance();
    return ir::Attr::ints(items);
  }
  default:
    return unexpected("an attribute value (number, true, false, name, string or list)");
  }
}

llvm::Error Parser::parseAttrList(ir::AttrMap &out, TokenKind close, llvm::StringRef closeText,
                                  SpecialParam special) {
  if (kind() == close)
    return llvm::Error::success();
  for (;;) {
    if (kind() != TokenKind::Identifier)
      return unexpected("a parameter name");
    std::string name = tok().text.str();
    ir::SourceLoc loc = tok().loc;
    advance();
    if (auto e = expect(TokenKind::Equal, "'=' after '" + name + "'"))
      return e;
    auto taken = special ? special(name, loc) : llvm::Expected<bool>(false);
    if (!taken)
      return taken.takeError();
    if (!*taken) {
      auto value = parseAttrValue();
      if (!value)
        return value.takeError();
      if (out.has(name))
        return errorAt(loc, "'" + name + "' is given twice");
      out.set(name, std::move(*value));
    }
    if (kind() == close)
      return llvm::Error::success();
    if (auto e = expect(TokenKind::Comma, "',' or " + closeText))
      return e;
  }
}

// An optimizer's parameters are attributes, but for `schedule`, which has a grammar of its own.
llvm::Error Parser::parseOptimizerParams(ir::Optimizer &optimizer) {
  std::optional<ir::SourceLoc> scheduleAt;
  return parseAttrList(optimizer.params, TokenKind::RParen, "')'",
                       [&](const std::string &name, ir::SourceLoc loc) -> llvm::Expected<bool> {
                         if (name != ir::kScheduleParam)
                           return false;
                         if (scheduleAt)
                           return errorAt(loc, "'schedule' is given twice");
                         scheduleAt = loc;
                         if (auto e = parseSchedule(optimizer.schedule))
                           return std::move(e);
                         return true;
                       });
}

llvm::Error Parser::parseSchedule(std::vector<ir::SchedulePhase> &phases) {
  if (kind() != TokenKind::LBracket) {
    auto phase = parseSchedulePhase();
    if (!phase)
      return phase.takeError();
    phases.push_back(std::move(*phase));
    return llvm::Error::success();
  }
  advance();
  for (;;) {
    auto phase = parseSchedulePhase();
    if (!phase)
      return phase.takeError();
    phases.push_back(std::move(*phase));
    if (kind() == TokenKind::RBracket)
      break;
    if (auto e = expect(TokenKind::Comma, "',' or ']'"))
      return e;
  }
  advance();
  return llvm::Error::success();
}

llvm::Expected<ir::SchedulePhase> Parser::parseSchedulePhase() {
  if (kind() != TokenKind::Identifier)
    return unexpected("a schedule (" + ir::schedulePhaseNames() + ")");
  ir::SchedulePhase phase;
  phase.kind = tok().text.str();
  phase.loc = tok().loc;
  advance();
  if (kind() != TokenKind::LParen)
    return std::move(phase);
  advance();
  if (auto e = parseAttrList(phase.params, TokenKind::RParen, "')'"))
    return std::move(e);
  advance();
  return std::move(phase);
}

llvm::Expected<ir::TensorType> Parser::parseType() {
  ir::SourceLoc loc = tok().loc;
  ir::TensorType type;
  if (isWord("sparse")) {
    type.sparse = true;
    advance();
  }
  if (kind() != TokenKind::Identifier)
    return unexpected("a type such as f32[B, 784]");
  std::optional<ir::DType> dtype = ir::parseDType(tok().text);
  if (!dtype)
    return errorAt(tok().loc, "unknown element type " + describeToken(tok()) +
                                  " (expected f32, f64, i32, i64 or bool)");
  type.dtype = *dtype;
  advance();
  if (auto e = expect(TokenKind::LBracket, "'[' and the dimensions"))
    return std::move(e);
  if (kind() != TokenKind::RBracket) {
    for (;;) {
      if (kind() == TokenKind::Integer) {
        auto value = parseInteger(tok());
        if (!value)
          return value.takeError();
        if (*value < 0)
          return errorAt(tok().loc,
                         "a dimension cannot be negative, found " + describeToken(tok()));
        type.dims.push_back(*value);
      } else if (isWord("B")) {
        type.dims.push_back(ir::kBatchDim);
      } else if (kind() == TokenKind::Question) {
        type.dims.push_back(ir::kDynamicDim);
      } else {
        return unexpected("a dimension (an integer, 'B' or '?')");
      }
      advance();
      if (kind() == TokenKind::RBracket)
        break;
      if (auto e = expect(TokenKind::Comma, "',' or ']'"))
        return std::move(e);
    }
  }
  advance();
  // Same bound as the verifier's, checked here so a bad shape is reported where it is written.
  int64_t elements = 1;
  for (int64_t d : type.dims) {
    if (d <= 0)
      continue;
    if (elements > ir::kMaxElements / d)
      return errorAt(loc, "type " + type.str() + " is too large: more than 2^40 elements");
    elements *= d;
  }
  return type;
}

llvm::Expected<ir::TensorType> Parser::parseStandaloneType() {
  auto type = parseType();
  if (!type)
    return type.takeError();
  if (kind() != TokenKind::EndOfFile)
    return unexpected("the end of the type");
  return type;
}

} // namespace

llvm::Expected<std::unique_ptr<ir::Module>> parseModule(llvm::StringRef text,
                                                        llvm::StringRef fileName) {
  return Parser(text, fileName).parseFile();
}

llvm::Expected<std::unique_ptr<ir::Module>> parseModuleFile(llvm::StringRef path) {
  if (path == "-") {
    auto buffer = llvm::MemoryBuffer::getSTDIN();
    if (!buffer)
      return ir::makeError("cannot read standard input: " + buffer.getError().message());
    return parseModule((*buffer)->getBuffer(), "<stdin>");
  }
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return ir::makeError("cannot read " + path + ": " + buffer.getError().message());
  return parseModule((*buffer)->getBuffer(), path);
}

llvm::Expected<ir::TensorType> parseType(llvm::StringRef text) {
  auto type = Parser(text, "").parseStandaloneType();
  if (type)
    return type;
  std::string message;
  llvm::handleAllErrors(
      type.takeError(),
      [&](const ir::LocatedError &e) {
        message = e.text() + " (column " + std::to_string(e.loc().column) + ")";
      },
      [&](const llvm::ErrorInfoBase &e) { message = e.message(); });
  return ir::makeError("invalid type '" + text + "': " + message);
}

} // namespace prism::frontends
