// The executor: ops in step order, programs per batch size, arenas from the device.
#include "runtime/exec/Executor.h"

#include <map>

#include "ir/Diagnostic.h"
#include "ir/OpTable.h"
#include "runtime/BatchSplit.h"
#include "runtime/exec/AccumulationSplit.h"
#include "runtime/exec/MemoryPlanner.h"
#include "runtime/reference/Tensor.h"
#include "support/Memory.h"
#include "llvm/ADT/DenseSet.h"

namespace prism::runtime {

namespace {

std::vector<int64_t> concreteShape(const ir::TensorType &t) {
  return std::vector<int64_t>(t.dims.begin(), t.dims.end());
}

// The tower an op belongs to (the index of the device it is pinned to), or -1 for the task's
// shared ops.
int64_t towerOf(const ir::Op &op) {
  std::optional<ir::DeviceId> device = ir::opDevice(op);
  return device ? device->index : -1;
}

// A collective whose result r is operand r combined over the group (all_reduce): it may finish
// in the background, and it may run in place.
bool isCollective(const ir::Op &op) {
  return op.def().has(ir::kCommunication) && op.def().resultPerOperand;
}

} // namespace

// A program for one batch size: kernels, an arena per device, and a slot per value (and per
// copy of a value on another device than its own).
struct Executor::Program {
  // A value read on a device other than its own: `to`, on `device`, is a copy of `from`, made
  // from `source` (null: a feed, from the host).
  struct Mirror {
    const ir::Value *value;
    size_t from, to;
    Device *device, *source;
  };

  int64_t batch = 0;
  std::vector<std::shared_ptr<void>> arenas;
  std::vector<size_t> arenaBytes;  // parallel to Executor::devices()
  std::vector<RuntimeValue> slots; // by value index, then the mirrors
  llvm::DenseMap<const ir::Value *, size_t> slotOf;
  llvm::DenseMap<std::pair<const ir::Value *, Device *>, size_t> mirrorOf; // the slot
  std::vector<std::vector<Mirror>> mirrorsBefore; // parallel to order_: copies its op awaits
  std::vector<Mirror> feedMirrors;
  std::vector<std::unique_ptr<Kernel>> kernels; // parallel to order_
  std::vector<std::vector<const RuntimeValue *>> inputs;
  std::vector<std::vector<RuntimeValue *>> outputs;

  // Steps as CUDA graphs (ExecutorOptions::captureSteps): runs of capturable ops of one device,
  // each recorded once (again when the memory its kernels use moved) and replayed.
  struct Segment {
    size_t begin = 0, end = 0;
    bool checksFirst = false; // holds an op before which flags raised earlier are checked
    std::unique_ptr<CapturedWork> work;
    std::vector<int64_t> bound; // the memory its kernels were recorded over: addresses, sizes
    std::string failed;         // why recording failed (it then runs op by op)
  };
  int64_t runs = 0; // full steps run
  bool planned = false;
  std::vector<Segment> segments;
  std::vector<int> segmentAt;           // parallel to order_: the segment starting there, or -1
  std::vector<std::string> notCaptured; // the ops outside the segments, and why
  int64_t captures = 0, replays = 0;

  // Kernels that ran since the last wait for the communication and finish after it
  // (Kernel::finishesAfterCommunication), in order.
  std::vector<size_t> unfinished;

