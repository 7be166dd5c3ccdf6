// One shard of a variable placed on a parameter server: rows [rowBegin, rowEnd) of a variable of
// shape `fullShape` (rank 1 or more; the rows are its first dimension).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/Diagnostic.h"
#include "ir/Type.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::ps {

struct PsShard {
  std::string name;
  ir::DType dtype = ir::DType::F32;
  int64_t rowBegin = 0;
  int64_t rowEnd = 0;
  std::vector<int64_t> fullShape;

  int64_t rows() const { return rowEnd - rowBegin; }
  bool ownsRow(int64_t globalRow) const { return globalRow >= rowBegin && globalRow < rowEnd; }
  // The shard's own shape: [rows(), fullShape[1:]...].
  std::vector<int64_t> shape() const {
    std::vector<int64_t> s = fullShape;
    s[0] = rows();
    return s;
  }
  // The shape of one row, fullShape[1:].
  std::vector<int64_t> rowShape() const { return {fullShape.begin() + 1, fullShape.end()}; }
  // Elements in one row.
  int64_t rowElements() const {
    int64_t n = 1;
    for (size_t i = 1; i < fullShape.size(); ++i)
      n *= fullShape[i];
    return n;
  }

  llvm::Error verify() const {
    if (name.empty())
      return ir::makeError("a parameter-server shard has no variable name");
    if (fullShape.empty())
      return ir::makeError("shard of " + name + ": a sharded variable needs rank 1 or more");
    for (int64_t d : fullShape)
      if (d < 0)
        return ir::makeError("shard of " + name + ": negative dimension in its shape");
    if (rowBegin < 0 || rowBegin > rowEnd || rowEnd > fullShape[0])
      return ir::makeError("shard of " + name + ": rows [" + llvm::Twine(rowBegin) + ", " +
                           llvm::Twine(rowEnd) + ") are not within [0, " +
                           llvm::Twine(fullShape[0]) + ")");
    return llvm::Error::success();
  }
};

} // namespace prism::runtime::ps
