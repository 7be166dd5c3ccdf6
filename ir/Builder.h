// The C++ builder API: builds the same Module the text format describes, with types inferred
// as ops are added. The first error is kept and returned by finish().
#pragma once

#include <memory>
#include <string>

#include "ir/Module.h"
#include "llvm/Support/Error.h"

namespace prism::ir {

class ModuleBuilder {
public:
  explicit ModuleBuilder(std::string name);

  Value *input(llvm::StringRef name, TensorType type);
  Value *variable(llvm::StringRef name, TensorType type, Initializer init = {"zeros", {}},
                  AttrMap attrs = {});
  // Adds an op; `name` names its first result (empty: numbered). Returns the first result,
  // or null for ops without results.
  Value *op(llvm::StringRef opName, llvm::ArrayRef<Value *> operands, AttrMap attrs = {},
            llvm::StringRef name = "");
  // Adds an op with several results, named in order.
  Op *opWithResults(llvm::StringRef opName, llvm::ArrayRef<Value *> operands, AttrMap attrs,
                    llvm::ArrayRef<std::string> names);
  void minimize(Value *loss, llvm::StringRef optimizer, AttrMap params);

  // Common ops, for readable model code.
  Value *matmul(Value *a, Value *b, llvm::StringRef name = "") {
    return op("matmul", {a, b}, {}, name);
  }
  Value *add(Value *a, Value *b, llvm::StringRef name = "") { return op("add", {a, b}, {}, name); }
  Value *relu(Value *x, llvm::StringRef name = "") { return op("relu", {x}, {}, name); }

  Module &module() { return *module_; }
  // Verifies and hands over the module, or the first error met while building.
  llvm::Expected<std::unique_ptr<Module>> finish();

private:
  void fail(llvm::Error e);
  std::unique_ptr<Module> module_;
  llvm::Error error_ = llvm::Error::success();
};

// Attribute maps in one expression: attrs({{"lr", Attr::real(0.1)}}).
AttrMap attrs(std::initializer_list<std::pair<const char *, Attr>> entries);

} // namespace prism::ir
