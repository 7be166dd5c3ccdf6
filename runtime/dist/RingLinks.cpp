// A ring's TCP connections and the loop that moves a schedule over them (see RingLinks.h).
#include "runtime/dist/RingLinks.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <thread>

#include "ir/Diagnostic.h"
#include "llvm/ADT/StringExtras.h"

namespace prism::runtime::dist {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::array<char, 8> kMagic = {'P', 'R', 'S', 'M', 'R', 'I', 'N', 'G'};
constexpr size_t kSecretBytes = 16;
// A hello's length (helloOf).
constexpr size_t kHelloBytes = kMagic.size() + sizeof(uint32_t) + kSecretBytes;
// How long an accepted connection may take to present itself before it is closed and the next
// one is accepted.
constexpr milliseconds kHelloWait(2000);

llvm::Error systemError(const llvm::Twine &what, int error = errno) {
  return ir::makeError(what + ": " + std::strerror(error));
}

// A socket closed when it goes out of scope unless released.
class Socket {
public:
  explicit Socket(int fd = -1) : fd_(fd) {}
  Socket(Socket &&other) noexcept : fd_(other.release()) {}
  Socket &operator=(Socket &&other) noexcept {
    if (this != &other) {
      reset();
      fd_ = other.release();
    }
    return *this;
  }
  ~Socket() { reset(); }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset() {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }

private:
  int fd_;
};

milliseconds remaining(Clock::time_point deadline) {
  return std::max(milliseconds(0),
                  std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

// Waits for `events` on `fd` until `deadline`: whether they came.
bool await(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int ready = ::poll(&p, 1, static_cast<int>(remaining(deadline).count()));
    if (ready > 0)
      return true;
    if (ready == 0 || errno != EINTR)
      return false;
  }
}

// Whether a non-blocking call that failed may succeed later (errno says so).
bool tryAgainLater() {
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

// What a connecting rank sends first (kHelloBytes): the magic, its rank, the secret the accepting
// rank published.
std::string helloOf(int rank, const std::string &secret) {
  std::string hello(kMagic.begin(), kMagic.end());
  const uint32_t networkRank = htonl(static_cast<uint32_t>(rank));
  hello.append(reinterpret_cast<const char *>(&networkRank), sizeof(networkRank));
  return hello + secret;
}

// A segment's bytes leave at once, and the 4 bytes of a weight do not wait for more.
void noDelay(int fd) {
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

struct Endpoint {
  sockaddr_storage address{};
  socklen_t length = 0;
};

llvm::Expected<Endpoint> resolve(const std::string &host, const std::string &port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return ir::makeError("cannot resolve '" + host + "': " + ::gai_strerror(rc));
  Endpoint endpoint;
  std::memcpy(&endpoint.address, found->ai_addr, found->ai_addrlen);
  endpoint.length = found->ai_addrlen;
  ::freeaddrinfo(found);
  return endpoint;
}

// "PORT SECRET HOST": what a rank publishes for its left neighbour to connect to.
struct Listener {
  Socket socket;
  std::string published;
  std::string secret; // kSecretBytes raw bytes
};

llvm::Expected<Listener> listenOn(const std::string &bindAddress) {
  auto endpoint = resolve(bindAddress, "0");
  if (!endpoint)
    return endpoint.takeError();
  Socket s(::socket(endpoint->address.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (s.get() < 0)
    return systemError("socket");
  if (::bind(s.get(), reinterpret_cast<sockaddr *>(&endpoint->address), endpoint->length) < 0)
    return systemError("bind to " + bindAddress);
  if (::listen(s.get(), 8) < 0)
    return systemError("listen");
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  if (::getsockname(s.get(), reinterpret_cast<sockaddr *>(&bound), &length) < 0)
    return systemError("getsockname");
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr *>(&bound), length, host, sizeof(host), port,
                    sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return ir::makeError("getnameinfo of the ring's listening socket failed");
  Listener listener;
  listener.secret.resize(kSecretBytes);
  if (RAND_bytes(reinterpret_cast<unsigned char *>(listener.secret.data()), kSecretBytes) != 1)
    return ir::makeError("no random bytes for the ring's secret");
  listener.published =
      std::string(port) + " " + llvm::toHex(listener.secret, /*LowerCase=*/true) + " " + host;
  listener.socket = std::move(s);
  return std::move(listener);
}

// Writes or reads all of `bytes` on a non-blocking socket before `deadline`.
template <typename Transfer>
bool transferAll(int fd, short events, size_t bytes, Clock::time_point deadline,
                 Transfer &&transfer) {
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = transfer(done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0 || !tryAgainLater())
      return false;
    if (!await(fd, events, deadline))
      return false;
  }
  return true;
}

// Connects to the rank that published `published`, presenting `rank` and its secret.
llvm::Expected<Socket> connectTo(const std::string &published, int rank,
                                 Clock::time_point deadline) {
  llvm::SmallVector<llvm::StringRef, 3> fields;
  llvm::StringRef(published).split(fields, ' ', 2);
  std::string secret;
  if (fields.size() != 3 || !llvm::tryGetFromHex(fields[1], secret) ||
      secret.size() != kSecretBytes)
    return ir::makeError("malformed ring address '" + published + "'");
  auto endpoint = resolve(fields[2].str(), fields[0].str());
  if (!endpoint)
    return endpoint.takeError();
  for (;;) {
    Socket s(::socket(endpoint->address.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (s.get() < 0)
      return systemError("socket");
    int rc = ::connect(s.get(), reinterpret_cast<sockaddr *>(&endpoint->address), endpoint->length);
    int error = rc == 0 ? 0 : errno;
    if (error == EINPROGRESS) {
      if (!await(s.get(), POLLOUT, deadline))
        return ir::makeError("connecting to " + fields[2] + ":" + fields[0] + " timed out");
      socklen_t length = sizeof(error);
      (void)::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &error, &length);
    }
    if (error == ECONNREFUSED && remaining(deadline).count() > 0) {
      std::this_thread::sleep_for(milliseconds(10));
      continue;
    }
    if (error != 0)
      return systemError("connecting to " + fields[2] + ":" + fields[0], error);
    noDelay(s.get());
    const std::string hello = helloOf(rank, secret);
    if (!transferAll(s.get(), POLLOUT, hello.size(), deadline, [&](size_t done) {
          return ::send(s.get(), hello.data() + done, hello.size() - done, MSG_NOSIGNAL);
        }))
      return systemError("introducing this rank to " + fields[2] + ":" + fields[0]);
    return std::move(s);
  }
}

// Accepts connections until one presents rank `left` and `secret`; closes the others.
llvm::Expected<Socket> acceptFrom(Listener &listener, int left, Clock::time_point deadline) {
  const std::string expected = helloOf(left, listener.secret);
  int refused = 0;
  while (await(listener.socket.get(), POLLIN, deadline)) {
    Socket s(::accept4(listener.socket.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (s.get() < 0)
      continue; // gone before it was accepted, or EINTR: wait for the next
    std::string hello(kHelloBytes, '\0');
    const Clock::time_point helloBy = std::min(deadline, Clock::now() + kHelloWait);
    if (transferAll(s.get(), POLLIN, hello.size(), helloBy,
                    [&](size_t done) {
                      return ::recv(s.get(), hello.data() + done, hello.size() - done, 0);
                    }) &&
        CRYPTO_memcmp(hello.data(), expected.data(), kHelloBytes) == 0) {
      noDelay(s.get());
      return std::move(s);
    }
    ++refused;
  }
  std::string why = "rank " + std::to_string(left) + " did not connect in time";
  if (refused)
    why += " (" + std::to_string(refused) + " other connection(s) refused)";
  return ir::makeError(why);
}

} // namespace

RingLinks::RingLinks(int rank, int size)
    : rank_(rank), size_(size), left_((rank + size - 1) % size), right_((rank + 1) % size) {}

RingLinks::~RingLinks() {
  if (out_ >= 0)
    ::close(out_);
  if (in_ >= 0)
    ::close(in_);
}

llvm::Expected<std::unique_ptr<RingLinks>>
RingLinks::connect(CoordinatorClient &client, const std::string &keyPrefix, int rank, int size,
                   const std::string &bindAddress, milliseconds timeout) {
  if (size < 2 || rank < 0 || rank >= size)
    return ir::makeError("a ring needs 2 ranks or more, rank " + llvm::Twine(rank) + " of " +
                         llvm::Twine(size) + " given");
  const Clock::time_point deadline = Clock::now() + timeout;
  std::unique_ptr<RingLinks> links(new RingLinks(rank, size));
  auto listener = listenOn(bindAddress);
  if (!listener)
    return listener.takeError();
  auto key = [&](int r) { return keyPrefix + "/ring/" + std::to_string(r); };
  if (auto e = client.set(key(rank), listener->published))
    return std::move(e);
  auto right = client.get(key(links->right_), remaining(deadline));
  if (!right)
    return right.takeError();
  auto out = connectTo(*right, rank, deadline);
  if (!out)
    return ir::withContext(out.takeError(), "rank " + llvm::Twine(links->right_));
  auto in = acceptFrom(*listener, links->left_, deadline);
  if (!in)
    return in.takeError();
  links->out_ = out->release();
  links->in_ = in->release();
  return std::move(links);
}

namespace {

// One run of a schedule over a ring's two sockets: how far each way has got.
class ScheduleRun {
public:
  ScheduleRun(RingLinks::Schedule &schedule, int out, int in, int right, int left)
      : schedule_(schedule), messages_(schedule.messages()), out_(out), in_(in), right_(right),
        left_(left) {
    skipEmpty();
  }

  bool done() const { return sent_ == messages_ && received_ == messages_; }

  // Writes as much as the socket takes of the messages that may go; whether any byte went.
  llvm::Expected<bool> send() {
    bool moved = false;
    while (mayGo()) {
      const size_t bytes = schedule_.sendBytes(sent_);
      ssize_t n = ::send(out_, static_cast<const char *>(schedule_.sendFrom(sent_)) + sentBytes_,
                         bytes - sentBytes_, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (tryAgainLater())
          break;
        return systemError("sending to rank " + llvm::Twine(right_));
      }
      moved = true;
      sentBytes_ += static_cast<size_t>(n);
      if (sentBytes_ == bytes) {
        sentBytes_ = 0;
        ++sent_;
        skipEmpty();
      }
    }
    return moved;
  }

  // Reads what has arrived, until a message it completes lets one go; whether any byte came.
  llvm::Expected<bool> receive() {
    bool moved = false;
    while (received_ < messages_) {
      const size_t bytes = schedule_.receiveBytes(received_);
      ssize_t n =
          ::recv(in_, static_cast<char *>(schedule_.receiveInto(received_)) + receivedBytes_,
                 bytes - receivedBytes_, MSG_DONTWAIT);
      if (n == 0)
        return ir::makeError("rank " + llvm::Twine(left_) + " closed its connection");
      if (n < 0) {
        if (tryAgainLater())
          break;
        return systemError("receiving from rank " + llvm::Twine(left_));
      }
      moved = true;
      receivedBytes_ += static_cast<size_t>(n);
      schedule_.arrived(received_, receivedBytes_);
      if (receivedBytes_ == bytes) {
        receivedBytes_ = 0;
        ++received_;
        skipEmpty();
        if (mayGo())
          break; // send it before reading on
      }
    }
    return moved;
  }

  // Sleeps until a socket can move, `wait` at most: an error after it, or when one failed.
  llvm::Error sleep(milliseconds wait, milliseconds idle) const {
    if (wait.count() <= 0)
      return ir::makeError("nothing moved for " + llvm::Twine(idle.count()) + " ms (sent " +
                           llvm::Twine(sent_) + " of " + llvm::Twine(messages_) +
                           " messages to rank " + llvm::Twine(right_) + ", received " +
                           llvm::Twine(received_) + " from rank " + llvm::Twine(left_) + ")");
    pollfd fds[2];
    nfds_t count = 0;
    if (mayGo())
      fds[count++] = {out_, POLLOUT, 0};
    if (received_ < messages_)
      fds[count++] = {in_, POLLIN, 0};
    if (::poll(fds, count, static_cast<int>(wait.count())) < 0 && errno != EINTR)
      return systemError("poll");
    for (nfds_t i = 0; i < count; ++i)
      if (fds[i].revents & (POLLERR | POLLNVAL))
        return ir::makeError(fds[i].fd == out_
                                 ? "the connection to rank " + llvm::Twine(right_) + " failed"
                                 : "the connection from rank " + llvm::Twine(left_) + " failed");
    return llvm::Error::success();
  }

private:
  bool mayGo() const { return sent_ < messages_ && schedule_.maySend(sent_, received_); }
  void skipEmpty() {
    while (sent_ < messages_ && schedule_.sendBytes(sent_) == 0)
      ++sent_;
    while (received_ < messages_ && schedule_.receiveBytes(received_) == 0)
      ++received_;
  }

  RingLinks::Schedule &schedule_;
  const size_t messages_;
  const int out_, in_, right_, left_;
  size_t sent_ = 0, sentBytes_ = 0;         // messages gone, and bytes of the next
  size_t received_ = 0, receivedBytes_ = 0; // the same, arrived
};

} // namespace

llvm::Error RingLinks::run(Schedule &schedule, milliseconds idle) {
  ScheduleRun run(schedule, out_, in_, right_, left_);
  Clock::time_point quietSince = Clock::now();
  while (!run.done()) {
    auto sent = run.send();
    if (!sent)
      return sent.takeError();
    auto received = run.receive();
    if (!received)
      return received.takeError();
    if (*sent || *received) {
      quietSince = Clock::now();
      continue;
    }
    const auto quiet = std::chrono::duration_cast<milliseconds>(Clock::now() - quietSince);
    if (llvm::Error e = run.sleep(idle - quiet, idle))
      return e;
  }
  return llvm::Error::success();
}

} // namespace prism::runtime::dist
