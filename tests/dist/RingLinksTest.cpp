// Tests of the weighted ring's transport: ranks as threads of this process, each with its own
// coordinator client, real TCP between them on loopback.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <thread>

#include "DistTestSupport.h"
#include "runtime/dist/RingLinks.h"
#include "llvm/ADT/StringExtras.h"

namespace prism::runtime::dist {
namespace {

using namespace std::chrono_literals;
using testing::clientOptions;
using testing::message;
using testing::onEachRank;

// Each rank sends its pattern in messages of the given lengths and receives its left rank's,
// each message whenever it may go (maySend: always, or only once the message before it arrived,
// as a ring's next message waits for what it forwards).
class Exchange final : public RingLinks::Schedule {
public:
  Exchange(int rank, int left, std::vector<size_t> lengths, bool forward)
      : lengths_(std::move(lengths)), forward_(forward) {
    size_t total = 0;
    for (size_t n : lengths_)
      total += n;
    mine_ = pattern(rank, total);
    theirs_.assign(total, 0);
    expected_ = pattern(left, total);
  }
  static std::vector<uint8_t> pattern(int rank, size_t n) {
    std::vector<uint8_t> bytes(n);
    for (size_t i = 0; i < n; ++i)
      bytes[i] = static_cast<uint8_t>((i * 131 + static_cast<size_t>(rank) * 17 + i / 977) & 0xff);
    return bytes;
  }
  size_t messages() const override { return lengths_.size(); }
  const void *sendFrom(size_t m) const override { return mine_.data() + offset(m); }
  size_t sendBytes(size_t m) const override { return lengths_[m]; }
  bool maySend(size_t m, size_t received) const override { return !forward_ || received >= m; }
  void *receiveInto(size_t m) override { return theirs_.data() + offset(m); }
  size_t receiveBytes(size_t m) const override { return lengths_[m]; }
  void arrived(size_t m, size_t bytes) override {
    EXPECT_LE(bytes, lengths_[m]);
    EXPECT_GE(bytes, lastArrived_[m]) << "message " << m;
    lastArrived_[m] = bytes;
  }
  // "" when every byte came as the left rank sent it.
  std::string check() const {
    for (size_t i = 0; i < theirs_.size(); ++i)
      if (theirs_[i] != expected_[i])
        return "byte " + std::to_string(i) + " of " + std::to_string(theirs_.size()) + " differs";
    return "";
  }

private:
  size_t offset(size_t m) const {
    size_t at = 0;
    for (size_t i = 0; i < m; ++i)
      at += lengths_[i];
    return at;
  }
  std::vector<size_t> lengths_;
  bool forward_;
  std::vector<uint8_t> mine_, theirs_, expected_;
  std::map<size_t, size_t> lastArrived_;
};

std::string exchange(RingLinks &links, int rank, bool forward) {
  // Empty messages, a byte, and messages larger than the sockets' buffers: every rank writes
  // megabytes before it reads, which only one thread moving both ways can do without blocking.
  Exchange schedule(rank, links.left(), {0, 1, 4099, 0, 3 << 20, 7, 5 << 20, 0}, forward);
  if (llvm::Error e = links.run(schedule, 10s))
    return llvm::toString(std::move(e));
  std::string problem = schedule.check();
  return problem.empty() ? "success" : problem;
}

TEST(RingLinksTest, RanksExchangeWithTheirNeighbours) {
  for (int ranks : {2, 3, 4}) {
    auto coordinator = testing::startCoordinator(ranks);
    ASSERT_TRUE(coordinator);
    auto messages = onEachRank(*coordinator, ranks, [&](int rank, CoordinatorClient &client) {
      auto links = RingLinks::connect(client, "ring", rank, ranks, "127.0.0.1", 10s);
      if (!links)
        return llvm::toString(links.takeError());
      if ((*links)->left() != (rank + ranks - 1) % ranks || (*links)->right() != (rank + 1) % ranks)
        return std::string("wrong neighbours");
      // Twice over the same links: each run takes exactly its own bytes.
      for (bool forward : {false, true})
        if (std::string result = exchange(**links, rank, forward); result != "success")
          return result;
      return std::string("success");
    });
    EXPECT_EQ(messages, std::vector<std::string>(static_cast<size_t>(ranks), "success"))
        << ranks << " ranks";
  }
}

// Connects to what `published` ("PORT SECRET HOST") names and sends `hello`; the socket.
int connectAs(const std::string &published, const std::string &hello) {
  llvm::SmallVector<llvm::StringRef, 3> fields;
  llvm::StringRef(published).split(fields, ' ', 2);
  if (fields.size() != 3)
    return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(std::stoi(fields[0].str())));
  if (inet_pton(AF_INET, fields[2].str().c_str(), &address.sin_addr) != 1)
    return -1;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof(address)) != 0 ||
      ::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(hello.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A connection that does not present the rank's secret is closed, and the ring still forms.
TEST(RingLinksTest, AConnectionWithoutTheSecretIsRefused) {
  auto coordinator = testing::startCoordinator(2);
  ASSERT_TRUE(coordinator);
  auto messages = onEachRank(*coordinator, 2, [&](int rank, CoordinatorClient &client) {
    if (rank == 1) {
      // Rank 0 has published its address; a stranger connects to it before rank 1 does, with
      // the right magic and rank but a wrong secret.
      auto published = client.get("ring/ring/0", 10s);
      if (!published)
        return llvm::toString(published.takeError());
      std::string hello = "PRSMRING";
      const uint32_t one = htonl(1);
      hello.append(reinterpret_cast<const char *>(&one), sizeof(one));
      hello += std::string(16, 'x');
      int fd = connectAs(*published, hello);
      if (fd < 0)
        return std::string("the stranger could not connect");
      char byte;
      // Rank 0 waits for rank 1's address before it accepts: publish it only now.
      auto links = RingLinks::connect(client, "ring", 1, 2, "127.0.0.1", 10s);
      ssize_t n = ::recv(fd, &byte, 1, 0);
      ::close(fd);
      if (!links)
        return llvm::toString(links.takeError());
      if (n != 0)
        return std::string("the stranger's connection was not closed");
      return exchange(**links, 1, true);
    }
    auto links = RingLinks::connect(client, "ring", 0, 2, "127.0.0.1", 10s);
    return links ? exchange(**links, 0, true) : llvm::toString(links.takeError());
  });
  EXPECT_EQ(messages, std::vector<std::string>(2, "success"));
}

// A neighbour that goes away ends the other's run at once with an error naming it.
TEST(RingLinksTest, ANeighbourThatLeavesIsAnError) {
  auto coordinator = testing::startCoordinator(2);
  ASSERT_TRUE(coordinator);
  auto messages = onEachRank(*coordinator, 2, [&](int rank, CoordinatorClient &client) {
    auto links = RingLinks::connect(client, "ring", rank, 2, "127.0.0.1", 10s);
    if (!links)
      return llvm::toString(links.takeError());
    if (rank == 1)
      return std::string("left"); // its links close here
    const auto started = std::chrono::steady_clock::now();
    std::string result = exchange(**links, 0, false);
    if (std::chrono::steady_clock::now() - started > 5s)
      return "took the idle bound: " + result;
    return result;
  });
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[1], "left");
  EXPECT_TRUE(messages[0].find("rank 1") != std::string::npos &&
              (messages[0].find("closed its connection") != std::string::npos ||
               messages[0].find("sending to rank 1") != std::string::npos ||
               messages[0].find("receiving from rank 1") != std::string::npos))
      << messages[0];
}

// A neighbour that stays connected but never moves: the run ends after its idle bound.
TEST(RingLinksTest, NothingMovingEndsTheRunAfterItsBound) {
  auto coordinator = testing::startCoordinator(2);
  ASSERT_TRUE(coordinator);
  std::promise<void> done;
  std::shared_future<void> finished = done.get_future().share();
  auto messages = onEachRank(*coordinator, 2, [&](int rank, CoordinatorClient &client) {
    auto links = RingLinks::connect(client, "ring", rank, 2, "127.0.0.1", 10s);
    if (!links)
      return llvm::toString(links.takeError());
    if (rank == 1) {
      finished.wait_for(testing::kRankBound); // connected, silent
      return std::string("silent");
    }
    Exchange schedule(0, 1, {16}, false);
    llvm::Error e = (*links)->run(schedule, 300ms);
    done.set_value();
    return message(std::move(e));
  });
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_NE(messages[0].find("nothing moved for 300 ms (sent 1 of 1 messages to rank 1, "
                             "received 0 from rank 1)"),
            std::string::npos)
      << messages[0];
}

TEST(RingLinksTest, ARingOfOneIsAnError) {
  auto coordinator = testing::startCoordinator(1);
  ASSERT_TRUE(coordinator);
  CoordinatorClient client(clientOptions(coordinator->address(), "worker:0"));
  auto links = RingLinks::connect(client, "ring", 0, 1, "127.0.0.1", 1s);
  ASSERT_FALSE(bool(links));
  EXPECT_EQ(llvm::toString(links.takeError()),
            "error: a ring needs 2 ranks or more, rank 0 of 1 given");
}

} // namespace
} // namespace prism::runtime::dist
