// The lexer of the text format: token kinds, locations, line breaks, comments, bad input.
#include <vector>

#include <gtest/gtest.h>

#include "frontends/text/Lexer.h"

using namespace prism::frontends;

namespace {

std::vector<Token> lexAll(llvm::StringRef text) {
  Lexer lexer(text);
  std::vector<Token> tokens;
  for (;;) {
    Token t = lexer.next();
    tokens.push_back(t);
    if (t.kind == TokenKind::EndOfFile || t.kind == TokenKind::Error)
      return tokens;
  }
}

} // namespace

TEST(Lexer, KindsTextAndLocations) {
  auto tokens = lexAll("%h = relu(x, axes = [B, ?], lr = -1e-05) : f32[2]\n  w1.b -3 \"s\"");
  std::vector<TokenKind> kinds;
  for (const Token &t : tokens)
    kinds.push_back(t.kind);
  using K = TokenKind;
  std::vector<TokenKind> expected = {
      K::ValueName,  K::Equal,      K::Identifier, K::LParen,     K::Identifier, K::Comma,
      K::Identifier, K::Equal,      K::LBracket,   K::Identifier, K::Comma,      K::Question,
      K::RBracket,   K::Comma,      K::Identifier, K::Equal,      K::Float,      K::RParen,
      K::Colon,      K::Identifier, K::LBracket,   K::Integer,    K::RBracket,   K::Identifier,
      K::Integer,    K::String,     K::EndOfFile};
  EXPECT_EQ(kinds, expected);
  EXPECT_EQ(tokens[0].text, "%h");
  EXPECT_EQ(tokens[16].text, "-1e-05");
  EXPECT_EQ(tokens[23].text, "w1.b");
  EXPECT_EQ(tokens[23].loc.line, 2);
  EXPECT_EQ(tokens[23].loc.column, 3);
  EXPECT_EQ(tokens[23].newlinesBefore, 1u);
  EXPECT_EQ(tokens[24].text, "-3");
  EXPECT_EQ(Lexer::unescape(tokens[25].text), "s");
}

TEST(Lexer, CommentsAreTokensWithTheirLineBreaks) {
  auto tokens = lexAll("a // one\n\n// two\nb");
  ASSERT_EQ(tokens.size(), 5u);
  EXPECT_EQ(tokens[1].kind, TokenKind::Comment);
  EXPECT_EQ(tokens[1].text, " one");
  EXPECT_EQ(tokens[1].newlinesBefore, 0u);
  EXPECT_EQ(tokens[2].kind, TokenKind::Comment);
  EXPECT_EQ(tokens[2].newlinesBefore, 2u);
  EXPECT_EQ(tokens[3].text, "b");
  EXPECT_EQ(tokens[3].newlinesBefore, 1u);
}

TEST(Lexer, NumbersAndMinus) {
  auto tokens = lexAll("0 12 1.5 2. 1e9 3E+2 -inf");
  EXPECT_EQ(tokens[0].kind, TokenKind::Integer);
  EXPECT_EQ(tokens[1].kind, TokenKind::Integer);
  EXPECT_EQ(tokens[2].kind, TokenKind::Float);
  EXPECT_EQ(tokens[3].kind, TokenKind::Float);
  EXPECT_EQ(tokens[4].kind, TokenKind::Float);
  EXPECT_EQ(tokens[5].kind, TokenKind::Float);
  EXPECT_EQ(tokens[6].kind, TokenKind::Minus);
  EXPECT_EQ(tokens[7].text, "inf");
}

TEST(Lexer, StringEscapes) {
  auto tokens = lexAll(R"("a\"b\\c\nd")");
  ASSERT_EQ(tokens[0].kind, TokenKind::String);
  EXPECT_EQ(Lexer::unescape(tokens[0].text), "a\"b\\c\nd");
}

TEST(Lexer, Errors) {
  auto last = [](llvm::StringRef text) { return lexAll(text).back(); };
  Token t = last("a \x01");
  EXPECT_EQ(t.kind, TokenKind::Error);
  EXPECT_EQ(t.message, "unexpected character '\\x01'");
  EXPECT_EQ(t.loc.column, 3);
  EXPECT_EQ(last("\xff").message, "unexpected character '\\xff'");
  EXPECT_EQ(last("$").message, "unexpected character '$'");
  EXPECT_EQ(last("@").message, "expected a function name after '@'");
  EXPECT_EQ(last("@1").message, "expected a function name after '@'");
  EXPECT_EQ(last("a / b").message, "unexpected character '/'");
  EXPECT_EQ(last("\"abc").message, "unterminated string");
  EXPECT_EQ(last("\"ab\ncd\"").message, "unterminated string");
  EXPECT_EQ(last("\"a\\qb\"").message,
            "unknown escape in string: 'q' after '\\' (accepted: \\\", \\\\, \\n)");
  EXPECT_EQ(last("\"a\\qb\"").loc.column, 3);
  EXPECT_EQ(last("% x").message, "expected a value name after '%'");
  EXPECT_EQ(last("784x").message, "invalid number '784x'");
  EXPECT_EQ(last("1.2.3").message, "invalid number '1.2.3'");
}

TEST(Lexer, FunctionNamesAndArrows) {
  auto tokens = lexAll("func @lstm_cell.v2(%x) -> (%y) x - inf");
  ASSERT_GE(tokens.size(), 11u);
  EXPECT_EQ(tokens[1].kind, TokenKind::FunctionName);
  EXPECT_EQ(tokens[1].text, "@lstm_cell.v2");
  EXPECT_EQ(tokens[5].kind, TokenKind::Arrow);
  EXPECT_EQ(tokens[9].kind, TokenKind::Identifier);
  EXPECT_EQ(tokens[10].kind, TokenKind::Minus);
}

TEST(Lexer, EndOfFileRepeats) {
  Lexer lexer("x");
  lexer.next();
  EXPECT_EQ(lexer.next().kind, TokenKind::EndOfFile);
  EXPECT_EQ(lexer.next().kind, TokenKind::EndOfFile);
}

TEST(Lexer, DescribeToken) {
  Token t;
  EXPECT_EQ(describeToken(t), "end of file");
  t.kind = TokenKind::LParen;
  t.text = "(";
  EXPECT_EQ(describeToken(t), "'('");
  EXPECT_EQ(describeByte('\''), "\"'\"");
}
