// The lexer of the IR text format.
#include "frontends/text/Lexer.h"

#include "llvm/ADT/StringExtras.h"

namespace prism::frontends {
namespace {

bool isIdentStart(char c) {
  return llvm::isAlpha(c) || c == '_';
}
bool isNameChar(char c) {
  return llvm::isAlnum(c) || c == '_' || c == '.';
}

} // namespace

Token Lexer::make(TokenKind kind, size_t begin, ir::SourceLoc loc) {
  Token t;
  t.kind = kind;
  t.text = text_.slice(begin, pos_);
  t.loc = loc;
  t.newlinesBefore = newlines_;
  newlines_ = 0;
  return t;
}

Token Lexer::error(size_t begin, ir::SourceLoc loc, std::string message) {
  Token t = make(TokenKind::Error, begin, loc);
  t.message = std::move(message);
  return t;
}

Token Lexer::next() {
  // Skip whitespace, counting line breaks.
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == '\n') {
      ++pos_;
      ++line_;
      ++newlines_;
      lineStart_ = pos_;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      ++pos_;
    } else {
      break;
    }
  }
  size_t begin = pos_;
  ir::SourceLoc loc = locAt(begin);
  if (pos_ >= text_.size())
    return make(TokenKind::EndOfFile, begin, loc);

  char c = text_[pos_];
  char nextChar = pos_ + 1 < text_.size() ? text_[pos_ + 1] : '\0';
  if (c == '/' && nextChar == '/') {
    size_t end = text_.find('\n', pos_);
    pos_ = end == llvm::StringRef::npos ? text_.size() : end;
    Token t = make(TokenKind::Comment, begin, loc);
    t.text = t.text.drop_front(2);
    return t;
  }
  if (isIdentStart(c)) {
    while (pos_ < text_.size() && isNameChar(text_[pos_]))
      ++pos_;
    return make(TokenKind::Identifier, begin, loc);
  }
  if (c == '%') {
    ++pos_;
    if (pos_ >= text_.size() || !isNameChar(text_[pos_]))
      return error(begin, loc, "expected a value name after '%'");
    while (pos_ < text_.size() && isNameChar(text_[pos_]))
      ++pos_;
    return make(TokenKind::ValueName, begin, loc);
  }
  if (c == '@') {
    ++pos_;
    if (pos_ >= text_.size() || !isIdentStart(text_[pos_]))
      return error(begin, loc, "expected a function name after '@'");
    while (pos_ < text_.size() && isNameChar(text_[pos_]))
      ++pos_;
    return make(TokenKind::FunctionName, begin, loc);
  }
  if (llvm::isDigit(c) || (c == '-' && llvm::isDigit(nextChar)))
    return lexNumber(begin, loc);
  if (c == '"')
    return lexString(begin, loc);

  ++pos_;
  switch (c) {
  case '{':
    return make(TokenKind::LBrace, begin, loc);
  case '}':
    return make(TokenKind::RBrace, begin, loc);
  case '(':
    return make(TokenKind::LParen, begin, loc);
  case ')':
    return make(TokenKind::RParen, begin, loc);
  case '[':
    return make(TokenKind::LBracket, begin, loc);
  case ']':
    return make(TokenKind::RBracket, begin, loc);
  case ',':
    return make(TokenKind::Comma, begin, loc);
  case ':':
    return make(TokenKind::Colon, begin, loc);
  case '=':
    return make(TokenKind::Equal, begin, loc);
  case '?':
    return make(TokenKind::Question, begin, loc);
  case '-':
    if (pos_ < text_.size() && text_[pos_] == '>') {
      ++pos_;
      return make(TokenKind::Arrow, begin, loc);
    }
    return make(TokenKind::Minus, begin, loc);
  default:
    return error(begin, loc, "unexpected character " + describeByte(c));
  }
}

Token Lexer::lexNumber(size_t begin, ir::SourceLoc loc) {
  auto digits = [&] {
    while (pos_ < text_.size() && llvm::isDigit(text_[pos_]))
      ++pos_;
  };
  if (text_[pos_] == '-')
    ++pos_;
  digits();
  bool isFloat = false;
  if (pos_ < text_.size() && text_[pos_] == '.') {
    isFloat = true;
    ++pos_;
    digits();
  }
  if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    size_t p = pos_ + 1;
    if (p < text_.size() && (text_[p] == '+' || text_[p] == '-'))
      ++p;
    if (p < text_.size() && llvm::isDigit(text_[p])) {
      isFloat = true;
      pos_ = p;
      digits();
    }
  }
  // `3x` or `1.2.3` is one malformed word, not a number followed by a name.
  if (pos_ < text_.size() && isNameChar(text_[pos_])) {
    while (pos_ < text_.size() && isNameChar(text_[pos_]))
      ++pos_;
    std::string word = text_.slice(begin, pos_).take_front(40).str();
    return error(begin, loc, "invalid number '" + word + "'");
  }
  return make(isFloat ? TokenKind::Float : TokenKind::Integer, begin, loc);
}

Token Lexer::lexString(size_t begin, ir::SourceLoc loc) {
  ++pos_; // the opening quote
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == '"') {
      ++pos_;
      return make(TokenKind::String, begin, loc);
    }
    if (c == '\n')
      break;
    if (c == '\\') {
      ir::SourceLoc escapeLoc = locAt(pos_);
      char e = pos_ + 1 < text_.size() ? text_[pos_ + 1] : '\0';
      if (e != '"' && e != '\\' && e != 'n') {
        ++pos_;
        return error(begin, escapeLoc,
                     "unknown escape in string: " + describeByte(e) +
                         " after '\\' (accepted: \\\", \\\\, \\n)");
      }
      pos_ += 2;
      continue;
    }
    ++pos_;
  }
  return error(begin, loc, "unterminated string");
}

std::string Lexer::unescape(llvm::StringRef quoted) {
  llvm::StringRef body = quoted.drop_front().drop_back();
  std::string out;
  out.reserve(body.size());
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] == '\\' && i + 1 < body.size()) {
      ++i;
      out += body[i] == 'n' ? '\n' : body[i];
      continue;
    }
    out += body[i];
  }
  return out;
}

std::string describeByte(unsigned char byte) {
  if (byte < 0x20 || byte >= 0x7f) {
    static const char hex[] = "0123456789abcdef";
    return std::string("'\\x") + hex[byte >> 4] + hex[byte & 15] + "'";
  }
  if (byte == '\'')
    return "\"'\"";
  return std::string("'") + static_cast<char>(byte) + "'";
}

std::string describeToken(const Token &token) {
  switch (token.kind) {
  case TokenKind::EndOfFile:
    return "end of file";
  case TokenKind::String:
    return "a string";
  case TokenKind::Comment:
    return "a comment";
  default:
    break;
  }
  llvm::StringRef text = token.text;
  if (text.size() > 40)
    return "'" + text.take_front(40).str() + "...'";
  return "'" + text.str() + "'";
}

} // namespace prism::frontends
