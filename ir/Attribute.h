// Attribute values of ops, initializers and optimizers, and the ordered maps that hold them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace prism::ir {

enum class AttrKind : uint8_t { Int, Float, Bool, String, Ints };

llvm::StringRef attrKindName(AttrKind kind);
// `s` in double quotes with `"`, `\\` and newlines escaped, as the text format reads strings.
std::string quoted(llvm::StringRef s);

// One attribute value. Ints may hold kBatchDim (printed `B`) so shapes can name the batch.
// A String prints bare when it is an identifier (`padding = same`), quoted otherwise.
class Attr {
public:
  Attr() = default;
  static Attr integer(int64_t v);
  static Attr real(double v);
  static Attr boolean(bool v);
  static Attr string(std::string v);
  static Attr ints(llvm::ArrayRef<int64_t> v);

  AttrKind kind() const { return kind_; }
  int64_t getInt() const { return int_; }
  // A Float attribute, or an Int attribute read as a float.
  double getFloat() const { return kind_ == AttrKind::Int ? static_cast<double>(int_) : float_; }
  bool getBool() const { return bool_; }
  const std::string &getString() const { return string_; }
  llvm::ArrayRef<int64_t> getInts() const { return ints_; }

  bool operator==(const Attr &o) const;
  bool operator!=(const Attr &o) const { return !(*this == o); }

  // Text form, as the printer writes it.
  std::string str() const;

private:
  AttrKind kind_ = AttrKind::Int;
  int64_t int_ = 0;
  double float_ = 0;
  bool bool_ = false;
  std::string string_;
  std::vector<int64_t> ints_;
};

// Shortest decimal text that reads back as the same double (always has a `.` or exponent).
std::string formatDouble(double v);

// Attributes in insertion order; lookups are linear (an op has a handful).
class AttrMap {
public:
  using Entry = std::pair<std::string, Attr>;

  const Attr *find(llvm::StringRef name) const;
  bool has(llvm::StringRef name) const { return find(name) != nullptr; }
  void set(llvm::StringRef name, Attr value);
  void erase(llvm::StringRef name);

  int64_t getInt(llvm::StringRef name, int64_t dflt = 0) const;
  double getFloat(llvm::StringRef name, double dflt = 0) const;
  bool getBool(llvm::StringRef name, bool dflt = false) const;
  std::string getString(llvm::StringRef name, llvm::StringRef dflt = "") const;
  llvm::SmallVector<int64_t, 4> getInts(llvm::StringRef name) const;

  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }
  bool operator==(const AttrMap &o) const;
  bool operator!=(const AttrMap &o) const { return !(*this == o); }

private:
  std::vector<Entry> entries_;
};

} // namespace prism::ir
