// What the communication kernels (all_reduce, ps_*, combine_towers' peers) ask of the task they
// run in. A single-device run has none; the distributed runtime (runtime/job) implements it
// over Gloo and the parameter servers. Kernels reach it through KernelSpec::communication.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "ir/Diagnostic.h"
#include "runtime/Tensor.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime {

struct RuntimeValue;

class Communication {
public:
  virtual ~Communication() = default;

  // Replaces each tensor by the batch-weighted mean Σ bᵢ xᵢ / Σ bᵢ over the group's tasks
  // (bᵢ: each task's examples this step). The tensors of one bucket travel together. It may
  // return before they are done (so the bucket travels while backward runs): the executor
  // calls synchronize() before anything reads them, and at the end of the step.
  virtual llvm::Error allReduce(llvm::StringRef group, int64_t bucket,
                                llvm::ArrayRef<Tensor *> tensors) = 0;
  // Waits until every all-reduce started is done; the first error of any of them.
  virtual llvm::Error synchronize() { return llvm::Error::success(); }
  // Whether allReduce(group, bucket, ...) this step leaves its tensors as they are (a group of
  // one task holding the whole batch), so that a GPU's staged all-reduce need not copy them
  // through host memory (it copies them on the device and does not call allReduce).
  virtual bool keepsValues(llvm::StringRef group, int64_t bucket) const { return false; }
  // A PS-held variable as of this step's start.
  virtual llvm::Expected<Tensor> pull(llvm::StringRef variable) = 0;
  // Rows `indices` of a PS-held table as of this step's start: indices.shape + row shape.
  virtual llvm::Expected<Tensor> pullRows(llvm::StringRef variable, const Tensor &indices) = 0;
  // This task's gradient of a PS-held variable (dense, or sparse rows), sent at step end.
  virtual llvm::Error push(llvm::StringRef variable, const RuntimeValue &gradient) = 0;
  // On a PS task: the combined gradient of its shard of `variable` this step.
  virtual llvm::Expected<const RuntimeValue *> gradient(llvm::StringRef variable) = 0;
};

// The communication of a plan's only worker: an all-reduce over a group of one task is the
// identity (Σ bᵢ xᵢ / Σ bᵢ with one term); there are no parameter servers, and a PS call is an
// error saying so, naming `owner` ("a session").
class SoleWorkerCommunication : public Communication {
public:
  explicit SoleWorkerCommunication(std::string owner) : owner_(std::move(owner)) {}
  llvm::Error allReduce(llvm::StringRef, int64_t, llvm::ArrayRef<Tensor *>) override {
    return llvm::Error::success();
  }
  bool keepsValues(llvm::StringRef, int64_t) const override { return true; }
  llvm::Expected<Tensor> pull(llvm::StringRef variable) override { return noServers(variable); }
  llvm::Expected<Tensor> pullRows(llvm::StringRef variable, const Tensor &) override {
    return noServers(variable);
  }
  llvm::Error push(llvm::StringRef variable, const RuntimeValue &) override {
    return noServers(variable);
  }
  llvm::Expected<const RuntimeValue *> gradient(llvm::StringRef variable) override {
    return noServers(variable);
  }

private:
  llvm::Error noServers(llvm::StringRef variable) const {
    return ir::makeError(ir::ErrorCode::Internal, "'" + variable +
                                                      "' is on a parameter server, and " + owner_ +
                                                      " has none");
  }
  std::string owner_;
};

} // namespace prism::runtime
