// Splits the IR text format into tokens; comments and line breaks are tokens' data too, so the
// parser can keep them for the printer.
#pragma once

#include <cstdint>
#include <string>

#include "ir/Diagnostic.h"
#include "llvm/ADT/StringRef.h"

namespace prism::frontends {

enum class TokenKind : uint8_t {
  EndOfFile,
  Error,        // text is the message; loc is where the bad input starts
  Identifier,   // input, w1, f32, relu, true, B ...: keywords are ordinary identifiers
  ValueName,    // %h (text includes the `%`)
  FunctionName, // @lstm_cell (text includes the `@`)
  Integer,      // 784, -1
  Float,        // 0.001, -1e-05
  String,       // "text" (text includes the quotes; escapes are checked)
  Comment,      // text is what follows `//` on the line
  LBrace,
  RBrace,
  LParen,
  RParen,
  LBracket,
  RBracket,
  Comma,
  Colon,
  Equal,
  Question,
  Minus, // only before `inf`: `-1` lexes as one Integer
  Arrow, // `->`, between a function's parameters and its results
};

struct Token {
  TokenKind kind = TokenKind::EndOfFile;
  llvm::StringRef text;
  ir::SourceLoc loc;
  unsigned newlinesBefore = 0; // line breaks between the previous token and this one
  std::string message;         // for Error tokens
};

class Lexer {
public:
  explicit Lexer(llvm::StringRef text) : text_(text) {}

  // The next token; after the end of the input, EndOfFile again and again.
  Token next();

  // The value of a String token's text (quotes removed, escapes resolved).
  static std::string unescape(llvm::StringRef quoted);

private:
  ir::SourceLoc locAt(size_t pos) const { return {line_, static_cast<int>(pos - lineStart_) + 1}; }
  Token make(TokenKind kind, size_t begin, ir::SourceLoc loc);
  Token error(size_t begin, ir::SourceLoc loc, std::string message);
  Token lexNumber(size_t begin, ir::SourceLoc loc);
  Token lexString(size_t begin, ir::SourceLoc loc);

  llvm::StringRef text_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t lineStart_ = 0;
  unsigned newlines_ = 0;
};

// How a token reads in a message: `'('`, `'%h'`, `end of file`.
std::string describeToken(const Token &token);

// `'\x01'` for bytes that do not print, `'@'` otherwise.
std::string describeByte(unsigned char byte);

} // namespace prism::frontends
