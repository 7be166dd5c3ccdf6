// The module's use-lists and op order: every change to the module keeps them right.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "ir/Builder.h"
#include "ir/OpTable.h"

using namespace prism::ir;

namespace {

// Checks every use-list against the operands, the loss and the gradients.
void expectUseListsMatch(const Module &m) {
  std::vector<const Value *> values;
  for (const auto &input : m.inputs())
    values.push_back(input->value.get());
  for (const auto &variable : m.variables())
    values.push_back(variable->value.get());
  size_t operands = 0;
  for (const auto &op : m.ops()) {
    for (unsigned i = 0; i < op->numOperands(); ++i) {
      const Value *v = op->operand(i);
      auto uses = v->uses();
      EXPECT_EQ(std::count_if(uses.begin(), uses.end(),
                              [&](const OpUse &u) { return u.op == op.get() && u.operand == i; }),
                1)
          << op->name().str() << " operand " << i;
    }
    operands += op->numOperands();
    for (unsigned i = 0; i < op->numResults(); ++i)
      values.push_back(op->result(i));
  }
  size_t uses = 0, outside = 0;
  for (const Value *v : values) {
    uses += v->uses().size();
    outside += v->numUses() - v->uses().size();
  }
  EXPECT_EQ(uses, operands);
  EXPECT_EQ(outside, (m.loss ? 1u : 0u) + m.gradients.size());
}

struct Fixture {
  std::unique_ptr<Module> m = std::make_unique<Module>("m");
  Value *x, *w, *h, *y;
  Op *matmul, *relu;

