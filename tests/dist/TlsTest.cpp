// TLS on the coordinator's channel, over real gRPC on loopback: a job's certificates are made
// private; a task with its own certificate is served; a client without the CA, with another
// CA's certificate, with another task's certificate, or expecting another server is refused.
#include <sys/stat.h>

#include <fstream>

#include <gtest/gtest.h>

#include "DistTestSupport.h"
#include "ir/Diagnostic.h"
#include "runtime/dist/Tls.h"
#include "llvm/Support/FileSystem.h"

namespace prism::runtime::dist {
namespace {

using namespace std::chrono_literals;
using testing::clientOptions;
using testing::message;

std::string scratchDir(const char *name) {
  llvm::SmallString<128> dir;
  llvm::sys::fs::createUniqueDirectory(name, dir);
  return std::string(dir);
}

mode_t modeOf(const std::string &path) {
  struct stat info {};
  stat(path.c_str(), &info);
  return info.st_mode & 0777;
}

TlsIdentity identityOf(const std::string &dir, const std::string &task) {
  auto identity = readTlsFiles(jobCertificateFiles(dir + "/certs", task));
  EXPECT_TRUE(static_cast<bool>(identity)) << llvm::toString(identity.takeError());
  return identity && *identity ? **identity : TlsIdentity();
}

class TlsTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = scratchDir("prism-tls-test");
    ASSERT_EQ(
        message(writeJobCertificates(dir + "/certs", {"coordinator:0", "worker:0", "worker:1"})),
        "success");
    ASSERT_EQ(message(writeJobCertificates(dir + "/other", {"worker:0"})), "success");
    CoordinatorOptions options;
    options.jobToken = testing::kTestToken;
    options.expectedTasks = testing::workerNames(2);
    options.tls = identityOf(dir, "coordinator:0");
    auto started = Coordinator::start(std::move(options));
    ASSERT_TRUE(static_cast<bool>(started)) << llvm::toString(started.takeError());
    coordinator = std::move(*started);
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  // A client of task `task` holding `identity` (none: plaintext).
  CoordinatorClientOptions client(const std::string &task, std::optional<TlsIdentity> identity) {
    CoordinatorClientOptions options = clientOptions(coordinator->address(), task);
    options.tls = std::move(identity);
    options.callTimeout = 3s;
    return options;
  }

  std::string dir;
  std::unique_ptr<Coordinator> coordinator;
};

TEST_F(TlsTest, TheJobsCertificatesArePrivate) {
  EXPECT_EQ(modeOf(dir + "/certs"), 0700u);
  TlsFiles files = jobCertificateFiles(dir + "/certs", "worker:1");
  EXPECT_EQ(files.cert, dir + "/certs/worker-1.pem");
  for (const std::string &file : {files.ca, files.cert, files.key})
    EXPECT_EQ(modeOf(file), 0600u) << file;
  // The CA's key is not kept: nobody can make another task's certificate afterwards.
  std::error_code ec;
  int entries = 0;
  for (llvm::sys::fs::directory_iterator it(dir + "/certs", ec), end; !ec && it != end;
       it.increment(ec))
    ++entries;
  EXPECT_EQ(entries, 1 + 2 * 3);
}

TEST_F(TlsTest, ATaskWithItsCertificateIsServed) {
  CoordinatorClient worker(client("worker:0", identityOf(dir, "worker:0")));
  EXPECT_EQ(message(worker.registerTask()), "success");
  EXPECT_EQ(message(worker.set("k", "v")), "success");
  auto value = worker.get("k", 2s);
  ASSERT_TRUE(static_cast<bool>(value)) << llvm::toString(value.takeError());
  EXPECT_EQ(*value, "v");
  EXPECT_EQ(coordinator->value("k"), std::optional<std::string>("v"));
}

TEST_F(TlsTest, PlaintextAndForeignCertificatesAreRefused) {
  CoordinatorClient plaintext(client("worker:0", std::nullopt));
  EXPECT_NE(message(plaintext.registerTask()), "success");
  // A certificate from another job's CA: the coordinator does not accept it (nor the client the
  // coordinator's).
  auto foreign = readTlsFiles(jobCertificateFiles(dir + "/other", "worker:0"));
  ASSERT_TRUE(static_cast<bool>(foreign) && *foreign);
  CoordinatorClient stranger(client("worker:0", **foreign));
  EXPECT_NE(message(stranger.registerTask()), "success");
  // The job's CA and the client's own certificate, but the CA of another job to check the server.
  TlsIdentity mixed = identityOf(dir, "worker:0");
  mixed.caPem = (*foreign)->caPem;
  CoordinatorClient doubting(client("worker:0", mixed));
  EXPECT_NE(message(doubting.registerTask()), "success");
  EXPECT_FALSE(coordinator->value("k"));
}

TEST_F(TlsTest, OneTasksCertificateCannotSpeakForAnother) {
  CoordinatorClient impostor(client("worker:0", identityOf(dir, "worker:1")));
  llvm::Error refused = impostor.registerTask();
  EXPECT_EQ(ir::errorCode(refused), ir::ErrorCode::PermissionDenied);
  std::string error = message(std::move(refused));
  EXPECT_NE(error.find("Register as worker:0 with the certificate of worker:1"), std::string::npos)
      << error;
  error = message(impostor.reportFailure("forged"));
  EXPECT_NE(error.find("ReportFailure as worker:0 with the certificate of worker:1"),
            std::string::npos)
      << error;
  EXPECT_FALSE(coordinator->abortReason());
}

TEST_F(TlsTest, TheClientChecksWhichServerItReached) {
  // A worker that expects worker:1 at this address refuses the coordinator's certificate.
  CoordinatorClientOptions options = client("worker:0", identityOf(dir, "worker:0"));
  options.coordinatorTask = "worker:1";
  CoordinatorClient misdirected(options);
  EXPECT_NE(message(misdirected.registerTask()), "success");
}

TEST(Tls, FlagsAndFilesThatCannotWorkAreErrors) {
  auto error = [](const TlsFiles &files) {
    auto read = readTlsFiles(files);
    return read ? std::string("success") : llvm::toString(read.takeError());
  };
  EXPECT_EQ(error({}), "success");
  EXPECT_NE(error({"ca.pem", "", "k.pem"}).find("--tls-cert is missing"), std::string::npos);
  EXPECT_NE(error({"/nonexistent/ca.pem", "c", "k"})
                .find("cannot read the TLS CA certificate "
                      "/nonexistent/ca.pem"),
            std::string::npos);
  std::string dir = scratchDir("prism-tls-files");
  std::string junk = dir + "/junk.pem";
  std::ofstream(junk) << "not a certificate\n";
  EXPECT_NE(error({junk, junk, junk}).find("holds no PEM block"), std::string::npos);
  llvm::sys::fs::remove_directories(dir);
  EXPECT_EQ(tlsPeerName("ps:3"), "ps-3.prism");
}

} // namespace
} // namespace prism::runtime::dist
