// A worker's links to the rest of its job: all-reduce over Gloo for the worker group, pulls and
// pushes to the parameter servers. Implements the Communication the executor's kernels use.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "runtime/dist/Collective.h"
#include "runtime/exec/Communication.h"
#include "runtime/exec/Trace.h"
#include "runtime/job/StallWatch.h"
#include "runtime/ps/HostAggregator.h"
#include "runtime/ps/PsClient.h"

namespace prism::runtime::job {

// Compressed communication (run.compress): float32 gradient buckets are all-reduced as 16-bit
// floats (the PS client compresses pushes and row pulls itself); with error feedback each worker
// adds what rounding took from its last contribution of a bucket, or of a dense PS gradient, to
// the next one.
struct Compression {
  ir::ComputePrecision precision = ir::ComputePrecision::F32;
  bool errorFeedback = false;
};

class WorkerCommunication : public runtime::Communication {
public:
  // `collective` joins every worker; `ps` is null when no variable lives on parameter servers.
  WorkerCommunication(int64_t rank, std::unique_ptr<dist::Collective> collective,
                      std::unique_ptr<ps::PsClient> ps, Compression compression = {});
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
  bool keepsValues(llvm::StringRef group, int64_t bucket) const override;

  ps::PsClient *psClient() { return ps_.get(); }
  // The variables each step pulls whole (the worker program's `ps_pull` ops). A step's first
  // such pull asks for all of them in one call per server, so a step pays one round trip to its
  // servers for its dense variables, not one per variable; the others are then taken from it.
  void setStepPulls(std::vector<std::string> variables) { stepPulls_ = std::move(variables); }
  // Local aggregation (ps/HostAggregator.h): from now on, the pulls and the push of each step go
  // to the host's leader through `channel` (pulls outside a step, an evaluation's, still go to
  // the servers).
  void setHostChannel(std::unique_ptr<ps::HostChannel> channel) { host_ = std::move(channel); }
  // Asynchronous training and backup workers: workers do not wait for each other's loss, so
  // the loss (bucket -1) is not all-reduced and each worker's is its own batch's.
  void keepLossLocal() { localLoss_ = true; }
  // The highest version the servers answered the last push with (asynchronous: pushes applied).
  int64_t lastVersion() const { return pushOutcome_.version; }
  // Asynchronous: the pushes the whole job makes, told to the servers with each push.
  void setJobPushes(int64_t pushes) {
    if (ps_)
      ps_->setJobPushes(pushes);
  }
  // The step this worker goes on with after its last push: the next one, or the servers'
  // version when they applied that push's step without it (backup workers).
  int64_t resumeAt() const { return pushOutcome_.dropped ? pushOutcome_.version : step_ + 1; }
  // Pushes the servers dropped (late for their step), and the steps skipped after them.
  int64_t droppedPushes() const { return droppedPushes_; }
  int64_t skippedSteps() const { return skippedSteps_; }
  // The worker group (between steps: the all-reduce thread is idle then).
  dist::Collective &group() { return *collective_; }
  // Elastic membership. After a failed step: drops the all-reduces not started, waits for the
  // one running (it ends, failing, within the group's timeout), forgets its error and closes
  // the group (replaceGroup gives the next).
  void abandonStep();
  // Between steps: the group of a new membership, this worker's rank in it, and the epoch the
  // parameter servers are to see.
  void replaceGroup(std::unique_ptr<dist::Collective> collective, int64_t rank,
                    int64_t membershipEpoch);
  // Elastic membership: the loss's all-reduce also sums whether each worker saw a newer
  // membership (`probe`, asked as it starts), so that all decide alike at the step's end
  // without a round trip of their own.
  void setMembershipProbe(std::function<bool()> probe) { probe_ = std::move(probe); }
  // After a step: positive when some worker saw a newer membership; none when no loss was
  // all-reduced since the last call.
  std::optional<double> takeMembershipProbe();
  // Payload bytes this worker sent and received so far: what a ring all-reduce moves each way,
  // 2(N−1)/N of each bucket, and the serialized PS messages.
  uint64_t bytesSent() const;
  uint64_t bytesReceived() const;
  // Records each all-reduce bucket (track "all-reduce") and PS call (track "ps") with its
  // bytes; null: none. Set before the first step.
  void setTrace(TraceRecorder *trace) { trace_ = trace; }
  // Reports waits for all-reduces and parameter servers longer than its bound; null: none.
  void setStallWatch(StallWatch *stalls) { stalls_ = stalls; }

private:
  // The only worker, holding the whole batch this step: its values are the mean already.
  bool aloneWithTheBatch() const;
  // The step's first pull of one of setStepPulls's variables: pulls them all, returns this one.
  llvm::Expected<Tensor> pullWithTheStep(llvm::StringRef variable);
  // A 16-bit bucket's staging: the weighted values, their wire form, what rounding left.
  struct HalfBuffer {
    std::vector<float> values;
    std::vector<uint16_t> wire;
    std::vector<float> residual;
  };
  llvm::Error compressedMean(llvm::ArrayRef<Tensor *> tensors, HalfBuffer &buffer, double fraction);
  void countAllReduce(size_t bytes);

  int64_t rank_;
  std::unique_ptr<dist::Collective> collective_;
  std::unique_ptr<ps::PsClient> ps_;
  std::unique_ptr<ps::HostChannel> host_;
  bool inStep_ = false; // between beginStep and finishStep
  // This step's pulls so far, by "pull/variable" and "rows/variable": the round of the next one.
  std::map<std::string, int64_t> pullRounds_;
  std::vector<std::string> stepPulls_;       // setStepPulls's variables
  bool stepPulled_ = false;                  // this step's pulls were asked for
  std::map<std::string, Tensor> prefetched_; // what they brought, until each variable's pull
  int64_t step_ = 0, examples_ = 0, globalExamples_ = 0;
  bool localLoss_ = false;
  ps::PushOutcome pushOutcome_;
  int64_t droppedPushes_ = 0, skippedSteps_ = 0;
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
  std::map<int64_t, HalfBuffer> halfBuffers_; // by bucket: the residual is that bucket's
  Compression compression_;
  std::map<std::string, std::vector<float>> pushResiduals_; // dense PS gradients, error feedback
  std::atomic<uint64_t> allReduceBytes_{0};
  TraceRecorder *trace_ = nullptr;
  // Seconds the running bucket spent in Gloo calls, for its span (all-reduce thread only).
  double inCollective_ = 0;
  StallWatch *stalls_ = nullptr;
  std::deque<int64_t> inFlight_; // buckets started and not yet done, in order (guarded by mutex_)
  // A PS call, traced (its span with the bytes it sent and received) and watched for stalls.
  template <typename Call> auto watchedPsCall(const char *category, std::string name, Call call);
  size_t nextBuffer_ = 0;
  std::function<bool()> probe_;
  Tensor probeValue_;          // appended to the loss's bucket: Σ b_i·[saw newer] / Σ b_i
  bool probeInFlight_ = false; // the last step's loss all-reduce carried it (guarded by mutex_)
};

} // namespace prism::runtime::job
