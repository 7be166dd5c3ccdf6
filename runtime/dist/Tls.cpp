// TLS credentials for gRPC, and a job's CA and task certificates made with OpenSSL.
#include "runtime/dist/Tls.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "ir/Diagnostic.h"
#include "support/AtomicFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

namespace prism::runtime::dist {
namespace {

constexpr const char *kDomain = ".prism";
constexpr long kValidSeconds = 30L * 24 * 3600;

// A task's name in file names, as plan::taskFileName makes it ("ps:0" -> "ps-0"; this library
// does not link the plan's).
std::string fileName(llvm::StringRef task) {
  std::string name = task.str();
  std::replace(name.begin(), name.end(), ':', '-');
  return name;
}

// OpenSSL objects, freed at scope exit.
struct KeyDeleter {
  void operator()(EVP_PKEY *key) const { EVP_PKEY_free(key); }
};
struct CertDeleter {
  void operator()(X509 *cert) const { X509_free(cert); }
};
struct BioDeleter {
  void operator()(BIO *bio) const { BIO_free(bio); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyDeleter>;
using Cert = std::unique_ptr<X509, CertDeleter>;
using Bio = std::unique_ptr<BIO, BioDeleter>;

llvm::Error opensslError(const llvm::Twine &what) {
  return ir::makeError("cannot make the job's TLS certificates: " + what + " failed");
}

std::string bioText(BIO *bio) {
  char *data = nullptr;
  long size = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(std::max(size, 0L)));
}

llvm::Expected<std::string> pemOfKey(EVP_PKEY *key) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return opensslError("writing a key");
  return bioText(bio.get());
}

llvm::Expected<std::string> pemOfCert(X509 *cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1)
    return opensslError("writing a certificate");
  return bioText(bio.get());
}

bool addExtension(X509 *cert, X509 *issuer, int nid, const std::string &value) {
  X509V3_CTX context;
  X509V3_set_ctx(&context, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION *extension = X509V3_EXT_nconf_nid(nullptr, &context, nid, value.c_str());
  if (!extension)
    return false;
  bool added = X509_add_ext(cert, extension, -1) == 1;
  X509_EXTENSION_free(extension);
  return added;
}

// A certificate for `key` named `commonName`, signed by `issuerKey` (itself when `issuer` is
// null: the CA).
llvm::Expected<Cert> makeCertificate(EVP_PKEY *key, const std::string &commonName, X509 *issuer,
                                     EVP_PKEY *issuerKey, const std::string &dnsName) {
  Cert cert(X509_new());
  if (!cert)
    return opensslError("X509_new");
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1)
    return opensslError("RAND_bytes");
  serial[0] &= 0x7f; // a positive serial number
  BIGNUM *number = BN_bin2bn(serial, sizeof serial, nullptr);
  bool ok = number && BN_to_ASN1_INTEGER(number, X509_get_serialNumber(cert.get()));
  BN_free(number);
  ok = ok && X509_set_version(cert.get(), 2) == 1 &&
       X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) &&
       X509_gmtime_adj(X509_getm_notAfter(cert.get()), kValidSeconds) &&
       X509_set_pubkey(cert.get(), key) == 1 &&
       X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_UTF8,
                                  reinterpret_cast<const unsigned char *>(commonName.c_str()), -1,
                                  -1, 0) == 1 &&
       X509_set_issuer_name(cert.get(), X509_get_subject_name(issuer ? issuer : cert.get())) == 1;
  if (!ok)
    return opensslError("filling the certificate of " + commonName);
  X509 *signer = issuer ? issuer : cert.get();
  ok = issuer ? addExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE") &&
                    addExtension(cert.get(), signer, NID_key_usage,
                                 "critical,digitalSignature,keyEncipherment") &&
                    addExtension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth") &&
                    addExtension(cert.get(), signer, NID_subject_alt_name, "DNS:" + dnsName)
              : addExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE") &&
                    addExtension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  ok = ok && addExtension(cert.get(), signer, NID_subject_key_identifier, "hash");
  if (issuer)
    ok = ok && addExtension(cert.get(), signer, NID_authority_key_identifier, "keyid:always");
  if (!ok)
    return opensslError("the extensions of the certificate of " + commonName);
  if (X509_sign(cert.get(), issuerKey, EVP_sha256()) == 0)
    return opensslError("signing the certificate of " + commonName);
  return std::move(cert);
}

llvm::Expected<Key> makeKey() {
  Key key(EVP_EC_gen("P-256"));
  if (!key)
    return opensslError("making an EC P-256 key");
  return std::move(key);
}

llvm::Error writePrivate(const std::string &path, const std::string &contents) {
  return support::writeFileAtomically(path, contents, support::FileAccess::OwnerOnly);
}

