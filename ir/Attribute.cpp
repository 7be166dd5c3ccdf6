// Attribute values and maps.
#include "ir/Attribute.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "ir/Type.h"

namespace prism::ir {

llvm::StringRef attrKindName(AttrKind kind) {
  switch (kind) {
  case AttrKind::Int:
    return "integer";
  case AttrKind::Float:
    return "number";
  case AttrKind::Bool:
    return "boolean";
  case AttrKind::String:
    return "name";
  case AttrKind::Ints:
    return "list of integers";
  }
  return "?";
}

Attr Attr::integer(int64_t v) {
  Attr a;
  a.kind_ = AttrKind::Int;
  a.int_ = v;
  return a;
}
Attr Attr::real(double v) {
  Attr a;
  a.kind_ = AttrKind::Float;
  a.float_ = v;
  return a;
}
Attr Attr::boolean(bool v) {
  Attr a;
  a.kind_ = AttrKind::Bool;
  a.bool_ = v;
  return a;
}
Attr Attr::string(std::string v) {
  Attr a;
  a.kind_ = AttrKind::String;
  a.string_ = std::move(v);
  return a;
}
Attr Attr::ints(llvm::ArrayRef<int64_t> v) {
  Attr a;
  a.kind_ = AttrKind::Ints;
  a.ints_.assign(v.begin(), v.end());
  return a;
}

bool Attr::operator==(const Attr &o) const {
  if (kind_ != o.kind_)
    return false;
  switch (kind_) {
  case AttrKind::Int:
    return int_ == o.int_;
  case AttrKind::Float:
    return float_ == o.float_ || (std::isnan(float_) && std::isnan(o.float_));
  case AttrKind::Bool:
    return bool_ == o.bool_;
  case AttrKind::String:
    return string_ == o.string_;
  case AttrKind::Ints:
    return ints_ == o.ints_;
  }
  return false;
}

std::string formatDouble(double v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".eE") == std::string::npos)
    s += ".0";
  return s;
}

static bool isIdentifier(llvm::StringRef s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_'))
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  });
}

std::string quoted(llvm::StringRef s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string Attr::str() const {
  switch (kind_) {
  case AttrKind::Int:
    return std::to_string(int_);
  case AttrKind::Float:
    return formatDouble(float_);
  case AttrKind::Bool:
    return bool_ ? "true" : "false";
  case AttrKind::String:
    // `true`, `false`, `B` and numbers would read back as other kinds: quote them.
    if (isIdentifier(string_) && string_ != "true" && string_ != "false" && string_ != "B" &&
        string_ != "nan" && string_ != "inf")
      return string_;
    return quoted(string_);
  case AttrKind::Ints: {
    std::string s = "[";
    for (size_t i = 0; i < ints_.size(); ++i) {
      if (i)
        s += ", ";
      s += dimString(ints_[i]);
    }
    return s + "]";
  }
  }
  return "";
}

const Attr *AttrMap::find(llvm::StringRef name) const {
  for (const Entry &e : entries_)
    if (e.first == name)
      return &e.second;
  return nullptr;
}

void AttrMap::set(llvm::StringRef name, Attr value) {
  for (Entry &e : entries_)
    if (e.first == name) {
      e.second = std::move(value);
      return;
    }
  entries_.emplace_back(name.str(), std::move(value));
}

void AttrMap::erase(llvm::StringRef name) {
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                [&](const Entry &e) { return e.first == name; }),
                 entries_.end());
}

int64_t AttrMap::getInt(llvm::StringRef name, int64_t dflt) const {
  const Attr *a = find(name);
  return a && a->kind() == AttrKind::Int ? a->getInt() : dflt;
}
double AttrMap::getFloat(llvm::StringRef name, double dflt) const {
  const Attr *a = find(name);
  return a && (a->kind() == AttrKind::Float || a->kind() == AttrKind::Int) ? a->getFloat() : dflt;
}
bool AttrMap::getBool(llvm::StringRef name, bool dflt) const {
  const Attr *a = find(name);
  return a && a->kind() == AttrKind::Bool ? a->getBool() : dflt;
}
std::string AttrMap::getString(llvm::StringRef name, llvm::StringRef dflt) const {
  const Attr *a = find(name);
  return a && a->kind() == AttrKind::String ? a->getString() : dflt.str();
}
llvm::SmallVector<int64_t, 4> AttrMap::getInts(llvm::StringRef name) const {
  const Attr *a = find(name);
  if (!a || a->kind() != AttrKind::Ints)
    return {};
  return llvm::SmallVector<int64_t, 4>(a->getInts().begin(), a->getInts().end());
}

bool AttrMap::operator==(const AttrMap &o) const {
  if (entries_.size() != o.entries_.size())
    return false;
  for (const Entry &e : entries_) {
    const Attr *other = o.find(e.first);
    if (!other || *other != e.second)
      return false;
  }
  return true;
}

} // namespace prism::ir
