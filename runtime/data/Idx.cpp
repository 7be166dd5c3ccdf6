// IDX files through zlib: validated reading (gzip or plain) and writing.
#include "runtime/data/Idx.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <zlib.h>

#include "ir/Diagnostic.h"
#include "ir/Type.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Host.h"

namespace prism::runtime::data {

int64_t idxElementBytes(IdxElement element) {
  switch (element) {
  case IdxElement::U8:
  case IdxElement::I8:
    return 1;
  case IdxElement::I16:
    return 2;
  case IdxElement::I32:
  case IdxElement::F32:
    return 4;
  case IdxElement::F64:
    return 8;
  }
  return 0;
}

llvm::StringRef idxElementName(IdxElement element) {
  switch (element) {
  case IdxElement::U8:
    return "u8";
  case IdxElement::I8:
    return "i8";
  case IdxElement::I16:
    return "i16";
  case IdxElement::I32:
    return "i32";
  case IdxElement::F32:
    return "f32";
  case IdxElement::F64:
    return "f64";
  }
  return "?";
}

int64_t IdxArray::numElements() const {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

std::string IdxArray::describe() const {
  std::string text;
  for (size_t i = 0; i < dims.size(); ++i)
    text += (i ? "x" : "") + std::to_string(dims[i]);
  return text + " " + idxElementName(element).str();
}

namespace {

bool isKnownElement(uint8_t code) {
  switch (code) {
  case 0x08:
  case 0x09:
  case 0x0B:
  case 0x0C:
  case 0x0D:
  case 0x0E:
    return true;
  default:
    return false;
  }
}

// Owns a zlib file handle.
class GzFile {
public:
  explicit GzFile(gzFile file) : file_(file) {}
  GzFile(const GzFile &) = delete;
  GzFile &operator=(const GzFile &) = delete;
  ~GzFile() {
    if (file_)
      gzclose(file_);
  }
  gzFile get() const { return file_; }
  // Closes the file, reporting a failed final write.
  int close() {
    int rc = gzclose(file_);
    file_ = nullptr;
    return rc;
  }

private:
  gzFile file_;
};

llvm::Error fileError(llvm::StringRef path, const llvm::Twine &message) {
  return ir::makeError(path, ir::SourceLoc{}, message);
}

// The error zlib has recorded for `file`, if any.
llvm::Error gzipError(gzFile file, llvm::StringRef path) {
  int errnum = Z_OK;
  const char *message = gzerror(file, &errnum);
  if (errnum == Z_OK)
    return llvm::Error::success();
  if (errnum == Z_ERRNO)
    return fileError(path, llvm::Twine("read failed: ") + std::strerror(errno));
  // zlib reports a gzip stream that ends early as Z_BUF_ERROR, after returning what it had.
  if (errnum == Z_BUF_ERROR)
    return fileError(path, llvm::Twine("truncated gzip stream (zlib: ") + message + ")");
  return fileError(path, llvm::Twine("corrupt gzip stream (zlib: ") + message + ")");
}

// Reads up to `size` bytes; fewer only at the end of the file.
llvm::Expected<size_t> readUpTo(gzFile file, llvm::StringRef path, uint8_t *dst, size_t size) {
  size_t total = 0;
  while (total < size) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(size - total, size_t(1) << 20));
    int got = gzread(file, dst + total, chunk);
    if (got < 0) {
      if (auto err = gzipError(file, path))
        return std::move(err);
      return fileError(path, "read failed");
    }
    if (got == 0)
      break;
    total += static_cast<size_t>(got);
  }
  if (total < size)
    if (auto err = gzipError(file, path))
      return std::move(err);
  return total;
}

uint32_t readBigEndian32(const uint8_t *p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

void writeBigEndian32(uint8_t *p, uint32_t value) {
  p[0] = uint8_t(value >> 24);
  p[1] = uint8_t(value >> 16);
  p[2] = uint8_t(value >> 8);
  p[3] = uint8_t(value);
}

// Reverses the bytes of each element in place: big-endian file order <-> little-endian host.
void swapElementBytes(std::vector<uint8_t> &bytes, int64_t elementBytes) {
  if (elementBytes == 1 || !llvm::sys::IsLittleEndianHost)
    return;
  for (size_t i = 0; i + elementBytes <= bytes.size(); i += elementBytes)
    std::reverse(bytes.begin() + i, bytes.begin() + i + elementBytes);
}

} // namespace

llvm::Expected<IdxArray> readIdxFile(llvm::StringRef path) {
  if (!llvm::sys::fs::exists(path))
    return fileError(path, "no such file");
  if (llvm::sys::fs::is_directory(path))
    return fileError(path, "is a directory, not an IDX file");
  GzFile file(gzopen(path.str().c_str(), "rb"));
  if (!file.get())
    return fileError(path, llvm::Twine("cannot open: ") + std::strerror(errno));
  gzbuffer(file.get(), 1 << 17);

  uint8_t magic[4];
  auto got = readUpTo(file.get(), path, magic, 4);
  if (!got)
    return got.takeError();
  if (*got < 4)
    return fileError(path, "truncated header: " + llvm::Twine(*got) +
                               " of the 4 bytes of the magic number");
  if (magic[0] != 0 || magic[1] != 0)
    return fileError(path, "not an IDX file: bad magic number 0x" +
                               llvm::utohexstr(readBigEndian32(magic), false, 8) +
                               " (expected 0x0000TTNN: element type TT, NN dimensions)");
  if (!isKnownElement(magic[2]))
    return fileError(path, "not an IDX file: unknown element type 0x" +
                               llvm::utohexstr(magic[2], false, 2) +
                               " (expected 08, 09, 0B, 0C, 0D or 0E)");
  IdxArray array;
  array.element = static_cast<IdxElement>(magic[2]);
  int numDims = magic[3];
  if (numDims == 0)
    return fileError(path, "IDX header declares no dimensions");

  std::vector<uint8_t> dimBytes(4 * static_cast<size_t>(numDims));
  got = readUpTo(file.get(), path, dimBytes.data(), dimBytes.size());
  if (!got)
    return got.takeError();
  if (*got < dimBytes.size())
    return fileError(path, "truncated header: " + llvm::Twine(*got) + " of the " +
                               llvm::Twine(dimBytes.size()) + " bytes of " + llvm::Twine(numDims) +
                               " dimensions");
  int64_t elements = 1;
  for (int i = 0; i < numDims; ++i) {
    int64_t d = readBigEndian32(&dimBytes[4 * i]);
    array.dims.push_back(d);
    if (d != 0 && elements > ir::kMaxElements / d)
      return fileError(path, "IDX header declares an absurd size " + array.describe() +
                                 " (more than 2^40 elements)");
    elements *= d;
  }

  // The body grows as it is read, so a corrupt header cannot make us allocate what the file
  // does not hold.
  int64_t expected = elements * idxElementBytes(array.element);
  std::vector<uint8_t> &body = array.bytes;
  body.reserve(static_cast<size_t>(std::min<int64_t>(expected, int64_t(1) << 26)));
  while (static_cast<int64_t>(body.size()) < expected) {
    size_t want = static_cast<size_t>(std::min<int64_t>(expected - body.size(), 1 << 22));
    size_t old = body.size();
    body.resize(old + want);
    got = readUpTo(file.get(), path, body.data() + old, want);
    if (!got)
      return got.takeError();
    body.resize(old + *got);
    if (*got < want)
      break;
  }
  if (static_cast<int64_t>(body.size()) < expected)
    return fileError(path, "truncated: the header declares " + array.describe() + " (" +
                               llvm::Twine(expected) + " bytes of data), the file holds " +
                               llvm::Twine(body.size()));
  // One more byte must be the end of the file; reading it also makes zlib check the gzip trailer
  // (CRC and length), so a corrupt stream cannot pass as valid.
  uint8_t extra;
  got = readUpTo(file.get(), path, &extra, 1);
  if (!got)
    return got.takeError();
  if (*got)
    return fileError(path, "unexpected bytes after the " + llvm::Twine(expected) +
                               " bytes of data that the header declares (" + array.describe() +
                               ")");
  swapElementBytes(body, idxElementBytes(array.element));
  return std::move(array);
}

llvm::Error writeIdxFile(llvm::StringRef path, const IdxArray &array, bool compress) {
  if (array.dims.empty() || array.dims.size() > 255)
    return fileError(path, "an IDX array needs 1 to 255 dimensions, got " +
                               llvm::Twine(array.dims.size()));
  for (int64_t d : array.dims)
    if (d < 0 || d > int64_t(UINT32_MAX))
      return fileError(path, "dimension " + llvm::Twine(d) + " does not fit an IDX header");
  int64_t expected = array.numElements() * idxElementBytes(array.element);
  if (expected != static_cast<int64_t>(array.bytes.size()))
    return fileError(path, array.describe() + " needs " + llvm::Twine(expected) +
                               " bytes of data, got " + llvm::Twine(array.bytes.size()));

  std::vector<uint8_t> out(4 + 4 * array.dims.size());
  out[2] = static_cast<uint8_t>(array.element);
  out[3] = static_cast<uint8_t>(array.dims.size());
  for (size_t i = 0; i < array.dims.size(); ++i)
    writeBigEndian32(&out[4 + 4 * i], static_cast<uint32_t>(array.dims[i]));
  std::vector<uint8_t> body = array.bytes;
  swapElementBytes(body, idxElementBytes(array.element));
  out.insert(out.end(), body.begin(), body.end());

  // zlib's "T" mode writes the bytes as they are.
  GzFile file(gzopen(path.str().c_str(), compress ? "wb9" : "wbT"));
  if (!file.get())
    return fileError(path, llvm::Twine("cannot create: ") + std::strerror(errno));
  for (size_t done = 0; done < out.size();) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(out.size() - done, size_t(1) << 20));
    if (gzwrite(file.get(), out.data() + done, chunk) != static_cast<int>(chunk))
      return fileError(path, "write failed");
    done += chunk;
  }
  if (file.close() != Z_OK)
    return fileError(path, "write failed");
  return llvm::Error::success();
}

} // namespace prism::runtime::data
