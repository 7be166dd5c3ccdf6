// A rank's two TCP connections of a ring (one to the rank on its right, one from the rank on its
// left), driven by the calling thread alone: the weighted ring's transport.
//
// Gloo's transport hands every socket to an event-loop thread; a caller writing a segment in
// place holds the connection's lock, the loop finding the socket readable cannot take it and
// polls again at once (pytorch/gloo#246), and a ring of two ranks, whose left and right are one
// connection, waits for that loop thread to get a core. Here the thread that reduces also
// writes and reads: it sleeps in poll() only when neither socket can move, so no other thread
// has to be woken, or given a core, for a byte to move.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/dist/CoordinatorClient.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::dist {

class RingLinks {
public:
  // Connects rank `rank` of `size` (at least 2) to its neighbours: listens on `bindAddress`,
  // publishes that address with a secret of its own under `keyPrefix` in the coordinator's
  // store, connects to the right rank's and accepts the left rank's connection, which must
  // present this rank's secret first (any other connection is closed). `timeout` bounds it all.
  static llvm::Expected<std::unique_ptr<RingLinks>>
  connect(CoordinatorClient &client, const std::string &keyPrefix, int rank, int size,
          const std::string &bindAddress, std::chrono::milliseconds timeout);
  ~RingLinks();
  RingLinks(const RingLinks &) = delete;
  RingLinks &operator=(const RingLinks &) = delete;

  // A sequence of byte ranges a ring moves one way, in order: what one rank sends is what the
  // next receives, so neither side frames the bytes.
  class Schedule {
  public:
    virtual ~Schedule() = default;
    virtual size_t messages() const = 0;
    // Where message `m` leaves from; empty messages are skipped.
    virtual const void *sendFrom(size_t m) const = 0;
    virtual size_t sendBytes(size_t m) const = 0;
    // Whether message `m` may leave, given that the first `received` incoming messages have
    // arrived (and been consumed).
    virtual bool maySend(size_t m, size_t received) const = 0;
    // Where message `m` arrives into, and its length.
    virtual void *receiveInto(size_t m) = 0;
    virtual size_t receiveBytes(size_t m) const = 0;
    // The first `bytes` of message `m` arrived (called as they do, `bytes` growing); a schedule
    // may consume them at once, while they are in the caches.
    virtual void arrived(size_t m, size_t bytes) = 0;
  };

  // Sends and receives every message of `schedule`, each as soon as it may go and as the
  // sockets take it. An error names the neighbour and what failed; `idle` bounds the time
  // neither socket moves. After an error the links are broken.
  llvm::Error run(Schedule &schedule, std::chrono::milliseconds idle);

  int left() const { return left_; }
  int right() const { return right_; }

private:
  RingLinks(int rank, int size);
  int rank_, size_, left_, right_;
  int out_ = -1; // to the right rank
  int in_ = -1;  // from the left rank
};

} // namespace prism::runtime::dist