  RuntimeValue &slot(const ir::Value *v) { return slots[slotOf.find(v)->second]; }
  // `v` as an op on `device` reads it: its slot, or its copy there.
  RuntimeValue &slotOn(const ir::Value *v, Device *device) {
    auto mirror = mirrorOf.find({v, device});
    return mirror == mirrorOf.end() ? slot(v) : slots[mirror->second];
  }
};

Executor::Executor(const ir::Module &module, std::shared_ptr<VariableStore> variables,
                   ExecutorOptions options, std::unique_ptr<Device> device)
    : module_(module), variables_(std::move(variables)), options_(std::move(options)),
      device_(std::move(device)) {
  context_.mode = options_.mode;
  context_.seed = options_.seed;
}

Executor::~Executor() = default;

llvm::Expected<std::unique_ptr<Executor>> Executor::create(const ir::Module &module,
                                                           std::shared_ptr<VariableStore> variables,
                                                           ExecutorOptions options) {
  if (options.tf32 && options.device.kind == ir::DeviceKind::Cpu)
    return ir::makeError("--tf32 makes a GPU's float32 matrix products use TF32; this program "
                         "runs on " +
                         options.device.str() + ", not a GPU");
  DeviceOptions deviceOptions;
  deviceOptions.threads = options.threads;
  auto device = createDevice(options.device, deviceOptions);
  if (!device)
    return device.takeError();
  std::unique_ptr<Executor> exec(
      new Executor(module, std::move(variables), std::move(options), std::move(*device)));
  if (auto err = exec->selectOps())
    return std::move(err);
  if (auto err = exec->createTowerDevices(deviceOptions))
    return std::move(err);
  if (auto err = exec->checkCapture())
    return std::move(err);
  if (auto err = checkKernels(module, exec->device_->id().kind))
    return ir::withNote(std::move(err), "the program runs on " + exec->device_->id().str());
  return exec;
}

// A device per tower: towerDevices names one per tower of the module, each made once (towers
// naming one device share it).
llvm::Error Executor::createTowerDevices(const DeviceOptions &options) {
  const std::vector<ir::DeviceId> &ids = options_.towerDevices;
  if (ids.empty())
    return llvm::Error::success();
  std::string listed;
  for (const ir::DeviceId &id : ids)
    listed += (listed.empty() ? "" : ", ") + id.str();
  if (static_cast<int64_t>(ids.size()) != towers_)
    return ir::makeError("the program has " + std::to_string(towers_) + " tower" +
                         (towers_ == 1 ? "" : "s") + ", but the devices " + listed + " were given");
  for (const ir::DeviceId &id : ids) {
    if (id.kind != device_->id().kind)
      return ir::makeError(ir::ErrorCode::Unsupported, "the towers' devices " + listed + " mix " +
                                                           ir::deviceKindName(device_->id().kind) +
                                                           " and " + ir::deviceKindName(id.kind) +
                                                           ": a task's towers run on one kind");
    Device *found = id == device_->id() ? device_.get() : nullptr;
    for (const auto &other : otherDevices_)
      if (other->id() == id)
        found = other.get();
    if (!found) {
      auto device = createDevice(id, options);
      if (!device)
        return device.takeError();
      otherDevices_.push_back(std::move(*device));
      found = otherDevices_.back().get();
    }
    towerDevice_.push_back(found);
  }
  return llvm::Error::success();
}

// --cuda-graphs needs devices that capture, and steps that replay as they were recorded.
llvm::Error Executor::checkCapture() const {
  if (!options_.captureSteps)
    return llvm::Error::success();
  for (Device *device : devices())
    if (!device->canCapture())
      return ir::makeError("--cuda-graphs records a GPU's kernels as CUDA graphs; this program "
                           "runs on " +
                           device->id().str() + ", not a GPU");
  if (options_.trace)
    return ir::makeError("--cuda-graphs and --trace: a traced step times each op, which a "
                         "replayed graph does not show; give one of them");
  if (options_.accumulate)
    return ir::makeError("--cuda-graphs and --accumulate: accumulated steps are not captured; "
                         "give one of them");
  return llvm::Error::success();
}

std::vector<Device *> Executor::devices() const {
  std::vector<Device *> all{device_.get()};
  for (const auto &other : otherDevices_)
    all.push_back(other.get());
  return all;
}

// Where `op` runs: its tower's device, or the task's.
Device &Executor::deviceOf(const ir::Op &op) const {
  int64_t tower = towerOf(op);
  if (tower < 0 || towerDevice_.empty())
    return *device_;
  return *towerDevice_[static_cast<size_t>(tower)];
}

// Where `v` lives: with the op that computes it; feeds and variables on the task's device.
Device &Executor::homeOf(const ir::Value *v) const {
  if (v->kind() == ir::ValueKind::OpResult)
    return deviceOf(*v->definingOp());
  return *device_;
}

llvm::Error Executor::selectOps() {
  for (const auto &op : module_.ops())
    towers_ = std::max(towers_, towerOf(*op) + 1);
  for (const auto &op : module_.ops())
    for (unsigned i = 0; i < op->numResults(); ++i)
      if (!op->result(i)->hasType())
        return ir::makeError(module_.sourceFile(), op->loc,
                             "the executor needs types: run infer-shapes first");
  if (!options_.outputs.empty())
    return selectEvaluationOps();
  if (options_.accumulate)
    return selectAccumulationOps();
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

// A step in two parts: the micro-step, then the step part with variable writes last.
llvm::Error Executor::selectAccumulationOps() {
  auto split = splitForAccumulation(module_);
  if (!split)
    return split.takeError();
  accumulating_ = true;
  order_ = split->microOps;
  microEnd_ = order_.size();
  for (bool writes : {false, true})
    for (const ir::Op *op : split->stepOps)
      if (op->def().has(ir::kSideEffect) == writes)
        order_.push_back(op);
  accumulated_ = split->accumulated;
  keptAcrossMicroBatches_ = split->kept;
  accumulators_.resize(accumulated_.size());
  markSynchronization();
  return llvm::Error::success();
}

// An evaluation step: only what the outputs need, and no writes.
llvm::Error Executor::selectEvaluationOps() {
  llvm::DenseSet<const ir::Value *> needed;
  for (const std::string &name : options_.outputs) {
    const ir::Value *v = module_.lookup(name);
    if (!v)
      return ir::makeError(ir::ErrorCode::NotFound, "the model has no value named '" + name + "'");
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
  checkBefore_.assign(order_.size(), false);
  for (size_t i = 0; i < order_.size(); ++i) {
    const ir::Op *op = order_[i];
    // What the kernels before flagged is checked before state is written or leaves the task.
    checkBefore_[i] = op->def().has(ir::kSideEffect) || op->def().has(ir::kCommunication);
    for (const ir::Value *v : op->operands())
      if (pending.count(v)) {
        syncBefore_[i] = true;
        pending.clear();
        break;
      }
    if (isCollective(*op))
      for (unsigned r = 0; r < op->numResults(); ++r)
        pending.insert(op->result(r));
  }
}

// B of a tower's values is the tower's slice of the batch.
ir::TensorType Executor::boundType(const ir::Value *v, int64_t batch) const {
  int64_t tower = v->kind() == ir::ValueKind::OpResult ? towerOf(*v->definingOp()) : -1;
  int64_t b = tower < 0 ? batch : splitBatch(batch, tower, towers_).size;
  ir::TensorType out = v->type();
  for (int64_t &d : out.dims)
    if (d == ir::kBatchDim)
      d = b;
  return out;
}

llvm::Expected<Executor::Program *> Executor::programFor(int64_t batch) {
  auto found = programs_.find(batch);
  if (found != programs_.end())
    return found->second.get();
  auto program = std::make_unique<Program>();
  program->batch = batch;
  auto slotFor = [&](const ir::Value *v) {
    if (program->slotOf.try_emplace(v, program->slots.size()).second)
      program->slots.emplace_back();
  };
  for (const ir::Op *op : order_) {
    for (const ir::Value *v : op->operands())
      slotFor(v);
    for (unsigned i = 0; i < op->numResults(); ++i)
      slotFor(op->result(i));
  }
  planMirrors(*program);
  if (auto err = planArena(*program))
    return std::move(err);
  if (auto err = buildKernels(*program))
    return std::move(err);
  Program *result = program.get();
  programs_[batch] = std::move(program);
  return result;
}

// A slot on each other device that reads a value, copied before its first reader there (a
// feed's, from the host when the step's feeds are bound).
void Executor::planMirrors(Program &program) {
  program.mirrorsBefore.assign(order_.size(), {});
  for (size_t i = 0; i < order_.size(); ++i) {
    Device *device = &deviceOf(*order_[i]);
    for (const ir::Value *v : order_[i]->operands()) {
      Device *home = &homeOf(v);
      if (home == device || !program.mirrorOf.try_emplace({v, device}, program.slots.size()).second)
        continue;
      Program::Mirror mirror{v, program.slotOf.find(v)->second, program.slots.size(), device, home};
      program.slots.emplace_back();
      if (v->kind() == ir::ValueKind::Input) {
        mirror.source = nullptr;
        program.feedMirrors.push_back(mirror);
      } else {
        program.mirrorsBefore[i].push_back(mirror);
      }
    }
  }
}

// The dense copies' memory on their devices (a sparse copy is made as it is copied).
llvm::Error Executor::allocateMirrors(Program &program) {
  for (const auto &[key, slot] : program.mirrorOf) {
    const ir::Value *v = key.first;
    if (v->type().sparse) {
      program.slots[slot].sparse = true;
      continue;
    }
    if (v->kind() == ir::ValueKind::Input)
      continue;
    ir::TensorType t = boundType(v, program.batch);
    auto copy = key.second->allocateTensor(t.dtype, concreteShape(t));
    if (!copy)
      return ir::withContext(copy.takeError(), v->ref() + " on " + key.second->id().str());
    program.slots[slot].dense = std::move(*copy);
  }
  return llvm::Error::success();
}

// Before order_[op] runs: the copies it awaits of values of other devices.
llvm::Error Executor::copyMirrors(Program &p, size_t op) {
  for (const Program::Mirror &m : p.mirrorsBefore[op]) {
    const RuntimeValue &from = p.slots[m.from];
    RuntimeValue &to = p.slots[m.to];
    TraceSpan span(options_.trace, "ops",
                   options_.trace ? "copy " + m.value->ref() + " to " + m.device->id().str() : "",
                   "copy");
    span.addArg("bytes", static_cast<double>(from.dense.numBytes() + from.indices.numBytes()));
    if (!from.sparse) {
      if (auto err = m.device->copyFromPeer(to.dense, *m.source, from.dense))
        return err;
      continue;
    }
    auto indices = m.device->fromPeer(*m.source, from.indices);
    if (!indices)
      return indices.takeError();
    auto rows = m.device->fromPeer(*m.source, from.dense);
    if (!rows)
      return rows.takeError();
    to.indices = std::move(*indices);
    to.dense = std::move(*rows);
  }
  return llvm::Error::success();
}

// The buffers of `device`'s dense op results: a request each, with the lifetime `lastUseOf`
// gives, except that a collective's result takes the buffer of its operand where the operand is
// read for the last time there (an all-reduce then runs in place, and nothing is copied).
void Executor::requestBuffers(Program &program, Device *device, const LastUse &lastUseOf,
                              const llvm::DenseSet<const ir::Value *> &kept,
                              std::vector<BufferRequest> &requests,
                              std::vector<std::pair<const ir::Value *, size_t>> &planned) {
  llvm::DenseMap<const ir::Value *, size_t> requestOf;
  for (int i = 0; i < static_cast<int>(order_.size()); ++i) {
    const ir::Op *op = order_[i];
    if (&deviceOf(*op) != device)
      continue;
    for (unsigned r = 0; r < op->numResults(); ++r) {
      const ir::Value *v = op->result(r);
      if (v->type().sparse) {
        program.slot(v).sparse = true;
        continue;
      }
      ir::TensorType t = boundType(v, program.batch);
      const size_t bytes = static_cast<size_t>(t.numElements() * ir::dtypeBytes(t.dtype));
      if (isCollective(*op)) {
        const ir::Value *in = op->operand(r);
        auto found = requestOf.find(in);
        if (found != requestOf.end() && !kept.count(in) && lastUseOf(in, i) == i &&
            requests[found->second].bytes == bytes) {
          const size_t request = found->second; // before an insertion moves the entries
          requests[request].lastUse = std::max(requests[request].lastUse, lastUseOf(v, i));
          requestOf[v] = request;
          planned.push_back({v, request});
          continue;
        }
      }
      requestOf[v] = requests.size();
      planned.push_back({v, requests.size()});
      requests.push_back({bytes, i, lastUseOf(v, i)});
    }
  }
}

// An allocation per device for the dense op results that live there; offsets planned from their
// lifetimes (kept values live to the end of the step).
llvm::Error Executor::planArena(Program &program) {
  const int end = static_cast<int>(order_.size());
  llvm::DenseSet<const ir::Value *> kept;
  if (module_.loss)
    kept.insert(module_.loss->value);
  for (const auto &entry : outputValues_)
    kept.insert(entry.getValue());
  // Accumulation: what the step part reads stays until the end of the step.
  kept.insert(accumulated_.begin(), accumulated_.end());
  kept.insert(keptAcrossMicroBatches_.begin(), keptAcrossMicroBatches_.end());
  llvm::DenseMap<const ir::Value *, int> lastUse;
  for (int i = 0; i < end; ++i)
    for (const ir::Value *v : order_[i]->operands())
      lastUse[v] = i;
  const LastUse lastUseOf = [&](const ir::Value *v, int i) {
    auto lu = lastUse.find(v);
    return kept.count(v) ? end : lu == lastUse.end() ? i : std::max(i, lu->second);
  };
  for (Device *device : devices()) {
    std::vector<BufferRequest> requests;
    std::vector<std::pair<const ir::Value *, size_t>> planned; // value, its request
    requestBuffers(program, device, lastUseOf, kept, requests, planned);
    MemoryPlan plan = planMemory(requests);
    // Before the allocation: a batch too large for the machine is an error naming it.
    if (auto err = support::checkFits(static_cast<double>(plan.totalBytes),
                                      "a step of batch " + llvm::Twine(program.batch) +
                                          " (its activations and gradients)"))
      return err;
    auto arena = device->allocate(plan.totalBytes);
    if (!arena)
      return ir::withContext(arena.takeError(), "the step's buffers on " + device->id().str());
    for (const auto &[v, request] : planned) {
      ir::TensorType t = boundType(v, program.batch);
      program.slot(v).dense =
          Tensor::view(t.dtype, concreteShape(t), *arena, plan.offsets[request], device->id());
    }
    program.arenas.push_back(std::move(*arena));
    program.arenaBytes.push_back(plan.totalBytes);
  }
  return allocateMirrors(program);
}

llvm::Error Executor::buildKernels(Program &program) {
  for (const ir::Op *op : order_) {
    Device &device = deviceOf(*op);
    // Before kernels are built: oneDNN fixes a primitive's thread count when it is created.
    device.enter();
    KernelFactory factory = findKernel(op->name(), device.id().kind);
    KernelSpec spec;
    spec.op = op;
    spec.attrs = ir::withDefaults(op->def(), op->attrs);
    spec.device = &device;
    spec.threads = options_.threads;
    spec.tf32 = options_.tf32;
    spec.batch = program.batch;
    spec.communication = options_.communication;
    spec.globalBatch = &globalBatch_;
    spec.step = &context_;
    if (int64_t tower = towerOf(*op); tower >= 0)
      spec.towerOffset = splitBatch(program.batch, tower, towers_).begin;
    std::vector<const RuntimeValue *> ins;
    std::vector<RuntimeValue *> outs;
    for (const ir::Value *v : op->operands()) {
      spec.inputTypes.push_back(boundType(v, program.batch));
      ins.push_back(&program.slotOn(v, &device));
    }
    for (unsigned r = 0; r < op->numResults(); ++r) {
      spec.outputTypes.push_back(boundType(op->result(r), program.batch));
      outs.push_back(&program.slot(op->result(r)));
    }
    auto kernel = factory(spec);
    if (!kernel)
      return ir::withLocation(ir::withContext(kernel.takeError(), "'" + op->name() + "'"),
                              module_.sourceFile(), op->loc);
    program.kernels.push_back(std::move(*kernel));
    program.inputs.push_back(std::move(ins));
    program.outputs.push_back(std::move(outs));
  }
  return llvm::Error::success();
}

// B from the feeds, each feed checked against its input's type.
llvm::Expected<int64_t> Executor::bindBatch(const Feeds &feeds) const {
  int64_t batch = -1;
  for (const auto &in : module_.inputs()) {
    auto it = feeds.find(in->name());
    if (it == feeds.end())
      return ir::makeError(ir::ErrorCode::NotFound, "no data fed for input '" + in->name() + "'");
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
                           ir::dtypeName(t.dtype()).str() + reference::shapeString(t.shape()) +
                           (batch >= 0 ? " (B = " + std::to_string(batch) + ")" : ""));
  }
  if (batch < 0)
    return 1;
  if (batch < towers_)
    return ir::makeError("a batch of " + std::to_string(batch) + " example" +
                         (batch == 1 ? "" : "s") + " for " + std::to_string(towers_) +
                         " towers: each tower needs at least one");
  return batch;
}

// A feed in `slot` on `device`: the host tensor itself on the CPU; elsewhere copied (counted) into
// a buffer of the device kept by the program from step to step, so that a step allocates
// nothing there (a GPU's allocations and frees wait for its queue).
llvm::Error Executor::bindFeed(Device &device, Tensor &slot, const Tensor &feed) {
  if (device.isHost()) {
    slot = feed;
    return llvm::Error::success();
  }
  if (slot.empty() || slot.dtype() != feed.dtype() || slot.shape() != feed.shape()) {
    auto buffer = device.allocateTensor(feed.dtype(), feed.shape());
    if (!buffer)
      return buffer.takeError();
    slot = std::move(*buffer);
  }
  return device.copyInto(slot, feed);
}

// Feeds are copied to the device (counted); variables alias the store, so updates are in place.
llvm::Error Executor::bindFeedsAndVariables(Program &p, const Feeds &feeds) {
  for (const auto &in : module_.inputs()) {
    auto slot = p.slotOf.find(in->value.get());
    if (slot == p.slotOf.end())
      continue;
    if (auto err = bindFeed(*device_, p.slots[slot->second].dense, feeds.at(in->name())))
      return ir::withContext(std::move(err), "feed '" + in->name() + "'");
  }
  for (const Program::Mirror &m : p.feedMirrors)
    if (auto err = bindFeed(*m.device, p.slots[m.to].dense, feeds.at(m.value->name())))
      return ir::withContext(std::move(err), "feed '" + m.value->name() + "'");
  for (const auto &var : module_.variables()) {
    auto slot = p.slotOf.find(var->value.get());
    if (slot == p.slotOf.end())
      continue;
    Tensor *t = variables_->find(var->name());
    if (!t)
      return ir::makeError(ir::ErrorCode::Internal,
                           "variable '" + var->name() + "' has no value: initialize first");
    if (!device_->isHost() && t->onHost() && t->numElements() > 0) {
      auto onDevice = device_->toDevice(*t);
      if (!onDevice)
        return ir::withContext(onDevice.takeError(), "variable '" + var->name() + "'");
      variables_->set(var->name(), std::move(*onDevice));
      t = variables_->find(var->name());
    }
    p.slots[slot->second].dense = *t;
  }
  return llvm::Error::success();
}

// Waits for the task's communication, then lets the kernels whose results arrive with it write
// them.
llvm::Error Executor::awaitCommunication(Program &p) {
  std::vector<size_t> unfinished;
  unfinished.swap(p.unfinished);
  if (auto err = options_.communication->synchronize())
    return err;
  for (size_t j : unfinished)
    if (auto err = p.kernels[j]->finish())
      return ir::withLocation(ir::withContext(std::move(err), "'" + order_[j]->name() + "'"),
                              module_.sourceFile(), order_[j]->loc);
  return llvm::Error::success();
}

// After an error: the communication started is waited for (its buffers stay the task's until it
// ends), its error dropped, and nothing it would have finished is written.
void Executor::abandonCommunication(Program &p) {
  p.unfinished.clear();
  if (options_.communication)
    llvm::consumeError(options_.communication->synchronize());
}

// Checks the flags of the kernels that ran and check later (Kernel::checksLater), in order.
llvm::Error Executor::checkRan(Program &p, std::vector<size_t> &unchecked) {
  for (size_t j : unchecked)
    if (auto err = p.kernels[j]->check()) {
      abandonCommunication(p);
      return ir::withLocation(ir::withContext(std::move(err), "'" + order_[j]->name() + "'"),
                              module_.sourceFile(), order_[j]->loc);
    }
  unchecked.clear();
  return llvm::Error::success();
}

// What comes before order_[i] runs (alone, or first of a captured segment): the flags raised so
// far checked where it writes state or communicates (`checkFirst`), the all-reduces it reads
// waited for, the values it reads from other devices copied.
llvm::Error Executor::beforeOp(Program &p, size_t i, bool checkFirst,
                               std::vector<size_t> &unchecked) {
  const ir::Op &op = *order_[i];
  if (!unchecked.empty() && checkFirst)
    if (auto err = checkRan(p, unchecked))
      return err;
  if (options_.communication && syncBefore_[i]) {
    TraceSpan wait(options_.trace, "ops", "wait for all-reduce", "wait");
    if (auto err = awaitCommunication(p))
      return ir::withLocation(ir::withContext(std::move(err), "before '" + op.name() + "'"),
                              module_.sourceFile(), op.loc);
  }
  if (!p.mirrorsBefore[i].empty())
    if (auto err = copyMirrors(p, i))
      return ir::withLocation(ir::withContext(std::move(err), "before '" + op.name() + "'"),
                              module_.sourceFile(), op.loc);
  return llvm::Error::success();
}

// Runs order_[begin, end), with `capture` from the program's second run on in captured segments;
// waits for its communication and the devices at the end.
llvm::Error Executor::runKernels(Program &p, size_t begin, size_t end, bool capture) {
  Communication *communication = options_.communication;
  TraceRecorder *trace = options_.trace;
  if (trace && traceNames_.size() != order_.size()) {
    traceNames_.clear();
    for (const ir::Op *op : order_)
      traceNames_.push_back(traceName(*op));
  }
  // What the devices' kernels read of the step there.
  const StepValues values{context_.step, context_.exampleOffset, globalBatch_};
  for (Device *device : devices())
    if (auto err = device->writeStepValues(values))
      return ir::withContext(std::move(err), "the step's values on " + device->id().str());
  capture = capture && p.runs++ > 0;
  if (capture && !p.planned)
    planSegments(p);
  std::vector<size_t> unchecked; // kernels that ran and check later, not yet checked
  for (size_t i = begin; i < end; ++i) {
    const ir::Op &op = *order_[i];
    const int segment = capture ? p.segmentAt[i] : -1;
    const bool checkFirst = checkBefore_[i] || (segment >= 0 && p.segments[segment].checksFirst);
    if (auto err = beforeOp(p, i, checkFirst, unchecked))
      return err;
    if (segment >= 0) {
      auto replayed = runSegment(p, static_cast<size_t>(segment));
      if (!replayed)
        return ir::withLocation(ir::withContext(replayed.takeError(), "a captured step"),
                                module_.sourceFile(), op.loc);
      if (*replayed) {
        for (size_t j = i; j < p.segments[segment].end; ++j)
          if (p.kernels[j]->checksLater())
            unchecked.push_back(j);
        i = p.segments[segment].end - 1;
        continue;
      }
    }
    auto started = trace ? TraceRecorder::Clock::now() : TraceRecorder::Clock::time_point();
    llvm::Error ran = p.kernels[i]->run(p.inputs[i], p.outputs[i]);
    if (trace)
      trace->span("ops", traceNames_[i], "op", started, TraceRecorder::Clock::now());
    if (auto err = std::move(ran)) {
      abandonCommunication(p);
      return ir::withLocation(ir::withContext(std::move(err), "'" + op.name() + "'"),
                              module_.sourceFile(), op.loc);
    }
    if (p.kernels[i]->checksLater())
      unchecked.push_back(i);
    if (p.kernels[i]->finishesAfterCommunication())
      p.unfinished.push_back(i);
  }
  if (auto err = checkRan(p, unchecked))
    return err;
  if (communication) {
    TraceSpan wait(trace, "ops", "wait for all-reduce", "wait");
    if (auto err = awaitCommunication(p))
      return err;
  }
  for (Device *device : devices())
    if (auto err = device->synchronize())
      return err;
  return llvm::Error::success();
}

// The runs of ops a captured step records: ops of one device whose kernels can be recorded,
// broken where the executor must act between two ops (before an op that waits for an
// all-reduce, reads a value from another device, or writes state after a kernel of the run that
// checks later).
void Executor::planSegments(Program &p) {
  p.planned = true;
  p.segmentAt.assign(order_.size(), -1);
  size_t start = order_.size();
  bool checks = false;
  auto close = [&](size_t end) {
    if (start < end) {
      Program::Segment segment;
      segment.begin = start;
      segment.end = end;
      for (size_t j = start; j < end; ++j)
        segment.checksFirst |= checkBefore_[j];
      p.segmentAt[start] = static_cast<int>(p.segments.size());
      p.segments.push_back(std::move(segment));
    }
    start = order_.size();
    checks = false;
  };
  for (size_t i = 0; i < order_.size(); ++i) {
    std::string why = p.kernels[i]->notCapturable();
    if (!why.empty()) {
      close(i);
      p.notCaptured.push_back(ir::opSpanName(*order_[i]) + " (" + why + ")");
      continue;
    }
    if (start < i && (&deviceOf(*order_[i]) != &deviceOf(*order_[start]) || syncBefore_[i] ||
                      !p.mirrorsBefore[i].empty() || (checkBefore_[i] && checks)))
      close(i);
    if (start == order_.size())
      start = i;
    checks |= p.kernels[i]->checksLater();
  }
  close(order_.size());
}

// Replays segment `index`, recording it first (again where the memory its kernels use moved);
// false where it cannot be recorded, and the caller runs its ops one by one.
llvm::Expected<bool> Executor::runSegment(Program &p, size_t index) {
  Program::Segment &s = p.segments[index];
  if (!s.failed.empty())
    return false;
  std::vector<int64_t> bound;
  auto add = [&](const Tensor &t) {
    bound.push_back(static_cast<int64_t>(reinterpret_cast<intptr_t>(t.raw())));
    bound.push_back(t.numElements());
  };
  for (size_t j = s.begin; j < s.end; ++j) {
    for (const RuntimeValue *v : p.inputs[j]) {
      add(v->dense);
      add(v->indices);
    }
    for (const RuntimeValue *v : p.outputs[j]) {
      add(v->dense);
      add(v->indices);
    }
  }
  Device &device = deviceOf(*order_[s.begin]);
  bound.push_back(static_cast<int64_t>(reinterpret_cast<intptr_t>(device.workspace())));
  bound.push_back(static_cast<int64_t>(device.workspaceBytes()));
  if (!s.work || bound != s.bound) {
    s.work.reset();
    if (auto err = device.beginCapture()) {
      s.failed = ir::messageOf(std::move(err));
      return false;
    }
    for (size_t j = s.begin; j < s.end; ++j)
      if (auto err = p.kernels[j]->run(p.inputs[j], p.outputs[j])) {
        // Run op by op instead, where the op reports it at its place.
        s.failed = ir::opSpanName(*order_[j]) + ": " + ir::messageOf(std::move(err));
        llvm::consumeError(device.endCapture().takeError());
        return false;
      }
    auto work = device.endCapture();
    if (!work) {
      s.failed = ir::messageOf(work.takeError());
      return false;
    }
    s.work = std::move(*work);
    s.bound = std::move(bound);
    ++p.captures;
  } else {
    ++p.replays;
  }
  if (auto err = s.work->replay())
    return std::move(err);
  return true;
}

std::string Executor::captureReport() const {
  if (!options_.captureSteps || !last_)
    return "";
  const Program &p = *last_;
  if (!p.planned)
    return "not captured yet (a program is captured from its second step)";
  size_t captured = 0, graphs = 0;
  std::vector<std::string> failed;
  for (const Program::Segment &s : p.segments) {
    if (s.work) {
      captured += s.end - s.begin;
      ++graphs;
    } else if (!s.failed.empty()) {
      failed.push_back(s.failed);
    }
  }
  std::string report = std::to_string(captured) + " of " + std::to_string(order_.size()) +
                       " ops in " + std::to_string(graphs) + " CUDA graph" +
                       (graphs == 1 ? "" : "s") + ", recorded " + std::to_string(p.captures) +
                       " and replayed " + std::to_string(p.replays) + " times";
  auto list = [&](const char *what, const std::vector<std::string> &items) {
    if (items.empty())
      return;
    report += std::string("; ") + what + ": ";
    for (size_t i = 0; i < items.size() && i < 4; ++i)
      report += (i ? ", " : "") + items[i];
    if (items.size() > 4)
      report += " and " + std::to_string(items.size() - 4) + " more";
  };
  list("not captured", p.notCaptured);
  list("not recorded", failed);
  return report;
}

std::string Executor::kernelChoices() const {
  if (!last_)
    return "";
  std::map<std::string, int> counts;
  for (const auto &kernel : last_->kernels)
    if (std::string choice = kernel ? kernel->choice() : ""; !choice.empty())
      ++counts[choice];
  std::string report;
  for (const auto &[choice, count] : counts)
    report += (report.empty() ? "" : ", ") + choice + " (" + std::to_string(count) + ")";
  return report;
}

std::string Executor::traceName(const ir::Op &op) const {
  return ir::opSpanName(op);
}

llvm::Error Executor::step(const Feeds &feeds) {
  if (accumulating_)
    return accumulatedStep({feeds});
  auto batch = bindBatch(feeds);
  if (!batch)
    return batch.takeError();
  globalBatch_ = globalBatchOverride_ > 0 ? globalBatchOverride_ : *batch;
  context_.exampleOffset = exampleOffset_;
  device_->enter();
  auto program = programFor(*batch);
  if (!program)
    return program.takeError();
  Program &p = **program;
  if (auto err = bindFeedsAndVariables(p, feeds))
    return err;
  if (auto err = runKernels(p, 0, order_.size(), options_.captureSteps))
    return err;
  if (auto err = readLoss(p))
    return err;
  last_ = &p;
  countStep();
  return llvm::Error::success();
}

// A training step that ran moves the step number on (evaluation steps are not steps), as the
// reference interpreter's do.
void Executor::countStep() {
  if (context_.training())
    ++context_.step;
}

llvm::Error Executor::readLoss(Program &p) {
  loss_.reset();
  if (!module_.loss)
    return llvm::Error::success();
  auto slot = p.slotOf.find(module_.loss->value);
  if (slot == p.slotOf.end())
    return llvm::Error::success();
  auto t = homeOf(module_.loss->value).toHost(p.slots[slot->second].dense);
  if (!t)
    return ir::withContext(t.takeError(), "the loss");
  loss_ = t->dtype() == ir::DType::F64 ? *t->data<double>() : *t->data<float>();
  return llvm::Error::success();
}

namespace {

double elementAt(const Tensor &t, int64_t i) {
  return t.dtype() == ir::DType::F64 ? t.data<double>()[i] : t.data<float>()[i];
}

void setElement(Tensor &t, int64_t i, double value) {
  if (t.dtype() == ir::DType::F64)
    t.data<double>()[i] = value;
  else
    t.data<float>()[i] = static_cast<float>(value);
}

} // namespace

// Adds batch × each crossing value of the micro-step just run to its sum. The sums are kept in
// host memory, in double: a value on a GPU comes over first (a counted copy).
llvm::Error Executor::addMicroBatch(Program &p, int64_t batch) {
  const double weight = static_cast<double>(batch);
  for (size_t a = 0; a < accumulated_.size(); ++a) {
    const RuntimeValue &value = p.slot(accumulated_[a]);
    Accumulator &acc = accumulators_[a];
    Device &device = homeOf(accumulated_[a]);
    auto onHost = device.toHost(value.dense);
    if (!onHost)
      return ir::withContext(onHost.takeError(), accumulated_[a]->ref());
    const Tensor &t = *onHost;
    if (!value.sparse) {
      acc.sum.resize(static_cast<size_t>(t.numElements()), 0.0);
      for (int64_t i = 0; i < t.numElements(); ++i)
        acc.sum[static_cast<size_t>(i)] += weight * elementAt(t, i);
      continue;
    }
    auto indices = device.toHost(value.indices);
    if (!indices)
      return ir::withContext(indices.takeError(), accumulated_[a]->ref());
    int64_t n = indices->numElements();
    const int64_t *ids = indices->data<int64_t>();
    acc.indices.insert(acc.indices.end(), ids, ids + n);
    for (int64_t i = 0; i < t.numElements(); ++i)
      acc.rows.push_back(weight * elementAt(t, i));
  }
  return llvm::Error::success();
}

// The means Σ bᵢ vᵢ / Σ bᵢ into the slots the step part reads (on a GPU, through a counted copy);
// the sums start again.
llvm::Error Executor::writeMeans(Program &p, int64_t examples) {
  const double inverse = 1.0 / static_cast<double>(examples);
  for (size_t a = 0; a < accumulated_.size(); ++a) {
    const ir::Value *v = accumulated_[a];
    RuntimeValue &value = p.slot(v);
    Accumulator &acc = accumulators_[a];
    Device &device = homeOf(v);
    if (!value.sparse) {
      Tensor mean =
          value.dense.onHost() ? value.dense : Tensor(value.dense.dtype(), value.dense.shape());
      for (int64_t i = 0; i < mean.numElements(); ++i)
        setElement(mean, i, acc.sum[static_cast<size_t>(i)] * inverse);
      acc.sum.assign(acc.sum.size(), 0.0);
      if (!value.dense.onHost())
        if (auto err = device.copyInto(value.dense, mean))
          return ir::withContext(std::move(err), v->ref());
      continue;
    }
    int64_t n = static_cast<int64_t>(acc.indices.size());
    std::vector<int64_t> rowShape(v->type().dims.begin(), v->type().dims.end());
    rowShape[0] = n;
    Tensor indices(ir::DType::I64, {n});
    std::copy(acc.indices.begin(), acc.indices.end(), indices.data<int64_t>());
    Tensor rows(v->type().dtype, rowShape);
    for (int64_t i = 0; i < rows.numElements(); ++i)
      setElement(rows, i, acc.rows[static_cast<size_t>(i)] * inverse);
    auto onDevice = device.toDevice(indices);
    auto rowsOnDevice = onDevice ? device.toDevice(rows) : onDevice.takeError();
    if (!rowsOnDevice)
      return ir::withContext(rowsOnDevice.takeError(), v->ref());
    value.indices = std::move(*onDevice);
    value.dense = std::move(*rowsOnDevice);
    acc.indices.clear();
    acc.rows.clear();
  }
  return llvm::Error::success();
}

llvm::Error Executor::accumulatedStep(llvm::ArrayRef<Feeds> microBatches) {
  if (!accumulating_)
    return ir::makeError(ir::ErrorCode::Internal,
                         "accumulatedStep needs a training executor made with accumulate = true");
  device_->enter();
  Program *last = nullptr;
  // Every micro-batch's size first: the kernels see the step's global batch from the first one.
  std::vector<int64_t> batches;
  int64_t examples = 0;
  for (const Feeds &feeds : microBatches) {
    auto batch = bindBatch(feeds);
    if (!batch)
      return batch.takeError();
    batches.push_back(*batch);
    examples += *batch;
  }
  globalBatch_ = globalBatchOverride_ > 0 ? globalBatchOverride_ : examples;
  context_.exampleOffset = exampleOffset_;
  for (size_t i = 0; i < microBatches.size(); ++i) {
    const Feeds &feeds = microBatches[i];
    const int64_t batch = batches[i];
    if (i > 0)
      context_.exampleOffset += batches[i - 1];
    if (batch == 0)
      continue;
    auto program = programFor(batch);
    if (!program)
      return program.takeError();
    if (auto err = bindFeedsAndVariables(**program, feeds))
      return err;
    if (auto err = runKernels(**program, 0, microEnd_))
      return err;
    if (auto err = addMicroBatch(**program, batch))
      return err;
    last = *program;
  }
  if (!last)
    return ir::makeError("an optimizer step with no examples in any micro-batch");
  if (auto err = writeMeans(*last, examples))
    return err;
  if (auto err = runKernels(*last, microEnd_, order_.size()))
    return err;
  if (auto err = readLoss(*last))
    return err;
  last_ = last;
  countStep();
  return llvm::Error::success();
}

const RuntimeValue *Executor::output(llvm::StringRef name) const {
  auto it = outputValues_.find(name);
  if (it == outputValues_.end() || !last_)
    return nullptr;
  auto slot = last_->slotOf.find(it->getValue());
  return slot == last_->slotOf.end() ? nullptr : &last_->slots[slot->second];
}

llvm::Expected<Tensor> Executor::fetch(llvm::StringRef name) {
  const RuntimeValue *value = output(name);
  if (!value)
    return ir::makeError(ir::ErrorCode::NotFound,
                         "'" + name + "' is not a kept output of the last step");
  return homeOf(outputValues_.find(name)->getValue()).toHost(value->dense);
}

llvm::Error Executor::variablesToHost() {
  if (device_->isHost())
    return llvm::Error::success();
  if (auto err = device_->synchronize())
    return err;
  for (const auto &var : module_.variables()) {
    Tensor *t = variables_->find(var->name());
    if (!t || t->onHost() || t->device() != device_->id())
      continue;
    auto onHost = device_->toHost(*t);
    if (!onHost)
      return ir::withContext(onHost.takeError(), "variable '" + var->name() + "'");
    variables_->set(var->name(), std::move(*onHost));
  }
  return llvm::Error::success();
}

size_t Executor::arenaBytes(const Device *device) const {
  const std::vector<Device *> all = devices();
  size_t most = 0;
  for (const auto &entry : programs_) {
    size_t bytes = 0;
    for (size_t d = 0; d < entry.second->arenaBytes.size(); ++d)
      if (!device || all[d] == device)
        bytes += entry.second->arenaBytes[d];
    most = std::max(most, bytes);
  }
  return most;
}

} // namespace prism::runtime
