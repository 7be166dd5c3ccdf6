// Shared pieces for op definitions: shape-rule checks, broadcasting, default costs, and
// the registration functions of each op family. Only ir/ops/ includes this.
#pragma once

#include <vector>

#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "llvm/ADT/Twine.h"

namespace prism::ir::ops {

using Types = llvm::SmallVector<TensorType, 1>;
using ShapeResult = llvm::Expected<Types>;

inline llvm::Error shapeError(const llvm::Twine &msg) {
  return makeError(msg);
}

// Numpy broadcasting, aligned at the last dimension; `B` only matches `B` or 1.
llvm::Expected<Dims> broadcastDims(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

llvm::Error expectDense(const TensorType &t, llvm::StringRef what);
llvm::Error expectFloat(const TensorType &t, llvm::StringRef what);
llvm::Error expectInteger(const TensorType &t, llvm::StringRef what);
llvm::Error expectRank(const TensorType &t, int64_t rank, llvm::StringRef what);
llvm::Error expectSameType(const TensorType &a, const TensorType &b, llvm::StringRef what);

// Normalizes `axis` (may be negative) for a rank; error when out of range.
llvm::Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank);

// Element count with B bound to `batch` (sparse: `?` bound to `batch` rows as a guess).
double elements(const TensorType &t, int64_t batch);
double bytesOf(const TensorType &t, int64_t batch);
// Reads every operand and writes every result once; one flop per result element.
OpCost elementwiseCost(llvm::ArrayRef<TensorType> operands, llvm::ArrayRef<TensorType> results,
                       const AttrMap &attrs, int64_t batch);

// Emits sum_like(g, ref) unless g already has ref's shape.
Value *sumLike(GradientContext &ctx, Value *g, Value *ref);

// An op-table entry with the fields most ops set; the caller sets the rest on the result.
OpDef makeOp(const char *name, const char *summary, std::vector<std::string> operands,
             ShapeRule shape, GradRule grad = nullptr, std::vector<AttrSpec> attrs = {},
             uint32_t traits = 0);

AttrSpec attr(const char *name, AttrKind kind, const char *doc);            // required
AttrSpec attr(const char *name, AttrKind kind, Attr dflt, const char *doc); // optional
// Optional without a default: absent means the attribute's feature is off.
AttrSpec optionalAttr(const char *name, AttrKind kind, const char *doc);

void registerElementwiseOps(std::vector<OpDef> &table);
void registerNeuralNetOps(std::vector<OpDef> &table);
void registerConvOps(std::vector<OpDef> &table);
void registerShapeOps(std::vector<OpDef> &table);
void registerSparseOps(std::vector<OpDef> &table);
void registerOptimizerOps(std::vector<OpDef> &table);
void registerCommunicationOps(std::vector<OpDef> &table);
void registerCallOps(std::vector<OpDef> &table);
void registerTrainingModeOps(std::vector<OpDef> &table); // dropout
// After the others: fused ops copy the operands and attributes of the ops they fuse.
void registerFusedOps(std::vector<OpDef> &table);

} // namespace prism::ir::ops
