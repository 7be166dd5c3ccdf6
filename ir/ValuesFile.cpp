// Writing and reading values files: little-endian, checked record by record.
#include "ir/ValuesFile.h"

#include <cstring>
#include <fstream>

#include "ir/Diagnostic.h"
#include "llvm/Support/CRC.h"
#include "llvm/Support/Endian.h"

namespace prism::ir {
namespace {

template <typename T> void appendLittle(std::string &out, T value) {
  char buf[sizeof(T)];
  llvm::support::endian::write<T, llvm::support::little>(buf, value);
  out.append(buf, sizeof(T));
}

template <typename T> T readLittle(const char *p) {
  return llvm::support::endian::read<T, llvm::support::little>(p);
}

uint32_t checksum(llvm::StringRef bytes) {
  return llvm::crc32(llvm::arrayRefFromStringRef(bytes));
}

} // namespace

ValuesFileWriter::ValuesFileWriter() {
  bytes_.append(kValuesFileMagic, sizeof(kValuesFileMagic));
  appendLittle<uint32_t>(bytes_, kValuesFileVersion);
  appendLittle<uint32_t>(bytes_, 0);
}

uint64_t ValuesFileWriter::append(llvm::ArrayRef<float> elements) {
  bytes_.resize((bytes_.size() + kValuesRecordAlignment - 1) / kValuesRecordAlignment *
                    kValuesRecordAlignment,
                '\0');
  const uint64_t offset = bytes_.size();
  std::string data;
  data.reserve(elements.size() * sizeof(float));
  for (float f : elements) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    appendLittle<uint32_t>(data, bits);
  }
  appendLittle<uint64_t>(bytes_, elements.size());
  appendLittle<uint32_t>(bytes_, kValuesFloat32);
  appendLittle<uint32_t>(bytes_, checksum(data));
  bytes_ += data;
  return offset;
}

llvm::Expected<std::vector<float>> readValuesRecord(llvm::StringRef path, uint64_t offset,
                                                    int64_t count) {
  std::ifstream in(path.str(), std::ios::binary);
  if (!in)
    return makeError(ErrorCode::NotFound, "cannot read values file '" + path + "'");
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  auto readAt = [&](uint64_t at, char *into, uint64_t n) {
    in.seekg(static_cast<std::streamoff>(at));
    return static_cast<bool>(in.read(into, static_cast<std::streamsize>(n)));
  };
  char header[kValuesFileHeaderBytes];
  if (size < kValuesFileHeaderBytes || !readAt(0, header, sizeof header) ||
      std::memcmp(header, kValuesFileMagic, sizeof(kValuesFileMagic)) != 0)
    return makeError("values file '" + path + "' does not start with PRISMVAL");
  if (uint32_t version = readLittle<uint32_t>(header + 8); version != kValuesFileVersion)
    return makeError("values file '" + path + "' has version " + llvm::Twine(version) +
                     "; this Prism reads version " + llvm::Twine(kValuesFileVersion));
  const std::string where = "values file '" + path.str() + "' at offset " + std::to_string(offset);
  char record[kValuesRecordHeaderBytes];
  if (offset < kValuesFileHeaderBytes || offset > size - kValuesRecordHeaderBytes ||
      !readAt(offset, record, sizeof record))
    return makeError(where + ": no record there (the file has " + std::to_string(size) + " bytes)");
  const uint64_t elements = readLittle<uint64_t>(record);
  const uint32_t type = readLittle<uint32_t>(record + 8);
  const uint32_t expectedCrc = readLittle<uint32_t>(record + 12);
  if (type != kValuesFloat32)
    return makeError(where + ": element type " + llvm::Twine(type) + " (expected 1, float32)");
  if (count < 0 || elements != static_cast<uint64_t>(count))
    return makeError(where + ": the record holds " + llvm::Twine(elements) +
                     " elements, the variable needs " + llvm::Twine(count));
  const uint64_t dataBytes = elements * sizeof(float);
  if (elements > (size - offset - kValuesRecordHeaderBytes) / sizeof(float))
    return makeError(where + ": the record's " + llvm::Twine(elements) +
                     " elements run past the end of the file");
  std::string data(dataBytes, '\0');
  if (!readAt(offset + kValuesRecordHeaderBytes, data.data(), dataBytes))
    return makeError(where + ": cannot read the record's elements");
  if (checksum(data) != expectedCrc)
    return makeError(where + ": checksum mismatch (the file is damaged)");
  std::vector<float> values(elements);
  for (uint64_t i = 0; i < elements; ++i) {
    uint32_t bits = readLittle<uint32_t>(data.data() + i * sizeof(float));
    std::memcpy(&values[i], &bits, sizeof bits);
  }
  return values;
}

} // namespace prism::ir