  Fixture() {
    x = m->addInput("x", TensorType(DType::F32, {kBatchDim, 4}))->value.get();
    w = m->addVariable("w", TensorType(DType::F32, {4, 4}), {"zeros", {}})->value.get();
    matmul = m->createOp(getOp("matmul"), {x, w}, {}, {"h"});
    h = matmul->result();
    relu = m->createOp(getOp("relu"), {h}, {}, {"y"});
    y = relu->result();
    m->loss = Loss{y, {}, {}};
  }
};

TEST(ModuleUses, CreateOpRegistersEveryOperand) {
  Fixture f;
  ASSERT_EQ(f.x->uses().size(), 1u);
  EXPECT_EQ(f.x->uses()[0].op, f.matmul);
  EXPECT_EQ(f.x->uses()[0].operand, 0u);
  EXPECT_EQ(f.w->uses()[0].operand, 1u);
  ASSERT_EQ(f.h->users().size(), 1u);
  EXPECT_EQ(f.h->users().front(), f.relu);
  EXPECT_TRUE(f.y->readOutsideOps());
  EXPECT_EQ(f.y->numUses(), 1u);
  EXPECT_FALSE(f.y->uses().size());
  expectUseListsMatch(*f.m);
}

TEST(ModuleUses, SetOperandMovesTheUse) {
  Fixture f;
  Op *add = f.m->createOp(getOp("add"), {f.h, f.h}, {}, {"s"});
  EXPECT_EQ(f.h->uses().size(), 3u);
  EXPECT_EQ(f.h->users().size(), 2u); // once per op
  add->setOperand(1, f.x);
  EXPECT_EQ(f.h->uses().size(), 2u);
  EXPECT_EQ(f.x->uses().size(), 2u);
  add->setOperands({f.y, f.y});
  EXPECT_EQ(f.h->uses().size(), 1u);
  EXPECT_EQ(f.y->uses().size(), 2u);
  expectUseListsMatch(*f.m);
}

TEST(ModuleUses, ReplaceAllUsesMovesOperandsLossAndGradients) {
  Fixture f;
  Op *add = f.m->createOp(getOp("add"), {f.h, f.y}, {}, {"s"});
  f.m->gradients.push_back(Gradient{f.w->variable(), f.h, {}, {}});
  Op *neg = f.m->createOp(getOp("neg"), {f.h}, {}, {"n"});
  f.m->replaceAllUses(f.h, neg->result());
  EXPECT_FALSE(f.h->hasUses());
  EXPECT_EQ(f.relu->operand(0), neg->result());
  EXPECT_EQ(add->operand(0), neg->result());
  EXPECT_EQ(neg->operand(0), neg->result()); // a cycle the caller mends, as passes do
  EXPECT_EQ(f.m->gradients[0].value, neg->result());
  neg->setOperand(0, f.h);
  f.m->replaceAllUses(f.y, f.x);
  EXPECT_EQ(f.m->loss->value, f.x);
  expectUseListsMatch(*f.m);
}

TEST(ModuleUses, ReplaceUsesIfLeavesTheOthers) {
  Fixture f;
  Op *add = f.m->createOp(getOp("add"), {f.h, f.h}, {}, {"s"});
  f.m->gradients.push_back(Gradient{f.w->variable(), f.h, {}, {}});
  f.m->replaceUsesIf(f.h, f.x, [&](const OpUse &use) { return use.op == add; });
  EXPECT_EQ(add->operand(0), f.x);
  EXPECT_EQ(add->operand(1), f.x);
  EXPECT_EQ(f.relu->operand(0), f.h);
  EXPECT_EQ(f.m->gradients[0].value, f.h);
  expectUseListsMatch(*f.m);
}

TEST(ModuleUses, EraseOpDropsItsUses) {
  Fixture f;
  Op *dead = f.m->createOp(getOp("add"), {f.x, f.h}, {}, {"dead"});
  f.m->eraseOp(dead);
  EXPECT_EQ(f.x->uses().size(), 1u);
  EXPECT_EQ(f.h->uses().size(), 1u);
  EXPECT_EQ(f.m->lookup("dead"), nullptr);
  expectUseListsMatch(*f.m);
}

TEST(ModuleUses, GradientsCopiedAndErasedKeepCounts) {
  Fixture f;
  f.m->gradients.push_back(Gradient{f.w->variable(), f.h, {}, {}});
  f.m->gradients.push_back(Gradient{f.w->variable(), f.y, {}, {}});
  // Growth moves the entries: each stays registered once.
  for (int i = 0; i < 20; ++i)
    f.m->gradients.push_back(Gradient{f.w->variable(), f.x, {}, {}});
  EXPECT_EQ(f.x->numUses(), 21u);
  f.m->gradients.erase(f.m->gradients.begin());
  EXPECT_EQ(f.h->numUses(), 1u); // relu only
  f.m->gradients.clear();
  EXPECT_EQ(f.x->numUses(), 1u);
  EXPECT_EQ(f.y->numUses(), 1u); // the loss
  f.m->loss.reset();
  EXPECT_FALSE(f.y->hasUses());
}

TEST(ModuleUses, ValueUseOutlivingItsValueBecomesNull) {
  Loss kept;
  {
    Fixture f;
    kept = *f.m->loss;
    EXPECT_EQ(f.y->numUses(), 2u);
  }
  EXPECT_EQ(kept.value.get(), nullptr);
}

TEST(ModuleUses, CloneHasItsOwnUseLists) {
  Fixture f;
  f.m->gradients.push_back(Gradient{f.w->variable(), f.h, {}, {}});
  llvm::DenseMap<const Value *, Value *> map;
  auto copy = f.m->clone(&map);
  expectUseListsMatch(*copy);
  EXPECT_EQ(map[f.h]->users().size(), 1u);
  EXPECT_EQ(map[f.h]->numUses(), 2u);
  EXPECT_EQ(f.h->numUses(), 2u);
  f.m.reset();
  expectUseListsMatch(*copy);
}

TEST(ModuleOrder, IsBeforeFollowsInsertionsMovesAndErasures) {
  Fixture f;
  EXPECT_TRUE(f.matmul->isBefore(*f.relu));
  EXPECT_FALSE(f.relu->isBefore(*f.matmul));
  EXPECT_FALSE(f.relu->isBefore(*f.relu));
  // Many insertions at one place use up the room between numbers: still right.
  std::vector<Op *> inserted;
  for (int i = 0; i < 100; ++i)
    inserted.push_back(f.m->createOp(getOp("neg"), {f.h}, {}, {"n"}, f.relu));
  for (size_t i = 1; i < inserted.size(); ++i) {
    EXPECT_TRUE(inserted[i - 1]->isBefore(*inserted[i]));
    EXPECT_TRUE(f.matmul->isBefore(*inserted[i]));
    EXPECT_TRUE(inserted[i]->isBefore(*f.relu));
  }
  EXPECT_EQ(f.h->users().front(), inserted.front());
  EXPECT_EQ(f.h->users().back(), f.relu);
  f.m->moveOp(inserted.back(), inserted.front());
  EXPECT_TRUE(inserted.back()->isBefore(*inserted.front()));
  EXPECT_EQ(inserted.back()->next(), inserted.front());
  EXPECT_EQ(inserted.front()->prev(), inserted.back());
  f.m->eraseOp(inserted[50]);
  EXPECT_TRUE(inserted[49]->isBefore(*inserted[51]));
  EXPECT_EQ(inserted[49]->next(), inserted[51]);
  EXPECT_EQ(f.matmul->prev(), nullptr);
  EXPECT_EQ(f.relu->next(), nullptr);
}

TEST(ModuleNames, UniqueNameReusesFreedSuffixes) {
  Fixture f;
  Op *a = f.m->createOp(getOp("neg"), {f.h}, {}, {"n"});
  Op *b = f.m->createOp(getOp("neg"), {f.h}, {}, {"n"});
  Op *c = f.m->createOp(getOp("neg"), {f.h}, {}, {"n"});
  EXPECT_EQ(a->result()->name(), "n");
  EXPECT_EQ(b->result()->name(), "n.1");
  EXPECT_EQ(c->result()->name(), "n.2");
  f.m->eraseOp(b);
  EXPECT_EQ(f.m->uniqueName("n"), "n.1");
  EXPECT_EQ(f.m->createOp(getOp("neg"), {f.h}, {}, {"n"})->result()->name(), "n.1");
  EXPECT_EQ(f.m->uniqueName("n"), "n.3");
}

} // namespace
