// CPU collectives over Gloo's TCP transport; every Gloo exception becomes an llvm::Error.
#include "runtime/dist/Collective.h"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include "ir/Diagnostic.h"
#include "runtime/HalfFloat.h"
#include "runtime/dist/CoordinatorStore.h"

namespace prism::runtime::dist {
namespace {
using ReduceFunction = void (*)(void *, const void *, const void *, size_t);
} // namespace

Collective::Collective(std::string groupName, int rank, int size, std::chrono::milliseconds timeout,
                       std::shared_ptr<gloo::Context> context)
    : groupName_(std::move(groupName)), rank_(rank), size_(size), timeout_(timeout),
      context_(std::move(context)) {}

Collective::~Collective() = default;

llvm::Error Collective::failure(const llvm::Twine &operation,
                                const std::exception &exception) const {
  return ir::makeError(operation + " in group '" + groupName_ + "' failed at rank " +
                       llvm::Twine(rank_) + " of " + llvm::Twine(size_) + ": " + exception.what());
}

llvm::Expected<std::unique_ptr<Collective>> Collective::create(CoordinatorClient &client,
                                                               std::string groupName, int rank,
                                                               int size, std::string bindAddress,
                                                               std::chrono::milliseconds timeout) {
  if (size < 1 || rank < 0 || rank >= size)
    return ir::makeError("group '" + groupName + "': rank " + llvm::Twine(rank) + " of " +
                         llvm::Twine(size) + " is out of range");
  if (timeout <= std::chrono::milliseconds(0))
    return ir::makeError("group '" + groupName + "': the timeout must be positive");
  std::unique_ptr<Collective> collective(
      new Collective(std::move(groupName), rank, size, timeout, nullptr));
  try {
    CoordinatorStore store(client, timeout);
    gloo::rendezvous::PrefixStore groupStore(collective->groupName_, store);
    gloo::transport::tcp::attr attributes;
    attributes.hostname = bindAddress;
    std::shared_ptr<gloo::transport::Device> device =
        gloo::transport::tcp::CreateDevice(attributes);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    // Set before connecting: it also bounds the rendezvous waits and the pairs' connects.
    context->setTimeout(timeout);
    context->connectFullMesh(groupStore, device);
    collective->context_ = std::move(context);
  } catch (const std::exception &exception) {
    return collective->failure("rendezvous at " + bindAddress, exception);
  }
  return std::move(collective);
}

template <typename T>
llvm::Error
Collective::allReduceSumOf(T *data, size_t count, const char *typeName,
                           std::function<void(void *, const void *, const void *, size_t)> sum) {
  // Gloo's ring needs a peer on each side; one rank's sum is its own buffer.
  if (count == 0 || size_ == 1)
    return llvm::Error::success();
  try {
    gloo::AllreduceOptions options(context_);
    options.setOutput(data, count);
    options.setReduceFunction(std::move(sum));
    // The ring (reduce-scatter, then all-gather) is bandwidth-optimal; bcube only pays off with
    // many hosts and small buffers.
    options.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    options.setTimeout(timeout_);
    gloo::allreduce(options);
  } catch (const std::exception &exception) {
    return failure("all-reduce of " + llvm::Twine(count) + " " + typeName + "s", exception);
  }
  return llvm::Error::success();
}

llvm::Error Collective::allReduceSum(float *data, size_t count) {
  return allReduceSumOf(data, count, "float", static_cast<ReduceFunction>(&gloo::sum<float>));
}

llvm::Error Collective::allReduceSum(double *data, size_t count) {
  return allReduceSumOf(data, count, "double", static_cast<ReduceFunction>(&gloo::sum<double>));
}

llvm::Error Collective::allReduceSum(uint16_t *data, size_t count, ir::ComputePrecision precision) {
  if (precision == ir::ComputePrecision::F32)
    return ir::makeError("a 16-bit all-reduce needs bf16 or fp16");
  // Gloo calls it with element counts: c = a + b, where c may be a.
  auto sum = [precision](void *c, const void *a, const void *b, size_t n) {
    addHalf(static_cast<const uint16_t *>(a), static_cast<const uint16_t *>(b),
            static_cast<uint16_t *>(c), static_cast<int64_t>(n), precision);
  };
  return allReduceSumOf(data, count, precision == ir::ComputePrecision::FP16 ? "fp16" : "bf16",
                        sum);
}

llvm::Error Collective::barrier() {
  if (size_ == 1)
    return llvm::Error::success();
  try {
    gloo::BarrierOptions options(context_);
    options.setTimeout(timeout_);
    gloo::barrier(options);
  } catch (const std::exception &exception) {
    return failure("barrier", exception);
  }
  return llvm::Error::success();
}

llvm::Error Collective::broadcast(void *data, size_t bytes, int root) {
  if (size_ == 1 || bytes == 0)
    return llvm::Error::success();
  try {
    gloo::BroadcastOptions options(context_);
    options.setOutput(static_cast<uint8_t *>(data), bytes);
    options.setRoot(root);
    options.setTimeout(timeout_);
    gloo::broadcast(options);
  } catch (const std::exception &exception) {
    return failure("broadcast of " + llvm::Twine(bytes) + " bytes from rank " + llvm::Twine(root),
                   exception);
  }
  return llvm::Error::success();
}

} // namespace prism::runtime::dist
