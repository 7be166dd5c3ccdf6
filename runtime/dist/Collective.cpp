// CPU collectives over Gloo's TCP transport; every Gloo exception becomes an llvm::Error.
#include "runtime/dist/Collective.h"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <sys/resource.h>
#include <unistd.h>

#include <exception>
#include <thread>

#include "ir/Diagnostic.h"
#include "runtime/HalfFloat.h"
#include "runtime/dist/CoordinatorStore.h"
#include "runtime/dist/RingLinks.h"

namespace prism::runtime::dist {
namespace {
using ReduceFunction = void (*)(void *, const void *, const void *, size_t);

// Creates Gloo's TCP device, whose event-loop thread then runs at nice `kEventLoopNice`, the lowest
// priority. That loop polls the sockets; while a caller thread holds a connection's lock (writing
// a segment in place), the loop finds the socket readable, cannot take the lock and polls again at
// once (pytorch/gloo#246). With more busy threads than cores it takes the core from the thread it
// waits for: mlp on two workers of a 2-core machine stepped in 3.5 ms, and in 1.3 ms with the loop
// at the lowest priority (BENCHMARKS.md, "Gloo's event loop at the lowest priority"). There the
// loop still runs at once on an idle core, and yields to the threads that compute and send. A
// thread inherits its creator's nice value, so the device is created on a helper thread that
// lowers its own.
std::shared_ptr<gloo::transport::Device>
createLowPriorityDevice(const gloo::transport::tcp::attr &attributes) {
  std::shared_ptr<gloo::transport::Device> device;
  std::exception_ptr failure;
  std::thread creator([&] {
    // Best effort: where the priority cannot be lowered, the loop runs at the caller's.
    (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), Collective::kEventLoopNice);
    try {
      device = gloo::transport::tcp::CreateDevice(attributes);
    } catch (...) {
      failure = std::current_exception();
    }
  });
  creator.join();
  if (failure)
    std::rethrow_exception(failure);
  return device;
}
} // namespace

Collective::Collective(std::string groupName, int rank, int size, std::chrono::milliseconds timeout,
                       std::shared_ptr<gloo::Context> context)
    : groupName_(std::move(groupName)), rank_(rank), size_(size), timeout_(timeout),
      context_(std::move(context)) {}

Collective::~Collective() = default;

llvm::Error Collective::failure(const llvm::Twine &operation,
                                const std::exception &exception) const {
  return failure(operation, ir::makeError(exception.what()));
}

llvm::Error Collective::failure(const llvm::Twine &operation, llvm::Error error) const {
  return ir::withContext(std::move(error), operation + " in group '" + groupName_ +
                                               "' failed at rank " + llvm::Twine(rank_) + " of " +
                                               llvm::Twine(size_));
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
    std::shared_ptr<gloo::transport::Device> device = createLowPriorityDevice(attributes);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    // Set before connecting: it also bounds the rendezvous waits and the pairs' connects.
    context->setTimeout(timeout);
    context->connectFullMesh(groupStore, device);
    collective->context_ = std::move(context);
  } catch (const std::exception &exception) {
    return collective->failure("rendezvous at " + bindAddress, exception);
  }
  if (size > 1) {
    auto ring =
        RingLinks::connect(client, collective->groupName_, rank, size, bindAddress, timeout);
    if (!ring)
      return collective->failure("the ring's rendezvous at " + bindAddress, ring.takeError());
    collective->ring_ = std::move(*ring);
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
