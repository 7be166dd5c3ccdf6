// Dependency slices: backward through operands, forward through uses, with filters.
#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "ir/Slice.h"

using namespace prism::ir;

namespace {

// x -> a = neg(x) -> b = add(a, w) -> c = relu(b);  d = neg(w) reads no input.
struct Chain {
  ModuleBuilder builder{"m"};
  Value *x, *w, *a, *b, *c, *d;
  Chain() {
    x = builder.input("x", TensorType(DType::F32, {4}));
    w = builder.variable("w", TensorType(DType::F32, {4}));
    a = builder.op("neg", {x}, {}, "a");
    b = builder.add(a, w, "b");
    c = builder.relu(b, "c");
    d = builder.op("neg", {w}, {}, "d");
  }
};

TEST(Slice, BackwardTakesEverythingAValueDependsOn) {
  Chain g;
  OpSet slice = backwardSlice({g.c});
  EXPECT_EQ(slice.size(), 3u);
  EXPECT_TRUE(slice.count(g.a->definingOp()));
  EXPECT_FALSE(slice.count(g.d->definingOp()));
  std::vector<Op *> ordered = inProgramOrder(g.builder.module(), slice);
  ASSERT_EQ(ordered.size(), 3u);
  EXPECT_EQ(ordered.front(), g.a->definingOp());
  EXPECT_EQ(ordered.back(), g.c->definingOp());
}

TEST(Slice, BackwardStopsWhereTheFilterRefuses) {
  Chain g;
  OpSet slice = backwardSlice({g.c}, [&](const Op &op) { return &op != g.b->definingOp(); });
  EXPECT_EQ(slice.size(), 1u); // c only: b is refused, so a is never reached
  addBackwardSlice(llvm::ArrayRef<const Value *>{g.d}, slice);
  EXPECT_EQ(slice.size(), 2u);
  addBackwardSlice(llvm::ArrayRef<const Op *>{g.b->definingOp()}, slice);
  EXPECT_EQ(slice.size(), 4u);
}

TEST(Slice, ForwardTakesEverythingThatReadsAValue) {
  Chain g;
  OpSet fromX = forwardSlice({g.x});
  EXPECT_EQ(fromX.size(), 3u);
  EXPECT_FALSE(fromX.count(g.d->definingOp()));
  EXPECT_EQ(forwardSlice({g.w}).size(), 3u); // b, c and d
}

} // namespace
