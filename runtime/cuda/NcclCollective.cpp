// NCCL all-reduce for the GPU path: the unique id through the coordinator, a non-blocking
// communicator polled against deadlines, every NCCL status as an llvm::Error.
#include "runtime/cuda/NcclCollective.h"

#include <cstring>
#include <string>
#include <thread>

#include "ir/Diagnostic.h"
#include "runtime/cuda/CudaDevice.h"

namespace prism::runtime::cuda {

llvm::Error ncclCheck(ncclResult_t result, const llvm::Twine &call) {
  if (result == ncclSuccess)
    return llvm::Error::success();
  return ir::makeError(call + " failed: " + ncclGetErrorString(result));
}

llvm::Error NcclCollective::failure(const llvm::Twine &operation, std::string problem) {
  // ncclCommAbort frees the communicator; `problem` was copied out of NCCL's messages before.
  llvm::StringRef message(problem);
  if (comm_)
    ncclCommAbort(comm_);
  comm_ = nullptr;
  broken_ = true;
  return ir::makeError(operation + " in NCCL group '" + group_ + "' failed at rank " +
                       llvm::Twine(rank_) + " of " + llvm::Twine(size_) + ": " + message);
}

llvm::Error NcclCollective::settle(const llvm::Twine &operation,
                                   std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    if (ncclResult_t result = ncclCommGetAsyncError(comm_, &state); result != ncclSuccess)
      return failure(operation,
                     std::string("ncclCommGetAsyncError: ") + ncclGetErrorString(result));
    if (state == ncclSuccess)
      return llvm::Error::success();
    if (state != ncclInProgress)
      return failure(operation,
                     std::string(ncclGetErrorString(state)) + " (" + ncclGetLastError(comm_) + ")");
    if (std::chrono::steady_clock::now() >= deadline)
      return failure(operation, "timed out after " + std::to_string(timeout_.count()) + " ms");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

llvm::Expected<std::unique_ptr<NcclCollective>>
NcclCollective::create(dist::CoordinatorClient &client, std::string group, int rank, int size,
                       int device, std::chrono::milliseconds timeout) {
  if (size < 1 || rank < 0 || rank >= size)
    return ir::makeError("NCCL group '" + group + "': rank " + llvm::Twine(rank) + " of " +
                         llvm::Twine(size) + " is out of range");
  if (timeout <= std::chrono::milliseconds(0))
    return ir::makeError("NCCL group '" + group + "': the timeout must be positive");
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_ptr<NcclCollective> collective(
      new NcclCollective(std::move(group), rank, size, device, timeout));
  const std::string key = collective->group_ + "/nccl-id";

  if (llvm::Error error =
          cudaCheck(cudaSetDevice(device), "cudaSetDevice(" + llvm::Twine(device) + ")"))
    return collective->failure("joining", ir::messageOf(std::move(error)));
  ncclUniqueId id;
  if (rank == 0) {
    if (llvm::Error error = ncclCheck(ncclGetUniqueId(&id), "ncclGetUniqueId"))
      return collective->failure("joining", ir::messageOf(std::move(error)));
    if (llvm::Error error = client.set(key, llvm::StringRef(id.internal, sizeof(id.internal))))
      return collective->failure("publishing the NCCL id", ir::messageOf(std::move(error)));
  } else {
    auto value = client.get(key, timeout);
    if (!value)
      return collective->failure("waiting for the NCCL id", ir::messageOf(value.takeError()));
    if (value->size() != sizeof(id.internal))
      return collective->failure("reading the NCCL id",
                                 "'" + key + "' holds " + std::to_string(value->size()) +
                                     " bytes, not " + std::to_string(sizeof(id.internal)));
    std::memcpy(id.internal, value->data(), sizeof(id.internal));
  }

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t result = ncclCommInitRankConfig(&collective->comm_, size, id, rank, &config);
  if (result != ncclSuccess && result != ncclInProgress) {
    std::string detail = ncclGetErrorString(result);
    if (collective->comm_)
      detail += std::string(" (") + ncclGetLastError(collective->comm_) + ")";
    return collective->failure("ncclCommInitRankConfig", detail);
  }
  if (llvm::Error error = collective->settle("ncclCommInitRankConfig", deadline))
    return std::move(error);
  return std::move(collective);
}

NcclCollective::~NcclCollective() {
  if (!comm_) // never made, or aborted after an error
    return;
  // Finalize flushes queued work; a communicator that cannot finish in time is aborted.
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  ncclResult_t result = ncclCommFinalize(comm_);
  if (result != ncclSuccess && result != ncclInProgress) {
    ncclCommAbort(comm_);
    return;
  }
  if (llvm::Error error = settle("ncclCommFinalize", deadline)) {
    llvm::consumeError(std::move(error)); // settle aborted it
    return;
  }
  ncclCommDestroy(comm_);
}

llvm::Error NcclCollective::allReduceSum(float *deviceData, size_t count, cudaStream_t stream) {
  if (broken_)
    return ir::makeError("NCCL group '" + group_ + "' is broken by an earlier error");
  if (count == 0)
    return llvm::Error::success();
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  if (llvm::Error error = cudaCheck(cudaSetDevice(device_), "cudaSetDevice"))
    return failure("all-reduce", ir::messageOf(std::move(error)));
  ncclResult_t result =
      ncclAllReduce(deviceData, deviceData, count, ncclFloat32, ncclSum, comm_, stream);
  if (result != ncclSuccess && result != ncclInProgress)
    return failure("all-reduce of " + llvm::Twine(count) + " floats",
                   std::string(ncclGetErrorString(result)) + " (" + ncclGetLastError(comm_) + ")");
  return settle("all-reduce of " + llvm::Twine(count) + " floats", deadline);
}

} // namespace prism::runtime::cuda