llvm::Expected<std::string> readPem(const std::string &path, const char *what) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return ir::makeError(std::string("cannot read the TLS ") + what + " " + path + ": " +
                         buffer.getError().message());
  std::string text = (*buffer)->getBuffer().str();
  if (text.find("-----BEGIN ") == std::string::npos)
    return ir::makeError(std::string("the TLS ") + what + " " + path + " holds no PEM block");
  return text;
}

} // namespace

llvm::Expected<std::optional<TlsIdentity>> readTlsFiles(const TlsFiles &files) {
  if (files.empty())
    return std::nullopt;
  for (auto [value, flag] : {std::pair{&files.ca, "--tls-ca"}, std::pair{&files.cert, "--tls-cert"},
                             std::pair{&files.key, "--tls-key"}})
    if (value->empty())
      return ir::makeError(std::string("TLS needs --tls-ca, --tls-cert and --tls-key; ") + flag +
                           " is missing");
  TlsIdentity identity;
  auto ca = readPem(files.ca, "CA certificate");
  if (!ca)
    return ca.takeError();
  auto cert = readPem(files.cert, "certificate");
  if (!cert)
    return cert.takeError();
  auto key = readPem(files.key, "key");
  if (!key)
    return key.takeError();
  identity.caPem = std::move(*ca);
  identity.certPem = std::move(*cert);
  identity.keyPem = std::move(*key);
  return identity;
}

std::string tlsPeerName(llvm::StringRef task) {
  return fileName(task) + kDomain;
}

std::shared_ptr<grpc::ServerCredentials>
serverCredentials(const std::optional<TlsIdentity> &identity) {
  if (!identity)
    return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = identity->caPem;
  options.pem_key_cert_pairs.push_back({identity->keyPem, identity->certPem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials>
channelCredentials(const std::optional<TlsIdentity> &identity, llvm::StringRef peerTask,
                   grpc::ChannelArguments &arguments) {
  if (!identity)
    return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = identity->caPem;
  options.pem_private_key = identity->keyPem;
  options.pem_cert_chain = identity->certPem;
  arguments.SetSslTargetNameOverride(tlsPeerName(peerTask));
  return grpc::SslCredentials(options);
}

std::optional<std::string> callerTask(const grpc::ServerContext &context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (!auth || !auth->IsPeerAuthenticated())
    return std::nullopt;
  std::vector<grpc::string_ref> names = auth->FindPropertyValues("x509_common_name");
  if (names.empty())
    return std::string();
  return std::string(names[0].data(), names[0].size());
}

TlsFiles TlsFiles::forTask(llvm::StringRef task) const {
  auto replaced = [&](std::string path) {
    std::string name = fileName(task);
    for (size_t at = path.find("{task}"); at != std::string::npos;
         at = path.find("{task}", at + name.size()))
      path.replace(at, 6, name);
    return path;
  };
  return {replaced(ca), replaced(cert), replaced(key)};
}

TlsFiles jobCertificateFiles(llvm::StringRef dir) {
  auto in = [&](const char *name) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, name);
    return std::string(path);
  };
  return {in("ca.pem"), in("{task}.pem"), in("{task}.key")};
}

llvm::Error writeJobCertificates(llvm::StringRef dir, llvm::ArrayRef<std::string> tasks) {
  if (auto ec = llvm::sys::fs::create_directories(dir, /*IgnoreExisting=*/true,
                                                  llvm::sys::fs::perms::owner_all))
    return ir::makeError("cannot create " + dir + ": " + ec.message());
  llvm::sys::fs::setPermissions(dir, llvm::sys::fs::perms::owner_all);
  auto caKey = makeKey();
  if (!caKey)
    return caKey.takeError();
  auto ca = makeCertificate(caKey->get(), "prism job CA", nullptr, caKey->get(), "");
  if (!ca)
    return ca.takeError();
  auto caPem = pemOfCert(ca->get());
  if (!caPem)
    return caPem.takeError();
  if (auto e = writePrivate(jobCertificateFiles(dir).ca, *caPem))
    return e;
  for (const std::string &task : tasks) {
    auto key = makeKey();
    if (!key)
      return key.takeError();
    auto cert = makeCertificate(key->get(), task, ca->get(), caKey->get(), tlsPeerName(task));
    if (!cert)
      return cert.takeError();
    auto certPem = pemOfCert(cert->get());
    if (!certPem)
      return certPem.takeError();
    auto keyPem = pemOfKey(key->get());
    if (!keyPem)
      return keyPem.takeError();
    TlsFiles files = jobCertificateFiles(dir, task);
    if (auto e = writePrivate(files.cert, *certPem))
      return e;
    if (auto e = writePrivate(files.key, *keyPem))
      return e;
  }
  return llvm::Error::success();
}

} // namespace prism::runtime::dist
