// The IDX array format of (Fashion-)MNIST: reading and writing, gzip-compressed or not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::data {

// The element type code, the third byte of an IDX magic number.
enum class IdxElement : uint8_t {
  U8 = 0x08,
  I8 = 0x09,
  I16 = 0x0B,
  I32 = 0x0C,
  F32 = 0x0D,
  F64 = 0x0E,
};

int64_t idxElementBytes(IdxElement element);
llvm::StringRef idxElementName(IdxElement element);

// A whole IDX file in memory. Multi-byte elements are held in host byte order (the file stores
// them big-endian).
struct IdxArray {
  IdxElement element = IdxElement::U8;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;

  int64_t numElements() const;
  // `60000x28x28 u8`
  std::string describe() const;
};

// Reads an IDX file through zlib, which also reads uncompressed files as they are. Every defect
// is an error naming the file: a missing file, a bad magic number, an unknown element type, a
// truncated header or body, bytes after the body, a corrupt or truncated gzip stream.
llvm::Expected<IdxArray> readIdxFile(llvm::StringRef path);

// Writes `array` as an IDX file, gzip-compressed when `compress` is set.
llvm::Error writeIdxFile(llvm::StringRef path, const IdxArray &array, bool compress);

} // namespace prism::runtime::data
