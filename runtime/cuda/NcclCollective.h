// A group of ranks, one GPU each, all-reducing device buffers over NCCL; the ranks meet through
// the coordinator's key-value store, where rank 0 publishes the NCCL unique id.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "runtime/dist/CoordinatorClient.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::cuda {

// Success, or "<call> failed: <NCCL's description>".
llvm::Error ncclCheck(ncclResult_t result, const llvm::Twine &call);

// Every rank of a group calls the same operations in the same order. The communicator is
// non-blocking so that `timeout` bounds the rendezvous and every later call; after an error or a
// timeout the group is broken (its communicator aborted): discard it.
class NcclCollective {
public:
  // Joins rank `rank` of `size` on CUDA device `device` (left current on the calling thread).
  // `group` must be unique within the job: the id travels under the key "<group>/nccl-id".
  static llvm::Expected<std::unique_ptr<NcclCollective>> create(dist::CoordinatorClient &client,
                                                                std::string group, int rank,
                                                                int size, int device,
                                                                std::chrono::milliseconds timeout);
  ~NcclCollective(); // finalizes and destroys the communicator (aborts it when broken)

  NcclCollective(const NcclCollective &) = delete;
  NcclCollective &operator=(const NcclCollective &) = delete;

  // Queues the element-wise sum over all ranks of `count` floats at `deviceData` (on this
  // rank's device), in place, on `stream`; returns once queued, not once done.
  llvm::Error allReduceSum(float *deviceData, size_t count, cudaStream_t stream);

  const std::string &group() const { return group_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }

private:
  NcclCollective(std::string group, int rank, int size, int device,
                 std::chrono::milliseconds timeout)
      : group_(std::move(group)), rank_(rank), size_(size), device_(device), timeout_(timeout) {}
  // Waits (up to the timeout) until the communicator's pending host-side work is done.
  llvm::Error settle(const llvm::Twine &operation, std::chrono::steady_clock::time_point deadline);
  // Aborts the communicator (the group is broken) and returns the error.
  llvm::Error failure(const llvm::Twine &operation, std::string problem);

  std::string group_;
  int rank_;
  int size_;
  int device_;
  std::chrono::milliseconds timeout_;
  ncclComm_t comm_ = nullptr; // null once aborted
  bool broken_ = false;
};

} // namespace prism::runtime::cuda
