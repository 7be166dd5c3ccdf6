// A worker's links to the rest of its job: all-reduce over Gloo for the worker group, pulls and
// pushes to the parameter servers. Implements the Communication the executor's kernels use.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/dist/Collective.h"
#include "runtime/exec/Communication.h"
#include "runtime/ps/PsClient.h"

namespace prism::runtime::job {

class WorkerCommunication : public runtime::Communication {
public:
  // `collective` joins every worker; `ps` is null when no variable lives on parameter servers.
  WorkerCommunication(int64_t rank, std::unique_ptr<dist::Collective> collective,
                      std::unique_ptr<ps::PsClient> ps);
  ~WorkerCommunication() override;

  // Before step `step`: this worker's examples and all workers' (the weights of means).
  void beginStep(int64_t step, int64_t examples, int64_t globalExamples);
  // After the step: sends its PS gradients (every worker pushes every step, so the servers
  // count contributions).
  llvm::Error finishStep();

  llvm::Error allReduce(llvm::StringRef group, int64_t bucket,
                        llvm::ArrayRef<Tensor *> tensors) override;
  llvm::Expected<Tensor> pull(llvm::StringRef variable) override;
  llvm::Expected<Tensor> pullRows(llvm::StringRef variable, const Tensor &indices) override;
  llvm::Error push(llvm::StringRef variable, const runtime::RuntimeValue &gradient) override;
  llvm::Expected<const runtime::RuntimeValue *> gradient(llvm::StringRef variable) override;
  llvm::Error synchronize() override;

  ps::PsClient *psClient() { return ps_.get(); }

private:
  int64_t rank_;
  std::unique_ptr<dist::Collective> collective_;
  std::unique_ptr<ps::PsClient> ps_;
  int64_t step_ = 0, examples_ = 0, globalExamples_ = 0;
  std::vector<ps::Gradient> pending_;
  // All-reduces run on one background thread, in the order the program starts them (the same
  // on every worker), while the executor goes on with backward.
  std::thread reducer_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<llvm::Error()>> queue_;
  bool busy_ = false, stopping_ = false;
  llvm::Error firstError_ = llvm::Error::success();
  std::deque<std::vector<float>> buffers_; // a deque: growing keeps the others in place
  std::deque<std::vector<double>> buffers64_;
  size_t nextBuffer_ = 0;
};

} // namespace prism::runtime::job
