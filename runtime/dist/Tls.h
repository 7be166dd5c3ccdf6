// TLS on a job's gRPC channels (coordinator and parameter servers), with a certificate per task:
// every certificate is signed by the job's CA, names its task as common name ("ps:0") and
// carries the DNS name "<task file name>.prism" ("ps-0.prism", "coordinator.prism") as
// subjectAltName. A client checks that the server it reached presents the name of the task it
// meant to call; a server requires a client certificate from the same CA, and reads the caller's
// task from it (callerTask) to check the task a request claims to come from. Without TLS every
// channel is plaintext and only the job token is checked (docs/security.md).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace grpc {
class ChannelArguments;
class ChannelCredentials;
class ServerContext;
class ServerCredentials;
} // namespace grpc

namespace prism::runtime::dist {

// A task's credentials as PEM files.
struct TlsFiles {
  std::string ca;   // the job's CA certificate: what peers' certificates are checked against
  std::string cert; // this task's certificate
  std::string key;  // its private key
  bool empty() const { return ca.empty() && cert.empty() && key.empty(); }
  // The files of `task`: "{task}" in the paths replaced by its file name ("ps:0" -> "ps-0"), so
  // one set of paths names every task's certificate.
  TlsFiles forTask(llvm::StringRef task) const;
};

// A task's credentials, read.
struct TlsIdentity {
  std::string caPem, certPem, keyPem;
};

// Reads the three files; none given: plaintext (nullopt). Some but not all, or a file that
// cannot be read or holds no PEM block, is an error naming it.
llvm::Expected<std::optional<TlsIdentity>> readTlsFiles(const TlsFiles &files);

// The name a task's certificate carries and channels to it check: "ps-0.prism".
std::string tlsPeerName(llvm::StringRef task);

// Credentials of a server: plaintext without an identity; else TLS that requires and verifies
// a client certificate from the same CA.
std::shared_ptr<grpc::ServerCredentials>
serverCredentials(const std::optional<TlsIdentity> &identity);
// Credentials of a channel to `peerTask` ("coordinator", "ps:0"); with TLS, `arguments` get the
// name the server must present.
std::shared_ptr<grpc::ChannelCredentials>
channelCredentials(const std::optional<TlsIdentity> &identity, llvm::StringRef peerTask,
                   grpc::ChannelArguments &arguments);

// The task the caller's verified certificate names; nullopt on a plaintext channel.
std::optional<std::string> callerTask(const grpc::ServerContext &context);

// The files in a directory writeJobCertificates filled, with "{task}" for the task (forTask).
TlsFiles jobCertificateFiles(llvm::StringRef dir);
inline TlsFiles jobCertificateFiles(llvm::StringRef dir, llvm::StringRef task) {
  return jobCertificateFiles(dir).forTask(task);
}
// A new CA (EC P-256, valid for 30 days) and a key and certificate for each of `tasks`, written
// to `dir`, which is created readable by its owner alone (files 0600): ca.pem, and per task
// <task file name>.pem and .key.
llvm::Error writeJobCertificates(llvm::StringRef dir, llvm::ArrayRef<std::string> tasks);

} // namespace prism::runtime::dist
