// The CPU executor.
#include "runtime/cpu/Executor.h"

#include <omp.h>

#include <cstdlib>
#include <cstring>

#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "runtime/BatchSplit.h"
#include "runtime/cpu/MemoryPlanner.h"
#include "runtime/reference/Initializers.h"
#include "llvm/ADT/DenseSet.h"

namespace prism::runtime::cpu {

namespace {

ir::TensorType bindBatch(const ir::TensorType &t, int64_t batch) {
  ir::TensorType out = t;
  for (int64_t &d : out.dims)
    if (d == ir::kBatchDim)
      d = batch;
  return out;
}

std::vector<int64_t> concreteShape(const ir::TensorType &t) {
  return std::vector<int64_t>(t.dims.begin(), t.dims.end());
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace

// The row ranges [begin, end) a PS shard holds (its `rows` attribute), or none.
static std::vector<std::pair<int64_t, int64_t>> shardRanges(const ir::Variable &var) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  const ir::Attr *rows = var.attrs.find("held_rows");
  if (!var.attrs.has("table_shape") || !rows || rows->kind() != ir::AttrKind::Ints)
    return ranges;
  for (size_t i = 0; i + 1 < rows->getInts().size(); i += 2)
    ranges.push_back({rows->getInts()[i], rows->getInts()[i + 1]});
  return ranges;
}

llvm::Error VariableStore::initialize(const ir::Module &module, uint64_t seed) {
  for (const auto &var : module.variables()) {
    if (values_.count(var->name()))
      continue;
    // Held by parameter servers: this task reads it through communication ops only.
    if (var->attrs.getString("placement") == "ps" && var->attrs.has("shards")) {
      values_[var->name()] = Tensor();
      continue;
    }
    // A shard: its rows of the whole table's initial value (which depends on the whole shape).
    auto ranges = shardRanges(*var);
    ir::TensorType initType = var->type();
    if (!ranges.empty()) {
      const auto &dims = var->attrs.find("table_shape")->getInts();
      initType = ir::TensorType(var->type().dtype, ir::Dims(dims.begin(), dims.end()));
    }
    auto value = reference::initialValue(var->init, initType, var->name(), seed);
    if (!value)
      return value.takeError();
    Tensor t(var->type().dtype, concreteShape(var->type()));
    std::vector<double> held;
    bool whole = !ranges.empty();
    if (whole) {
      int64_t rowElements = t.rank() ? t.numElements() / std::max<int64_t>(t.dim(0), 1) : 1;
      for (auto [begin, end] : ranges)
        held.insert(held.end(), value->data().begin() + begin * rowElements,
                    value->data().begin() + end * rowElements);
      if (static_cast<int64_t>(held.size()) != t.numElements())
        return ir::makeError("variable '" + var->name() + "': its rows " +
                             std::to_string(held.size() / std::max<int64_t>(rowElements, 1)) +
                             " do not match its shape " + var->type().str());
    }
    const std::vector<double> &src = whole ? held : value->data();
    switch (t.dtype()) {
    case ir::DType::F32:
      for (int64_t i = 0; i < t.numElements(); ++i)
        t.data<float>()[i] = static_cast<float>(src[i]);
      break;
    case ir::DType::F64:
      std::memcpy(t.raw(), src.data(), src.size() * sizeof(double));
      break;
    case ir::DType::I32:
      for (int64_t i = 0; i < t.numElements(); ++i)
        t.data<int32_t>()[i] = static_cast<int32_t>(src[i]);
      break;
    case ir::DType::I64:
      for (int64_t i = 0; i < t.numElements(); ++i)
        t.data<int64_t>()[i] = static_cast<int64_t>(src[i]);
      break;
    case ir::DType::Bool:
      for (int64_t i = 0; i < t.numElements(); ++i)
        t.data<uint8_t>()[i] = src[i] != 0;
      break;
    }
    values_[var->name()] = std::move(t);
  }
  return llvm::Error::success();
}

Tensor *VariableStore::find(llvm::StringRef name) {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

const Tensor *VariableStore::find(llvm::StringRef name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

// A program for one batch size: kernels, one arena, and a slot per value.
struct Executor::Program {
  int64_t batch = 0;
  std::shared_ptr<void> arena;
  size_t arenaBytes = 0;
  std::vector<RuntimeValue> slots; // by value index
  llvm::DenseMap<const ir::Value *, size_t> slotOf;
  std::vector<std::unique_ptr<Kernel>> kernels; // parallel to order_
  std::vector<std::vector<const RuntimeValue *>> inputs;
  std::vector<std::vector<RuntimeValue *>> outputs;
};

Executor::Executor(const ir::Module &module, std::shared_ptr<VariableStore> variables,
                   ExecutorOptions options)
    : module_(module), variables_(std::move(variables)), options_(std::move(options)) {}

Executor::~Executor() = default;

llvm::Expected<std::unique_ptr<Executor>> Executor::create(const ir::Module &module,
                                                           std::shared_ptr<VariableStore> variables,
                                                           ExecutorOptions options) {
  std::unique_ptr<Executor> exec(new Executor(module, std::move(variables), std::move(options)));
  if (auto err = exec->selectOps())
    return std::move(err);
  return exec;
}

// The tower an op belongs to (`device = "cpu:i"`), or -1 for the task's shared ops.
static int64_t towerOf(const ir::Op &op) {
  const ir::Attr *device = op.attrs.find(ir::kDeviceAttr);
  if (!device || device->kind() != ir::AttrKind::String)
    return -1;
  llvm::StringRef text = device->getString();
  int64_t index = -1;
  if (!text.consume_front("cpu:") || text.getAsInteger(10, index))
    return -1;
  return index;
}

llvm::Error Executor::selectOps() {
  for (const auto &op : module_.ops())
    towers_ = std::max(towers_, towerOf(*op) + 1);
  for (const auto &op : module_.ops())
    for (unsigned i = 0; i < op->numResults(); ++i)
      if (!op->result(i)->hasType())
        return ir::makeError(module_.sourceFile(), op->loc,
                             "the executor needs types: run infer-shapes first");
  if (options_.outputs.empty()) {
    // A training step: every op, variable writes last (they take effect at step end).
    for (const auto &op : module_.ops())
      if (!op->def().has(ir::kSideEffect))
        order_.push_back(op.get());
    for (const auto &op : module_.ops())
      if (op->def().has(ir::kSideEffect))
        order_.push_back(op.get());
    markSynchronization();
    return llvm::Error::success();
  }
  // An evaluation step: only what the outputs need, and no writes.
  llvm::DenseSet<const ir::Value *> needed;
  for (const std::string &name : options_.outputs) {
    const ir::Value *v = module_.lookup(name);
    if (!v)
      return ir::makeError("the model has no value named '" + name + "'");
    needed.insert(v);
    outputValues_[name] = v;
  }
  std::vector<const ir::Op *> reversed;
  for (auto it = module_.ops().rbegin(); it != module_.ops().rend(); ++it) {
    const ir::Op *op = it->get();
    bool feeds = false;
    for (unsigned i = 0; i < op->numResults(); ++i)
      feeds |= needed.count(op->result(i)) != 0;
    if (!feeds || op->def().has(ir::kSideEffect))
      continue;
    reversed.push_back(op);
    for (const ir::Value *v : op->operands())
      needed.insert(v);
  }
  order_.assign(reversed.rbegin(), reversed.rend());
  markSynchronization();
  return llvm::Error::success();
}

void Executor::markSynchronization() {
  // All-reduces may finish in the background: the first reader of any result of one waits.
  llvm::DenseSet<const ir::Value *> pending;
  syncBefore_.assign(order_.size(), false);
  for (size_t i = 0; i < order_.size(); ++i) {
    const ir::Op *op = order_[i];
    for (const ir::Value *v : op->operands())
      if (pending.count(v)) {
        syncBefore_[i] = true;
        pending.clear();
        break;
      }
    if (op->def().has(ir::kCommunication) && op->def().resultPerOperand)
      for (unsigned r = 0; r < op->numResults(); ++r)
        pending.insert(op->result(r));
  }
}

llvm::Expected<Executor::Program *> Executor::programFor(int64_t batch) {
  auto found = programs_.find(batch);
  if (found != programs_.end())
    return found->second.get();

  auto program = std::make_unique<Program>();
  program->batch = batch;
  // B of a tower's values is the tower's slice of the batch.
  auto bind = [&](const ir::Value *v) {
    int64_t tower = v->kind() == ir::ValueKind::OpResult ? towerOf(*v->definingOp()) : -1;
    return bindBatch(v->type(), tower < 0 ? batch : splitBatch(batch, tower, towers_).size);
  };
  auto slotFor = [&](const ir::Value *v) {
    auto [it, inserted] = program->slotOf.try_emplace(v, program->slots.size());
    if (inserted)
      program->slots.emplace_back();
    return it->second;
  };
  for (const ir::Op *op : order_) {
    for (const ir::Value *v : op->operands())
      slotFor(v);
    for (unsigned i = 0; i < op->numResults(); ++i)
      slotFor(op->result(i));
  }

  // Lifetimes of dense op results; kept values live to the end of the step.
  const int end = static_cast<int>(order_.size());
  llvm::DenseSet<const ir::Value *> kept;
  if (module_.loss)
    kept.insert(module_.loss->value);
  for (const auto &entry : outputValues_)
    kept.insert(entry.getValue());
  llvm::DenseMap<const ir::Value *, int> lastUse;
  for (int i = 0; i < end; ++i)
    for (const ir::Value *v : order_[i]->operands())
      lastUse[v] = i;
  std::vector<BufferRequest> requests;
  std::vector<const ir::Value *> planned;
  for (int i = 0; i < end; ++i) {
    const ir::Op *op = order_[i];
    for (unsigned r = 0; r < op->numResults(); ++r) {
      const ir::Value *v = op->result(r);
      if (v->type().sparse)
        continue;
      ir::TensorType t = bind(v);
      BufferRequest req;
      req.bytes = static_cast<size_t>(t.numElements() * ir::dtypeBytes(t.dtype));
      req.firstUse = i;
      auto lu = lastUse.find(v);
      req.lastUse = kept.count(v) ? end : lu == lastUse.end() ? i : std::max(i, lu->second);
      requests.push_back(req);
      planned.push_back(v);
    }
  }
  MemoryPlan plan = planMemory(requests);
  program->arenaBytes = plan.totalBytes;
  void *raw = std::aligned_alloc(64, std::max<size_t>(64, (plan.totalBytes + 63) / 64 * 64));
  if (!raw)
    return ir::makeError("cannot allocate " + std::to_string(plan.totalBytes) +
                         " bytes for the step's buffers");
  program->arena = std::shared_ptr<void>(raw, std::free);
  for (size_t i = 0; i < planned.size(); ++i) {
    ir::TensorType t = bind(planned[i]);
    RuntimeValue &slot = program->slots[program->slotOf[planned[i]]];
    slot.dense = Tensor::view(t.dtype, concreteShape(t), program->arena, plan.offsets[i]);
  }
  for (const ir::Op *op : order_)
    for (unsigned r = 0; r < op->numResults(); ++r)
      if (op->result(r)->type().sparse)
        program->slots[program->slotOf[op->result(r)]].sparse = true;

  for (const ir::Op *op : order_) {
    KernelFactory factory = findKernel(op->name());
    if (!factory)
      return ir::makeError(module_.sourceFile(), op->loc, "no CPU kernel for '" + op->name() + "'");
    KernelSpec spec;
    spec.op = op;
    spec.attrs = ir::withDefaults(op->def(), op->attrs);
    spec.threads = options_.threads;
    spec.batch = batch;
    spec.communication = options_.communication;
    std::vector<const RuntimeValue *> ins;
    std::vector<RuntimeValue *> outs;
    for (const ir::Value *v : op->operands()) {
      spec.inputTypes.push_back(bind(v));
      ins.push_back(&program->slots[program->slotOf[v]]);
    }
    for (unsigned r = 0; r < op->numResults(); ++r) {
      spec.outputTypes.push_back(bind(op->result(r)));
      outs.push_back(&program->slots[program->slotOf[op->result(r)]]);
    }
    auto kernel = factory(spec);
    if (!kernel)
      return ir::makeError(module_.sourceFile(), op->loc,
                           "'" + op->name() + "': " + llvm::toString(kernel.takeError()));
    program->kernels.push_back(std::move(*kernel));
    program->inputs.push_back(std::move(ins));
    program->outputs.push_back(std::move(outs));
  }
  Program *result = program.get();
  programs_[batch] = std::move(program);
  return result;
}

llvm::Error Executor::step(const Feeds &feeds) {
  // Bind B from the feeds and check every feed against its input's type.
  int64_t batch = -1;
  for (const auto &in : module_.inputs()) {
    auto it = feeds.find(in->name());
    if (it == feeds.end())
      return ir::makeError("no data fed for input '" + in->name() + "'");
    const ir::TensorType &type = in->type();
    const Tensor &t = it->second;
    bool ok = t.dtype() == type.dtype && static_cast<int64_t>(t.rank()) == type.rank();
    for (size_t d = 0; ok && d < t.rank(); ++d) {
      if (type.dims[d] == ir::kBatchDim) {
        if (batch < 0)
          batch = t.dim(d);
        ok = t.dim(d) == batch;
      } else {
        ok = t.dim(d) == type.dims[d];
      }
    }
    if (!ok)
      return ir::makeError("input '" + in->name() + "' expects " + type.str() + ", got " +
                           ir::dtypeName(t.dtype()).str() + shapeText(t.shape()) +
                           (batch >= 0 ? " (B = " + std::to_string(batch) + ")" : ""));
  }
  if (batch < 0)
    batch = 1;
  // Before kernels are built: oneDNN fixes a primitive's thread count when it is created.
  omp_set_num_threads(options_.threads);
  auto program = programFor(batch);
  if (!program)
    return program.takeError();
  Program &p = **program;
  for (const auto &in : module_.inputs()) {
    auto slot = p.slotOf.find(in->value.get());
    if (slot != p.slotOf.end())
      p.slots[slot->second].dense = feeds.at(in->name());
  }
  for (const auto &var : module_.variables()) {
    auto slot = p.slotOf.find(var->value.get());
    if (slot == p.slotOf.end())
      continue;
    Tensor *t = variables_->find(var->name());
    if (!t)
      return ir::makeError("variable '" + var->name() + "' has no value: initialize first");
    p.slots[slot->second].dense = *t; // aliases the store: updates are in place
  }
  Communication *communication = options_.communication;
  for (size_t i = 0; i < order_.size(); ++i) {
    if (communication && syncBefore_[i])
      if (auto err = communication->synchronize())
        return ir::makeError(module_.sourceFile(), order_[i]->loc,
                             "before '" + order_[i]->name() +
                                 "': " + llvm::toString(std::move(err)));
    if (auto err = p.kernels[i]->run(p.inputs[i], p.outputs[i])) {
      if (communication)
        llvm::consumeError(communication->synchronize());
      return ir::makeError(module_.sourceFile(), order_[i]->loc,
                           "'" + order_[i]->name() + "': " + llvm::toString(std::move(err)));
    }
  }
  if (communication)
    if (auto err = communication->synchronize())
      return err;
  loss_.reset();
  if (module_.loss) {
    auto slot = p.slotOf.find(module_.loss->value);
    if (slot != p.slotOf.end()) {
      const Tensor &t = p.slots[slot->second].dense;
      loss_ = t.dtype() == ir::DType::F64 ? *t.data<double>() : *t.data<float>();
    }
  }
  last_ = &p;
  return llvm::Error::success();
}

const RuntimeValue *Executor::output(llvm::StringRef name) const {
  auto it = outputValues_.find(name);
  if (it == outputValues_.end() || !last_)
    return nullptr;
  auto slot = last_->slotOf.find(it->getValue());
  return slot == last_->slotOf.end() ? nullptr : &last_->slots[slot->second];
}

size_t Executor::arenaBytes() const {
  size_t most = 0;
  for (const auto &entry : programs_)
    most = std::max(most, entry.second->arenaBytes);
  return most;
}

} // namespace prism::runtime::cpu
